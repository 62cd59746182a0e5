"""rtl/seq.py on its own: a matmul right after a row-serial weight load waits for nothing but the
descriptor flow (docs/timing.md: decoded the cycle after the load leaves the FIFO, issued the cycle
after; the load rule, one cycle after the load's issue, is already met), whatever its passes; the
golden engine and the sequencer agree."""
import pytest

from tensore.cosim import programs as P
from tests.test_rtl_seq import _check, _expected, _run


@pytest.mark.parametrize("dtype,mode", [("bf16", None), ("fp32", "high"), ("fp32", "low_high")])
def test_matmul_follows_a_row_serial_load(dtype, mode):
    """A load of 4 rows in last-column-first order (the row-serial port under every profile), then a
    matmul of 1 or 4 passes: the matmul issues two cycles after the load, in the golden trace and in
    the sequencer (not when the load's last row request leaves, 4 cycles after it), with the same
    refusals and registers."""
    prog = P.single("mariana", dtype, rows=4, cols=4, n=3, fp32_mode=mode, load_order="last_col_first")
    issues = sorted(_expected(prog)[0])
    assert len(issues) == 2 and issues[1] == issues[0] + 2
    _check(_run([prog]))
