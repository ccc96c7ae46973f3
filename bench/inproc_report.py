#!/usr/bin/env python3
"""Issue 12's bars from one bench_inproc run: l3 (l3::encode defaults) against PNG level 6.

  cd bench/corpus && ../../build/bench/bench_inproc --no-png9 --min-time 0.1 */*.png > run.tsv
  bench/inproc_report.py run.tsv --title "..." > bench/results/codec-v2.md

bench_inproc times PNG and l3 side by side on each image (single thread, fastest run), so the
ratios hold on a shared machine better than the absolute MB/s. Classes are the corpus folders
(bench/make_corpus.py); "photos (all)" is jpeg_photos + photos, "graphics (all)" is graphics +
synthetic. MB/s = raw bytes / summed seconds over the class. Standard library only.
"""
import argparse
import collections
import os


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("tsv")
    ap.add_argument("--title", default="l3 against PNG level 6")
    ap.add_argument("--command", default="")
    a = ap.parse_args()
    rows = [line.rstrip("\n").split("\t") for line in open(a.tsv)][1:]
    groups = {"photos (all)": ("jpeg_photos", "photos"), "graphics (all)": ("graphics", "synthetic")}
    tot = collections.defaultdict(collections.Counter)
    per = {}
    for r in rows:
        f = r[0]
        cls = f.split("/")[0]
        d = dict(raw=int(r[1]), png=int(r[2]), pe=float(r[3]), pd=float(r[4]), l3=int(r[8]), le=float(r[9]),
                 ld=float(r[10]))
        per[f] = d
        keys = [cls] + [g for g, members in groups.items() if cls in members]
        for k in keys:
            for field, v in d.items():
                tot[k][field] += v
            tot[k]["n"] += 1
    out = [f"# {a.title}", ""]
    if a.command:
        out += [f"- Command: `{a.command}`", ""]
    out += ["| class | images | PNG 6 bytes | l3 bytes | l3 / PNG | l3 encode MB/s | PNG 6 encode MB/s | encode x PNG "
            "| l3 decode MB/s | PNG 6 decode MB/s | decode x PNG |",
            "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    order = ["jpeg_photos", "photos", "graphics", "synthetic", "rgba_opaque", "photos (all)", "graphics (all)"]
    for k in order:
        t = tot[k]
        if not t["n"]:
            continue
        out.append(f"| {k} | {t['n']} | {t['png']} | {t['l3']} | {t['l3'] / t['png']:.3f} | {t['raw'] / t['le'] / 1e6:.2f} "
                   f"| {t['raw'] / t['pe'] / 1e6:.2f} | {t['pe'] / t['le']:.2f} | {t['raw'] / t['ld'] / 1e6:.1f} "
                   f"| {t['raw'] / t['pd'] / 1e6:.1f} | {t['pd'] / t['ld']:.2f} |")
    # Opaque RGBA against the same RGB pixels (rgba_opaque/rgba_NAME.png and <class>/NAME.png).
    pairs = []
    for f, d in per.items():
        if f.startswith("rgba_opaque/rgba_"):
            name = os.path.basename(f)[len("rgba_"):]
            rgb = [g for g in per if g.endswith("/" + name) and not g.startswith("rgba_opaque/")]
            if rgb:
                pairs.append((name, d["l3"], per[rgb[0]]["l3"]))
    over = sorted(((d["l3"] / d["png"], f, d["l3"], d["png"]) for f, d in per.items()), reverse=True)
    over = [o for o in over if o[0] > 1.05]
    t_ph, t_gr = tot["photos (all)"], tot["graphics (all)"]
    worst_rgba = max((l3 / rgb for _, l3, rgb in pairs), default=float("nan"))

    def bar(name, op, target, value):
        ok = value <= target if op == "<=" else value >= target
        miss = "reached" if ok else f"NOT reached (by {abs(value - target):.3f})"
        return f"| {name} | {op} {target} | {value:.3f} | {miss} |"

    out += ["", "## Issue 12's bars", "", "| bar | target | measured | status |", "|---|---|---:|---|"]
    for cls, target in (("jpeg_photos", 0.72), ("photos", 0.70), ("graphics (all)", 0.70)):
        v = tot[cls]["l3"] / tot[cls]["png"]
        out.append(bar(f"{cls}: bytes / PNG", "<=", target, v))
    out.append(f"| no image above 1.05x PNG | 0 images | {len(over)} of {len(per)} | "
               f"{'reached' if not over else 'NOT reached'} |")
    out.append(bar("opaque RGBA / RGB bytes (worst pair)", "<=", 1.01, worst_rgba))
    for label, t in (("photos (all)", t_ph), ("graphics (all)", t_gr)):
        v = t["pd"] / t["ld"]
        out.append(bar(f"single-thread decode x libpng, {label}", ">=", 2.0, v))
        v = t["pe"] / t["le"]
        out.append(bar(f"default encode x libpng level 6, {label}", ">=", 1.0, v))
    out += ["", "## Opaque RGBA: l3 bytes of the RGBA copy / of the RGB image", "", "| image | RGBA | RGB | ratio |",
            "|---|---:|---:|---:|"]
    out += [f"| {n} | {a_} | {b} | {a_ / b:.4f} |" for n, a_, b in sorted(pairs)]
    out += ["", f"## Images above 1.05x PNG ({len(over)})", "", "| image | l3 bytes | PNG 6 bytes | l3 / PNG |",
            "|---|---:|---:|---:|"]
    out += [f"| {f} | {l3} | {png} | {r:.3f} |" for r, f, l3, png in over]
    print("\n".join(out))


if __name__ == "__main__":
    main()
