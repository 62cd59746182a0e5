"""SUNDA and MARIANA_PLUS on the RTL.  Each is a twin of the generation whose layouts it uses (SUNDA of
CAYMAN, MARIANA_PLUS of MARIANA: D-T09, D-T43): the same library bits, the same golden-engine traces,
and the same engine RTL (its elaborated netlist equals the twin's up to the generation's name in
module names), so the twin's library runs on the RTL (tests/test_cosim_hdl.py,
tests/test_rtl_top.py) cover it; here the twins' own libraries also run on the RTL in Amaranth's
simulator (make cosim).  SUNDA differs from CAYMAN only by its public limits (D-T97): no FP8 double
row and 192 KiB of SBUF, rules of the decoder (the sequencer unit) that tests/test_rtl_decoder.py
checks against the model, and by its row tiles under `public` (2 x 64 rows on NeuronCore-v2, 4 x 32
from v3, D-T100): SUNDA's traces and netlist equal CAYMAN's under `contract`, and its PSUM under
both."""
import numpy as np
import pytest

from tensore.cosim import lockstep
from tensore.cosim import programs as P
from tensore.model.dtypes import Gen
from tensore.model.engine import Engine
from tensore.model.isa.asm import assemble

TWINS = [(Gen.SUNDA, Gen.CAYMAN), (Gen.MARIANA_PLUS, Gen.MARIANA)]
IDS = [t.name for t, _ in TWINS]
# programs of the base that the twin lacks, and the twin's own in their place (D-T97)
ONLY_BASE = {Gen.SUNDA: {"double_row", "all_codes_fp8_exp3_double_row"}, Gen.MARIANA_PLUS: set()}
ONLY_TWIN = {Gen.SUNDA: {"all_codes_fp8_exp3"}, Gen.MARIANA_PLUS: set()}


def _pairs(twin, base):
    """The library programs twin and base share, by name; the rest is exactly ONLY_BASE / ONLY_TWIN."""
    mine, theirs = {p.name: p for p in P.library(twin)}, {p.name: p for p in P.library(base)}
    assert set(theirs) - set(mine) == ONLY_BASE[twin] and set(mine) - set(theirs) == ONLY_TWIN[twin]
    return [(mine[n], theirs[n]) for n in mine if n in theirs]


@pytest.mark.parametrize("twin,base", TWINS, ids=IDS)
def test_twin_library_is_the_same_program(twin, base):
    """Same descriptor bytes, SBUF image, register writes and expectations."""
    for p, q in _pairs(twin, base):
        assert assemble(p.text, twin) == assemble(q.text, base), p.name
        assert np.array_equal(p.sbuf, q.sbuf) and p.regs == q.regs and p.refused == q.refused, p.name
        for mine_e, theirs_e in ((p.expect_fp32, q.expect_fp32), (p.expect_bf16, q.expect_bf16)):
            assert mine_e.keys() == theirs_e.keys(), p.name
            for k in mine_e:
                assert mine_e[k][0] == theirs_e[k][0] and np.array_equal(mine_e[k][1], theirs_e[k][1]), (p.name, k)


@pytest.mark.parametrize("twin,base", TWINS, ids=IDS)
def test_twin_golden_traces_are_equal(twin, base):
    """The golden engine gives the same events in the same cycles and the same PSUM (SUNDA: the same
    events under `contract`, its tiles apart)."""
    same_tiles = twin != Gen.SUNDA
    for p, q in _pairs(twin, base):
        for timing in ("public", "contract"):
            runs = []
            for prog in (p, q):
                eng = Engine(prog.gen, rows=prog.rows, cols=prog.cols, sbuf=prog.sbuf_model(), timing=timing)
                for reg, value in prog.regs.items():
                    eng.write_reg(reg, value)
                trace = eng.run(assemble(prog.text, prog.gen))
                runs.append((eng, [(e.cycle, e.kind, e.op, repr(e.data)) for e in trace.events]))
            (e1, ev1), (e2, ev2) = runs
            if same_tiles or timing == "contract":
                assert ev1 == ev2, (p.name, timing)
            assert np.array_equal(e1.psum.mem, e2.psum.mem), (p.name, timing)


def _rtlil(gen, pack):
    from amaranth.back import rtlil
    from tensore.rtl.pe import PE
    from tensore.rtl.rowport import RowPort
    from tensore.rtl.top import Engine as RtlEngine
    from tensore.rtl.export import convert_ports
    timing = "contract" if gen in (Gen.SUNDA, Gen.CAYMAN) else "public"      # SUNDA's tiles apart
    eng = RtlEngine(gen, 2, 2, pack=pack, psum_partitions=2, black_box=True, timing=timing)
    parts = [rtlil.convert(PE(gen, pack), name="pe", emit_src=False),
             rtlil.convert(RowPort(gen, pack, 2), name="rowport", emit_src=False),
             rtlil.convert(eng, name="top", emit_src=False),
             # the units the top instantiates (D-T82)
             *(rtlil.convert(u, name="unit", ports=convert_ports(u), emit_src=False)
               for u in (eng._seq(), eng._load(), eng._launch(), eng._write()))]
    return [t.replace(gen.name.lower(), "GEN").replace(gen.name, "GEN") for t in parts]


@pytest.mark.slow
@pytest.mark.parametrize("twin,base,pack", [pytest.param(Gen.SUNDA, Gen.CAYMAN, 2, marks=pytest.mark.cosim),
                                               (Gen.MARIANA_PLUS, Gen.MARIANA, 8)], ids=IDS)
def test_twin_rtl_is_the_same_netlist(twin, base, pack):
    """The PE, the row port, the engine top (its blocks as instances) and its units elaborate to the
    same RTLIL for the twin and its base, up to the generation's name: the RTL is the same circuit.
    SUNDA's sequencer (it holds the decoder) differs by the D-T97 limits, and SUNDA with CAYMAN
    compare under `contract` (their row tiles differ)."""
    names = ["pe", "rowport", "top", "seq", "load", "launch", "write"]
    for name, mine, theirs in zip(names, _rtlil(twin, pack), _rtlil(base, pack)):
        if twin == Gen.SUNDA and name == "seq":
            assert mine != theirs
        else:
            assert mine == theirs, name


@pytest.mark.slow
@pytest.mark.cosim
@pytest.mark.parametrize("gen,size", [(Gen.SUNDA, (4, 4)), (Gen.MARIANA_PLUS, (8, 4))], ids=IDS)
def test_twin_library_lockstep(gen, size):
    """The twin's whole library on the engine RTL in Amaranth's simulator, in lockstep with the golden
    engine (as tests/test_rtl_top.py does for CAYMAN / MARIANA / MAVERICK)."""
    progs = P.library(gen, rows=size[0], cols=size[1], n=4)
    stats = {}
    results = lockstep.run_many(progs, psum_partitions=8, stats=stats)
    failed = [(p.name, str(bad)) for p, bad in zip(progs, results) if bad is not None]
    assert not failed, failed
    print(f"{gen.name}: {len(progs)} programs, {stats['cycles']} cycles, {stats['checks']} checks")
