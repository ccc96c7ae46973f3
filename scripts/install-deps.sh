#!/usr/bin/env bash
# Installs what l3 needs on Debian 12 (run as root). Idempotent: packages
# already present are not fetched again. Usage: install-deps.sh [--test]
#   --test  also the tools the test suite uses (clang + libFuzzer for fuzzers;
#           Ceph's radosgw for test_s3_radosgw: 63 packages, 69 MB, ~45 s).
set -euo pipefail

packages=(build-essential cmake ninja-build pkg-config git ca-certificates
  libzstd-dev libpng-dev libjpeg62-turbo-dev libspng-dev libxxhash-dev libwebp-dev libtiff-dev
  doctest-dev libcli11-dev nlohmann-json3-dev libcurl4-openssl-dev libssl-dev libmemcached-dev
  python3 python3-dev python3-venv python3-pip)
if [[ "${1:-}" == "--test" ]]; then
  packages+=(clang libclang-rt-14-dev python3-numpy python3-pil memcached)  # memcached: the peer cache's tests
  packages+=(ccache)  # scripts/test.sh: the five builds share compiled objects (and a warm cache across runs)
  # test_s3_radosgw: a one-OSD cluster with radosgw on 127.0.0.1 (bench/radosgw_local.sh).
  packages+=(ceph-mon ceph-osd radosgw ceph-common curl)
fi

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "install-deps: installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -q
  apt-get install -y -q --no-install-recommends "${missing[@]}"
else
  echo "install-deps: all ${#packages[@]} packages present"
fi

# The object-storage tests (tests/s3/) run an S3 server: moto[server] from PyPI,
# in its own virtual environment (idempotent: kept while it imports).
if [[ "${1:-}" == "--test" ]]; then
  s3_venv="$HOME/.cache/l3/venv-s3"  # tests/storage.cmake looks for it there
  if ! "$s3_venv/bin/python" -c 'import moto.server, boto3, pytest' 2>/dev/null; then
    echo "install-deps: pip install moto[server] pytest into $s3_venv"
    python3 -m venv "$s3_venv"
    "$s3_venv/bin/python" -m pip install -q 'moto[server]>=5,<6' pytest
  else
    echo "install-deps: $s3_venv has moto"
  fi
fi
