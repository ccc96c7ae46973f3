#!/usr/bin/env bash
# CI check of the GPU kit's machinery, no GPU and no network (issue 13):
#  - the kit's scripts parse (bash -n);
#  - a step whose first command fails is reported failed, and its later
#    commands do not run (scripts/gpu-kit.sh step `selfcheck`);
#  - scripts/check_runpath.sh fails a binary that needs a library from the
#    kit's folder without naming it in its RUNPATH (the class of failure an
#    exported LIBRARY_PATH caused), also when LD_LIBRARY_PATH would find it,
#    and passes the same binary linked with the RUNPATH;
#  - scripts/tree_manifest.py (the device copy's provenance check) matches an
#    exact copy and names the files of one that differs;
#  - the device's build step takes the prebuilt programs (.gpukit/prebuilt)
#    only when they were built from this tree, at this path, for this arch.
# Usage: gpu_kit_selftest.sh REPO_ROOT
set -euo pipefail
root="${1:?usage: gpu_kit_selftest.sh REPO_ROOT}"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
fail() { echo "gpu_kit_selftest: FAIL: $*" >&2; exit 1; }

for f in scripts/gpu-kit.sh scripts/check_runpath.sh bench/run_cuda_bench.sh bench/run_reader_gpu_bench.sh \
  bench/reader_bench_common.sh; do
  bash -n "$root/$f" || fail "$f does not parse"
done

# A failing command fails its step.
if OUT="$tmp/out" L3KIT_WORK="$tmp/work" bash "$root/scripts/gpu-kit.sh" device selfcheck >"$tmp/device.log" 2>&1; then
  cat "$tmp/device.log"; fail "device selfcheck exited 0"
fi
grep -q 'step selfcheck FAILED' "$tmp/device.log" || { cat "$tmp/device.log"; fail "selfcheck not reported failed"; }
[[ -f "$tmp/out/kit-selfcheck.log" && -f "$tmp/out/results-selfcheck.tar.gz" ]] || fail "no log or archive in OUT"
! grep -q 'selfcheck: after the failing command' "$tmp/out/kit-selfcheck.log" ||
  fail "the step went on after a failing command"

# RUNPATH checker.
mkdir -p "$tmp/kit"
echo 'int l3probe(void) { return 7; }' >"$tmp/p.c"
echo 'int l3probe(void); int main(void) { return l3probe() - 7; }' >"$tmp/m.c"
cc -shared -fPIC -o "$tmp/kit/libl3probe.so" "$tmp/p.c"
cc -o "$tmp/broken" "$tmp/m.c" -L"$tmp/kit" -ll3probe
cc -o "$tmp/good" "$tmp/m.c" -L"$tmp/kit" -ll3probe -Wl,-rpath,"$tmp/kit"
check="$root/scripts/check_runpath.sh"
if bash "$check" --kit "$tmp/kit" "$tmp/broken" >"$tmp/c1" 2>&1; then cat "$tmp/c1"; fail "broken binary passed"; fi
grep -q 'not found: libl3probe.so' "$tmp/c1" || { cat "$tmp/c1"; fail "no 'not found' report"; }
if LD_LIBRARY_PATH="$tmp/kit" bash "$check" --kit "$tmp/kit" "$tmp/broken" >"$tmp/c2" 2>&1; then
  cat "$tmp/c2"; fail "broken binary passed with LD_LIBRARY_PATH"
fi
bash "$check" --kit "$tmp/kit" "$tmp/good" >"$tmp/c3" 2>&1 || { cat "$tmp/c3"; fail "good binary failed"; }
"$tmp/good" || fail "good binary does not run"
if bash "$check" --kit "$tmp/kit" "$tmp/p.c" >/dev/null 2>&1; then fail "no ELF file passed"; fi
# Provenance: a copy of a tree (no .git) matches the manifest written with
# it, and a copy with one file changed names that file.
manifest="$root/scripts/tree_manifest.py"
git init -q "$tmp/repo" && echo one >"$tmp/repo/a.txt" && mkdir "$tmp/repo/d" && echo two >"$tmp/repo/d/b.txt"
git -C "$tmp/repo" add a.txt d/b.txt
echo edited >"$tmp/repo/a.txt"  # an uncommitted edit: the manifest has the file as it is
python3 "$manifest" write "$tmp/repo" "$tmp/manifest"
mkdir "$tmp/copy" && cp -r "$tmp/repo/a.txt" "$tmp/repo/d" "$tmp/copy/"
[[ "$(python3 "$manifest" check "$tmp/copy" "$tmp/manifest")" == same ]] || fail "an exact copy does not match"
echo changed >"$tmp/copy/d/b.txt"
[[ "$(python3 "$manifest" check "$tmp/copy" "$tmp/manifest")" == "differs: d/b.txt" ]] || fail "a changed file is not named"
rm "$tmp/copy/a.txt"
[[ "$(python3 "$manifest" check "$tmp/copy" "$tmp/manifest")" == "differs: a.txt d/b.txt" ]] || fail "a missing file is not named"

# Prebuilt programs: usable only for this tree, path and arch.
kit="$tmp/gpukit" && mkdir -p "$kit/prebuilt" && : >"$kit/prebuilt/programs.tar.xz"
python3 "$manifest" write "$root" "$kit/prebuilt/manifest"
echo "90 $root" >"$kit/prebuilt/info"
usable() { L3KIT_DIR="$kit" bash "$root/scripts/gpu-kit.sh" _prebuilt_usable "$1" >"$tmp/u.log" 2>&1; }
usable 90 || { cat "$tmp/u.log"; fail "prebuilt programs of this tree not taken"; }
if usable 80; then fail "prebuilt for sm_90 taken for sm_80"; fi
grep -q 'prebuilt for sm_90, this GPU is sm_80' "$tmp/u.log" || { cat "$tmp/u.log"; fail "no arch reason"; }
if L3KIT_NO_PREBUILT=1 usable 90; then fail "L3KIT_NO_PREBUILT=1 ignored"; fi
echo "90 /elsewhere" >"$kit/prebuilt/info"
if usable 90; then fail "prebuilt at another path taken"; fi
echo "90 $root" >"$kit/prebuilt/info"
sed -i '1s/^[0-9a-f]/x/' "$kit/prebuilt/manifest"
if usable 90; then fail "prebuilt from another tree taken"; fi
grep -q 'prebuilt from another tree (differs: ' "$tmp/u.log" || { cat "$tmp/u.log"; fail "no tree reason"; }
python3 "$manifest" write "$root" "$kit/prebuilt/manifest" && usable 90 || fail "prebuilt not taken again"
rm "$kit/prebuilt/programs.tar.xz"
if usable 90; then fail "prebuilt without its archive taken"; fi
grep -q 'no prebuilt programs' "$tmp/u.log" || { cat "$tmp/u.log"; fail "no missing-archive reason"; }
echo "gpu_kit_selftest: ok"
