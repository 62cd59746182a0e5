"""The exported engine Verilog in lockstep with the golden engine through cocotb (cosim/hdl.py):
the whole program library of every generation on Verilator at small sizes, Icarus Verilog giving
the same results, the mismatch report from a simulator run, and the lint of the export."""
import os
import subprocess
from pathlib import Path

import pytest

from tensore.cosim import hdl, toolchain
from tensore.cosim import programs as P
from tensore.cosim import random_programs as R
from tensore.cosim.lockstep import Lockstep
from tests.fixtures import RTL_GAPS

# `make test`: the whole library of every generation on 8 x 8 arrays (cosim/programs.py; MAVERICK's
# `cols` is half the array), one Verilator build per generation with the most elements per PE its
# programs need (MX: 8) and one simulator process running all of its programs (cosim.hdl.run_many).
PACK = {"cayman": 2, "mariana": 8, "maverick": 8}
HALF = {"maverick": 4}
REPRO = Path(__file__).parent / "repro"


# make test keeps MARIANA (the generation with every kind of micro-op but c256, and the build the
# tests below share); make cosim adds the others
IN_MAKE_TEST = ("mariana",)


def _per_gen(gens):
    return [pytest.param(g, marks=[pytest.mark.xdist_group(g)] + ([] if g in IN_MAKE_TEST else [pytest.mark.cosim]))
            for g in gens]


@pytest.mark.slow
@pytest.mark.parametrize("gen", _per_gen(PACK))
def test_library_on_verilator(gen):
    """The library, and the reproducers (tests/repro) of the generation on 8 x 8 arrays (they share
    the build, so the reproducers, saved under `contract` before profiles, run under the library's
    profile too) but the known RTL gaps."""
    progs = P.library(gen, rows=8, cols=HALF.get(gen, 8))
    repro = (R.load(s.with_suffix("")) for s in sorted(REPRO.glob("*.s")))
    progs += [p for p in repro if p.gen.name.lower() == gen and gen not in HALF and (p.rows, p.cols) == (8, 8)
              and p.name not in RTL_GAPS]
    for p in progs:
        p.timing = progs[0].timing
    results = hdl.run_many(progs, pack=PACK[gen])
    failed = [(p.name, r.mismatch) for p, r in zip(progs, results) if r.mismatch is not None]
    assert not failed, f"{[n for n, _ in failed]} mismatch; {failed[0][0]}: {failed[0][1]}"
    for p, r in zip(progs, results):
        assert r.cycles == r.lockstep.end and r.checks > r.cycles, p.name
        assert r.lockstep.expected_writes() > 0 or p.refused, p.name
    cycles, seconds = sum(r.cycles for r in results), sum(r.seconds for r in results)
    print(f"{gen}: {len(progs)} programs, {cycles} cycles in {seconds:.1f} s on Verilator")


@pytest.mark.slow
@pytest.mark.xdist_group("mariana")
def test_icarus_matches_verilator():
    """The same program on both simulators: both pass, with the same number of checks; a corrupted
    golden write is reported identically by both, with a waveform from Icarus."""
    prog = P.single("mariana", "bf16", n=4)
    hdl.ensure_icarus()
    assert toolchain.have_icarus()
    v = hdl.run(prog, sim="verilator", pack=PACK["mariana"])   # the library's build
    i = hdl.run(prog, sim="icarus", pack=PACK["mariana"], waves=True)     # the same export; one Icarus build
    assert v.mismatch is None and i.mismatch is None, (v.mismatch, i.mismatch)
    assert (v.cycles, v.checks) == (i.cycles, i.checks)

    def tamper(trace):
        e = next(e for e in trace.events if e.kind == "psum_write")
        e.data["bits"] ^= 1 << 3
    bad_v = hdl.run(prog, sim="verilator", pack=PACK["mariana"], tamper=tamper, mismatch_waves=False).mismatch
    bad_i = hdl.run(prog, sim="icarus", pack=PACK["mariana"], waves=True, tamper=tamper).mismatch
    assert bad_v is not None and bad_i is not None
    assert (bad_v.cycle, bad_v.where, bad_v.expected, bad_v.actual) == \
        (bad_i.cycle, bad_i.where, bad_i.expected, bad_i.actual)
    assert "PSUM partition" in bad_i.where and "expected" in str(bad_i) and "got" in str(bad_i)
    assert bad_i.vcd and os.path.getsize(bad_i.vcd) > 1000


def _end_checks(prog, sims):
    """The lockstep's own checks reported by `sims` alike: a write's width, the PSUM read back after
    the run, the idle engine at the end (D-T78); returns the mismatches per check."""
    def widen(trace):                   # the golden engine writes a bf16 half where the RTL writes 32 bits
        e = next(e for e in trace.events if e.kind == "psum_write")
        e.data["bytes"] = 2

    def final_tampered():               # one wrong golden word of the final PSUM
        lk = Lockstep(prog, pack=PACK["mariana"])
        lk.final_psum[1, 3] ^= 1 << 9
        return lk

    def cut():                          # a run cut short while the engine computes
        lk = Lockstep(prog, pack=PACK["mariana"])
        lk.end = min(lk.writes)
        return lk
    cfg = hdl.Config.of(prog, pack=PACK["mariana"])
    first = min(cut().writes)
    quick = {"mismatch_waves": False}   # no traced re-run for a waveform (a build of its own; make cosim tests it)
    out = {"width": [hdl.run(prog, sim=s, pack=PACK["mariana"], tamper=widen, **quick).mismatch for s in sims],
           "final": [hdl.run_locksteps([final_tampered()], cfg, sim=s, **quick)[0].mismatch for s in sims],
           "idle": [hdl.run_locksteps([cut()], cfg, sim=s, **quick)[0].mismatch for s in sims]}
    assert all(b is not None and "PSUM partition" in b.where for b in out["width"]), out["width"]
    assert all(b is not None and b.where == "final PSUM partition 3 word at offset 0x4" for b in out["final"])
    assert all(b is not None and b.where.startswith("done") and b.cycle == first - 1 for b in out["idle"])
    return out


@pytest.mark.slow
@pytest.mark.xdist_group("mariana")
def test_end_checks_report_mismatches():
    """On Verilator (the library's build): a 32-bit write where the golden engine writes a bf16 half,
    a wrong word of the final PSUM and an engine still busy at the end are each a mismatch."""
    out = _end_checks(P.single("mariana", "bf16", n=4), ["verilator"])
    assert all(bad[0].vcd is None for bad in out.values())       # reported without a traced re-run


@pytest.mark.slow
@pytest.mark.cosim
@pytest.mark.xdist_group("mariana")
def test_end_checks_agree_across_simulators():
    """Icarus (cocotb) reports the end checks' mismatches as the compiled Verilator harness does."""
    hdl.ensure_icarus()
    out = _end_checks(P.single("mariana", "bf16", n=4), ["verilator", "icarus"])
    for bad in out.values():
        assert (bad[0].cycle, bad[0].where, bad[0].expected, bad[0].actual) == \
            (bad[1].cycle, bad[1].where, bad[1].expected, bad[1].actual)


@pytest.mark.slow
@pytest.mark.parametrize("gen", _per_gen(PACK))
def test_export_lints_clean(gen, tmp_path):
    """`verilator --lint-only -Wall` with the committed waivers (rtl/lint.vlt) reports nothing, on the
    export the library runs of the generation build from: the PE module alone, and the engine with a
    PE of the same ports whose outputs are 0 (a lint elaborates every instance: 64 real PEs take
    most of a minute, and each is the module linted alone)."""
    from tensore.rtl.blackbox import prototype
    from tensore.rtl.pe import PE
    prog = P.single(gen, "bf16", n=4, **({"cols": HALF[gen]} if gen in HALF else {}))
    exp = hdl.export_cached(hdl.Config.of(prog, pack=PACK[gen]), log=lambda *a: None)
    d = exp["dir"]
    pe = prototype(PE(gen, exp["pack"], dtypes=exp["dtypes"] and tuple(exp["dtypes"]), sparse32=exp["sparse32"]))
    stub = tmp_path / f"{pe.module_name}_stub.v"
    stub.write_text(_stub(pe))
    files = [f if f != f"{pe.module_name}.v" else str(stub) for f in open(os.path.join(d, "files.f")).read().split()]
    for top, sources in ((pe.module_name, [f"{pe.module_name}.v"]), (exp["top"], files)):
        res = subprocess.run(["verilator", "--lint-only", "-Wall", "--top-module", top, "verilator.vlt", "lint.vlt",
                              *sources], cwd=d, env=toolchain.verilator_env(), capture_output=True, text=True)
        assert res.returncode == 0 and "%Warning" not in res.stderr and "%Error" not in res.stderr, res.stderr[-3000:]


def _stub(block) -> str:
    """A module with `block`'s name and ports (rtl/blackbox.py) whose outputs are 0."""
    from amaranth.lib.wiring import In

    from tensore.rtl.blackbox import ports
    pins = ports(block)
    lines = [f"module {block.module_name}({', '.join(['clk', 'rst', *pins])});", "  input clk, rst;"]
    for name, (value, flow) in pins.items():
        width = f"[{len(value) - 1}:0] " if len(value) > 1 else ""
        lines.append(f"  {'input' if flow == In else 'output'} {width}{name};")
        if flow != In:
            lines.append(f"  assign {name} = {len(value)}'d0;")
    return "\n".join(lines + ["endmodule", ""])
