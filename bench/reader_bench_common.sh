# Sourced by run_reader_bench.sh and run_reader_gpu_bench.sh.

# imagefolder BENCH_DIR: prints the torchvision ImageFolder of the corpus photos
# (<class>/<file> links, class = file-name prefix: the labels bench_reader
# uses), made on first use in BENCH_DIR/work/reader-imagefolder.
imagefolder() {
  local here="$1" folder="$1/work/reader-imagefolder" f b c
  if [[ ! -d "$folder" ]]; then
    mkdir -p "$folder"
    for f in "$here"/corpus/photos/*.png; do
      b="$(basename "$f")"; c="${b%%_*}"
      mkdir -p "$folder/$c"; ln -s "$f" "$folder/$c/$b"
    done
  fi
  echo "$folder"
}

# uncommitted_note ROOT PATH...: " (built with uncommitted changes in: ...)" for
# the paths that differ from HEAD, else nothing; goes after the commit id.
uncommitted_note() {
  local root="$1" d dirty=""
  shift
  for d in "$@"; do
    git -C "$root" diff --quiet HEAD -- "$d" || dirty="$dirty $d"
  done
  [[ -z "$dirty" ]] || echo " (built with uncommitted changes in:$dirty)"
}
