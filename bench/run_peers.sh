#!/usr/bin/env bash
# The peer-codec benchmark (bench/peers.py) over the whole corpus: l3 v1 against PNG, WebP
# lossless, JPEG XL, JPEG-LS, HTJ2K, JPEG 2000, QOI and AVIF, each decode checked exact.
# Report: bench/results/codec-peers.md, every figure in bench/results/codec-peers.tsv.
#
#   bench/run_peers.sh                      # all classes, all codecs (about 30 min on one idle core)
#   bench/run_peers.sh --jobs 2 --codecs webp_z6,jxl_e7,htj2k --classes jpeg_photos
#
# Builds l3pack and bench_inproc (Release, CUDA off) in BUILD_DIR (default <repo>/build-bench)
# unless L3PACK and BENCH_INPROC name built ones; creates a venv (PEERS_VENV, default
# ~/.cache/l3/venv-peers) with pinned numpy, Pillow and imagecodecs (the last release for
# Python 3.11, Debian 12's); fetches the corpus when a class is missing. Runs under nice.
# Per-image results are cached in bench/work/peers-cache (keyed by image and binaries): an
# interrupted run resumes, and a run of other --codecs adds to the same report.
# Extra arguments go to peers.py (--out and --tsv override the defaults).
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/.." && pwd)"
venv="${PEERS_VENV:-$HOME/.cache/l3/venv-peers}"
pins=(numpy==2.4.6 pillow==13.0.0 imagecodecs==2026.3.6)

if [[ -z "${L3PACK:-}" || -z "${BENCH_INPROC:-}" ]]; then
  build="${BUILD_DIR:-$root/build-bench}"
  cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DL3_BUILD_TESTS=OFF -DL3_CUDA=OFF >/dev/null
  ninja -C "$build" -j"${JOBS:-2}" l3pack bench_inproc
  L3PACK="$build/converters/l3pack" BENCH_INPROC="$build/bench/bench_inproc"
fi
if ! "$venv/bin/python" -c "import imagecodecs, numpy, PIL" 2>/dev/null; then
  /usr/bin/python3 -m venv "$venv"
  "$venv/bin/pip" install -q "${pins[@]}"
fi
for cls in photos graphics jpeg_photos synthetic rgba_opaque; do
  [[ -d "$here/corpus/$cls" ]] || { "$here/fetch_corpus.sh"; break; }
done
export L3_PEERS_COMMAND="bench/run_peers.sh${*:+ $*}"
exec nice -n 10 "$venv/bin/python" "$here/peers.py" --l3pack "$L3PACK" --bench-inproc "$BENCH_INPROC" \
  --out "$here/results/codec-peers.md" --tsv "$here/results/codec-peers.tsv" --cache "$here/work/peers-cache" "$@"
