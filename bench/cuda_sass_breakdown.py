#!/usr/bin/env python3
"""Where the decode kernel's instructions go, per wavefront step (issue 13).

Reads `nvdisasm -gi -c` of the batch decoder's cubin (compiled with -lineinfo;
bench/cuda_sass_breakdown.sh does both), finds the CH=3 wavefront step loop of
decode_kernel (the backward branch whose body holds 6 SHFL.UP: 2 x CH
neighbour shuffles) and attributes each of its instructions to a category by
its inline chain (innermost first) and the source function and line it came
from. Static counts, not a profile. Three columns:
- whole step loop: every instruction of the loop, a cold caller anywhere in
  the chain naming it (the Rice read's refill counts as Rice);
- common path: the blocks a warp runs at a step of a rANS tile without run
  mode; the Rice tile path (the third), the same walk for a Rice-coded tile:
  the rANS reads cold, the Rice read hot. The warp runs every branch that any of its 32 lanes takes, and at a
  step some lane takes nearly every data-dependent one, so the walk goes from
  the loop head both ways at every branch, except into a block whose first
  instruction (past reconvergence points) is in a cold category: the Rice
  read, the run length read, the refill's byte loop near a stream's end,
  the copy-out every 32 steps, and the features a photo tile has not (ramps,
  pixel copies). Blocks reached so count whatever lines the
  compiler tagged them with (it shares the refill's word loads between the
  rANS and Rice paths), by their innermost function.

Usage: cuda_sass_breakdown.py SASS_FILE SOURCE_ROOT
"""
import collections
import os
import re
import sys

hdr = re.compile(r'//## File "([^"]+)", line (\d+)(?: inlined at "([^"]+)", line (\d+))?')
ins = re.compile(r'/\*([0-9a-f]{4,})\*/\s+(.*?);')
def parse(path, kernel='decode_kernel'):
    out = []; chain = []; prev_hdr = False; infn = False
    for line in open(path):
        if '.text.' in line and 'section' in line:
            infn = kernel in line
        if not infn: continue
        m = hdr.search(line)
        if m:
            f, l = m.group(1).split('/')[-1], int(m.group(2))
            if not prev_hdr: chain = []
            chain.append((f, l)); prev_hdr = True
            if m.group(3): pass
            continue
        prev_hdr = False
        m = ins.search(line)
        if m: out.append((int(m.group(1), 16), m.group(2).strip(), tuple(chain)))
        elif re.match(r'\s*\.L_x_\d+:', line): out.append((None, line.strip(), ()))
    return out
def labels(I):
    return {op.rstrip(':'): i for i, (a, op, ch) in enumerate(I) if a is None}
def loops(I):
    L = labels(I); res = []
    for i, (a, op, ch) in enumerate(I):
        if a is None: continue
        m = re.search(r'BRA\s+(?:\w+\s+)?`\((\.L_x_\d+)\)', op)
        if m and m.group(1) in L and L[m.group(1)] < i:
            j = L[m.group(1)]
            body = [x for x in I[j:i+1] if x[0] is not None]
            shfl = sum('SHFL.UP' in x[1] for x in body)
            res.append((j, i, len(body), shfl, op))
    return res

SRC = {}
def src(f):
    # file name -> (lines, function of each line): functions start at a line
    # beginning with L3_ (the host/device macros) and end at a "}" in column 0.
    if f in SRC: return SRC[f]
    for root in ROOTS:
        for d in ('codec/include/l3/codec', 'cuda/include/l3/cuda', 'cuda/src'):
            path = os.path.join(root, d, f)
            if os.path.exists(path): break
        else: continue
        break
    else:
        SRC[f] = ([], []); return SRC[f]
    lines = open(path).read().split('\n'); fn = []; cur = None; indent = ''
    for ln in lines:
        m = re.match(r'(\s*)(?:template <.*> )?L3_\w+\s+(?:constexpr\s+)?(?:[\w:<>]+\s+)+(\w+)\(', ln)
        if m: cur, indent = m.group(2), m.group(1)
        fn.append(cur)
        if cur and (ln.startswith(indent + '}') or (m and ln.rstrip().endswith('}'))): cur = None
    SRC[f] = (lines, fn); return SRC[f]
ROOTS = []

def where(f, l):
    lines, fn = src(f)
    if 1 <= l <= len(lines): return fn[l - 1] or '', lines[l - 1]
    return '', ''

# Categories: (name, hot, test(file, function, line text)); the first match
# along an instruction's inline chain names it, a cold one anywhere first.
# Cold: not run on the common path (a photo's rANS tile: no run mode, no ramps,
# no pixel copies; an interior pixel).
def _t(name, hot, fns=(), text=None, files=None):
    def test(f, fn, ln):
        if files and f not in files: return False
        if fns and fn not in fns: return False
        return text is None or re.search(text, ln) is not None
    return (name, hot, test)
CATS = [
    _t('refill: byte loop near the stream end', False, ('refill',), r'byte|past|while|avail \+= 8|<< \(56'),
    _t('refill: byte loop near the stream end', False, ('tail_word',)),
    _t('Rice read (Rice tiles only)', False, ('read_rice',)),
    _t('run length read (run mode only)', False, ('zero_run_step',), r'read\(|run > t.width|run == 0|run_left = run|s.run_left == 0\) s.blocked'),
    _t('run length read (run mode only)', False, ('decode_pixel',), r'kAnsRunContext'),
    _t('copy-out (every 32 steps)', False, ('flush_stage', 'store_pixel')),
    # Tile features a photo tile has not (the timed batches: bench_cuda).
    _t('ramps (tiles with ramps only)', False, ('ramp_at', 'add_ramps')),
    _t('ramps (tiles with ramps only)', False, ('ramped_pixel',), r'ramped|add_ramps|int ramped'),
    _t('pixel copies (tiles with copies only)', False, ('copy_step',), r"^(?!.*!(t\.)?copies)"),
    _t('pixel copies (tiles with copies only)', False, ('wavefront_coded',), r'copy_d|word >> |forward_transform|\*slot = word|val\[0\] = int\(word\)'),
    _t('copy-out (every 32 steps)', False, ('wavefront_coded',), r'flush_stage|warp.sync|c0 =|switch|case|CH == 1 && t.palette'),
    _t('refill: word loads', True, ('load_le32_aligned', 'bswap32', 'load_word', 'fetch_word', 'load_be64', 'refill_load', 'refill')),
    _t('refill: word loads', True, ('ans_read_select', 'ans_renorm'), r'avail < (16|32)'),
    _t('token search', True, ('ans_search', 'ans_read')),
    _t('token search', True, ('ans_read_select',), r'ans_search'),
    _t('raw bits', True, ('ans_raw_bits', 'ans_value')),
    _t('raw bits', True, ('ans_decode_token', 'ans_read_select'), r'raw|kAnsDirect'),
    _t('rANS update + renorm', True, ('ans_renorm', 'ans_decode_token', 'ans_read_select', 'consume')),
    _t('residual corrections', True, ('sign3', 'correction_class', 'correction_flip', 'correction_bias',
                                      'corrected_residual', 'correction_entry', 'correct_residual')),
    _t('residual corrections', True, ('decode_pixel',), r'corrected'),
    _t('context (activity, k table)', True, ('activity', 'k_for_activity', 'bucket_of')),
    _t('context (activity, k table)', True, ('decode_pixel',), r'k_for_activity|ans_read|pp.constant|const PlaneParams'),
    _t('prediction', True, ('predict', 'predict_fixed')),  # imin/imax: their caller's
    _t('prediction', True, ('decode_pixel',), r'predict'),
    _t('value (unzigzag)', True, ('unzigzag',)),
    _t('value (unzigzag)', True, ('decode_pixel',), r'value\[p\]|code\[p\]'),
    _t('zero-run step (no run mode)', True, ('zero_run_step', 'decode_pixel')),
    _t('edges', True, ('apply_edges', 'apply_edges_select')),
    _t('transform + range check', True, ('inverse_transform', 'inverse_transform_bits')),
    _t('transform + range check', True, ('wavefront_coded',), r'inverse_transform|!ok|l >= task.y0'),
    _t('staging (pack + shared store)', True, ('pack_pixel',)),
    _t('staging (pack + shared store)', True, ('wavefront_coded',), r'stage\['),
    _t('neighbours + shuffles', True, ('wavefront_coded',), r'nb\.|shfl|nwv|nwu|wv\[p\]|wu\[p\]'),
    _t('neighbours + shuffles', True, ('shfl_up', 'shfl_up_by'), None),
    _t('neighbours + shuffles', True, (), None, ('sm_30_intrinsics.hpp',)),
    _t('issue probe filler (filler-K variants only)', True, ('issue',)),
    _t('loop control', True, ('wavefront_coded', 'each')),
]
# The Rice tile path (the third column): a step of a Rice-coded tile (44% of
# the tiles of bench_cuda's photos, tile_census), whose reads are read_rice's;
# what only a rANS read runs is cold there, the Rice read hot.
RANS_ONLY = {'ans_read_select', 'ans_search_wide', 'ans_search_at', 'ans_search', 'ans_decode_token',
             'ans_renorm', 'ans_read'}

REFILL = {'fetch_word', 'load_word', 'refill', 'load_le32_aligned', 'bswap32', 'tail_word'}

def hot_in(profile, chain, name, hot):
    """Whether an instruction of category (name, hot) is hot in `profile`:
    'ans' (the common path of a rANS tile) or 'rice' (of a Rice tile). The
    word refill's own lines count as shared: nvcc tags the Rice read's
    refill with the rANS read's inline chain."""
    if profile != 'rice': return hot
    inner = where(*chain[0])[0] if chain else ''
    if inner not in REFILL and any(where(f, l)[0] in RANS_ONLY for f, l in chain): return False
    return hot or name.startswith('Rice read')

def category(chain, cold_first=True):
    """(name, hot) of an instruction by its inline chain. cold_first: a cold
    caller anywhere in the chain names it (the Rice read's refill is Rice);
    otherwise the innermost match does (for code on the common path that the
    compiler shares with a cold path and tagged with the cold one's lines)."""
    info = [(f, l) + where(f, l) for f, l in chain]
    if cold_first:
        for f, l, fn, ln in info:
            for name, hot, test in CATS:
                if not hot and test(f, fn, ln): return name, hot
    for f, l, fn, ln in info:
        for name, hot, test in CATS:
            if (hot or not cold_first) and test(f, fn, ln): return name, hot
    f, l, fn, ln = info[0] if info else ('?', 0, '', '')
    return 'other: %s:%d %s' % (f, l, fn), True

BRANCH = re.compile(r'^(@!?U?P\w+\s+)?(BRA|BRX|JMP)(\.\w+)?\s+(?:\w+,\s*)?`\((\.L_x_\d+)\)')

def blocks(I, first, last):
    """Basic blocks of I[first..last]: (label or None, instructions, successors)."""
    out = []; cur = None
    for k in range(first, last + 1):
        a, op, ch = I[k]
        if a is None:  # a label starts a block (consecutive labels, the same one)
            if cur is not None and not cur['ins']: cur['labels'].append(op.rstrip(':')); continue
            cur = {'labels': [op.rstrip(':')], 'ins': [], 'succ': [], 'falls': True}; out.append(cur); continue
        if cur is None or not cur['falls']:
            cur = {'labels': [], 'ins': [], 'succ': [], 'falls': True}; out.append(cur)
        cur['ins'].append((a, op, ch))
        m = BRANCH.match(op)
        if m:
            divergent_fallback = (m.group(3) or '') == '.DIV'  # taken only by a diverged warp
            if not divergent_fallback: cur['succ'].append(m.group(4))
            cur['falls'] = bool(m.group(1)) or divergent_fallback
            if cur['falls']:
                cur = {'labels': [], 'ins': [], 'succ': [], 'falls': True}; out.append(cur)
        elif op.startswith('EXIT') or op.startswith('RET'):
            cur['falls'] = bool(re.match(r'@', op))
    return [b for b in out if b['ins'] or b['labels']]

def common_path(I, first, last, profile='ans'):
    """Instructions of the blocks a warp runs at a common step: from the loop
    head, both ways at every branch, except into a block whose first
    instruction is in a cold category (the entry of a cold path); blocks
    reached so are on the common path whatever their own lines say.
    `profile`: the tile (hot_in)."""
    bl = blocks(I, first, last)
    at = {}
    for n, b in enumerate(bl):
        for lab in b['labels']: at[lab] = n
    def cold_entry(n):  # by its first instruction other than a reconvergence (BSYNC)
        real = [x for x in bl[n]['ins'] if not re.match(r'(BSYNC|NOP)\b', x[1])]
        return bool(real) and not hot_in(profile, real[0][2], *category(real[0][2], cold_first=False))
    seen = set(); todo = [0]
    while todo:
        n = todo.pop()
        if n in seen: continue
        seen.add(n)
        b = bl[n]
        nxt = [at[t] for t in b['succ'] if t in at]
        if b['falls'] and n + 1 < len(bl): nxt.append(n + 1)
        for m in nxt:
            if m > n and m not in seen and not cold_entry(m): todo.append(m)  # m <= n: the loop's back edge
    return [x for n in sorted(seen) for x in bl[n]['ins']]

def table(path, first, last):
    """Per category: instructions in the whole loop (cold callers first), on
    its common path and on the Rice tile path (innermost function first)."""
    I = parse(path)
    tot = collections.Counter(); common = collections.Counter(); rice = collections.Counter(); hot = {}
    for a, op, ch in (x for x in I[first:last + 1] if x[0] is not None):
        name, h = category(ch)
        tot[name] += 1; hot.setdefault(name, h)
    for a, op, ch in common_path(I, first, last):
        name, h = category(ch, cold_first=False)
        common[name] += 1; hot.setdefault(name, h)
    for a, op, ch in common_path(I, first, last, 'rice'):
        rice[category(ch, cold_first=False)[0]] += 1
    return tot, common, rice, hot

def ch3_loop(path):
    I = parse(path)
    for j, i, n, sh, op in loops(I):
        if sh == 6 and n < 8000: return j, i
    raise SystemExit('no CH=3 step loop (6 SHFL.UP) found')



def main():
    if len(sys.argv) != 3: raise SystemExit(__doc__)
    ROOTS.append(sys.argv[2])
    j, i = ch3_loop(sys.argv[1])
    tot, common, rice, hot = table(sys.argv[1], j, i)
    print('| category | whole step loop | common path | Rice tile path |')
    print('|---|---:|---:|---:|')
    for k in sorted(set(tot) | set(common) | set(rice), key=lambda k: (-common[k], -rice[k], -tot[k])):
        print(f'| {k} | {tot[k]} | {common[k]} | {rice[k]} |')
    print(f'| **total** | **{sum(tot.values())}** | **{sum(common.values())}** | **{sum(rice.values())}** |')


if __name__ == '__main__':
    main()
