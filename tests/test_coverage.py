"""cosim/coverage.py: the facts a golden run hits, the issue-rule monitor against the engine's issue
cycles, the cocotb-coverage database, its merge and the reports."""
from dataclasses import replace
from itertools import product

import pytest

from tensore.cosim import coverage as C
from tensore.cosim import programs as P
from tensore.cosim import random_programs as R
from tensore.model.dtypes import Gen


def _runs(gen, seeds=range(4), library=False):
    progs = [R.generate(gen, s) for s in seeds] + (P.library(gen) if library else [])
    return [(p, R.run_golden(p)[1]) for p in progs]


@pytest.mark.parametrize("gen", [Gen.CAYMAN, Gen.MARIANA, Gen.MAVERICK], ids=lambda g: g.name)
def test_the_monitor_explains_every_issue_cycle(gen):
    """docs/timing.md's issue rules, restated from the trace, give every micro-op's issue cycle
    (random programs and the library, whose backpressure, barriers and events stall issues)."""
    rules = set()
    for p, trace in _runs(gen, range(8), library=True):
        for o, why in C.stalls(trace, p.regs):
            assert "unexplained" not in why, (p.name, o.index, o.name)
            rules |= why
    assert {"barrier", "after_barrier", "weight_port", "moving_port", "swap_wait", "wait_event",
            "fifo_full"} <= rules, rules


@pytest.mark.parametrize("gen", [Gen.CAYMAN, Gen.MAVERICK], ids=lambda g: g.name)
def test_the_monitor_explains_row_tiles(gen):
    """Under row tiles (`public`, D-T100) the monitor follows each tile's moving port (a
    stream reaching a tile's entry passes x its rows above later) and each tile's last matmul for the
    loads' fronts: every issue cycle of random programs and the library explained."""
    for p in [R.generate(gen, s) for s in range(6)] + P.library(gen):
        p = replace(p, timing="public")
        for o, why in C.stalls(R.run_golden(p)[1], p.regs, timing="public"):
            assert "unexplained" not in why, (p.name, o.index, o.name)


def test_the_monitor_reports_a_wrong_issue_cycle():
    p, trace = _runs(Gen.MARIANA, [1])[0]
    op = next(o for o, why in C.stalls(trace, p.regs) if o.name == "matmul")
    op.t_issue += 1                                       # a cycle no rule gives
    assert any(o is op and "unexplained" in why for o, why in C.stalls(trace, p.regs))


def test_facts_of_library_programs():
    """Programs that exercise one feature hit its bins (and a plain one does not)."""
    def facts(p):
        return {(g, k) for _, g, k in C.facts(p, R.run_golden(p)[1])}
    f = facts(P.single("mariana", "fp32", fp32_mode="low_high", load_order="last_col_first"))
    assert ("matmul", ("matmul", "fp32", "fp32_low_high")) in f
    assert ("load", ("fp32", "plain", "last_col_first")) in f
    assert ("flags", ("single", "1", "fp32")) in f
    assert not any(g in ("rounding", "seed", "error", "mx") for g, _ in f)
    assert ("rounding", ("sr",)) in facts(P.bf16_drain("mariana", sr=True))
    assert ("rounding", ("rne",)) in facts(P.bf16_drain("mariana", sr=False))
    assert {("seed", ("save_seed",)), ("seed", ("load_seed",))} <= facts(P.seed_replay("mariana"))
    assert ("mx", ("matmul", "fp8_exp5", "quad_row_interleave")) in \
        facts(P.mx("mariana", "fp8_e5m2", "quad_row_interleave", n=12))
    assert {("config", ("fifo_1",)), ("stall", ("fifo_full",))} <= facts(P.backpressure("cayman"))
    assert any(g == "error" for g, _ in facts(P.invalid_mixed("cayman")))
    assert ("zero", ("2", "no")) in facts(P.accumulate_group("cayman"))


@pytest.mark.parametrize("gen", list(Gen), ids=lambda g: g.name)
def test_every_fact_is_a_bin_the_model_counts(gen):
    """Each fact of random and library programs names a bin of its group, and a combination the
    model counts (not one of its ignore bins): the model and the sampling agree."""
    model = C.model(gen)
    for p, trace in _runs(gen, library=True):
        for g, group, key in C.facts(p, trace):
            axes, legal = model[group]
            assert key in set(product(*axes.values())), (p.name, group, key)
            assert legal is None or legal(*key), (p.name, group, key)


def test_database_report_and_merge(tmp_path):
    """The database counts the distinct bins hit (hits = runs); two halves merged by cocotb-coverage
    give the database of the whole; the reports list the holes."""
    runs = _runs(Gen.MAVERICK, range(6))
    whole, first, second = C.Coverage(["maverick"]), C.Coverage(["maverick"]), C.Coverage(["maverick"])
    for i, (p, trace) in enumerate(runs):
        whole.add(p, trace)
        (first if i % 2 else second).add(p, trace)
    groups = C.read(whole.write_xml(tmp_path / "whole.xml"))
    ops = {k for (_, group, k) in whole.hits if group == "opcode"}
    assert groups["MAVERICK.opcode"]["covered"] == len(ops)
    assert groups["MAVERICK.opcode"]["bins"]["matmul"] == sum(1 for p, _ in runs if "matmul" in p.text)
    merged = C.merge([first.write_xml(tmp_path / "a.xml"), second.write_xml(tmp_path / "b.xml")], tmp_path / "m.xml")
    assert C.read(merged) == groups
    text = C.write_report(merged, tmp_path / "cov.txt")
    holes = C.holes(merged)
    assert "MAVERICK.error" in text and "sparse_drain" in holes["MAVERICK.stall"] and "sparse_drain" in text
    page = (tmp_path / "cov.html").write_text(C.html_report(merged)) and (tmp_path / "cov.html").read_text()
    assert '<span class="hole"' in page and "sparse_drain" in page
