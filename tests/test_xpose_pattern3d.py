"""A transpose over several rounds along a three-dimensional source pattern, in the full engine RTL
beside the golden engine (Amaranth's simulator), every cycle.

On a rows x cols array with rows R < cols, rtl/launch.py gives row 0 the pattern position of element
j * R of each later round j (`_xit`: its index in every dimension).  The library's wide transposes
walk one or two dimensions, where the third index of those positions is 0 whatever it is computed
as; here the source has three dimensions of 2 elements each on a 4 x 8 array, so round 1 starts at
element 4 = index (0, 0, 1), and a wrong third index fetches the wrong element."""
import numpy as np
import pytest

from tensore.cosim import lockstep
from tensore.cosim import programs as P
from tensore.model import addrmap
from tensore.rtl.rowport import xpose_rounds

STEPS, NUMS = (1, 3, 10), (2, 2, 2)          # element steps and counts, dim 0 fastest


def _program():
    """MARIANA 4 x 8: one transposing matmul of the 8 bf16 elements at STEPS x NUMS of partitions
    0..3 into bank 2; the expectation is the elements picked with numpy, element e of partition k to
    partition e, half k (D-13)."""
    b = P._Builder("transpose_3d", "mariana", 4, 8, 50)
    span = sum(s * (n - 1) for s, n in zip(STEPS, NUMS)) + 1
    a = b.rng.integers(0, 1 << 16, (4, span), dtype=np.uint64)
    off = b.put(0, a, 2)
    b.line(f"matmul in_dtype=bf16 out_dtype=bf16 rows=4 cols=8 flags=(xpose_mode=enabled) acc=single "
           f"src=(start_addr=sbuf(0,{off:#x}), step_elem=[{STEPS[0]},{STEPS[1]},{STEPS[2]}], "
           f"num_elem=[{NUMS[0]},{NUMS[1]},{NUMS[2]}]) "
           "dst=(start_addr=psum(0,2,0), step_elem=[1,0,0], num_elem=[4,1,1])")
    idx = [i0 * STEPS[0] + i1 * STEPS[1] + i2 * STEPS[2]
           for i2 in range(NUMS[2]) for i1 in range(NUMS[1]) for i0 in range(NUMS[0])]
    for e, col in enumerate(idx):
        b.p.expect_bf16[(e, 2)] = (0, a[:, col].astype(np.uint16))
    return b.done()


@pytest.mark.slow
def test_transpose_rounds_along_three_dimensions():
    """Two rounds (4 x 8); the golden engine writes the numpy transpose, and the engine RTL matches
    it in every cycle's PSUM writes, the status, the registers and the final PSUM."""
    prog = _program()
    assert xpose_rounds(prog.rows, prog.cols) == 2
    eng, _, _ = prog.golden()
    halves = eng.psum.cells(2)
    for (part, bank), (off, bits) in prog.expect_bf16.items():
        got = halves[part, (bank * addrmap.PSUM_BANK_BYTES + off) // 2:][:bits.size]
        assert np.array_equal(got, bits), part
    assert lockstep.run_many([prog], psum_partitions=16) == [None]
