"""Aggregate traces (model/trace.py): the same run as a detailed trace, bit for bit and cycle for
cycle, with each matmul's PSUM writes held as one WriteBlock of arrays."""
import functools

import numpy as np
import pytest

from tensore.cosim import programs
from tensore.kernels import gemm as G
from tensore.model.dtypes import Gen
from tensore.model.engine import Engine
from tensore.model.isa.asm import assemble

library = functools.cache(programs.library)
LIBRARY = [(g, i) for g in (Gen.CAYMAN, Gen.MARIANA, Gen.MAVERICK) for i in range(len(library(g)))]


def run_both(gen, rows, cols, sbuf, text, regs=()):
    """(engine, trace) of the detailed and of the aggregate run of one program."""
    out = []
    for mode in ("detailed", "aggregate"):
        eng = Engine(gen, rows=rows, cols=cols, sbuf=sbuf(), trace=mode)
        for reg, value in dict(regs).items():
            eng.write_reg(reg, value)
        out.append((eng, eng.run(assemble(text, gen))))
    return out


def assert_same(detailed, aggregate):
    (e1, t1), (e2, t2) = detailed, aggregate
    assert np.array_equal(e1.psum.mem, e2.psum.mem) and np.array_equal(e1.psum.sr_state, e2.psum.sr_state)
    assert t1.cycles == t2.cycles and t1.summary() == t2.summary()
    for kind in {e.kind for e in t1.events} - {"psum_write"}:
        assert t1.of_kind(kind) == t2.of_kind(kind), kind
    assert "events" not in t2.__dict__                  # counted and read without one object per write
    assert t1.events == t2.events                       # the expanded view: same Events, same order
    ops = [o.index for o in t1.ops]
    w1, w2 = t1.psum_writes_of(ops), t2.psum_writes_of(ops)
    for op in ops:
        rows1, rows2 = (np.stack(w[op], axis=1) for w in (w1, w2))
        assert np.array_equal(np.unique(rows1, axis=0), np.unique(rows2, axis=0)), op


@pytest.mark.parametrize("gen,index", LIBRARY, ids=[f"{g.name}-{library(g)[i].name}" for g, i in LIBRARY])
def test_library_program(gen, index):
    """Every library program (transposes, SR drains, c256, sparse, MX, seeds, refusals) in both modes."""
    p = library(gen)[index]
    assert_same(*run_both(p.gen, p.rows, p.cols, p.sbuf_model, p.text, p.regs))


@pytest.mark.parametrize("gen,m,k,n,kw", [
    ("cayman", 100, 300, 20, {}),                                  # 3 K tiles, partial tiles
    ("mariana", 40, 130, 150, dict(out_dtype="bf16")),             # bf16 cells, 2 N tiles
    ("mariana", 40, 130, 50, dict(out_dtype="bf16", rounding="sr")),   # SR: writes in cycle order
    ("maverick", 16, 130, 300, {}),                                # a c256 tile: two column halves
    ("maverick", 30, 70, 40, dict(dtype="fp32", fp32_mode="high")),    # 4 passes per vector
])
def test_gemm(gen, m, k, n, kw):
    """Full-size kernel GEMMs: the same C, PSUM, cycles and events; C as a float64 reference says."""
    rng = np.random.default_rng(7)
    a, b = rng.standard_normal((m, k)), rng.standard_normal((k, n))
    prog = G.gemm(a, b, gen=gen, **kw)
    (c1, t1, e1), (c2, t2, e2) = G.run(prog), G.run(prog, trace="aggregate")
    assert np.array_equal(c1.view(np.uint32), c2.view(np.uint32))
    assert len(t2.blocks) == len([o for o in t2.ops if o.psum_writes]) and not t1.blocks
    assert_same((e1, t1), (e2, t2))
    ref = a @ b
    assert np.abs(c2 - ref).max() < 0.05 * np.abs(ref).max()


def test_whole_matmul_writes(monkeypatch):
    """A kernel matmul's writes (own cells, RNE) go to PSUM as one write per column half, not per cycle."""
    def per_cycle(*_):
        raise AssertionError("per-cycle writes")
    prog = G.gemm(np.ones((8, 8)), np.ones((8, 300)), gen="maverick")
    monkeypatch.setattr(Engine, "_write_diagonals", per_cycle)
    c, trace, _ = G.run(prog, trace="aggregate")
    assert np.array_equal(c, np.full((8, 300), 8.0, np.float32)) and trace.psum_write_count == 8 * 300


def test_shared_cells_in_cycle_order():
    """A dst pattern that writes one cell many times accumulates in cycle order in both modes."""
    p = programs.single("mariana", "bf16")
    text = p.text.replace("acc=single", "acc=multi_mid").replace(
        "step_elem=[1,0,0], num_elem=[16,1,1])\n", "step_elem=[0,0,0], num_elem=[16,1,1])\n")
    assert "step_elem=[0,0,0]" in text
    detailed, aggregate = run_both(p.gen, p.rows, p.cols, p.sbuf_model, text)
    assert_same(detailed, aggregate)
    assert len({e.data["offset"] for e in detailed[1].of_kind("psum_write")}) == 1


def test_bad_mode():
    with pytest.raises(ValueError, match="detailed, aggregate"):
        Engine("mariana", trace="blocks")
