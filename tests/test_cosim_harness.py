"""The compiled Verilator harness (cosim/harness.py, D-T61) and the cocotb testbench give the same
verdicts: the same programs pass with the same cycles and checks, and a corrupted golden write is
reported identically, with a waveform from a traced re-run."""
import os

import pytest

from tensore.cosim import hdl
from tensore.cosim import programs as P

# minutes on 2 cores: make cosim (make test keeps one Verilator library run per generation)
pytestmark = [pytest.mark.slow, pytest.mark.cosim, pytest.mark.xdist_group("cayman")]
PACK = 2                                    # the library's CAYMAN build (tests/test_cosim_hdl.py)


def _tamper(trace):
    e = [e for e in trace.events if e.kind == "psum_write"][5]
    e.data["bits"] ^= 1 << 7


def test_harnesses_agree():
    progs = [p for p in P.library("cayman", rows=8, cols=8)
             if p.name in ("accumulate_group", "double_row", "sparse_mixed", "invalid_mixed", "specials_fp32_high")]
    assert len(progs) == 5
    compiled = hdl.run_many(progs, pack=PACK, harness="compiled")
    cocotb = hdl.run_many(progs, pack=PACK, harness="cocotb", opt="-O0")      # -O0: a build twice as fast
    for p, a, b in zip(progs, compiled, cocotb):
        assert a.mismatch is None and b.mismatch is None, (p.name, a.mismatch, b.mismatch)
        assert (a.cycles, a.checks) == (b.cycles, b.checks), p.name
    prog = progs[0]
    bad_a = hdl.run(prog, pack=PACK, harness="compiled", tamper=_tamper).mismatch
    bad_b = hdl.run(prog, pack=PACK, harness="cocotb", tamper=_tamper, opt="-O0").mismatch
    assert bad_a is not None and bad_b is not None
    assert (bad_a.cycle, bad_a.where, bad_a.expected, bad_a.actual) == \
        (bad_b.cycle, bad_b.where, bad_b.expected, bad_b.actual)
    assert bad_a.vcd and os.path.getsize(bad_a.vcd) > 1000          # the traced re-run's waveform
    assert f"cycle {bad_a.cycle}" in str(bad_a) and "expected" in str(bad_a)


def test_compiled_harness_refuses_icarus():
    with pytest.raises(ValueError, match="Verilator"):
        hdl.run(P.single("cayman", "bf16", n=2), sim="icarus", harness="compiled")
