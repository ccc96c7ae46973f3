#!/usr/bin/env bash
# check_runpath.sh [--kit DIR] FILE...: for each ELF file (executable or shared
# object), prints its RUNPATH/RPATH (`readelf -d`) and checks that every
# NEEDED library resolves (`ldd`, with LD_LIBRARY_PATH unset so that only the
# file's own RUNPATH and the system's paths count). With --kit DIR, a file that
# resolves a library inside DIR must name DIR in its RUNPATH/RPATH, and every
# library it loads, directly or not, must come from DIR, CUDA or the C/C++
# runtime.
# Exit 1 if any file fails, 2 on usage errors. Used by scripts/gpu-kit.sh
# (the kit's libraries live in /opt/l3kit on the GPU machine, which has none
# of our -dev packages: a binary that lost its RUNPATH finds no libjpeg there)
# and tested by tests/gpu_kit_selftest.sh.
set -euo pipefail
kit=""
if [[ "${1:-}" == "--kit" ]]; then
  kit="${2:?--kit needs a folder}"
  shift 2
fi
(($#)) || { echo "usage: check_runpath.sh [--kit DIR] FILE..." >&2; exit 2; }

bad=0 checked=0
for f in "$@"; do
  readelf -h "$f" >/dev/null 2>&1 || continue  # not ELF: nothing to check
  checked=$((checked + 1))
  rpath="$(readelf -d "$f" | sed -nE 's/.*\((RUNPATH|RPATH)\).*\[(.*)\]/\2/p' | paste -sd:)"
  deps="$(env -u LD_LIBRARY_PATH ldd "$f" 2>&1)" || true
  missing="$(grep -E 'not found' <<<"$deps" | awk '{print $1}' | paste -sd' ')" || true
  if [[ -n "$missing" ]]; then
    echo "check_runpath: FAIL $f: not found: $missing (RUNPATH: ${rpath:-none})"
    bad=1
    continue
  fi
  # Everything but the C/C++ runtime and CUDA comes from the kit: a library
  # found in this system may be missing from the device's image.
  outside=""
  if [[ -n "$kit" ]]; then
    outside="$(awk '$2 == "=>" && $3 ~ /^\// {print $1, $3}' <<<"$deps" |
      grep -vE "^[^ ]+ ($kit/|/usr/local/cuda)" |
      grep -vE '^(libc|libm|libdl|libpthread|librt|libresolv|libstdc\+\+|libgcc_s|libcudart)\.so' |
      awk '{print $1}' | paste -sd' ')" || true
  fi
  if [[ -n "$outside" ]]; then
    echo "check_runpath: FAIL $f: not from the kit ($kit): $outside"
    bad=1
    continue
  fi
  if [[ -n "$kit" ]] && grep -qF "=> $kit/" <<<"$deps"; then
    if [[ ":$rpath:" != *":$kit:"* ]]; then
      echo "check_runpath: FAIL $f: uses $kit but its RUNPATH is ${rpath:-none}"
      bad=1
      continue
    fi
  fi
  echo "check_runpath: ok $f (RUNPATH: ${rpath:-none})"
done
((checked)) || { echo "check_runpath: FAIL: no ELF file among the arguments"; exit 1; }
exit "$bad"
