"""The engine RTL (rtl/top.py) in Amaranth's simulator in lockstep with the golden engine, cycle by
cycle (cosim/lockstep.py): PSUM writes of every partition, error status every cycle, counters and
status registers at the end."""
import pytest

from cosim import lockstep
from cosim import programs as P

# The Amaranth-simulator lockstep of a few programs that cover the engine's paths (one element per
# PE, FP8 double row, the MAVERICK c256 pump); the whole library runs on the exported Verilog in
# Verilator (tests/test_cosim_hdl.py), where one build per generation serves every program.
PROGRAMS = [
    ("single bf16 4x4", lambda: P.single("mariana", "bf16", rows=4, cols=4, n=4), 1),
    ("fp8 double row", lambda: P.double_row("cayman"), 2),
    ("accumulate group", lambda: P.accumulate_group("mariana"), 1),
    ("maverick c256", lambda: P.c256(), 1),
]


@pytest.mark.slow
@pytest.mark.parametrize("label,make,pack", PROGRAMS, ids=[p[0] for p in PROGRAMS])
def test_lockstep(label, make, pack):
    bad = lockstep.check(make(), pack=pack)
    assert bad is None, str(bad)


@pytest.mark.slow
def test_lockstep_sbuf_latency_3():
    """The testbench's SBUF answers one cycle later (L = 3): model and RTL shift their schedule alike."""
    bad = lockstep.check(P.single("mariana", "bf16", rows=4, cols=4, n=4), pack=1, sbuf_latency=3)
    assert bad is None, str(bad)


def test_mismatch_report(tmp_path):
    """A corrupted golden write is reported with its cycle, partition, both values and a VCD."""
    def tamper(trace):
        e = next(e for e in trace.events if e.kind == "psum_write")
        e.data["bits"] ^= 1 << 3
    prog = P.single("mariana", "bf16", rows=4, cols=4, n=4)
    bad = lockstep.check(prog, pack=1, vcd_dir=str(tmp_path), tamper=tamper)
    assert bad is not None and "PSUM partition" in bad.where
    text = str(bad)
    assert "expected" in text and "got" in text and "waveform" in text
    assert (tmp_path / "single_bfloat16_mariana.vcd").stat().st_size > 1000
