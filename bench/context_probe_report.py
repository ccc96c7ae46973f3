#!/usr/bin/env python3
"""Summarises `entropy_probe --contexts` or `--flips` output per corpus class (spec/codec.md §12,
"Contexts from plane values, measured before building", "Residual corrections").

Usage: python3 bench/context_probe_report.py PROBE.tsv

Each column of the probe is an image's projected bytes under one context source; the report sums
them per class (the corpus folder; graphics and synthetic also together as "graphics (all)",
photos and jpeg_photos as "photos (all)") and prints each as a ratio to the class's bytes under
today's contexts with per-tile tables (codes4_tile), as a markdown table, one row per column.
"""
import csv
import sys

GROUPS = {"graphics (all)": ("graphics", "synthetic"), "photos (all)": ("photos", "jpeg_photos")}


def main(path):
    with open(path, newline="") as f:
        rows = list(csv.DictReader(f, delimiter="\t"))
    if not rows or "codes4_tile" not in rows[0]:
        sys.exit(f"{path}: not the output of entropy_probe --contexts or --flips")
    fixed = ("file", "pixels", "l3_bytes", "rice_rows", "rice_params", "samples", "zero_samples")
    columns = [c for c in rows[0] if c not in fixed]
    classes = sorted({r["file"].split("/")[0] for r in rows})
    totals = {}
    for name in classes + list(GROUPS):
        members = GROUPS.get(name, (name,))
        picked = [r for r in rows if r["file"].split("/")[0] in members]
        if picked:
            totals[name] = {c: sum(float(r[c]) for r in picked) for c in columns}
    names = list(totals)
    print("| context source | " + " | ".join(names) + " |")
    print("|---|" + "---:|" * len(names))
    for c in columns:
        cells = (f"{totals[n][c] / totals[n]['codes4_tile']:.4f}" for n in names)
        print(f"| {c} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    main(sys.argv[1])
