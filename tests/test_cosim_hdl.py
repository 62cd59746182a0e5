"""The exported engine Verilog in lockstep with the golden engine through cocotb (cosim/hdl.py):
the whole program library on Verilator at small sizes, Icarus Verilog giving the same results,
the mismatch report from a simulator run, and the lint of the export."""
import os
import subprocess

import pytest

from cosim import hdl, toolchain
from cosim import programs as P

# Every program of the library, on one engine build per generation (the default pack per generation:
# FP8 double row on CAYMAN / MARIANA, one element per PE on MAVERICK).
LIBRARY = [
    ("single bf16", lambda: P.single("mariana", "bf16", n=4)),
    ("single fp16 last-col-first", lambda: P.single("mariana", "fp16", load_order="last_col_first")),
    ("single fp32 low_high", lambda: P.single("mariana", "fp32", fp32_mode="low_high")),
    ("accumulate group", lambda: P.accumulate_group("mariana")),
    ("invalid mixed", lambda: P.invalid_mixed("mariana")),
    ("bf16 drain sr", lambda: P.bf16_drain("mariana", sr=True)),
    ("bf16 drain rne", lambda: P.bf16_drain("mariana", sr=False)),
    ("single fp8 e4m3 cayman", lambda: P.single("cayman", "fp8_e4m3")),
    ("row/col group tiles", lambda: P.tiles("cayman")),
    ("reg write bypass", lambda: P.reg_write_bypass("cayman")),
    ("zero region", lambda: P.zero_region("cayman")),
    ("fp8 double row", lambda: P.double_row("cayman")),
    ("maverick quadrants", lambda: P.tiles("maverick")),
    ("maverick c256", lambda: P.c256()),
]


def _marks(make):
    """Tests of one engine build run on one xdist worker (`--dist loadgroup`): the other worker
    builds the next configuration instead of waiting for the same build's lock.  `make test` builds
    only the MARIANA engine (each Verilator build takes minutes on 2 cores); the CAYMAN and MAVERICK
    builds are marked `cosim` and run by `make cosim`."""
    gen = make().gen.name.lower()
    return [pytest.mark.xdist_group(gen)] + ([] if gen == "mariana" else [pytest.mark.cosim])


@pytest.mark.slow
@pytest.mark.parametrize("label,make", [pytest.param(n, m, marks=_marks(m), id=n) for n, m in LIBRARY])
def test_library_on_verilator(label, make):
    prog = make()
    res = hdl.run(prog, opt="-O0")
    assert res.mismatch is None, str(res.mismatch)
    assert res.cycles == res.lockstep.end and res.checks > res.cycles
    assert res.lockstep.expected_writes() > 0 or prog.refused


@pytest.mark.slow
@pytest.mark.xdist_group("mariana")
def test_icarus_matches_verilator():
    """The same program on both simulators: both pass, with the same number of checks; a corrupted
    golden write is reported identically by both, with a waveform from Icarus."""
    prog = P.single("mariana", "bf16", n=4)
    hdl.ensure_icarus()
    assert toolchain.have_icarus()
    v = hdl.run(prog, sim="verilator", opt="-O0")
    i = hdl.run(prog, sim="icarus", waves=True)            # one Icarus build serves both runs
    assert v.mismatch is None and i.mismatch is None, (v.mismatch, i.mismatch)
    assert (v.cycles, v.checks) == (i.cycles, i.checks)

    def tamper(trace):
        e = next(e for e in trace.events if e.kind == "psum_write")
        e.data["bits"] ^= 1 << 3
    bad_v = hdl.run(prog, sim="verilator", opt="-O0", tamper=tamper).mismatch
    bad_i = hdl.run(prog, sim="icarus", waves=True, tamper=tamper).mismatch
    assert bad_v is not None and bad_i is not None
    assert (bad_v.cycle, bad_v.where, bad_v.expected, bad_v.actual) == \
        (bad_i.cycle, bad_i.where, bad_i.expected, bad_i.actual)
    assert "PSUM partition" in bad_i.where and "expected" in str(bad_i) and "got" in str(bad_i)
    assert bad_i.vcd and os.path.getsize(bad_i.vcd) > 1000


@pytest.mark.slow
def test_export_lints_clean():
    """`verilator --lint-only -Wall` with the committed waivers (rtl/lint.vlt) reports nothing."""
    prog = P.single("mariana", "bf16", n=4)
    exp = hdl.export_cached(hdl.Config.of(prog), log=lambda *a: None)
    d = exp["dir"]
    files = open(os.path.join(d, "files.f")).read().split()
    res = subprocess.run(["verilator", "--lint-only", "-Wall", "--top-module", exp["top"], "verilator.vlt", "lint.vlt",
                          *files], cwd=d, env=toolchain.verilator_env(), capture_output=True, text=True)
    assert res.returncode == 0 and "%Warning" not in res.stderr and "%Error" not in res.stderr, res.stderr[-3000:]
