#!/usr/bin/env bash
# Fetches the corpus if missing, builds bench_codec (Release) and runs it; the report goes to
# bench/results/codec-<host>.md. Extra arguments go to bench_codec (e.g. --quick, --out FILE).
# Environment: BUILD_DIR (default <repo>/build-bench), JOBS (default 2).
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/.." && pwd)"
build="${BUILD_DIR:-$root/build-bench}"

if [[ ! -d "$here/corpus/photos" || ! -d "$here/corpus/graphics" ]]; then
  "$here/fetch_corpus.sh"
fi
cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DL3_BUILD_TESTS=OFF -DL3_CUDA=OFF >/dev/null
ninja -C "$build" -j"${JOBS:-2}" bench_codec
commit="$(git -C "$root" rev-parse --short HEAD 2>/dev/null || echo unknown)"
if [[ -n "$(git -C "$root" status --porcelain --untracked-files=no -- codec common bench 2>/dev/null)" ]]; then
  commit="$commit (codec/, common/ or bench/ modified)"
fi
exec "$build/bench/bench_codec" --corpus "$here/corpus" --commit "$commit" "$@"
