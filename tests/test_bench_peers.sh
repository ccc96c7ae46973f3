#!/usr/bin/env bash
# Smoke test of bench/peers.py (the peer-codec benchmark) on two small committed images:
# PNG and l3 through bench_inproc and the l3pack CLI, plus the script's two stand-in codecs, one
# exact and one that changes a sample. A lossy codec and an l3pack whose decode differs must be
# reported as failed and left out of the totals. No imagecodecs needed (--no-peers): a few
# seconds. Usage: test_bench_peers.sh L3PACK BENCH_INPROC WORK_DIR
set -euo pipefail
l3pack="$1" inproc="$2" work="$3"
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
py="${L3_PEERS_PYTHON:-/usr/bin/python3}"
"$py" -c "import numpy, PIL" || { echo "FAIL: $py lacks numpy or PIL (scripts/install-deps.sh --test)"; exit 1; }
rm -rf "$work" && mkdir -p "$work"
fail() { echo "FAIL: $*"; exit 1; }
images=("$root/bench/sample/camera.png" "$root/bench/sample/chelsea.png")
peers() {  # peers OUT_STEM L3PACK [EXTRA...]
  local stem="$1" bin="$2"
  shift 2
  "$py" "$root/bench/peers.py" --no-peers --test-codecs --min-time 0.01 --l3pack "$bin" \
    --bench-inproc "$inproc" --images "${images[@]}" --out "$work/$stem.md" --tsv "$work/$stem.tsv" "$@" 2>"$work/$stem.log"
}

peers good "$l3pack" || { cat "$work/good.log"; fail "peers.py exited non-zero"; }
md="$work/good.md" tsv="$work/good.tsv"
grep -Eq '^\| l3 \| 0\.[0-9]{3} \|$' "$md" || fail "no l3 total below PNG in $md"
grep -Eq '^\| test zlib \| [0-9]+\.[0-9]{3} \|$' "$md" || fail "the exact stand-in is not counted"
grep -Eq '^\| test lossy \| failed \|$' "$md" || fail "the lossy stand-in is counted"
[[ $(grep -c '| test lossy | 1 samples differ |' "$md") == 2 ]] || fail "the lossy stand-in's failures are not listed"
for codec in png6 png9 l3 l3_cli test_zlib; do
  [[ $(awk -F'\t' -v c="$codec" '$6 == c && $11 == "ok"' "$tsv" | wc -l) == 2 ]] || fail "$codec not ok on both images"
done
[[ $(awk -F'\t' '$6 == "test_lossy" && $11 ~ /^FAIL/' "$tsv" | wc -l) == 2 ]] || fail "test_lossy not failed twice"

# The cache: a second run reports every row from it (--cached-only measures nothing), and a
# rebuilt l3pack (a newer mtime) remeasures l3 and PNG but keeps the peers' rows.
peers cache1 "$l3pack" --cache "$work/cache" || { cat "$work/cache1.log"; fail "peers.py --cache exited non-zero"; }
peers cache2 "$l3pack" --cache "$work/cache" --cached-only || { cat "$work/cache2.log"; fail "peers.py --cached-only exited non-zero"; }
cmp -s "$work/cache1.tsv" "$work/cache2.tsv" || fail "--cached-only did not report the cached rows"
cp "$l3pack" "$work/l3pack-rebuilt" && touch "$work/l3pack-rebuilt"
peers cache3 "$work/l3pack-rebuilt" --cache "$work/cache" --cached-only || { cat "$work/cache3.log"; fail "peers.py after a rebuild exited non-zero"; }
[[ $(awk -F'\t' '$6 == "test_zlib" && $11 == "ok"' "$work/cache3.tsv" | wc -l) == 2 ]] || fail "a rebuilt l3pack dropped the peers' cached rows"
[[ $(awk -F'\t' '$6 == "l3" && $11 == "ok"' "$work/cache3.tsv" | wc -l) == 2 ]] || fail "a rebuilt l3pack did not remeasure l3"

# An l3pack whose decoded file differs from the source: l3 must be reported failed.
cat >"$work/bad-l3pack" <<EOS
#!/usr/bin/env bash
"$l3pack" "\$@" || exit
if [[ \$1 == decode ]]; then printf '\\x01' | dd of="\$3" bs=1 seek=\$((\$(stat -c %s "\$3") - 1)) conv=notrunc status=none; fi
EOS
chmod +x "$work/bad-l3pack"
peers bad "$work/bad-l3pack" || { cat "$work/bad.log"; fail "peers.py exited non-zero with the bad l3pack"; }
grep -Eq '^\| l3 \| failed \|$' "$work/bad.md" || fail "a differing l3pack decode is counted"
[[ $(grep -c '| l3 | CLI: l3pack decode differs from the source |' "$work/bad.md") == 2 ]] || fail "l3 failures not listed"
echo "bench_peers_smoke: OK (good and bad runs checked)"
