"""Weights loaded in the background (`Profile.column_loads` of the default `public` profile, model/timing.py, D-T99; rtl/column_load.py):
a plain weight load writes each row two columns at a time behind the previous matmul's swap front,
so a load + matmul pair costs what AWS's public cost model says.  The closed-form issue rules are
checked against a brute-force account of every PE's shadow write, swap and first vector, over the
library and random programs, and the RTL's column-serial port against the golden engine every cycle."""
from dataclasses import replace

import numpy as np
import pytest

from tensore.cosim import hdl, lockstep
from tensore.cosim import programs as P
from tensore.cosim import random_programs as R
from tensore.model import timing
from tensore.model.isa.enums import Opcode
from tensore.model.isa.microop import Kind
from tests.test_timing_profile import _program
from tests.test_public_cost import PAIRS, TABLE, program, run

# the steady interval between matmul issues under `public`: a load issues by column_load_issue,
# 64 cycles after the matmul before it for 128 columns, and its matmul two cycles later (decode)
BACKGROUND = {"bf16 N=1": 66, "bf16 N=16": 66, "bf16 N=64": 66, "bf16 N=128": 128, "bf16 N=256": 256,
              "bf16 N=512": 512, "fp32 N=128": 512, "reuse N=1": 64}


@pytest.mark.parametrize("gen", ["cayman", "mariana"])
@pytest.mark.parametrize("case,opts,ours,public", TABLE, ids=[t[0] for t in TABLE])
def test_pairs_cost_the_public_figure(gen, case, opts, ours, public):
    """Every row of the gap table within 2 cycles per matmul of the public cost model."""
    cmp = run(gen, program(gen, **opts), timing="public")
    steady = cmp["rows"][1:-1]
    assert {r.ours for r in steady} == {BACKGROUND[case]}, case
    assert all(abs(r.ours - r.public) <= 2 for r in steady), case
    assert cmp["public"] == PAIRS * public
    slower = BACKGROUND[case] > public
    assert [w.startswith("7 of 7 matmul intervals hold a weight load") for w in cmp["reasons"]] == [True] * slower
    assert all("behind that matmul's swap front" in w for w in cmp["reasons"])


def test_formulas():
    """The load's last column binds; rows skew as the front does, so row0 only shifts the front."""
    L = 2
    assert timing.column_groups(128) == 64 and timing.column_groups(7) == 4 and timing.column_groups(1) == 1
    assert timing.column_load_issue(100, 1, 0, 0, 128, L) == 100 + 128 - 1 - L - 63
    assert timing.column_load_issue(100, 4, 8, 0, 128, L) == 100 + 4 * 136 - 1 - L - 4 * 63
    assert timing.column_write(10, 4, 3, 5, L) == 10 + 4 * 8 + L
    assert timing.column_load_end(10, 4, 128, 128) == 10 + 4 * (127 + 63) + 1
    assert timing.column_port_free(10, 4, 128) == 10 + 4 * 64
    assert timing.column_load(0, 0, 0, 0, 0, 0) and not timing.column_load(1, 0, 0, 0, 0, 0)
    assert not timing.column_load(0, 0, 1, 0, 0, 0) and not timing.column_load(0, 0, 0, 0, 0, 1)


def _writes(trace, op, L: int) -> np.ndarray:
    """The cycle each PE's shadow is written by load `op` (-1: not written), from its events: a
    column-serial row writes two columns each `skew` cycles from its event's cycle, a row-serial row
    all at once."""
    w = np.full((trace.rows, trace.cols), -1)
    u = op.uop
    for e in trace.events:
        if e.kind == "shadow_write" and e.op == op.index:
            if "groups" in e.data:
                g = np.arange(u.cols)
                w[e.data["row"], e.data["col0"] + g] = e.cycle + e.data["skew"] * (g // timing.LOAD_COLS)
            else:
                w[e.data["row"], u.col0:u.col0 + u.cols] = e.cycle
    return w


def _stages(trace, op, L: int) -> dict:
    """{row: cycles} a column-serial load's groups hold that row's stage (rtl/column_load.py, one group
    a stage), from its events: group g's request in the cycle after it enters, L - 1 cycles before
    its write, then `skew` cycles there before it moves down; in the load's last row only the request
    cycle (it moves no further).  Empty for a row-serial load."""
    last = op.uop.row0 + op.uop.rows - 1
    out = {}
    for e in trace.events:
        if e.kind == "shadow_write" and e.op == op.index and "groups" in e.data:
            held = 1 if e.data["row"] == last else e.data["skew"]
            enter = e.cycle - L + 1
            out[e.data["row"]] = {enter + e.data["skew"] * g + i for g in range(e.data["groups"]) for i in range(held)}
    return out


def _front(trace, op, L: int, tiles: bool = False) -> tuple:
    """(swap, last cycle on the first vector, mask) of matmul `op` for every PE of the array; with
    `tiles` (row_tiles, D-T100) its moving stream enters at its first row."""
    u = op.uop
    r, c = np.indices((trace.rows, trace.cols))
    swap = op.t_issue + L + u.passes * (r - (u.row0 if tiles else 0) + c)
    mask = (r >= u.row0) & (r < u.row0 + u.rows) & (c >= u.col0) & (c < u.col0 + u.cols)
    return swap, swap + u.passes - 1, mask


def hazards(prog, L: int = 2, shared: bool = True) -> list:
    """Each PE whose shadow write comes before an earlier matmul's last cycle on its first vector, at
    or after a later matmul's swap, or out of order with another load's write, and each row whose
    stage two column-serial loads' groups hold in one cycle (one is dropped, whatever their columns):
    brute force over every pair of micro-ops, independent of the issue rules' closed forms."""
    _, trace, _ = prog.golden(shared=shared)
    tiles = timing.profile(prog.timing).row_tiles
    ops = [o for o in trace.ops if o.uop is not None and o.t_issue is not None]
    out = []
    for i, a in enumerate(ops):
        if a.uop.kind != Kind.LOAD or a.desc.op == Opcode.LDTAGS:
            continue
        w = _writes(trace, a, L)
        on = w >= 0
        for j, b in enumerate(ops):
            if b.uop.kind == Kind.MATMUL:
                swap, last, mask = _front(trace, b, L, tiles)
                bad = on & mask & ((w < last) if j < i else (swap <= w))
            elif b.uop.kind == Kind.LOAD and b.desc.op != Opcode.LDTAGS and j > i:
                w2 = _writes(trace, b, L)
                bad = on & (w2 >= 0) & (w2 <= w)
                sa, sb = _stages(trace, a, L), _stages(trace, b, L)
                out += [(prog.name, a.index, b.index, ("stage", r)) for r in sorted(sa.keys() & sb.keys())
                        if sa[r] & sb[r]]
            else:
                continue
            if bad.any():
                out.append((prog.name, a.index, b.index, tuple(np.argwhere(bad)[0])))
    return out


def _plain(prog) -> bool:
    """No seed micro-op (their identity loads and transposes are scheduled as a barrier)."""
    return not any(o.uop is not None and (o.uop.kind == Kind.SEED or o.uop.seed) for o in prog.golden()[1].ops)


def test_no_write_races_a_front():
    """Library programs of three generations and random ones, under `public` and, as a check of the
    oracle, `contract`: no PE's shadow write races a matmul's front."""
    progs = [p for g in ("cayman", "mariana", "maverick") for p in P.library(g)]
    progs += [R.generate(g, s, blocks=12) for g in ("cayman", "mariana") for s in range(6)]
    checked = columns = 0
    for p in progs:
        for name in ("public", "contract"):
            q = replace(p, timing=name)
            if _plain(q):
                assert hazards(q) == [], name
                checked += name == "public"
                columns += sum(e.kind == "shadow_write" and "groups" in e.data for e in q.golden()[1].events)
    assert checked >= 40 and columns >= 200


def test_the_oracle_sees_a_race(monkeypatch):
    """A load one cycle before its rule allows writes a PE while the matmul before still uses it."""
    early = timing.column_load_issue
    prog = _race_program()
    assert hazards(prog, shared=False) == []
    monkeypatch.setattr("tensore.model.engine.issue.column_load_issue", lambda *a: early(*a) - 1)
    assert len(hazards(prog, shared=False)) == 1


def _race_program():
    """Two 8 x 8 weight load + matmul pairs of 4 vectors each under `public`."""
    b = P._Builder("race", "mariana", 8, 8, 7)
    a = b.put(0, b.values("bf16", (8, 4)), 2)
    for _ in range(2):
        w = b.put(0, b.values("bf16", (8, 8)), 2)
        b.line(f"ldweights in_dtype=bf16 rows=8 cols=8 flags=(load_order=first_col_first) src={P._t3(f'sbuf(0,{w:#x})', 8)}")
        b.line(f"matmul in_dtype=bf16 out_dtype=fp32 rows=8 cols=8 acc=single src={P._t3(f'sbuf(0,{a:#x})', 4)} "
               f"dst={P._t3('psum(0,0,0)', 4)}")
    return replace(b.done(), timing="public")


def _pair_program(R: int, first: tuple, second: tuple, name: str = "pair"):
    """Two back-to-back column-serial loads on R x 8 (row groups of R / 4 rows, column groups of 2
    columns), different weights, then a matmul on the first one's columns: the first load's
    (rows, cols) at row and column 0, the second's (row_grp, col_grp, rows, cols)."""
    b = P._Builder(name, "mariana", R, 8, 7)
    a = b.put(0, b.values("bf16", (R, 8)), 2)
    w, v = b.put(0, b.values("bf16", (R, 4)), 2), b.put(0, b.values("bf16", (R, 4)), 2)
    (rows, cols), (rg, cg, rows2, cols2) = first, second
    order = "flags=(load_order=first_col_first)"
    b.line(f"ldweights in_dtype=bf16 rows={rows} cols={cols} {order} src={P._t3(f'sbuf(0,{w:#x})', cols)}")
    b.line(f"ldweights in_dtype=bf16 rows={rows2} cols={cols2} row_grp={rg} col_grp={cg} {order} "
           f"src={P._t3(f'sbuf(0,{v:#x})', cols2)}")
    b.line(f"matmul in_dtype=bf16 out_dtype=fp32 rows={R} cols={cols} acc=single "
           f"src={P._t3(f'sbuf(0,{a:#x})', 8)} dst={P._t3('psum(0,0,0)', 8)}")
    return replace(b.done(), timing="public")


# the reported 8 x 8 pairs (the second load's rows from 2 row_grp, columns from 2 col_grp): rows 4..7 x
# columns 2..5 rewrite the first load's PEs (4..7, 2..3) and enter 4 rows below it; rows 2..5 x
# columns 4..7 share no PE but rows 2..5's stages; rows 0..3 x columns 2..5 enter behind its groups
PAIRS_BELOW = {"rewrite": ((8, 4), (2, 1, 4, 4)), "stage": ((8, 4), (1, 2, 4, 4)), "behind": ((8, 4), (0, 1, 4, 4))}


def test_a_load_entering_below_lets_the_groups_above_pass():
    """A column-serial load entering below the previous one's first row, within its rows, issues
    skew x (G + rows between) after it, or at its end (timing.column_port_next), not at
    column_port_free: its groups would otherwise reach a shared row's stage before the previous
    load's last group left it.  The brute-force oracle sees both hazards under the old rule (the port
    alone): the later load's write overtaken by the earlier's on a shared PE, and two groups in one
    row's stage."""
    import tensore.model.engine.issue as issue
    pick = lambda c, a, b: a if c else b                                        # noqa: E731
    assert timing.column_port_next(10, 30, 1, 0, 8, 4, pick) == 14 and timing.column_port_next(10, 30, 4, 0, 8, 4,
                                                                                               pick) == 26
    assert timing.column_port_next(10, 22, 4, 0, 8, 7, pick) == 22                       # the previous one's end
    assert [timing.column_port_next(10, 30, 4, 4, 4, r, pick) for r in (0, 4, 8, 9)] == [10] * 4  # not below it
    for name, (first, second) in PAIRS_BELOW.items():
        prog = _pair_program(8, first, second)
        lw1, lw2 = [o.t_issue for o in prog.golden()[1].ops if o.name == "ldweights"]
        assert lw2 - lw1 == timing.column_groups(4) + 2 * second[0], name
        assert hazards(prog) == [], name
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(issue, "column_port_next", lambda port, *a: port)
        found = {name: hazards(_pair_program(8, *pair), shared=False) for name, pair in PAIRS_BELOW.items()}
    assert found["behind"] == []
    assert [h[3] for h in found["rewrite"]][:1] == [(4, 2)]                     # PE (4, 2): rewritten
    assert {h[3] for h in found["stage"]} == {("stage", r) for r in range(2, 6)}     # every shared row


def test_a_load_entering_below_in_lockstep():
    """Such pairs on 4 x 8 on the RTL (Amaranth) every cycle against the golden engine: row 3 x
    columns 0..1 after 4 x 2 (a rewrite, 3 rows below: it waits for the first load's end), rows
    1..2 x columns 4..7 after 4 x 4 (a shared stage), rows 0..1 behind.  Under the old rule (both
    second loads 2 cycles after the first, as the third) the lockstep failed: the RTL's PE (3, 0)
    kept the first load's weight where the golden engine's had the second's (the first load's group
    reached row 3 a cycle after the second's), and the RTL lost the first load's columns 2..3 below
    row 0 (the second load's group entered row 1's stage as the first's moved into it); the 8 x 8
    program reported, rows 4..7 x columns 2..5 after 8 x 4, mismatched in cycle 19, PSUM partition 2."""
    pairs = {"rewrite": ((4, 2), (3, 0, 1, 2)), "stage": ((4, 4), (1, 2, 2, 4)), "behind": ((4, 4), (0, 1, 2, 4))}
    progs = [_pair_program(4, *pair, name=name) for name, pair in pairs.items()]
    lw = [[o.t_issue for o in p.golden()[1].ops if o.name == "ldweights"] for p in progs]
    assert [b - a for a, b in lw] == [timing.column_load_end(0, 1, 4, 2), 2 + 1, 2]
    assert lockstep.run_many(progs, psum_partitions=16) == [None] * len(progs)


def test_a_matmul_of_other_passes_waits_for_the_load():
    """After a 4-pass matmul a load's rows skew by 4; a 1-pass matmul issued right after it (the load
    waited for the 4-pass matmul's end by an event) waits until the load's last row is written."""
    prog = _skews_program()
    _, trace, _ = prog.golden()
    lw, mm = trace.ops[2], trace.ops[3]
    assert mm.t_issue == timing.column_load_end(lw.t_issue, 4, 4, 8) > lw.t_issue + 2
    assert hazards(prog) == []


def _skews_program(lead: int = 0):
    """A 4-pass matmul, then (by an event, after its end) a load skewed by 4, then a 1-pass matmul;
    `lead` two-column loads first move the 4-pass matmul's issue (its rhythm's phase) on by 2 each."""
    b = P._Builder("skews", "mariana", 4, 8, 7)
    a32, a16 = b.put(0, b.values("fp32", (4, 4)), 4), b.put(0, b.values("bf16", (4, 4)), 2)
    w32, w16 = b.put(0, b.values("fp32", (4, 8)), 4), b.put(0, b.values("bf16", (4, 8)), 2)
    order = "flags=(load_order=first_col_first)"
    for _ in range(lead):
        b.line(f"ldweights in_dtype=bf16 rows=4 cols=2 {order} src={P._t3(f'sbuf(0,{w16:#x})', 2)}")
    b.line(f"ldweights in_dtype=fp32 fp32_mode=high rows=4 cols=8 {order} src={P._t3(f'sbuf(0,{w32:#x})', 8)}")
    b.line(f"matmul in_dtype=fp32 fp32_mode=high out_dtype=fp32 rows=4 cols=8 acc=single set=1 "
           f"src={P._t3(f'sbuf(0,{a32:#x})', 4)} dst={P._t3('psum(0,0,0)', 4)}")
    b.line(f"ldweights in_dtype=bf16 rows=4 cols=8 {order} wait=1 src={P._t3(f'sbuf(0,{w16:#x})', 8)}")
    b.line(f"matmul in_dtype=bf16 out_dtype=fp32 rows=4 cols=8 acc=single src={P._t3(f'sbuf(0,{a16:#x})', 4)} "
           f"dst={P._t3('psum(0,1,0)', 4)}")
    return replace(b.done(), timing="public")


@pytest.mark.parametrize("name", ["public", "contract"])
def test_every_issue_explained(name):
    """The issue-rule monitor (cosim/coverage.py stalls, the regression's check) names a rule of the
    profile for every issue cycle of random programs: the front rules, the issue floor, the column
    port's end."""
    from tensore.cosim import coverage
    named = set()
    for gen in ("cayman", "mariana"):
        for seed in range(8):
            p = replace(R.generate(gen, seed, blocks=12), timing=name)
            stalls = coverage.stalls(p.golden()[1], p.regs, timing=name)
            assert not [o.index for o, rules in stalls if "unexplained" in rules], (gen, seed)
            named |= set().union(*(rules for _, rules in stalls))
    assert ({"issue_floor", "column_front", "row_front"} if name == "public" else {"swap_wait"}) <= named


def test_same_values():
    """Every library program of three generations writes the same PSUM bits under `public` as under
    `contract`."""
    for gen in ("cayman", "mariana", "maverick"):
        for p in P.library(gen):
            p, q = replace(p, timing="public"), replace(p, timing="contract")
            _, tp, _ = p.golden()
            _, tq, _ = q.golden()
            key = [sorted((e.data["partition"], e.data["offset"], e.data["bits"]) for e in t.events
                          if e.kind == "psum_write") for t in (tp, tq)]
            assert key[0] == key[1], (gen, p.name)


def _pairs(fp32: bool = False, loads: int = 3, per_load: int = 1):
    return _program(4, 8, loads=loads, per_load=per_load, n=6, fp32=fp32, timing_name="public")


@pytest.mark.parametrize("fp32", [False, True], ids=["1-pass", "4-pass"])
def test_rtl_in_lockstep(fp32):
    """Load + matmul pairs on 4 x 8, the loads behind the fronts: golden and RTL (Amaranth) agree
    every cycle; with the mixed-skews program (a 4-pass matmul, then a load skewed by 4, then a
    1-pass matmul), its 4-pass rhythm starting at cycle 9 and, after one more load, 11 (1 and 3 mod 4:
    the launch unit's phase counts from the rhythm's first issue)."""
    progs = [_pairs(fp32), _pairs(fp32, loads=2, per_load=2)] if not fp32 else \
        [_pairs(fp32), _skews_program(), _skews_program(1)]
    issues = [o.t_issue for o in progs[0].golden()[1].ops if o.name == "ldweights"]
    mms = [o.t_issue for o in progs[0].golden()[1].ops if o.name == "matmul"]
    assert all(lw < mm for lw, mm in zip(issues, mms)) and issues[1] < mms[0] + 6 * (4 if fp32 else 1)
    if fp32:
        starts = [next(o.t_issue for o in p.golden()[1].ops if o.name == "matmul") for p in progs[1:]]
        assert [t % 4 for t in starts] == [1, 3]
    assert lockstep.run_many(progs, psum_partitions=16) == [None] * len(progs)


def test_a_load_a_cycle_earlier_breaks_the_rtl(monkeypatch):
    """The rule is tight: a column-serial load one cycle earlier in model and RTL alike writes a PE
    of the last column while it still takes the first matmul's weights; the lockstep sees the PSUM
    writes differ from the golden engine's."""
    from tensore.model.engine import issue
    from tensore.rtl import seq
    early = lambda *a: timing.column_load_issue(*a) - 1                    # noqa: E731
    monkeypatch.setattr(issue, "column_load_issue", early)
    monkeypatch.setattr(seq, "column_load_issue", early)
    [bad] = lockstep.run_many([_pairs()], psum_partitions=16)
    assert bad is not None and "psum" in str(bad).lower()


@pytest.mark.cosim
def test_library_on_verilator_under_contract():
    """MARIANA's and MAVERICK's libraries (8 x 8) under `contract` on Verilator's compiled harness,
    every cycle against the golden engine: the row-serial engine beside the default's (which
    tests/test_cosim_hdl.py runs), the sequencer and load unit built without the column port."""
    for gen in ("mariana", "maverick"):
        progs = [replace(p, timing="contract") for p in P.library(gen)]
        results = hdl.run_many(progs, pack=8 if gen == "mariana" else None)
        failed = [(p.name, r.mismatch) for p, r in zip(progs, results) if r.mismatch is not None]
        assert not failed, f"{[n for n, _ in failed]} mismatch; {failed[0][0]}: {failed[0][1]}"


def test_a_load_completes_with_its_last_shadow_write():
    """A weight load's completion is the cycle of its last PE's shadow write, read from its events:
    row-serial and column-serial (public), on the library programs and the race pair."""
    progs = [replace(p, timing=name) for p in P.library("mariana") for name in ("public", "contract")] + [_race_program()]
    loads = columns = 0
    for p in progs:
        trace = p.golden()[1]
        for o in trace.ops:
            if o.uop is not None and o.t_issue is not None and o.uop.kind == Kind.LOAD and o.desc.op != Opcode.LDTAGS:
                assert o.t_complete == _writes(trace, o, 2).max(), (p.name, o.index)
                loads += 1
                columns += any(e.kind == "shadow_write" and e.op == o.index and "groups" in e.data for e in trace.events)
    assert loads >= 10 and columns >= 5
