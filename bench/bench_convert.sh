#!/usr/bin/env bash
# bench/bench_convert.sh [BUILD_DIR]: the dataset-conversion benchmark (issue 4 item 6).
#
#   1. l3pack convert of bench/corpus (classes: graphics, photos) with --threads 1
#      and --threads 2 (outputs compared byte for byte), images/s and images/s per core;
#   2. l3pack verify --source: every checksum, decode and pixel against the PNGs;
#   3. dataset bytes against the PNG folder (the corpus files) and against a JPEG
#      folder (the same pixels as JPEG q90 and q95 files: libjpeg-turbo through
#      bench/bench_io.cpp, jpeg_set_defaults, 4:2:0; alpha dropped: JPEG has none);
#   4. bench_convert_read: time per random record read at 1x, 4x, 16x the records.
# Writes bench/results/convert-cpu.md. Needs a Release build of l3pack and
# bench_convert_read in BUILD_DIR (default build-convert).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(dirname "$here")"
build="${1:-$root/build-convert}"
corpus="$here/corpus"
report="$here/results/convert-cpu.md"
scratch="$(mktemp -d /tmp/l3-bench-convert.XXXXXX)"
trap 'rm -rf "$scratch"' EXIT

[ -d "$corpus/photos" ] || "$here/fetch_corpus.sh"
ninja -C "$build" l3pack bench_convert_read >/dev/null
l3pack="$build/converters/l3pack"

sum_sizes() { find "$@" -type f -printf '%s\n' | awk '{s += $1} END {print s + 0}'; }
seconds_of() { awk '/^time:/ {print $2}' "$1"; }

echo "convert (threads 1, then 2)..." >&2
"$l3pack" convert "$corpus" "$scratch/ds1" --threads 1 >"$scratch/convert1.txt" 2>"$scratch/convert1.err"
"$l3pack" convert "$corpus" "$scratch/ds2" --threads 2 >"$scratch/convert2.txt" 2>"$scratch/convert2.err"
identical=no
if diff -r -q "$scratch/ds1" "$scratch/ds2" >/dev/null; then identical=yes; fi

echo "verify --source..." >&2
verify_status=0
"$l3pack" verify "$scratch/ds2" --source "$corpus" >"$scratch/verify.txt" 2>&1 || verify_status=$?

echo "JPEG folder sizes..." >&2
"$build/bench/bench_convert_read" --jpeg-sizes "$scratch/ds2" >"$scratch/jpeg.txt"

echo "random reads..." >&2
"$build/bench/bench_convert_read" "$scratch/ds2" "$scratch/scaled" --scales 1,4,16 >"$scratch/reads.md"

images=$(awk '/^images:/ {print $2}' "$scratch/convert2.txt")
t1=$(seconds_of "$scratch/convert1.txt"); t2=$(seconds_of "$scratch/convert2.txt")
png_bytes=$(sum_sizes "$corpus" -name '*.png')
ds_bytes=$(sum_sizes "$scratch/ds2")
q90=$(awk '$1 == "q90" {print $2}' "$scratch/jpeg.txt"); q95=$(awk '$1 == "q95" {print $2}' "$scratch/jpeg.txt")
ratio() { awk -v a="$1" -v b="$2" 'BEGIN {printf "%.3f", a / b}'; }
png_ratio=$(ratio "$ds_bytes" "$png_bytes")
bar_size=$(awk -v r="$png_ratio" 'BEGIN {print (r <= 0.85) ? "reached" : "NOT reached"}')
bar_verify=$([ "$verify_status" = 0 ] && echo reached || echo "NOT reached")

mkdir -p "$here/results"
{
  echo "# Dataset conversion benchmark (l3pack convert / verify, random record reads)"
  echo
  echo "- Host: $(hostname), $(nproc) hardware threads, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs)"
  echo "- Load average at the end: $(cut -d' ' -f1-3 /proc/loadavg) (shared machine: other engineers build in parallel; timings are noisy)"
  echo "- Date: $(date -u '+%Y-%m-%d %H:%M UTC'), commit $(git -C "$root" rev-parse --short HEAD)"
  echo "- Build: $(grep -m1 CMAKE_BUILD_TYPE: "$build/CMakeCache.txt" | cut -d= -f2), codec defaults (l3::encode effort 1, default tiles)"
  echo "- Corpus: bench/corpus (photos + graphics, $images images, $png_bytes bytes of PNG)"
  echo "- Command: bench/bench_convert.sh $build"
  echo
  echo "## Conversion"
  echo
  echo "| threads | seconds | images/s | images/s per core |"
  echo "|---:|---:|---:|---:|"
  awk -v n="$images" -v t="$t1" 'BEGIN {printf "| 1 | %.2f | %.2f | %.2f |\n", t, n / t, n / t}'
  awk -v n="$images" -v t="$t2" 'BEGIN {printf "| 2 | %.2f | %.2f | %.2f |\n", t, n / t, n / t / 2}'
  echo
  echo "Outputs of --threads 1 and --threads 2 byte-identical: $identical."
  echo
  echo '```'
  cat "$scratch/convert2.txt"
  echo '```'
  echo
  echo "## Verify (l3pack verify --source bench/corpus), exit status $verify_status"
  echo
  echo '```'
  cat "$scratch/verify.txt"
  echo '```'
  echo
  echo "## Size"
  echo
  echo "| what | bytes | dataset / what |"
  echo "|---|---:|---:|"
  echo "| l3 dataset (shards + manifest.json) | $ds_bytes | 1.000 |"
  echo "| PNG folder (the corpus files) | $png_bytes | $png_ratio |"
  echo "| JPEG q90 folder (lossy; libjpeg-turbo, 4:2:0) | $q90 | $(ratio "$ds_bytes" "$q90") |"
  echo "| JPEG q95 folder (lossy; libjpeg-turbo, 4:2:0) | $q95 | $(ratio "$ds_bytes" "$q95") |"
  echo
  echo "## Random record reads (bench_convert_read; warm page cache, uniform random indices)"
  echo
  echo "Datasets of 1x, 4x, 16x the corpus records (each record repeated; 64 MiB shards); each"
  echo "checked record by record against the original before timing. lookup = Dataset::record"
  echo "without checksum; checksum = with XXH3 of the payload; decode = checksum + l3::decode (1 thread)."
  echo
  cat "$scratch/reads.md"
  echo
  echo "## Bars"
  echo
  echo "| bar | target | measured | status |"
  echo "|---|---|---|---|"
  echo "| convert + verify --source, pixel-exact on the corpus | exit 0 | exit $verify_status | $bar_verify |"
  echo "| dataset bytes vs the PNG folder | <= 0.85x | $png_ratio | $bar_size |"
} >"$report"
cat "$report"
