#!/usr/bin/env python3
"""Rewrites old-form l3 include paths to the form that names the library.

Until 2026-11-24 every public header sat directly under <lib>/include/l3/ and
was included as "l3/<name>.hpp"; now it sits under <lib>/include/l3/<lib>/ and
is included as "l3/<lib>/<name>.hpp" (l3/cuda/... was already so). This script
rewrites both spellings in the files it is given (or, with --tree, in every
text file of the checkout but bench/results/, which records history, and
this script):

  #include "l3/tile_core.hpp"          -> #include "l3/codec/tile_core.hpp"
  codec/include/l3/tile_core.hpp       -> codec/include/l3/codec/tile_core.hpp

Branches written before the move run it on the files they touched:
  python3 scripts/rename_includes.py $(git diff --name-only main...)
"""
import argparse
import pathlib
import re
import subprocess
import sys

# Library folder -> the headers it installs (the old names, without .hpp).
HEADERS = {
    "common": ["checked", "errc", "error", "file_io", "host_device", "parallel",
               "pixel_layout", "target_clones", "text", "version"],
    "codec": ["bit_reader", "codec", "codec_layout", "tile_constants", "tile_core",
              "tile_grid"],
    "storage": ["storage"],
    "format": ["dataset", "shard"],
    "imageio": ["image_io"],
    "convert": ["convert"],
    "reader": ["batch_transform_core", "peer_cache", "reader", "reader_backend",
               "reader_backend_cuda", "sample_order", "transform_core", "transforms"],
}
# Where a library's headers were before the move, when the folder changed too.
OLD_FOLDER = {"convert": "converters"}

TEXT_SUFFIXES = {".cpp", ".hpp", ".cu", ".cuh", ".h", ".c", ".py", ".md", ".txt",
                 ".cmake", ".sh", ".toml", ".in", ".json", ".pyi"}


def rules():
    out = []
    for lib, names in HEADERS.items():
        old_folder = OLD_FOLDER.get(lib, lib)
        for name in names:
            # A path inside the source tree: <folder>/include/l3/<name>.hpp.
            out.append((re.compile(rf"\b{old_folder}/include/l3/{name}\.hpp\b"),
                        f"{lib}/include/l3/{lib}/{name}.hpp"))
            # The include form: l3/<name>.hpp not preceded by a path character.
            out.append((re.compile(rf"(?<![\w/.-])l3/{name}\.hpp\b"), f"l3/{lib}/{name}.hpp"))
    return out


def rewrite(path: pathlib.Path, compiled) -> bool:
    try:
        text = path.read_text()
    except (UnicodeDecodeError, OSError):
        return False
    new = text
    for pattern, repl in compiled:
        new = pattern.sub(repl, new)
    if new != text:
        path.write_text(new)
        return True
    return False


def tree_files():
    listed = subprocess.run(["git", "ls-files"], check=True, capture_output=True, text=True)
    for line in listed.stdout.splitlines():
        p = pathlib.Path(line)
        if line.startswith("bench/results/") or line == "scripts/rename_includes.py" or not p.is_file():
            continue
        if p.suffix in TEXT_SUFFIXES or p.name == "CMakeLists.txt":
            yield p


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("files", nargs="*", type=pathlib.Path)
    ap.add_argument("--tree", action="store_true", help="every tracked text file (run from the checkout's root)")
    args = ap.parse_args()
    files = list(tree_files()) if args.tree else args.files
    compiled = rules()
    changed = [str(f) for f in files if f.is_file() and rewrite(f, compiled)]
    for f in changed:
        print(f)
    print(f"rename_includes: {len(changed)} file(s) rewritten", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
