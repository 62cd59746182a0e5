"""MAVERICK c256 destinations in the full engine RTL beside the golden engine (Amaranth's
simulator), every cycle: a matmul whose destination walks three dimensions and a SaveSeed.

Columns 0-127 write vector v at destination element v, columns 128-255 at element v plus the upper
dimension's step (dst dim 2 of size 2).  The library's c256 programs step their lower dimension by
one element, where element v + 1 and the upper slot differ; here dims 0 and 1 both walk (2 x 2
vectors) with steps 1 and 3 and dim 2 steps one PSUM bank, so the upper half's address taken from
any other element lands in the wrong cells.  A SaveSeed's upper half writes destination element 1
(its 1 x 1 x 2 pattern's upper step); the library's step of 1 is tried here with a step of 5."""
import ml_dtypes
import numpy as np
import pytest

from tensore.cosim import lockstep
from tensore.cosim import programs as P
from tensore.model import addrmap
from tensore.model.psum import SR_STATE_BASE

ROWS, COLS = 4, 8                    # both column halves: 4 columns each
NUMS, STEPS = (2, 2, 2), (1, 3, 512)  # dst: 4 vectors in dims 0 and 1, the column halves in dim 2
SEED_BANK, SEED_OFF, SEED_STEP = 3, 0x40, 5


def _program():
    """Weights and moving data of small integers (exact in bf16 and in every fp32 sum), so the
    expectation is numpy's integer product: column c's sum for vector v in partition c mod 4, bank
    4 + c // 4, cell i0 + 3 * i1 of v = i0 + 2 * i1."""
    b = P._Builder("c256_pattern3d", "maverick", ROWS, COLS // 2, 52)
    n = NUMS[0] * NUMS[1]
    w = b.rng.integers(-4, 5, (ROWS, COLS))
    a = b.rng.integers(-4, 5, (ROWS, n))
    bf16 = lambda x: x.astype(ml_dtypes.bfloat16).view(np.uint16)
    ow, oa = b.put(0, bf16(w), 2), b.put(0, bf16(a), 2)
    t = "tile_size=(row_size_log2=r128, col_size_log2=c256) "
    b.line(f"ldweights in_dtype=bf16 rows={ROWS} cols=0 {t}flags=(load_order=first_col_first) "
           f"src=(start_addr=sbuf(0,{ow:#x}), step_elem=[1,0,0], num_elem=[{COLS},1,1])")
    b.line(f"matmul in_dtype=bf16 out_dtype=fp32 rows={ROWS} cols=0 {t}flags=(accumulate_flag=overwrite) "
           f"src=(start_addr=sbuf(0,{oa:#x}), step_elem=[1,0,0], num_elem=[{n},1,1]) "
           f"dst=(start_addr=psum(0,4,0), step_elem=[{STEPS[0]},{STEPS[1]},{STEPS[2]}], "
           f"num_elem=[{NUMS[0]},{NUMS[1]},{NUMS[2]}])")
    ref = w.T @ a                                           # [column, vector]
    half = COLS // 2
    for c in range(COLS):
        cells = np.zeros(STEPS[1] * (NUMS[1] - 1) + NUMS[0], np.float32)
        for v in range(n):
            cells[(v % NUMS[0]) * STEPS[0] + (v // NUMS[0]) * STEPS[1]] = ref[c, v]
        b.p.expect_fp32[(c % half, 4 + c // half)] = (0, cells.view(np.uint32))
    return b.done()


def _save_seed_program():
    """A SaveSeed of the reset states into bank 3 at 0x40, dst step [1, 0, 5] x [1, 1, 2]: column c
    saves partition c mod 4's state 2 * 3 + c // 4 (seed 000 section 5), reset to SR_STATE_BASE ^
    (partition << 8 | state), so partition p holds state 6 in cell 0 and state 7 in cell 5."""
    b = P._Builder("save_seed_pattern", "maverick", ROWS, COLS // 2, 54)
    src = b.put(0, np.zeros((1, COLS), np.uint32), 4)
    b.line("matmul in_dtype=fp32 fp32_mode=high out_dtype=fp32 rows=1 cols=0 "
           "tile_size=(row_size_log2=r64, col_size_log2=c256) flags=(xpose_mode=enabled, seed_mode=save_seed) "
           f"src=(start_addr=sbuf(0,{src:#x}), step_elem=[1,0,0], num_elem=[{COLS},1,1]) "
           f"dst=(start_addr=psum(0,{SEED_BANK},{SEED_OFF:#x}), step_elem=[1,0,{SEED_STEP}], num_elem=[1,1,2])")
    for p in range(COLS // 2):
        cells = np.zeros(SEED_STEP + 1, np.uint32)
        cells[0], cells[SEED_STEP] = (SR_STATE_BASE ^ ((p << 8) | (2 * SEED_BANK + h)) for h in (0, 1))
        b.p.expect_fp32[(p, SEED_BANK)] = (SEED_OFF, cells)
    return b.done()


@pytest.mark.slow
def test_c256_upper_half_along_three_dimensions():
    """The golden engine writes numpy's product into both banks and the SaveSeed's states where the
    pattern puts them, and the engine RTL (one engine for both programs) matches it in every cycle's
    PSUM writes, the status, the registers and the final PSUM."""
    progs = [_program(), _save_seed_program()]
    for prog in progs:
        eng, trace, _ = prog.golden()
        assert not trace.stalled and all(o.error == 0 for o in trace.ops), prog.name
        cells = eng.psum.cells(4)
        for (part, bank), (off, bits) in prog.expect_fp32.items():
            start = (bank * addrmap.PSUM_BANK_BYTES + off) // 4
            assert np.array_equal(cells[part, start:start + bits.size], bits), (prog.name, part, bank)
    assert lockstep.run_many(progs, psum_partitions=8) == [None, None]
