"""cosim/regress.py, cosim/fuzz.py, cosim/watchdog.py: deterministic shards and their merged JUnit /
JSON / coverage report, the dask.distributed path (a LocalCluster), the fuzz stream and decoder
parity, the watchdog bound and its reports; one tiny RTL run of the watchdog (Amaranth)."""
import asyncio
import json
from xml.etree import ElementTree

import pytest

from tensore.cli import main
from tensore.cosim import fuzz as F
from tensore.cosim import programs as P
from tensore.cosim import random_programs as R
from tensore.cosim import regress as G
from tensore.cosim import watchdog as W
from tensore.model.dtypes import Gen
from tensore.model.isa.asm import assemble


def _cfg(tmp_path, **kw):
    return G.Config(**({"gens": ["CAYMAN", "MAVERICK"], "programs": 5, "out": str(tmp_path)} | kw))


def test_shards_split_the_work_once(tmp_path):
    cfg = _cfg(tmp_path, programs=23, fuzz=35_000)
    whole = G.tasks(cfg)
    for n in (2, 3, 7):
        parts = [t for i in range(n) for t in G.tasks(cfg, i, n)]
        seeds = sorted((g, s) for kind, g, items in parts if kind == "random" for s in items)
        ranges = sorted((g, items) for kind, g, items in parts if kind == "fuzz")
        assert seeds == sorted((g, s) for kind, g, items in whole if kind == "random" for s in items)
        assert ranges == sorted((g, items) for kind, g, items in whole if kind == "fuzz")
        assert len(seeds) == 2 * 23 and len(set(seeds)) == len(seeds)
    assert G.tasks(cfg, 1, 3) == G.tasks(cfg, 1, 3)
    with pytest.raises(ValueError, match="i/n"):
        G.parse_shard("1-of-2")
    with pytest.raises(ValueError, match="0 <= i < n"):
        G.parse_shard("2/2")


def _work(shard) -> list:
    return sorted((kind, g, s) for kind, g, items in shard for s in (items if kind == "random" else [items]))


def test_shards_spread_the_engine_builds(tmp_path):
    """`make regress REGRESS_N=1 REGRESS_FUZZ=1` on two shards: both get work, each generation's
    engine is built by one shard (none builds them all), and the shards hold the whole work once;
    on the full run the estimated seconds of the two shards differ by at most one build."""
    gens = [g.name for g in Gen]
    cfg = G.Config(gens=gens, programs=1, fuzz=1, rtl=True, out=str(tmp_path))
    shards = G.split(cfg, 2)
    built = [{g for _, g, _ in s} for s in shards]
    assert all(built) and not built[0] & built[1] and built[0] | built[1] == set(gens)
    whole = _work(G.tasks(cfg))
    assert sorted(_work(shards[0]) + _work(shards[1])) == whole and len(set(whole)) == len(whole) == 10
    assert G.split(cfg, 2) == shards == [G.tasks(cfg, i, 2) for i in range(2)]
    full = G.Config(gens=gens, programs=10_000, fuzz=100_000, rtl=True)

    def seconds(shard):
        return G.build_seconds(full) * len({g for _, g, _ in shard}) + sum(
            len(x) * G.RANDOM_SECONDS if kind == "random" else (x[1] - x[0]) * G.FUZZ_SECONDS for kind, _, x in shard)
    a, b = (seconds(s) for s in G.split(full, 2))
    assert abs(a - b) <= G.build_seconds(full)


def test_sharded_run_merges_to_the_unsharded_report(tmp_path):
    """Two shards merged give the cases, totals and coverage database of one unsharded run; the
    JUnit XML counts them per suite."""
    cfg = _cfg(tmp_path)
    halves = [G.run_shard(cfg, i, 2) for i in range(2)]
    one = G.merge([G.run_shard(cfg, 0, 1)], tmp_path / "one")
    two = G.merge(halves, tmp_path / "two")
    assert two["totals"] == one["totals"] == {"cases": 10, "passed": 10, "failed": 0, "errors": 0}
    assert (tmp_path / "one" / "coverage.xml").read_text() == (tmp_path / "two" / "coverage.xml").read_text()
    root = ElementTree.parse(tmp_path / "two" / "junit.xml").getroot()
    assert root.get("tests") == "10" and root.get("failures") == "0"
    assert {s.get("name"): s.get("tests") for s in root} == {"random.CAYMAN": "5", "random.MAVERICK": "5"}
    saved = json.loads((tmp_path / "two" / "regress.json").read_text())
    assert saved["coverage"]["covered"] > 100 and "MAVERICK.opcode" in saved["coverage"]["holes"]


def test_a_failing_program_is_reported_with_its_reproducer(tmp_path, monkeypatch):
    real = G.golden_checks

    def checks(program, trace):
        return real(program, trace) + (["injected"] if program.name.endswith("_3") else [])
    monkeypatch.setattr(G, "golden_checks", checks)
    report = G.merge([G.run_shard(_cfg(tmp_path, gens=["CAYMAN"]), 0, 1)], tmp_path)
    assert report["totals"] == {"cases": 5, "passed": 4, "failed": 1, "errors": 0}
    bad = report["failures"][0]
    assert bad["name"] == "seed_3" and "injected" in bad["failure"]
    assert R.load(bad["reproducer"]).text == R.generate("cayman", 3).text
    failure = ElementTree.parse(tmp_path / "junit.xml").getroot().find(".//failure")
    assert "injected" in failure.get("message") and "reproducer" in failure.text


def test_cli_shards_and_merge(tmp_path, capsys):
    out = str(tmp_path / "r")
    for shard in ("0/2", "1/2"):
        assert main(["regress", "--gen", "sunda", "-n", "3", "--shard", shard, "-o", out]) == 0
    assert main(["regress", "--merge", "-o", out]) == 0
    text = capsys.readouterr().out
    assert "regress: 3 cases in 2 shard(s): 3 passed" in text and "SUNDA.opcode" in text
    assert main(["regress", "--shard", "2/2", "-o", out]) == 2
    assert main(["regress", "--merge", "-o", str(tmp_path / "empty")]) == 2


def test_dask_local_cluster_runs_the_shards(tmp_path):
    """The shards as dask.distributed tasks on a LocalCluster of two worker processes: the same
    results as running them here."""
    pytest.importorskip("distributed")
    cfg = _cfg(tmp_path, gens=["CAYMAN"], programs=4)
    results = G.run_dask(cfg, 2, None, workers=2)
    assert [r["shard"] for r in results] == [[0, 2], [1, 2]]
    here = [G.run_shard(cfg, i, 2) for i in range(2)]
    strip = lambda rs: [[(c["name"], c["failure"], c.get("cycles")) for c in r["cases"]] for r in rs]
    assert strip(results) == strip(here)
    assert [r["coverage"]["hits"] for r in results] == [r["coverage"]["hits"] for r in here]


# --- the fuzz stream --------------------------------------------------------------------------------

def test_fuzz_stream_is_deterministic_and_parity_holds():
    a = F.mutants("mariana", 0, 1500)
    assert F.mutants("mariana", 700, 1300) == a[700:1300] and len(set(a)) > 1400
    assert F.mutants("mariana", 0, 10, seed=1) != a[:10]
    parity = F.decoder_parity("cayman", F.mutants("cayman", 0, 400))
    assert parity["mismatch_count"] == 0 and parity["codes"]["none"] > 20 and len(parity["codes"]) >= 8
    progs = F.engine_programs("maverick", F.mutants("maverick", 0, 300))
    assert len(progs) == 3 and all(p.cols == 16 for p in progs)
    for p in progs:
        assert not G.golden_checks(p, R.run_golden(p)[1])


# --- the watchdog -------------------------------------------------------------------------------------

@pytest.mark.parametrize("gen", list(Gen), ids=lambda g: g.name)
def test_the_bound_holds_for_every_program(gen):
    """The golden engine is idle by the bound computed from the descriptors alone."""
    for p in [R.generate(gen, s) for s in range(6)] + P.library(gen):
        _, trace = R.run_golden(p)
        bound = W.program_bound(p)
        assert trace.cycles <= bound.cycles, (p.name, trace.cycles, bound)
        assert W.check_trace(trace, bound) is None


def test_the_watchdog_names_what_is_still_busy():
    p = P.accumulate_group("cayman")
    _, trace = R.run_golden(p)
    bound = W.program_bound(p)
    bound.cycles = trace.ops[2].t_issue + 3            # as if the engine had to be idle mid-program
    hang = W.check_trace(trace, bound)
    assert hang.cycle == bound.cycles
    assert any(b.startswith("array: #1 matmul") for b in hang.busy) and any("not issued" in b for b in hang.busy), hang
    assert "not idle at cycle" in str(hang)
    wait = "ldweights in_dtype=bf16 rows=1 cols=1 wait=5 src=(start_addr=sbuf(0,0x100), step_elem=[1,0,0], num_elem=[1,1,1])\n"
    never = W.idle_bound(assemble(wait, "cayman"), "cayman", rows=8, cols=8)
    assert never.cycles is None and "event 5" in never.reason
    assert W.check_rtl(bound.cycles, 0, bound) is None
    assert W.check_rtl(None, 0x301, bound).busy[0] == "instruction FIFO holds 3 descriptor(s)"


class _StuckPort:
    """An engine whose `done` never rises, with 2 descriptors in its FIFO."""

    def __init__(self):
        self.values, self.ticks = {}, 0

    def set(self, name, value):
        self.values[name] = value

    def get(self, name):
        return {"done": 0, "bus_rdata": 0x201 if self.values.get("bus_addr") == W.STATUS["offset"] else 0}[name]

    async def settle(self):
        pass

    async def tick(self):
        self.ticks += 1


def test_watch_stops_at_the_bound_and_reads_the_status():
    port = _StuckPort()
    hang = asyncio.run(W.watch(port, W.Bound(50, []), 30))
    assert port.ticks == 20 and hang.cycle == 50
    assert hang.busy == ["instruction FIFO holds 2 descriptor(s)", "sequencer busy (status.busy)"]


@pytest.mark.slow
def test_the_engine_rtl_goes_idle_within_the_bound():
    """One tiny RTL run (Amaranth): lockstep, then `done` within the bound."""
    bad, hang = W.run_amaranth(P.single("cayman", "bf16", 4, 4, n=2))
    assert bad is None and hang is None


def test_golden_checks_take_the_programs_array():
    """`check` judges a descriptor on the program's array: a MAVERICK SaveSeed whose PSUM partitions
    run past 127 only at full size is no address error on 8 x 16 (found by make regress as
    fuzz_0_maverick_23, where the full-size check disagreed with the scaled engine's refusal)."""
    import numpy as np
    from tensore.model.isa import ErrorCode, check, error_code
    text = ("matmul src_mem_pattern=tensor3d(start_addr=sbuf(0,0), step_elem=[0,0,0], num_elem=[0,0,0]) "
            "in_dtype=fp32 fp32_mode=high num_active_rows=1 tile_size=(row_size_log2=r64, col_size_log2=c256) "
            "flags=(seed_mode=save_seed, xpose_mode=enabled) dst_mem_pattern=tensor3d(start_addr=psum(1,0,0), "
            "step_elem=[0,0,0], num_elem=[1,1,1])\n")
    assert error_code(check(assemble(text, Gen.MAVERICK), Gen.MAVERICK)) == ErrorCode.BAD_ADDRESS
    p = P.Program("fuzz_0_maverick_23", Gen.MAVERICK, 8, 16, text, np.zeros((128, P.SBUF_BYTES), np.uint8))
    _, trace = R.run_golden(p)
    assert trace.ops[0].error == ErrorCode.BAD_PATTERN
    assert G.golden_checks(p, trace) == []


def test_a_crashing_task_is_an_error_case_and_checkpoints_keep_the_rest(tmp_path, monkeypatch):
    """A task that raises is one error case and the shard goes on; the checkpoint after every task
    holds the cases so far (incomplete), and the merged report names an incomplete shard."""
    real = G.run_random

    def crash_on_maverick(gen, *args, **kw):
        if Gen.parse(gen) == Gen.MAVERICK:
            raise RuntimeError("injected crash")
        return real(gen, *args, **kw)
    monkeypatch.setattr(G, "run_random", crash_on_maverick)
    seen = []
    r = G.run_shard(_cfg(tmp_path, programs=2), 0, 1, checkpoint=lambda res: seen.append((len(res["cases"]), res["complete"])))
    errors = [c for c in r["cases"] if c["error"]]
    assert r["complete"] and len(r["cases"]) == 3 and len(errors) == 1
    assert errors[0]["suite"] == "random.MAVERICK" and "injected crash" in errors[0]["error"]
    assert seen == [(2, False), (3, False)]
    G.write_shard({**r, "complete": False}, tmp_path)
    report = G.merge(G.read_shards(tmp_path), tmp_path)
    assert report["incomplete"] == [[0, 1]] and "incomplete shards" in G.format_report(report)


def test_random_mutants_are_refused_on_the_programs_array():
    """An illegal mutant is refused by `check` on the program's own array, not only at full size:
    MAVERICK seed 6185 drew a SaveSeed (refused at full size) moved to PSUM partition 112, which the
    8 x 16 engine ran (found by make regress, whose 16-partition RTL build then failed the batch)."""
    _, trace = R.run_golden(R.generate("maverick", 6185))
    assert G._partitions_past(trace) == []


def test_a_program_past_the_rtl_partitions_is_one_error_case(tmp_path, monkeypatch):
    """A random program writing PSUM partitions past the RTL build's is its own error case; the
    rest of its batch runs on the RTL."""
    real = R.generate

    def generate(gen, seed, **kw):
        p = real(gen, seed, **kw)
        if seed == 1:
            p.text = p.text.replace("psum(0,", "psum(40,")
        return p
    monkeypatch.setattr(R, "generate", generate)
    ran = []
    monkeypatch.setattr(G, "_rtl_cases", lambda programs, cases, *a: ran.extend(p.name for p in programs))
    cases = G.run_random("cayman", [0, 1, 2], _cfg(tmp_path, rtl=True))
    assert [c["name"] for c in cases if c["error"]] == ["seed_1"] and "past the RTL build's 16" in cases[1]["error"]
    assert ran == ["random_cayman_0", "random_cayman_2"]
