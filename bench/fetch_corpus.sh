#!/usr/bin/env bash
# Builds bench/corpus/ (git-ignored) from Debian packages. Idempotent: installs only the
# packages that are missing, and make_corpus.py keeps files that already exist.
# Runs as root on a fresh Debian 12 (or with sudo). Usage: bench/fetch_corpus.sh [--force]
#
# Downloads (Debian 12 .deb sizes): plasma-workspace-wallpapers 94.0 MB, python3-skimage 20.7 MB
# (+ python3-skimage-lib and scipy etc. when absent), lomiri-wallpapers-16.04 15.8 MB (the
# jpeg_photos class), fonts-dejavu-core 1.1 MB (text in the synthetic class): about 132 MB with
# the image packages alone, nothing when they are installed.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
pkgs=(python3-skimage plasma-workspace-wallpapers lomiri-wallpapers-16.04 fonts-dejavu-core python3-pil python3-numpy)

missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "fetch_corpus: installing ${missing[*]}"
  sudo=""
  if [[ $(id -u) -ne 0 ]]; then
    command -v sudo >/dev/null || { echo "fetch_corpus: need root (or sudo) to install ${missing[*]}" >&2; exit 1; }
    sudo="sudo"
  fi
  export DEBIAN_FRONTEND=noninteractive
  $sudo apt-get update -qq
  $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

# Debian's python3-pil / python3-skimage live in the system interpreter's dist-packages.
exec /usr/bin/python3 "$here/make_corpus.py" "$@"
