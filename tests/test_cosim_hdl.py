"""The exported engine Verilog in lockstep with the golden engine through cocotb (cosim/hdl.py):
programs of the library on Verilator at small sizes (all of them with `make cosim`), Icarus Verilog
giving the same results, the mismatch report from a simulator run, and the lint of the export."""
import os
import subprocess

import pytest

from cosim import hdl, toolchain
from cosim import programs as P

# `make test`: two programs (a matmul; seeds, SR and transposes) on one MARIANA build (8 x 8, two elements per
# PE); the whole library of every generation runs in Amaranth's simulator (tests/test_rtl_top.py).
# `make cosim`: the whole library of every generation on Verilator, one build per generation with
# the most elements per PE its programs need (MX: 8).
CI = [
    ("single bf16", lambda: P.single("mariana", "bf16", n=4)),
    ("seed replay", lambda: P.seed_replay("mariana", n=3)),
]
FULL = [(g, i, p.name) for g in ("cayman", "mariana", "maverick") for i, p in enumerate(P.library(g))]
FULL_PACK = {"cayman": 2, "mariana": 8, "maverick": 8}


@pytest.mark.slow
@pytest.mark.xdist_group("mariana")
@pytest.mark.parametrize("label,make", CI, ids=[n for n, _ in CI])
def test_programs_on_verilator(label, make):
    prog = make()
    res = hdl.run(prog, opt="-O0")
    assert res.mismatch is None, str(res.mismatch)
    assert res.cycles == res.lockstep.end and res.checks > res.cycles
    assert res.lockstep.expected_writes() > 0 or prog.refused


@pytest.mark.slow
@pytest.mark.cosim
@pytest.mark.parametrize("gen,index,name", FULL, ids=[f"{g}-{i}-{n}" for g, i, n in FULL])
def test_library_on_verilator(gen, index, name):
    prog = P.library(gen)[index]
    res = hdl.run(prog, opt="-O0", pack=FULL_PACK[gen])
    assert res.mismatch is None, str(res.mismatch)
    assert res.cycles == res.lockstep.end and res.checks > res.cycles


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
@pytest.mark.xdist_group("mariana")                  # the export the Verilator tests build from
def test_export_lints_clean():
    """`verilator --lint-only -Wall` with the committed waivers (rtl/lint.vlt) reports nothing."""
    prog = P.single("mariana", "bf16", n=4)
    exp = hdl.export_cached(hdl.Config.of(prog), log=lambda *a: None)
    d = exp["dir"]
    files = open(os.path.join(d, "files.f")).read().split()
    res = subprocess.run(["verilator", "--lint-only", "-Wall", "--top-module", exp["top"], "verilator.vlt", "lint.vlt",
                          *files], cwd=d, env=toolchain.verilator_env(), capture_output=True, text=True)
    assert res.returncode == 0 and "%Warning" not in res.stderr and "%Error" not in res.stderr, res.stderr[-3000:]
