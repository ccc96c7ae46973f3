# Sourced by run_reader_bench.sh and run_reader_gpu_bench.sh.

# imagefolder BENCH_DIR [MIN_IMAGES]: prints the torchvision ImageFolder of the
# corpus photos (<class>/<file> links, class = file-name prefix: the labels
# bench_reader uses), made on first use in BENCH_DIR/work/reader-imagefolder.
# With MIN_IMAGES, each photo is linked as many times (<file>_rK.png) as it
# takes to reach that count (the GPU bench needs thousands of images; the
# carried corpus has a few dozen photos), in reader-imagefolder-<MIN_IMAGES>.
imagefolder() {
  local here="$1" min="${2:-0}" folder="$1/work/reader-imagefolder" f b c n copies k
  ((min > 0)) && folder="$folder-$min"
  if [[ ! -d "$folder" ]]; then
    n="$(ls "$here"/corpus/photos/*.png | wc -l)"
    copies=$(((min + n - 1) / n)); ((copies >= 1)) || copies=1
    mkdir -p "$folder"
    for f in "$here"/corpus/photos/*.png; do
      b="$(basename "$f" .png)"; c="${b%%_*}"
      mkdir -p "$folder/$c"
      if ((min > 0)); then
        for ((k = 0; k < copies; k++)); do ln -s "$f" "$folder/$c/${b}_r$k.png"; done
      else
        ln -s "$f" "$folder/$c/$b.png"
      fi
    done
  fi
  echo "$folder"
}

# imagefolder_cut HERE MIN WxH PY: an ImageFolder of distinct WxH pieces cut
# (no resampling) from the corpus photos, class = photo name prefix, linked up
# to MIN images; prints its path.
imagefolder_cut() {
  local here="$1" min="$2" size="$3" py="$4" folder="$1/work/reader-imagefolder-$2-$3"
  if [[ ! -d "$folder" ]]; then
    "$py" - "$here/corpus/photos" "$folder.tmp" "$min" "$size" <<'PY'
import os, sys
from PIL import Image
src, dst, want, size = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
w, h = map(int, size.split("x"))
pieces = []
for name in sorted(os.listdir(src)):
    if not name.endswith(".png"):
        continue
    im = Image.open(os.path.join(src, name))
    cls = name[:-4].split("_")[0]
    os.makedirs(os.path.join(dst, cls), exist_ok=True)
    for y in range(0, im.height - h + 1, h):
        for x in range(0, im.width - w + 1, w):
            p = os.path.join(dst, cls, f"{name[:-4]}_{x}_{y}.png")
            im.crop((x, y, x + w, y + h)).save(p, compress_level=6)
            pieces.append(p)
copies = max(1, -(-want // len(pieces)))
for p in pieces:
    for k in range(1, copies):
        os.symlink(os.path.basename(p), f"{p[:-4]}_r{k}.png")
print(f"imagefolder_cut: {len(pieces)} pieces of {size}, {len(pieces) * copies} images", file=sys.stderr)
PY
    mv "$folder.tmp" "$folder"
  fi
  echo "$folder"
}

# uncommitted_note ROOT PATH...: " (built with uncommitted changes in: ...)" for
# the paths that differ from HEAD, else nothing; goes after the commit id.
uncommitted_note() {
  local root="$1" d dirty=""
  shift
  # Under the GPU kit (L3_COMMIT set) its check of the copy against the stamp
  # says it (scripts/gpu-kit.sh check_tree); the copy's git state does not.
  if [[ -n "${L3_COMMIT:-}" ]]; then echo "${L3_TREE_NOTE:-}"; return 0; fi
  # A copy without .git (the GPU machine's) has nothing to compare with.
  git -C "$root" rev-parse --git-dir >/dev/null 2>&1 || { echo " (no git checkout: commit unknown)"; return 0; }
  for d in "$@"; do
    git -C "$root" diff --quiet HEAD -- "$d" || dirty="$dirty $d"
  done
  [[ -z "$dirty" ]] || echo " (built with uncommitted changes in:$dirty)"
}
