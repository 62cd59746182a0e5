"""Weights loaded in the background (model/timing.py `background` profile, D-T99): a plain weight load
writes each row two columns per cycle behind the previous matmul's swap front, so a load + matmul
pair costs what AWS's public cost model says.  The closed-form issue rules are checked against a
brute-force account of every PE's shadow write, swap and first vector, over the library and random
programs; the golden engine runs the profile, the RTL refuses it with one line."""
from dataclasses import replace

import numpy as np
import pytest

from tensore.cli import main
from tensore.cosim import hdl
from tensore.cosim import programs as P
from tensore.cosim import random_programs as R
from tensore.model import timing
from tensore.model.isa.enums import Opcode
from tensore.model.isa.microop import Kind
from tensore.rtl.top import Engine as RtlEngine
from tests.test_public_cost import PAIRS, TABLE, program, run

# the steady interval between matmul issues under `background`: a load issues by column_load_issue,
# 64 cycles after the matmul before it for 128 columns, and its matmul two cycles later (decode)
BACKGROUND = {"bf16 N=1": 66, "bf16 N=16": 66, "bf16 N=64": 66, "bf16 N=128": 128, "bf16 N=256": 256,
              "bf16 N=512": 512, "fp32 N=128": 512, "reuse N=1": 64}


@pytest.mark.parametrize("gen", ["cayman", "mariana"])
@pytest.mark.parametrize("case,opts,ours,public", TABLE, ids=[t[0] for t in TABLE])
def test_pairs_cost_the_public_figure(gen, case, opts, ours, public):
    """Every row of the gap table within 2 cycles per matmul of the public cost model."""
    cmp = run(gen, program(gen, **opts), timing="background")
    steady = cmp["rows"][1:-1]
    assert {r.ours for r in steady} == {BACKGROUND[case]}, case
    assert all(abs(r.ours - r.public) <= 2 for r in steady), case
    assert cmp["public"] == PAIRS * public
    slower = BACKGROUND[case] > public
    assert [w.startswith("7 of 7 matmul intervals hold a weight load") for w in cmp["reasons"]] == [True] * slower
    assert all("behind the previous matmul's swap front" in w for w in cmp["reasons"])


def test_formulas():
    """The load's last column binds; rows skew as the front does, so row0 only shifts the front."""
    L = 2
    assert timing.column_groups(128) == 64 and timing.column_groups(7) == 4 and timing.column_groups(1) == 1
    assert timing.column_load_issue(100, 1, 0, 0, 128, L) == 100 + 128 - 1 - L - 63
    assert timing.column_load_issue(100, 4, 8, 0, 128, L) == 100 + 4 * 136 - 1 - L - 63
    assert timing.column_write(10, 4, 3, 5, L) == 10 + 12 + 5 + L
    assert timing.column_load_end(10, 4, 128, 128) == 10 + 4 * 127 + 64
    assert timing.column_load(0, 0, 0, 0, 0) and not timing.column_load(1, 0, 0, 0, 0)
    assert not timing.column_load(0, 0, 1, 0, 0) and not timing.column_load(0, 0, 0, 0, 1)


def _writes(trace, op, L: int) -> np.ndarray:
    """The cycle each PE's shadow is written by load `op` (-1: not written), from its events: a
    column-serial row writes two columns per cycle from its event's cycle, a row-serial row all at once."""
    w = np.full((trace.rows, trace.cols), -1)
    u = op.uop
    for e in trace.events:
        if e.kind == "shadow_write" and e.op == op.index:
            if "groups" in e.data:
                g = np.arange(u.cols)
                w[e.data["row"], e.data["col0"] + g] = e.cycle + g // timing.LOAD_COLS
            else:
                w[e.data["row"], u.col0:u.col0 + u.cols] = e.cycle
    return w


def _front(trace, op, L: int) -> tuple:
    """(swap, last cycle on the first vector, mask) of matmul `op` for every PE of the array."""
    u = op.uop
    r, c = np.indices((trace.rows, trace.cols))
    swap = op.t_issue + L + u.passes * (r + c)
    mask = (r >= u.row0) & (r < u.row0 + u.rows) & (c >= u.col0) & (c < u.col0 + u.cols)
    return swap, swap + u.passes - 1, mask


def hazards(prog, L: int = 2, shared: bool = True) -> list:
    """Each PE whose shadow write comes before an earlier matmul's last cycle on its first vector, at
    or after a later matmul's swap, or out of order with another load's write: brute force over
    every pair of micro-ops, independent of the issue rules' closed forms."""
    _, trace, _ = prog.golden(shared=shared)
    ops = [o for o in trace.ops if o.uop is not None and o.t_issue is not None]
    out = []
    for i, a in enumerate(ops):
        if a.uop.kind != Kind.LOAD or a.desc.op == Opcode.LDTAGS:
            continue
        w = _writes(trace, a, L)
        on = w >= 0
        for j, b in enumerate(ops):
            if b.uop.kind == Kind.MATMUL:
                swap, last, mask = _front(trace, b, L)
                bad = on & mask & ((w < last) if j < i else (swap <= w))
            elif b.uop.kind == Kind.LOAD and b.desc.op != Opcode.LDTAGS and j > i:
                w2 = _writes(trace, b, L)
                bad = on & (w2 >= 0) & (w2 <= w)
            else:
                continue
            if bad.any():
                out.append((prog.name, a.index, b.index, tuple(np.argwhere(bad)[0])))
    return out


def _plain(prog) -> bool:
    """No seed micro-op (their identity loads and transposes are scheduled as a barrier)."""
    return not any(o.uop is not None and (o.uop.kind == Kind.SEED or o.uop.seed) for o in prog.golden()[1].ops)


def test_no_write_races_a_front():
    """Library programs of three generations and random ones, under `background` and, as a check of
    the oracle, `public` and `contract`: no PE's shadow write races a matmul's front."""
    progs = [p for g in ("cayman", "mariana", "maverick") for p in P.library(g)]
    progs += [R.generate(g, s, blocks=12) for g in ("cayman", "mariana") for s in range(6)]
    checked = 0
    for p in progs:
        for name in ("background", "public", "contract"):
            q = replace(p, timing=name)
            if _plain(q):
                assert hazards(q) == [], name
                checked += name == "background"
    assert checked >= 40


def test_the_oracle_sees_a_race(monkeypatch):
    """A load one cycle before its rule allows writes a PE while the matmul before still uses it."""
    early = timing.column_load_issue
    prog = _race_program()
    assert hazards(prog, shared=False) == []
    monkeypatch.setattr("tensore.model.engine.column_load_issue", lambda *a: early(*a) - 1)
    assert len(hazards(prog, shared=False)) == 1


def _race_program():
    """Two 8 x 8 weight load + matmul pairs of 4 vectors each under `background`."""
    b = P._Builder("race", "mariana", 8, 8, 7)
    a = b.put(0, b.values("bf16", (8, 4)), 2)
    for _ in range(2):
        w = b.put(0, b.values("bf16", (8, 8)), 2)
        b.line(f"ldweights in_dtype=bf16 rows=8 cols=8 flags=(load_order=first_col_first) src={P._t3(f'sbuf(0,{w:#x})', 8)}")
        b.line(f"matmul in_dtype=bf16 out_dtype=fp32 rows=8 cols=8 acc=single src={P._t3(f'sbuf(0,{a:#x})', 4)} "
               f"dst={P._t3('psum(0,0,0)', 4)}")
    return replace(b.done(), timing="background")


def test_a_matmul_of_other_passes_waits_for_the_load():
    """After a 4-pass matmul a load's rows skew by 4; a 1-pass matmul issued right after it (the load
    waited for the 4-pass matmul's end by an event) waits until the load's last row is written."""
    b = P._Builder("skews", "mariana", 8, 8, 7)
    a32, a16 = b.put(0, b.values("fp32", (8, 4)), 4), b.put(0, b.values("bf16", (8, 4)), 2)
    w32, w16 = b.put(0, b.values("fp32", (8, 8)), 4), b.put(0, b.values("bf16", (8, 8)), 2)
    order = "flags=(load_order=first_col_first)"
    b.line(f"ldweights in_dtype=fp32 fp32_mode=high rows=8 cols=8 {order} src={P._t3(f'sbuf(0,{w32:#x})', 8)}")
    b.line(f"matmul in_dtype=fp32 fp32_mode=high out_dtype=fp32 rows=8 cols=8 acc=single set=1 "
           f"src={P._t3(f'sbuf(0,{a32:#x})', 4)} dst={P._t3('psum(0,0,0)', 4)}")
    b.line(f"ldweights in_dtype=bf16 rows=8 cols=8 {order} wait=1 src={P._t3(f'sbuf(0,{w16:#x})', 8)}")
    b.line(f"matmul in_dtype=bf16 out_dtype=fp32 rows=8 cols=8 acc=single src={P._t3(f'sbuf(0,{a16:#x})', 4)} "
           f"dst={P._t3('psum(0,1,0)', 4)}")
    prog = replace(b.done(), timing="background")
    _, trace, _ = prog.golden()
    lw, mm = trace.ops[2], trace.ops[3]
    assert mm.t_issue == timing.column_load_end(lw.t_issue, 4, 8, 8) > lw.t_issue + 2
    assert hazards(prog) == []


def test_same_values():
    """Every library program of three generations writes the same PSUM bits as under `contract`."""
    for gen in ("cayman", "mariana", "maverick"):
        for p in P.library(gen):
            q = replace(p, timing="background")
            _, tp, _ = p.golden()
            _, tq, _ = q.golden()
            key = [sorted((e.data["partition"], e.data["offset"], e.data["bits"]) for e in t.events
                          if e.kind == "psum_write") for t in (tp, tq)]
            assert key[0] == key[1], (gen, p.name)


def test_the_rtl_refuses_it(tmp_path, capsys):
    """The RTL builds the profiles it runs; `background` is refused with one line."""
    with pytest.raises(ValueError, match="golden engine's only"):
        RtlEngine("mariana", 8, 8, timing="background")
    with pytest.raises(ValueError, match="the RTL runs contract, public"):
        hdl.Config("MARIANA", 8, 8, 2, timing="background")
    (tmp_path / "p.s").write_text(program("mariana", 4).replace("rows=128 cols=128", "rows=8 cols=8")
                                  .replace("num_elem=[128,1,1]", "num_elem=[8,1,1]"))
    assert main(["run", str(tmp_path / "p.s"), "--gen", "mariana", "--rows", "8", "--timing", "background"]) == 0
    capsys.readouterr()
    assert main(["gemm", "--gen", "mariana", "--m", "8", "--k", "8", "--n", "8", "--rows", "8",
                 "--timing", "background", "--rtl"]) == 2
    assert capsys.readouterr().err.count("\n") == 1
    with pytest.raises(SystemExit):
        main(["cosim", str(tmp_path / "p.s"), "--gen", "mariana", "--timing", "background"])
