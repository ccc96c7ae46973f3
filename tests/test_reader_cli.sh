#!/usr/bin/env bash
# bench-read through its stand-alone driver: prints the metrics summary for a
# dataset (made by test_reader_pipeline's first test case) and rejects bad options.
set -euo pipefail
bench="$1"; maker="$2"; bin="$3"; built="${4:-cpu}"  # built: cuda when l3_reader_cuda exists
"$maker" --no-intro=true -tc="batches equal a reference*" >/dev/null
ds="$bin/test_tmp/$(basename "$maker")/reference"  # fresh_dir() in test_util.hpp
out=$("$bench" bench-read "$ds" --batch 4 --workers 2 --crop 32 --epochs 2 --echo 2 --cache-mb 10)
echo "$out"
grep -q "batches 40, examples 160 (fresh 80, echoed 80)" <<<"$out"
grep -q "bound by: " <<<"$out"
grep -q "cache hits 40, misses 40" <<<"$out"
# --mode takes l3.Loader's crop spellings; 'random', its old spelling, is still accepted.
for mode in center random_resized full random; do
  json=$("$bench" bench-read "$ds" --batch 8 --crop 16 --json --mode "$mode" --dtype uint8)
  grep -q '"examples":40' <<<"$json"
done
# The what-if for a GPU step time: one line of text, a "what_if" object in JSON.
out=$("$bench" bench-read "$ds" --batch 8 --crop 16 --step-ms 50)
grep -q "what-if: a step of 50.0 ms per batch of 8 needs 160 images/s: " <<<"$out"
json=$("$bench" bench-read "$ds" --batch 8 --crop 16 --json --step-ms 50)
grep -q '"what_if":{.*"batch_size":8,.*"step_seconds":0.05' <<<"$json"
set +e
"$bench" bench-read "$ds" --world 2 --rank 2 2>/dev/null; rc=$?
[[ $rc -eq 2 ]] || { echo "expected exit 2 for --rank >= --world, got $rc"; exit 1; }
"$bench" bench-read "$bin/does-not-exist" 2>/dev/null; rc=$?
[[ $rc -eq 1 ]] || { echo "expected exit 1 for a missing dataset, got $rc"; exit 1; }
"$bench" bench-read "$ds" --mode random_crop 2>/dev/null; rc=$?
[[ $rc -eq 2 ]] || { echo "expected exit 2 for --mode random_crop, got $rc"; exit 1; }
"$bench" bench-read "$ds" --step-ms 0 2>/dev/null; rc=$?
[[ $rc -eq 2 ]] || { echo "expected exit 2 for --step-ms 0, got $rc"; exit 1; }
# --device cuda: a CUDA build links the GPU batch backend into l3pack (it runs,
# or says no device is found); a CPU build says it was built without CUDA.
why=$("$bench" bench-read "$ds" --batch 8 --crop 16 --device cuda 2>&1 >/dev/null); rc=$?
if [[ $built == cuda ]]; then
  [[ $why != *"built without CUDA"* ]] || { echo "a CUDA build's l3pack lacks the GPU backend: $why"; exit 1; }
  [[ $rc -eq 0 || $why == *"no CUDA device found"* ]] || { echo "--device cuda failed: rc $rc: $why"; exit 1; }
else
  [[ $rc -eq 2 && $why == *"built without CUDA"* ]] || { echo "expected exit 2, built without CUDA: $rc $why"; exit 1; }
fi
echo "test_reader_cli: ok"
