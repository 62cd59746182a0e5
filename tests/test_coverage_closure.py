"""Functional coverage closure (D-T95): a fixed set of random seeds hits every reachable bin of each
generation's coverage model on the golden engine, and every bin `coverage.unreachable` names is
unreachable for the reason it gives (the ISA check refuses that cross; an issue rule another rule
always subsumes)."""
from itertools import product

import pytest

from tensore.cosim import coverage as C
from tensore.cosim import random_programs as R
from tensore.model.dtypes import Gen
from tensore.model.isa import ErrorCode
from tensore.model.isa.microop import Kind

# Greedy set covers over seeds 0, 1, ... of `R.generate(gen, seed)` (8 x 8, default blocks, the default timing
# profile's bins), after the sized seeds of SIZED: re-derive them with `closure_seeds(gen)` after a change to
# the generator.  MAX_IN_FLIGHT micro-ops in flight need R + C above 16 under row tiles (one-vector 4-pass
# matmuls issue 4 cycles apart and complete about 4 (R + C) later, D-T100): a 16 x 8 seed on the 8-column
# generations (MAVERICK's 8 x 16 reaches it).
SEEDS = {
    Gen.SUNDA: [27, 28, 34, 54, 57, 104, 128, 173, 203, 254, 260, 284, 363, 425, 464],
    Gen.CAYMAN: [3, 4, 10, 17, 18, 27, 28, 35, 37, 39, 44, 55, 58, 59, 83, 95, 96, 104, 128, 129, 160, 169],
    Gen.MARIANA: [2, 4, 6, 7, 9, 10, 11, 18, 27, 28, 29, 37, 39, 41, 46, 50, 65, 79, 95, 96, 105, 108, 110, 115, 119,
                  127, 155, 174, 212, 231, 237, 246, 270, 272],
    Gen.MAVERICK: [1, 13, 18, 21, 23, 33, 41, 42, 52, 58, 59, 67, 79, 90, 101, 102, 106, 109, 119, 124, 127, 128, 149,
                   152, 154, 167, 169, 196, 242, 246, 262, 279, 285, 294, 315, 316, 333, 341, 345],
}
SEEDS[Gen.MARIANA_PLUS] = SEEDS[Gen.MARIANA]
SIZED = {g: [] if g == Gen.MAVERICK else [(4, 16, 8)] for g in Gen}   # (seed, rows, cols)


def reachable(gen) -> set:
    """{(generation, group, bin)} the coverage model counts for `gen`."""
    gen, dead = Gen.parse(gen), C.unreachable(gen)
    return {(gen.name, group, key) for group, (axes, legal) in C.model(gen).items()
            for key in product(*axes.values()) if not (legal and not legal(*key)) and (group, key) not in dead}


def _facts(gen, seed, rows: int = 8, cols: int = 8) -> set:
    p = R.generate(gen, seed, rows=rows, cols=cols)
    return C.facts(p, R.run_golden(p)[1])


def _covered(gen) -> set:
    return set().union(*(_facts(gen, s) for s in SEEDS[Gen.parse(gen)]),
                       *(_facts(gen, *sized) for sized in SIZED[Gen.parse(gen)]))


def closure_seeds(gen, limit: int = 3000) -> list:
    """A greedy set cover of the reachable bins the sized seeds leave by seeds 0, 1, ... (for SEEDS)."""
    want = reachable(gen) - set().union(set(), *(_facts(gen, *sized) for sized in SIZED[Gen.parse(gen)]))
    per, seed = {}, 0
    while want - set().union(set(), *per.values()) and seed < limit:
        per[seed] = _facts(gen, seed)
        seed += 1
    left, chosen = set(want), []
    while left and per:
        best = max(per, key=lambda s: (len(per[s] & left), -s))
        if not per[best] & left:
            break
        chosen.append(best)
        left -= per[best]
    return sorted(chosen)


@pytest.mark.parametrize("gen", list(Gen), ids=lambda g: g.name)
def test_fixed_seeds_hit_every_reachable_bin(gen):
    hit = _covered(gen)
    dead = {(Gen.parse(gen).name, g, k) for g, k in C.unreachable(gen)}
    assert not hit & dead, sorted(hit & dead)
    missing = reachable(gen) - hit
    assert not missing, sorted(missing)


@pytest.mark.parametrize("gen", list(Gen), ids=lambda g: g.name)
def test_unreachable_bins_hold(gen):
    """Each unreachable load cross is a descriptor the golden engine refuses (the code the reason
    names); `after_load` never binds: every matmul decodes no earlier than the last load's issue + 1."""
    dead = C.unreachable(gen)
    assert ("stall", ("after_load",)) in dead
    g = Gen.parse(gen)
    tile = "tile_size=(row_size_log2=r128, col_size_log2=c128) " if g.layout == Gen.MAVERICK else ""
    xp = "flags=(xpose_mode=enabled) " if g >= Gen.MARIANA else "transpose_mode=enabled "
    for (group, key), why in dead.items():
        if group != "load":
            continue
        d, mode, _ = key
        assert mode == "xpose"
        gen_ = R._Gen(g, 0, 8, 8)
        gen_.b.line(f"ldweights in_dtype={d} rows=4 cols=4 {tile}{xp}"
                    "src=(start_addr=sbuf(0,0x0), step_elem=[1,0,0], num_elem=[4,1,1])")
        _, trace = R.run_golden(gen_.b.done(), shared=False)
        assert trace.ops[0].error != ErrorCode.NONE and trace.ops[0].error.name in why, (key, trace.ops[0].error, why)
    for seed in SEEDS[g][:8]:
        p = R.generate(g, seed)
        _, trace = R.run_golden(p)
        last_load = None
        for o in trace.ops:
            if o.error != ErrorCode.NONE or o.t_issue is None:
                continue
            if o.uop.kind == Kind.LOAD:
                last_load = o.t_issue
            elif o.uop.kind == Kind.MATMUL and last_load is not None:
                assert last_load + 1 <= o.t_decode, (p.name, o.index)
        assert not any("after_load" in why for _, why in C.stalls(trace, p.regs))


def test_report_counts_reachable_bins(tmp_path):
    """At closure the reports read "N / N reachable bins hit" and list the unreachable bins with
    their reasons (text and HTML)."""
    cov = C.Coverage(["maverick"])
    for s in SEEDS[Gen.MAVERICK]:
        p = R.generate("maverick", s)
        cov.add(p, R.run_golden(p)[1])
    assert not SIZED[Gen.MAVERICK]
    xml = cov.write_xml(tmp_path / "cov.xml")
    n = len(reachable("maverick"))
    text = C.write_report(xml, tmp_path / "cov.txt")
    assert f"{n} / {n} reachable bins hit (100.0%)" in text, text.splitlines()[0]
    assert "holes:" not in text
    dead = C.unreachable("maverick")
    assert f"{len(dead)} unreachable bins" in text
    assert "MAVERICK.load int4 x xpose x first_col_first: model.isa.check refuses" in text
    assert "MAVERICK.stall after_load: a micro-op decodes after" in text
    page = C.html_report(xml)
    assert f"{n} / {n} reachable bins hit" in page and "Unreachable bins" in page and "BAD_DTYPE" in page
