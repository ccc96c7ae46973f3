#!/usr/bin/env python3
"""What tree a copy holds, without git: the GPU kit's provenance check.

The device tool copies the working tree to the GPU machine; the copy's git
metadata (where there is any) need not match its files, so reports made there
cannot ask git what they were built from. `scripts/gpu-kit.sh stamp` writes a
manifest here: each tracked file's git blob id, computed from the file as it
is in the working tree (so uncommitted edits are in it). On the device the kit
checks the copy against it and the reports name the stamp, and any file that
differs.

  tree_manifest.py write ROOT MANIFEST   (needs git: the tracked files)
  tree_manifest.py check ROOT MANIFEST   prints "same" or "differs: PATH..."
                                         (at most 8 named); exit 0 either way
"""
import hashlib
import os
import subprocess
import sys


def blob_id(path):
    """git's object id of a file's bytes (sha1 of "blob <size>\\0" + bytes)."""
    if os.path.islink(path):
        data = os.readlink(path).encode()
    else:
        with open(path, "rb") as f:
            data = f.read()
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


def write(root, manifest):
    paths = subprocess.run(["git", "-C", root, "ls-files", "-z"], check=True,
                           capture_output=True).stdout.decode().split("\0")
    with open(manifest, "w") as out:
        for p in filter(None, paths):
            full = os.path.join(root, p)
            if os.path.lexists(full):  # a tracked file deleted here is not in the copy either
                out.write(f"{blob_id(full)} {p}\n")


def check(root, manifest):
    differ = []
    with open(manifest) as f:
        for line in f:
            oid, path = line.rstrip("\n").split(" ", 1)
            full = os.path.join(root, path)
            if not os.path.lexists(full) or blob_id(full) != oid:
                differ.append(path)
    if not differ:
        print("same")
    else:
        more = f" (+{len(differ) - 8} more)" if len(differ) > 8 else ""
        print("differs: " + " ".join(differ[:8]) + more)


def main(argv):
    if len(argv) != 4 or argv[1] not in ("write", "check"):
        print("usage: tree_manifest.py write|check ROOT MANIFEST", file=sys.stderr)
        return 2
    (write if argv[1] == "write" else check)(argv[2], argv[3])
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
