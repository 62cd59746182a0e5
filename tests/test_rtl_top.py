"""The engine RTL (rtl/top.py) in lockstep with the golden engine, cycle by cycle (cosim/lockstep.py):
PSUM writes of every partition, error status every cycle, counters and status registers at the end."""
import pytest

from cosim import lockstep
from cosim import programs as P

PROGRAMS = [
    ("single bf16 4x4", lambda: P.single("mariana", "bf16", rows=4, cols=4, n=4), 1),
    ("single fp16 last-col-first", lambda: P.single("mariana", "fp16", load_order="last_col_first"), 1),
    ("single fp8 e4m3 cayman", lambda: P.single("cayman", "fp8_e4m3"), 1),
    ("single fp32 low_high", lambda: P.single("mariana", "fp32", fp32_mode="low_high"), 1),
    ("accumulate group", lambda: P.accumulate_group("mariana"), 1),
    ("invalid mixed", lambda: P.invalid_mixed("mariana"), 1),
    ("row/col group tiles", lambda: P.tiles("cayman"), 1),
    ("reg write bypass", lambda: P.reg_write_bypass("cayman"), 1),
    ("zero region", lambda: P.zero_region("cayman"), 1),
    ("fp8 double row", lambda: P.double_row("cayman"), 2),
    ("bf16 drain sr", lambda: P.bf16_drain("mariana", sr=True), 1),
    ("maverick quadrants", lambda: P.tiles("maverick"), 1),
    ("maverick c256", lambda: P.c256(), 1),
]


@pytest.mark.slow
@pytest.mark.parametrize("label,make,pack", PROGRAMS, ids=[p[0] for p in PROGRAMS])
def test_lockstep(label, make, pack):
    bad = lockstep.check(make(), pack=pack)
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
