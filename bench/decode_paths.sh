#!/usr/bin/env bash
# The CPU decoder's paths side by side on one machine: per stream, the fastest
# single-thread decode (decode_loop decode ROUNDS, thread CPU time) with the
# lanes capped at each of PATHS (L3_MAX_ISA: avx512, avx2, scalar), the paths
# alternating ALTERNATIONS times and the minimum kept; then per class (the
# corpus folder) the summed times and each path's speed against the scalar
# loops. The streams are encoded once, with l3 defaults, and decode_loop
# encode checks each decodes to its image; every path decodes the same pixels
# (test_cuda_emu and its _avx2 and _scalar runs check that). A path the CPU
# lacks falls back to the next narrower one: the printed path says which ran.
#
#   cd bench/corpus && ../decode_paths.sh ../../build/bench/decode_loop 10 4 */*.png > paths.md
#
# Environment: PATHS (default "avx512 avx2 scalar").
set -euo pipefail
if [[ $# -lt 4 ]]; then
  echo "usage: $0 DECODE_LOOP ROUNDS ALTERNATIONS IMAGE..." >&2
  exit 2
fi
loop=$1 rounds=$2 alternations=$3
shift 3
paths=(${PATHS:-avx512 avx2 scalar})
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
"$loop" encode "$work" "$@" >/dev/null
declare -A ran
for p in "${paths[@]}"; do
  ran[$p]=$(L3_MAX_ISA=$p "$loop" decode 1 "$work/0.l3i" | sed -E 's/.*path //')
done
{
  printf '# decode paths, per stream (decode_loop decode %s, %s alternations, the minimum)\n\n' "$rounds" "$alternations"
  printf 'CPU: %s. Paths as run:' "$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ //')"
  for p in "${paths[@]}"; do printf ' L3_MAX_ISA=%s -> %s;' "$p" "${ran[$p]}"; done
  printf '\n\n| stream |'; for p in "${paths[@]}"; do printf ' %s ms |' "$p"; done; printf '\n|---|'
  for p in "${paths[@]}"; do printf -- '---:|'; done; printf '\n'
}
i=0
for image in "$@"; do
  s="$work/$i.l3i"
  declare -A best=()
  for ((a = 0; a < alternations; a++)); do
    for p in "${paths[@]}"; do
      t=$(L3_MAX_ISA=$p "$loop" decode "$rounds" "$s" | awk '{print $1}')
      if [[ -z ${best[$p]:-} ]] || awk -v t="$t" -v b="${best[$p]}" 'BEGIN{exit !(t < b)}'; then best[$p]=$t; fi
    done
  done
  printf '| %s |' "$image"
  for p in "${paths[@]}"; do printf ' %.3f |' "$(awk -v t="${best[$p]}" 'BEGIN{print t * 1000}')"; done
  printf '\n'
  for p in "${paths[@]}"; do echo "$image	$p	${best[$p]}" >> "$work/times.tsv"; done
  i=$((i + 1))
done
printf '\n| class | streams |'; for p in "${paths[@]}"; do printf ' %s s | x scalar |' "$p"; done; printf '\n|---|---:|'
for p in "${paths[@]}"; do printf -- '---:|---:|'; done; printf '\n'
awk -F'\t' -v paths="${paths[*]}" '
  BEGIN { np = split(paths, ps, " ") }
  { split($1, f, "/"); c = (f[2] == "" ? "." : f[1]); t[c, $2] += $3; if ($2 == ps[1]) n[c]++; classes[c] = 1 }
  END {
    for (c in classes) {
      printf "| %s | %d |", c, n[c]
      for (k = 1; k <= np; k++) {
        if (t[c, "scalar"] > 0) printf " %.4f | %.3f |", t[c, ps[k]], t[c, "scalar"] / t[c, ps[k]]
        else printf " %.4f | - |", t[c, ps[k]]
      }
      printf "\n"
    }
  }' "$work/times.tsv" | sort
