#!/usr/bin/env python3
"""Checks bench/variant_table.py (the report of scripts/gpu-kit.sh step
`variant`) on made-up bench_cuda --kernel-only reports, no GPU needed: the
median over rounds per size, the ratio to the default kernel, each kernel's
resident warps per SM (an occupancy probe's), and a failure for a report that
is not bit-exact, lacks a round, has no kernel figure or another occupancy
than its other rounds: the whole table's for the default kernel's report, a
variant's own (the others' rows stay) for a variant's.

Usage: variant_table_test.py SOURCE_ROOT
"""
import contextlib
import io
import os
import sys
import tempfile

sys.path.insert(0, os.path.join(sys.argv[1], 'bench'))
import variant_table as vt  # noqa: E402

HEAD = ('| size | images/batch | tiles/batch | MB/batch | kernel GB/s | kernel img/s | call GB/s | e2e GB/s | '
        'e2e img/s | e2e+xxh GB/s | CPU GB/s | CPU img/s |\n|---|' + '---:|' * 11 + '\n')


def report(small, large, exact=True, warps=20):
    """A report as bench_cuda --kernel-only writes it (warps None: a report
    from before bench_cuda stated the occupancy)."""
    rows = (f'| 500x375 | 910 | 21840 | 512 | {small} | 100 | - | - | - | - | - | - |\n'
            f'| 2048x1024 | 81 | 21384 | 510 | {large} | 10 | - | - | - | - | - | - |\n')
    verdict = 'yes, every image of every batch' if exact else 'NO (see stderr)'
    tail = ('\nBit-exact against the source pixels: ' + verdict
            + '\n\n--kernel-only: the call, e2e and CPU columns not measured (-).\n')
    occupancy = '' if warps is None else f'Decode kernel: {warps} warps resident per SM (CUDA occupancy API).\n\n'
    return '# GPU batch decode: NVIDIA H100\n\nImages: ...\n\n' + occupancy + HEAD + rows + tail


def run(files, variants=('binary-search=L3_WAVEFRONT_BINARY_SEARCH', 'occupancy-16=L3_WAVEFRONT_PROBE_BLOCKS=4')):
    with tempfile.TemporaryDirectory() as d:
        for name, text in files.items():
            open(os.path.join(d, name), 'w').write(text)
        out, err = io.StringIO(), io.StringIO()
        args = ['--runs', d, '--gpu', 'NVIDIA-H100', '--commit', 'abc1234']
        for v in variants:
            args += ['--variant', v]
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            rc = vt.main(args)
        return rc, out.getvalue(), err.getvalue()


def check(cond, what):
    if not cond:
        print(f'FAIL: {what}')
        sys.exit(1)


good = {
    'default.1.md': report(100.0, 120.0), 'default.2.md': report(110.0, 118.0), 'default.3.md': report(90.0, 200.0),
    'binary-search.1.md': report(95.0, 126.0), 'binary-search.2.md': report(50.0, 132.0),
    'binary-search.3.md': report(105.0, 129.0),
    'occupancy-16.1.md': report(80.0, 96.0, warps=16), 'occupancy-16.2.md': report(88.0, 99.0, warps=16),
    'occupancy-16.3.md': report(85.0, 90.0, warps=16),
}
rc, out, err = run(good)
check(rc == 0, f'a good run: rc {rc}, {err}')
lines = {l.split('|')[1].strip(): l for l in out.splitlines() if l.startswith('| ') and not l.startswith('| kernel')}
# Medians: default 100.0 and 120.0; the variant 95.0 (0.950) and 129.0
# (1.075); the probe 85.0 (0.850) and 96.0 (0.800), at 16 warps.
check('| - | 20 | 100.0 | 1.000 | 120.0 | 1.000 |' in lines.get('default', ''), f'default row: {lines.get("default")}')
check('| 20 | 95.0 | 0.950 | 129.0 | 1.075 |' in lines.get('binary-search', ''),
      f'variant row: {lines.get("binary-search")}')
check('L3_WAVEFRONT_PROBE_BLOCKS=4 | 16 | 85.0 | 0.850 | 96.0 | 0.800 |' in lines.get('occupancy-16', ''),
      f'probe row (definitions with "=", its warps): {lines.get("occupancy-16")}')
check('L3_WAVEFRONT_BINARY_SEARCH' in lines['binary-search'], 'the definitions are named')
check('500x375: 95.0, 50.0, 105.0' in lines['binary-search'], 'every round is shown')
check('abc1234' in out and '3 rounds' in out, 'commit and rounds in the header')



def failed_alone(files, name, why):
    """A variant's bad report fails the run (rc 1, said on stderr and under
    the table) but leaves the default's and the other variants' rows."""
    rc, out, err = run(files)
    rows = [l.split('|')[1].strip() for l in out.splitlines() if l.startswith('| ') and not l.startswith('| kernel')]
    others = [n for n in ('default', 'binary-search', 'occupancy-16') if n != name]
    check(rc == 1 and why in err and f'variant {name} failed' in err, f'{name} ({why}) must fail: rc {rc}, {err!r}')
    check(rows == others, f'{name} ({why}): the other kernels\' rows stay, its own goes: {rows}')
    check(f'- {name}: ' in out and why in out.split('**Failed**')[-1], f'{name} ({why}): said under the table: {out!r}')


failed_alone(dict(good, **{'binary-search.2.md': report(50.0, 132.0, exact=False)}), 'binary-search', 'not bit-exact')
failed_alone({k: v for k, v in good.items() if k != 'binary-search.3.md'}, 'binary-search', 'missing')
failed_alone(dict(good, **{'occupancy-16.2.md': report(88.0, 99.0, warps=12)}), 'occupancy-16',
             'warps resident per SM')
failed_alone(dict(good, **{'occupancy-16.1.md': report('-', 96.0, warps=16)}), 'occupancy-16', 'no kernel GB/s')

# The default is every ratio's base: its failure fails the whole table.
dash = dict(good, **{'default.1.md': report('-', 120.0)})
rc, out, err = run(dash)
check(rc == 1 and 'no kernel GB/s' in err and not out, f'a default without a kernel figure must fail: rc {rc}, {err!r}')
bad = dict(good, **{'default.2.md': report(110.0, 118.0, exact=False)})
rc, out, err = run(bad)
check(rc == 1 and 'not bit-exact' in err and not out, f'a mismatching default must fail: rc {rc}, {err!r}')

old = {k: report(*([100.0, 120.0] if k.startswith('default') else [95.0, 126.0]), warps=None)
       for k in good if not k.startswith('occupancy')}
rc, out, err = run(old, variants=('binary-search=L3_WAVEFRONT_BINARY_SEARCH',))
check(rc == 0 and '| default | - | - | 100.0 |' in out,
      f'reports without the occupancy line: rc {rc}, {err!r}, {out!r}')

try:
    with contextlib.redirect_stderr(io.StringIO()):
        vt.main(['--runs', '.', '--gpu', 'g', '--variant', 'default=X'])
    check(False, 'a variant named "default" must be refused')
except SystemExit as e:
    check(e.code == 2, 'argparse error exit')
print('PASS: variant_table medians, ratios, occupancies and failures')
