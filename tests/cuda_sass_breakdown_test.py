#!/usr/bin/env python3
"""Checks bench/cuda_sass_breakdown.py (issue 13's per-step SASS table) on a
made-up disassembly and source tree, no CUDA needed: it finds the step loop
by its 6 SHFL.UP, names instructions by their inline chains (a cold caller
anywhere in the chain wins over the innermost function), skips other
kernels and loops, and counts the common path: the blocks reached from the
loop head without entering a cold path, code the compiler shares between a
hot and a cold path included, a reconvergence point never a cold entry.

Usage: cuda_sass_breakdown_test.py SOURCE_ROOT
"""
import os
import sys
import tempfile

sys.path.insert(0, os.path.join(sys.argv[1], 'bench'))
import cuda_sass_breakdown as sb  # noqa: E402

BIT_READER = '''// header
struct BitReader {
  L3_HD void refill() {
    if (end - p >= kLoadBytes) {
      refill_load();
      return;
    }
    while (avail <= 56) {
      std::uint64_t byte = 0;
    }
  }
};
L3_HD std::uint32_t read_rice(BitReader& br, int k) {
  if (br.avail < 30) br.refill();
  return 0;
}
'''
TILE_ANS = '''// header
L3_HD int ans_search(const std::uint16_t* cum, std::uint32_t slot) {
  int t = 0;
  return t;
}
'''
WAVEFRONT = '''// header
template <int CH, std::uint8_t kPred, class Warp>
L3_WF_HD int wavefront_coded(Warp& warp, const TileTask& task, const core::CodedTileParams& t, std::uint32_t* stage) {
  for (int s = 0; s < steps; ++s) {
      warp.shfl_up(nv[p], wv[p]);
      flush_stage<CH>(warp, task, stage, c0);
  }
}
'''
# Lines: bit_reader.hpp 4 = refill's bound check, 9 = its byte loop, 14 =
# read_rice's refill call; tile_ans.hpp 4 = ans_search; wavefront.hpp 4 = the
# step loop, 5 = a shuffle, 6 = the copy-out.


def chain(*links):
    first = links[0]
    out = [f'\t//## File "/x/{first[0]}", line {first[1]}' +
           (f' inlined at "/x/{links[1][0]}", line {links[1][1]}' if len(links) > 1 else '')]
    for k in range(1, len(links)):
        nxt = f' inlined at "/x/{links[k + 1][0]}", line {links[k + 1][1]}' if k + 1 < len(links) else ''
        out.append(f'\t//## File "/x/{links[k][0]}", line {links[k][1]}{nxt}')
    return out


def ins(addr, op):
    return f'        /*{addr:04x}*/                   {op} ;'


def sass():
    loop = ['.L_x_1:']
    a = 0x100
    def add(op, *links):
        nonlocal a
        loop.extend(chain(*links) if links else [])
        loop.append(ins(a, op))
        a += 0x10
    step = ('wavefront.hpp', 4)
    add('ISETP.GE.AND P0, PT, R1, R2, PT', step)
    for k in range(3):
        add('LDS.U16 R5, [R4+0x10]', ('tile_ans.hpp', 4), step)                    # token search
        add('ISETP.GT.U32.AND P3, PT, R4, 0xb, PT', ('bit_reader.hpp', 4), step)   # refill check
        add(f'@P3 BRA `(.L_x_1{k}0)', ('bit_reader.hpp', 4), step)
        add('LDG.E.U8 R6, desc[UR4][R2.64]', ('bit_reader.hpp', 9), step)          # byte loop: cold entry
        loop.append(f'.L_x_1{k}0:')
        # Word loads the compiler shares with the Rice read, tagged with its
        # lines: on the common path all the same (reached from the check).
        add('LD.E R6, desc[UR4][R2.64]', ('bit_reader.hpp', 4), ('bit_reader.hpp', 14), step)
    add('@P1 BRA `(.L_x_20)', step)
    add('ISETP.GT.AND P5, PT, R17, 0x1d, PT', ('bit_reader.hpp', 14), step)        # Rice read: cold entry
    loop.append('.L_x_20:')
    for _ in range(6):
        add('SHFL.UP PT, R7, R8, 0x1, RZ', ('wavefront.hpp', 5))
    add('@P2 BRA `(.L_x_21)', step)
    add('STG.E.U8 desc[UR4][R2.64], R9', ('wavefront.hpp', 6))                 # copy-out: cold entry
    loop.append('.L_x_21:')
    loop.append('\t//## File "/x/wavefront.hpp", line 6')
    loop.append(ins(a, 'BSYNC B1'))  # a reconvergence point with a cold line: not a cold entry
    a += 0x10
    add('BRA `(.L_x_1)', step)
    other_kernel = ['\t.section\t.text._Z6gatherv,"ax",@progbits', ins(0x0, 'SHFL.UP PT, R7, R8, 0x1, RZ'),
                    '.L_x_9:', ins(0x10, 'NOP'), ins(0x20, 'BRA `(.L_x_9)')]
    return '\n'.join(other_kernel + ['\t.section\t.text._ZN2l34cuda13decode_kernelEv,"ax",@progbits',
                                     ins(0x0, 'S2R R0, SR_TID.X'), '.L_x_2:', ins(0x10, 'NOP'),
                                     ins(0x20, 'BRA `(.L_x_2)')] + loop + [ins(a, 'EXIT')]) + '\n'


def rice_sass():
    """A step loop with a rANS and a Rice branch: the Rice branch's refill
    tagged with the rANS read's chain, as nvcc tags it."""
    loop = ['.L_x_1:']
    a = 0x100
    def add(op, *links):
        nonlocal a
        loop.extend(chain(*links) if links else [])
        loop.append(ins(a, op))
        a += 0x10
    step = ('wavefront.hpp', 4)
    add('ISETP.NE.AND P0, PT, R1, RZ, PT', step)
    add('@P0 BRA `(.L_x_30)', step)
    add('LDS.U16 R5, [R4+0x10]', ('tile_ans.hpp', 4), step)                       # rANS: token search
    add('LDS.U16 R6, [R4+0x20]', ('tile_ans.hpp', 4), step)
    add('BRA `(.L_x_31)', step)
    loop.append('.L_x_30:')
    add('ISETP.GT.AND P2, PT, R30, 0x1d, PT', ('bit_reader.hpp', 14), step)       # Rice read
    add('@P2 BRA `(.L_x_31)', ('bit_reader.hpp', 14), step)
    add('LD.E R6, desc[UR4][R2.64]', ('bit_reader.hpp', 4), ('tile_ans.hpp', 4), step)  # its refill, mis-tagged
    loop.append('.L_x_31:')
    for _ in range(6):
        add('SHFL.UP PT, R7, R8, 0x1, RZ', ('wavefront.hpp', 5))
    add('BRA `(.L_x_1)', step)
    return '\n'.join(['\t.section\t.text._ZN2l34cuda13decode_kernelEv,"ax",@progbits', ins(0x0, 'S2R R0, SR_TID.X')] +
                     loop + [ins(a, 'EXIT')]) + '\n'


def main():
    with tempfile.TemporaryDirectory() as root:
        for d, f, text in (('codec/include/l3/codec', 'bit_reader.hpp', BIT_READER),
                           ('codec/include/l3/codec', 'tile_ans.hpp', TILE_ANS),
                           ('cuda/include/l3/cuda', 'wavefront.hpp', WAVEFRONT)):
            os.makedirs(os.path.join(root, d), exist_ok=True)
            with open(os.path.join(root, d, f), 'w') as out:
                out.write(text)
        path = os.path.join(root, 'k.sass')
        with open(path, 'w') as out:
            out.write(sass())
        sb.ROOTS[:] = [root]
        first, last = sb.ch3_loop(path)
        tot, common, rice, hot = sb.table(path, first, last)
        # The whole loop, a cold caller anywhere in the chain first.
        assert dict(tot) == {'token search': 3, 'refill: word loads': 6, 'refill: byte loop near the stream end': 3,
                             'Rice read (Rice tiles only)': 4, 'neighbours + shuffles': 6,
                             'copy-out (every 32 steps)': 2, 'loop control': 4}, dict(tot)
        # The common path: no cold entry, the shared word loads included.
        assert dict(common) == {'token search': 3, 'refill: word loads': 9, 'neighbours + shuffles': 6,
                                'copy-out (every 32 steps)': 1, 'loop control': 4}, dict(common)
        # The Rice tile path: the rANS branch (its token search) cold, the
        # Rice read and its refill hot whatever chain nvcc gave the refill.
        with open(path, 'w') as out:
            out.write(rice_sass())
        first, last = sb.ch3_loop(path)
        tot, common, rice, hot = sb.table(path, first, last)
        assert dict(common) == {'loop control': 4, 'token search': 2, 'neighbours + shuffles': 6}, dict(common)
        assert dict(rice) == {'loop control': 3, 'Rice read (Rice tiles only)': 2, 'refill: word loads': 1,
                              'neighbours + shuffles': 6}, dict(rice)
    print('PASS')


if __name__ == '__main__':
    main()
