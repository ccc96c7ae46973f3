#!/usr/bin/env bash
# The main job on the built-in sample: install, build, convert the sample photos
# (bench/sample) into a dataset, verify it pixel for pixel against the sources,
# and compare size and decode speed with PNG. Idempotent; run as root on Debian 12.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="${BUILD_DIR:-$root/build}"
out="${OUT_DIR:-$root/out/sample-dataset}"

"$root/scripts/install-deps.sh"
cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DL3_CUDA=AUTO >/dev/null
ninja -C "$build" -j"$(nproc)" l3pack
l3pack="$build/converters/l3pack"

echo; echo "== convert bench/sample -> $out"
echo "   (three of the six sample files are lossy JPEGs, smaller than any lossless form; the"
echo "    lossless comparison with PNG of the same pixels is the last step)"
rm -rf "$out"
"$l3pack" convert "$root/bench/sample" "$out"
echo; echo "== verify (checksums, decodes, and pixels against the source files)"
"$l3pack" verify "$out" --source "$root/bench/sample"
echo; echo "== dataset"
"$l3pack" info "$out"
echo; echo "== size and decode speed against PNG"
"$l3pack" bench "$root/bench/sample"
