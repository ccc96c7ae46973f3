#!/usr/bin/env python3
"""The kernel-variant report of scripts/gpu-kit.sh step `variant` (spec/cuda.md
§2 "Kernel variants"): reads the bench_cuda --kernel-only reports that the
step wrote, NAME.ROUND.md for the default kernel (NAME "default") and each
variant, and prints a Markdown table: the warps each kernel had resident per
SM (an occupancy probe's point, spec/cuda.md §2), and per image size the
median kernel GB/s over the rounds and its ratio to the default's, every
round's figure beside.

Fails (exit 1) when a report is missing, has no kernel figure for a size, or
says its batches were not bit-exact: a variant that decodes other pixels is
not a variant. A variant's failure still leaves the table of the default and
the other variants, with a line saying why that one failed (a GPU call is
scarce: one bad variant must not cost the others' figures); the default's
fails it all (it is every ratio's base).

Usage: variant_table.py --runs DIR --gpu NAME --commit SHA --variant NAME=DEFS [...]
"""
import argparse
import os
import re
import statistics
import sys

ROW = re.compile(r'^\| (\d+x\d+) \|')
WARPS = re.compile(r'^Decode kernel: (\d+) warps resident per SM', re.M)


def resident_warps(path):
    """The decode kernel's resident warps per SM that a report states, or
    None (a report from before bench_cuda wrote it)."""
    m = WARPS.search(open(path).read())
    return int(m.group(1)) if m else None


def kernel_gbs(path):
    """{size: kernel GB/s} of one bench_cuda report; raises ValueError when
    the report is not bit-exact or a row has no kernel figure."""
    text = open(path).read()
    if 'Bit-exact against the source pixels: yes' not in text:
        raise ValueError(f'{path}: not bit-exact (or not a GPU run)')
    out = {}
    for line in text.splitlines():
        m = ROW.match(line)
        if not m:
            continue
        cells = [c.strip() for c in line.strip().strip('|').split('|')]
        try:
            out[m.group(1)] = float(cells[4])  # size, images, tiles, MB, kernel GB/s
        except ValueError:
            raise ValueError(f'{path}: no kernel GB/s for {m.group(1)}: {cells[4]!r}')
    if not out:
        raise ValueError(f'{path}: no table rows')
    return out


def kernel_rounds(runs, name, rounds):
    """({size: [GB/s per round]}, resident warps per SM) of one kernel's
    reports; ValueError when one is missing or wrong, or the rounds'
    occupancies differ."""
    data, warps = {}, []
    for r in rounds:
        path = os.path.join(runs, f'{name}.{r}.md')
        if not os.path.exists(path):
            raise ValueError(f'{path}: missing')
        w = resident_warps(path)
        if warps and warps[0] != w:
            raise ValueError(f'{path}: {w} warps resident per SM, another round {warps[0]}')
        warps.append(w)
        for size, gbs in kernel_gbs(path).items():
            data.setdefault(size, []).append(gbs)
    return data, warps[0]


def collect(runs, names):
    """{name: {size: [GB/s per round]}}, the sizes in the default's order,
    the rounds, {name: resident warps per SM} and {name: why it failed} of
    the variants whose reports are wrong (names[0], the default: ValueError)."""
    rounds = sorted({int(f.split('.')[-2]) for f in os.listdir(runs) if re.match(r'.+\.\d+\.md$', f)})
    if not rounds:
        raise ValueError(f'{runs}: no NAME.ROUND.md reports')
    data, warps, failed = {}, {}, {}
    for name in names:
        try:
            data[name], warps[name] = kernel_rounds(runs, name, rounds)
            sizes = list(data[names[0]])
            lacking = [s for s in sizes if len(data[name].get(s, [])) != len(rounds)]
            if lacking:
                raise ValueError(f'{name}: {lacking[0]} missing in some round')
        except ValueError as e:
            if name == names[0]:
                raise
            failed[name] = str(e)
            data.pop(name, None)
    return data, list(data[names[0]]), rounds, warps, failed


def table(data, sizes, rounds, warps, variants, gpu, commit, failed=None):
    lines = [f'# GPU kernel variants: {gpu}', '',
             f'- Commit: {commit}',
             '- Command: `scripts/gpu-kit.sh device ... variant` (bench_cuda --kernel-only, the same images and '
             f'batches for every kernel; {len(rounds)} rounds of the default then each variant in turn).',
             '- A variant is the decode kernel built with -DL3_CUDA_KERNEL_DEFINES=DEFINITIONS (spec/cuda.md §2 '
             '"Kernel variants"); every batch of every run bit-exact against the source pixels.',
             '- GB/s: decoded pixel bytes a second of the kernel (CUDA-graph replay, CUDA events), median of the '
             'rounds; ratio: against the default kernel of the same run. Warps/SM: the decode kernel\'s resident '
             'warps per SM (CUDA occupancy API), which an occupancy probe lowers on purpose.', '']
    head = '| kernel | definitions | warps/SM |' + ''.join(f' {s} GB/s | ratio |' for s in sizes) + ' rounds |'
    lines += [head, '|---|---|---:|' + '---:|---:|' * len(sizes) + '---|']
    base = {s: statistics.median(data['default'][s]) for s in sizes}
    for name, defs in [('default', '-')] + [v for v in variants if v[0] not in (failed or {})]:
        cells = ''
        for s in sizes:
            med = statistics.median(data[name][s])
            cells += f' {med:.1f} | {med / base[s]:.3f} |'
        per_round = '; '.join(f'{s}: ' + ', '.join(f'{x:.1f}' for x in data[name][s]) for s in sizes)
        w = '-' if warps[name] is None else warps[name]
        lines.append(f'| {name} | {defs} | {w} |{cells} {per_round} |')
    if failed:
        lines += ['', '**Failed** (not in the table):']
        lines += [f'- {name}: {why}' for name, why in failed.items()]
    return '\n'.join(lines) + '\n'


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    ap.add_argument('--runs', required=True, help='folder of NAME.ROUND.md bench_cuda reports')
    ap.add_argument('--gpu', required=True)
    ap.add_argument('--commit', default='unknown')
    ap.add_argument('--variant', action='append', default=[], metavar='NAME=DEFS',
                    help='a kernel variant and its definitions (repeat)')
    a = ap.parse_args(argv)
    variants = []
    for v in a.variant:
        name, sep, defs = v.partition('=')
        if not sep or not name or name == 'default':
            ap.error(f'--variant {v!r}: want NAME=DEFINITIONS, NAME not "default"')
        variants.append((name, defs))
    try:
        data, sizes, rounds, warps, failed = collect(a.runs, ['default'] + [n for n, _ in variants])
    except ValueError as e:
        print(f'variant_table: {e}', file=sys.stderr)
        return 1
    sys.stdout.write(table(data, sizes, rounds, warps, variants, a.gpu, a.commit, failed))
    for name, why in failed.items():
        print(f'variant_table: variant {name} failed: {why}', file=sys.stderr)
    return 1 if failed else 0


if __name__ == '__main__':
    sys.exit(main())
