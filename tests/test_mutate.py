"""The mutation tool (cosim/mutate.py, D-T96): its mutants are the changes they name, an equivalent
one is found without a run, a run kills a mutant its tests reach and reports one they do not reach
as survived, the repository's files are never written, and the report counts them, per unit.  The
unit -> tests map covers every unit but the known finding, and an rtl mutant changes what Amaranth's
simulator runs."""
import ast
import json
import marshal
import subprocess
import sys
from dataclasses import asdict

import pytest

from tensore.cli import main
from tensore.cosim import mutate as M

TARGET = "model/timing.py"
REACHED = "return sum(n > (1 << k) for k in range(1, BUCKETS))"   # timing.bucket: the test below calls it
MISSED = "return bucket(rows) * BUCKETS + bucket(cols)"    # timing.counter_index: it does not
TOY_TEST = """\
from tensore.model.timing import bucket


def test_bucket():
    assert [bucket(n) for n in (1, 2, 3, 4, 5, 128)] == [0, 0, 1, 1, 2, 6]
"""


def _find(mutants, line: str, op: str) -> M.Mutant:
    found = [m for m in mutants if m.original.strip() == line and m.op == op]
    assert len(found) == 1, f"{TARGET} has no single {op} mutant of `{line}`"
    return found[0]


def test_each_mutant_is_the_change_it_names():
    """Every mutant of a file applies and changes the syntax tree, its shown line differs from the
    original; ids are unique."""
    mutants = M.enumerate_mutants(M.ROOT, [TARGET])
    assert len({m.id for m in mutants}) == len(mutants) > 50
    source = (M.ROOT / TARGET).read_text()
    original = ast.dump(ast.parse(source))
    for m in mutants:
        tree = M.mutated_tree(M.ROOT, m, source)
        assert ast.dump(tree) != original, m.id
        assert not m.mutated or m.mutated != m.original, m.id


def test_docstrings_and_pragma_lines_are_left_alone(tmp_path):
    (tmp_path / "model").mkdir()
    (tmp_path / "model" / "toy.py").write_text('"""Doc 1."""\n\n\ndef f(x: int = 3) -> int:\n    """Doc 2."""\n'
                                              '    y = x + 1  # pragma: no mutate\n    return y < 2\n')
    mutants = M.enumerate_mutants(tmp_path, ["model/toy.py"])
    assert {m.line for m in mutants} == {4, 7}                # the default 3 and `return y < 2`
    assert {m.op for m in mutants if m.line == 7} == {"return->None", "Lt->LtE@0", "const+1", "const-1"}


def test_targets_and_equivalent_file_are_checked(tmp_path):
    for bad in (["tests/test_mutate.py"], ["model/nosuch.py"], ["model/../cosim/mutate.py"], []):
        with pytest.raises(ValueError):
            M.check_targets(M.ROOT, bad)
    eq = tmp_path / "eq.txt"
    eq.write_text("# comment\nmodel/a.py:1:0:const+1  the value is never read\n")
    assert M.read_equivalent(eq) == {"model/a.py:1:0:const+1": "the value is never read"}
    eq.write_text("model/a.py:1:0:const+1\n")
    with pytest.raises(ValueError, match="no reason"):
        M.read_equivalent(eq)


def test_equivalent_listing_names_current_mutants():
    """Every id in tests/mutants_equivalent.txt names a mutant the tool enumerates now: the ids are
    keyed by line and column, so an edit that moves the code leaves an entry that no longer applies
    (and could excuse another mutant at the old place).  Only the listed files are enumerated."""
    listed = M.read_equivalent(M.ROOT / M.EQUIVALENT_FILE)
    assert listed
    current: dict = {}
    stale = []
    for ident in listed:
        rel = ident.split(":", 1)[0]
        if rel not in current:
            current[rel] = {m.id for m in M.file_mutants(M.ROOT, rel, shown=False)} if (M.ROOT / rel).is_file() else set()
        if ident not in current[rel]:
            stale.append(ident)
    assert not stale, (f"{M.EQUIVALENT_FILE} lists mutants the tool no longer enumerates (the code moved or "
                       f"changed): {', '.join(stale)}; re-key each to its current id after re-checking its "
                       "argument against the current code, or drop it")


def test_a_run_kills_what_its_tests_reach(tmp_path):
    """Baseline, then three mutants in a fresh pytest each: the one in bucket is killed, the one in
    counter_index (no test of the set calls it) survives, a listed one is equivalent without a run;
    timing.py is unchanged on disk."""
    test = tmp_path / "test_toy.py"
    test.write_text(TOY_TEST)
    mutants = M.enumerate_mutants(M.ROOT, [TARGET])
    killed, survived = _find(mutants, REACHED, "return->None"), _find(mutants, MISSED, "Add->Sub")
    listed = _find(mutants, MISSED, "Mult->FloorDiv")
    eq = tmp_path / "eq.txt"
    eq.write_text(f"{listed.id}  for the test of the tool\n")
    before = (M.ROOT / TARGET).read_bytes()
    cfg = M.Config(targets=[TARGET], tests=[str(test)], ids=[killed.id, survived.id, listed.id],
                   equivalent=str(eq), timeout=120, jobs=2)
    result = M.run_shard(cfg)
    assert (M.ROOT / TARGET).read_bytes() == before
    status = {r["id"]: r["status"] for r in result["mutants"]}
    assert status == {killed.id: M.KILLED, survived.id: M.SURVIVED, listed.id: M.EQUIVALENT}
    assert "test_bucket" in next(r["detail"] for r in result["mutants"] if r["id"] == killed.id)
    report = M.merge([result], tmp_path / "out", "toy")
    assert report["summary"]["score"] == 50.0 and [s["id"] for s in report["survivors"]] == [survived.id]
    assert (tmp_path / "out" / "toy.html").read_text().count("<tr class=") == 3


def test_a_stopped_run_resumes(tmp_path, capsys):
    """A run stopped after one of its two mutants (its shard file as the checkpoint left it) runs only
    the other when resumed: the kept result is carried as it was, the baseline is not run again and
    the report counts both; a saved run of other options or other sources is refused in one line."""
    test = tmp_path / "test_toy.py"
    test.write_text(TOY_TEST)
    mutants = M.enumerate_mutants(M.ROOT, [TARGET])
    killed, survived = _find(mutants, REACHED, "return->None"), _find(mutants, MISSED, "Add->Sub")
    cfg = M.Config(targets=[TARGET], tests=[str(test)], ids=[killed.id, survived.id], timeout=120)
    saved = []
    M.run_shard(cfg, checkpoint=lambda r: saved.append(json.loads(json.dumps(r))))
    stopped = saved[0]                              # the checkpoint after the first mutant
    assert not stopped["complete"] and len(stopped["mutants"]) == 1
    first = stopped["mutants"][0]
    log = []
    resumed = M.run_shard(cfg, log=log.append, previous=stopped)
    assert resumed["complete"] and resumed["baseline_seconds"] == stopped["baseline_seconds"]
    assert {r["id"]: r["status"] for r in resumed["mutants"]} == {killed.id: M.KILLED, survived.id: M.SURVIVED}
    assert next(r for r in resumed["mutants"] if r["id"] == first["id"]) == first
    assert "1 kept from the saved run" in log[0] and len(log) == 2     # the shard line and one mutant run
    with pytest.raises(ValueError, match="ran other options"):
        M.run_shard(M.Config(**{**asdict(cfg), "seed": 1}), previous=stopped)
    with pytest.raises(ValueError, match=f"{TARGET} changed since the saved run"):
        M.run_shard(cfg, previous={**stopped, "sources": {TARGET: "0" * 16}})
    shard = tmp_path / "out" / "timing" / "shard-0-of-1.json"
    shard.parent.mkdir(parents=True)
    shard.write_text("{")
    assert main(["mutate", "--target", TARGET, "--tests", str(test), "--resume", "-o", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err
    assert "is not a shard result" in err and err.count("\n") == 1


def test_the_baseline_runs_its_files_side_by_side(tmp_path):
    """With --jobs 2 the unmutated run's files are split over two runs: each unit's cap counts the
    seconds of its tests in either run, and a file failing in the second run fails the baseline."""
    fast, slow, bad = tmp_path / "test_fast.py", tmp_path / "test_slow.py", tmp_path / "test_bad.py"
    fast.write_text(TOY_TEST)
    slow.write_text("import time\n\n\ndef test_slow():\n    time.sleep(3)\n")
    bad.write_text("def test_bad():\n    assert False\n")
    runner = M.Runner(M.Config(targets=[TARGET], tests=[str(fast), str(slow)], jobs=2))
    try:
        runner.baseline()
        assert sorted(n.rpartition('::')[2] for n in runner.took) == ['test_bucket', 'test_slow']
        assert runner.timeouts[TARGET] >= 4 * 3 + 30     # the slow file's 3 s, run beside the other
    finally:
        runner.close()
    runner = M.Runner(M.Config(targets=[TARGET], tests=[str(fast), str(bad)], jobs=2))
    try:
        with pytest.raises(ValueError, match="does not pass on the unmutated sources"):
            runner.baseline()
    finally:
        runner.close()


def test_a_mutant_runs_the_tests_of_its_line_first(tmp_path):
    """Under line coverage (D-T106) a mutant runs the tests of its set that run its line (a test
    collected first that does not run it is not run), and one whose line no test runs survives
    without a run; with whole sets, the set runs in its order; with --confirm, a survivor of its
    line's tests runs the whole set (a value carried to a test that does not run the line kills it).
    A resumed run carries the baseline's coverage; a test of its line that its collection lacks
    (pytest's usage error) runs the whole set."""
    other, toy = tmp_path / "test_a_other.py", tmp_path / "test_b_toy.py"
    other.write_text(f"import os\nimport pathlib\n\n\ndef test_other():\n    if os.environ.get({M.MUTANT_ENV!r}):\n"
                     f"        pathlib.Path({str(tmp_path / 'ran')!r}).touch()\n")     # run on a mutant
    toy.write_text(TOY_TEST)
    mutants = M.enumerate_mutants(M.ROOT, [TARGET])
    killed, missed = _find(mutants, REACHED, "return->None"), _find(mutants, MISSED, "Add->Sub")
    cfg = M.Config(targets=[TARGET], tests=[str(other), str(toy)], ids=[killed.id, missed.id], timeout=120)
    saved = []
    result = M.run_shard(cfg, checkpoint=saved.append)
    status = {r["id"]: r for r in result["mutants"]}
    assert status[killed.id]["status"] == M.KILLED and "test_bucket" in status[killed.id]["detail"]
    assert not (tmp_path / "ran").exists()
    assert status[missed.id]["status"] == M.SURVIVED and status[missed.id]["seconds"] == 0.0
    assert "not run" in status[missed.id]["detail"] and "+    return bucket(rows) * BUCKETS - bucket(cols)" in status[missed.id]["diff"]
    assert result["lines"]["cover"][TARGET] and saved[0]["lines"] == result["lines"]
    whole = M.run_shard(M.Config(**{**asdict(cfg), "lines": False, "ids": [killed.id]}))
    assert whole["mutants"][0]["status"] == M.KILLED and (tmp_path / "ran").exists() and not whole["lines"]["cover"]
    carried = tmp_path / "test_c_carried.py"       # bucket's value reaches a test that does not call it
    carried.write_text("import os\n\n\ndef test_carried():\n    assert os.environ['BUCKET'] == '1'\n")
    toy.write_text(TOY_TEST.replace("def test_bucket():", "def test_bucket():\n    import os\n"
                                    "    os.environ['BUCKET'] = str(bucket(3))\n    return"))
    cfg = M.Config(**{**asdict(cfg), "tests": [str(other), str(toy), str(carried)], "ids": [killed.id]})
    assert M.run_shard(cfg)["mutants"][0]["status"] == M.SURVIVED
    assert M.run_shard(M.Config(**{**asdict(cfg), "confirm": True}))["mutants"][0]["status"] == M.KILLED
    runner = M.Runner(cfg)
    try:
        runner.restore(result["lines"])
        assert runner.first(killed) == [f"{toy}::test_bucket"] and runner.first(missed) is None
        gone = f"{toy}::test_gone"                 # a line's test the mutant's collection lacks: the whole set
        runner.cover[TARGET] = {line: {gone} for line in runner.cover[TARGET]}
        runner.members[killed.key] = runner.members[killed.key] | {gone}
        assert runner.first(killed) == [gone] and runner.run(killed, {})["status"] == M.KILLED
    finally:
        runner.close()


def test_each_test_runs_the_lines_a_cache_would_spare_it(tmp_path):
    """Under line coverage every test starts with tensore's caches empty: two tests calling a cached
    layout (rtl/isa.py's uop_layout) both run its body, as two tests of one lockstep engine both run its
    elaboration, so a mutant of those lines runs either test."""
    toy = tmp_path / "test_cached.py"
    toy.write_text("from tensore.rtl.isa import uop_layout\n\n\ndef test_first():\n    assert uop_layout().size\n\n\n"
                   "def test_second():\n    assert uop_layout().size\n")
    unit = "rtl/isa.py"
    runner = M.Runner(M.Config(targets=[unit], tests=[str(toy)], timeout=120))
    try:
        runner.baseline()
        body = next(n.body[-1].lineno for n in ast.parse(runner.sources[unit]).body
                    if isinstance(n, ast.FunctionDef) and n.name == "uop_layout")
        assert runner.cover[unit][body] == {f"{toy}::test_first", f"{toy}::test_second"}
    finally:
        runner.close()


def test_the_lines_a_mutant_needs_run():
    """A node's lines: its statement's whole span; a compound statement's header only; a decorator's
    from its own line.  A decorator, a default, module and class code run at import, not in a call."""
    tree = ast.parse("@dec(1)\ndef f(a=2):\n    if (a >\n            3):\n        x = [4,\n             5]\n    return x\n")
    at = {(type(n).__name__, n.lineno, getattr(n, "value", None)): M._key(n) for n in ast.walk(tree)
          if isinstance(n, ast.Constant)}
    assert M.run_lines(tree, at["Constant", 1, 1]) == range(1, 2)
    assert M.run_lines(tree, at["Constant", 2, 2]) == range(1, 3)
    assert M.run_lines(tree, at["Constant", 4, 3]) == range(3, 5)
    assert M.run_lines(tree, at["Constant", 6, 5]) == range(5, 7)
    assert M.run_lines(tree, at["Constant", 5, 4]) == range(5, 7)
    assert [M.in_a_call(tree, at[k]) for k in (("Constant", 1, 1), ("Constant", 2, 2), ("Constant", 4, 3))] == \
        [False, False, True]
    tree = ast.parse("X = 1\nclass A:\n    y = 2\n    f = lambda self: 3\n")
    assert [M.in_a_call(tree, M._key(n)) for n in ast.walk(tree) if isinstance(n, ast.Constant)] == [False, False, True]


def test_sample_is_reproducible():
    mutants = M.enumerate_mutants(M.ROOT, [TARGET])
    a, b = M.select(mutants, 10, 7), M.select(mutants, 10, 7)
    assert a == b and len(a) == 10 and a != M.select(mutants, 10, 8)
    assert M.select(mutants, None) == mutants


@pytest.mark.parametrize("argv,msg", [
    (["mutate", "--target", "cosim/mutate.py", "--list"], "a unit is a .py file under model/ or rtl/"),
    (["mutate", "--units", "rtl/nosuch.py", "--list"], "no such file"),
    (["mutate", "--target", TARGET, "--mutant", "model/timing.py:1:0:nosuch", "--list"], "no such mutant"),
    (["mutate", "--tests", "tests/nosuch.py", "--list"], "no such test file"),
])
def test_bad_options_are_one_line(capsys, argv, msg):
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert msg in err and err.count("\n") == 1


def test_list_names_every_mutant(capsys):
    assert main(["mutate", "--target", TARGET, "--list", "--sample", "5", "--seed", "3"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert len(out) == 6 and out[-1].startswith("5 of ") and all(line.startswith(TARGET + ":") for line in out[:5])


# --- units: the map, rtl targets, the per-unit report -------------------------------------------------

PE = "rtl/pe.py"
PE_KILLED = "compute = live & (~sparse | (sel < ai.fmaps))"     # ~ removed: no PE of a dense matmul computes
PE_CONST = "COL_BITS = 9"
LOCKSTEP = "tests/test_rtl_array.py::test_array_lockstep[cayman-0]"   # every PE register, every cycle


def _pe(mutants, line: str, op: str) -> M.Mutant:
    found = [m for m in mutants if m.original.strip() == line and m.op == op]
    assert len(found) == 1, f"{PE} has no single {op} mutant of `{line}`"
    return found[0]


def test_unit_map_covers_every_unit():
    """Every model target, file of the engine and rtl file has covering tests that exist (rtl/array_loop.py
    only its writer's); an rtl unit's own tests run no Verilator; every rtl file is in the `rtl`
    group, every file of the engine in the `engine` group; a mutant is a writer's where the map says."""
    assert M.check_map(M.ROOT) == []
    engine = M.GROUPS["engine"](M.ROOT)
    assert "model/engine/issue.py" in engine and "model/engine/__init__.py" not in engine
    assert all(M.UNIT_TESTS.get(u) for u in engine)
    rtl = M.GROUPS["rtl"](M.ROOT)
    assert PE in rtl and "rtl/array_loop.py" in rtl and len(rtl) == len(M.rtl_units(M.ROOT))
    for unit in rtl:
        for item in M.UNIT_TESTS.get(unit, []):
            text = (M.ROOT / item.split("::")[0]).read_text()
            assert "pytestmark = pytest.mark.verilator" not in text, (unit, item)
    assert any("lockstep" in (M.ROOT / t.split("::")[0]).read_text() for t in M.UNIT_TESTS[PE])
    array = M.enumerate_mutants(M.ROOT, ["rtl/array.py"])
    writers = {m.line for m in array if m.writer}
    source = (M.ROOT / "rtl/array.py").read_text().splitlines()
    assert writers and all(not m.writer for m in M.enumerate_mutants(M.ROOT, [PE]))
    assert any(".tag_data(tag_data)" in source[line - 1] for line in writers)      # Array.verilog's text
    assert not any("m.d.comb" in source[line - 1] for line in writers)             # not the Amaranth form's
    assert all(m.writer for m in M.enumerate_mutants(M.ROOT, ["rtl/array_loop.py"]))
    assert M.test_sets(M.ROOT, ["unit"], "rtl/array.py") == {"rtl/array.py": M.UNIT_TESTS["rtl/array.py"],
                                                             "rtl/array.py#writer": M.WRITER_TESTS["rtl/array.py"]}


def test_a_writer_mutant_runs_its_writers_tests(tmp_path, monkeypatch):
    """A writer's mutant runs WRITER_TESTS under WRITER_MARKS (make test's, Verilator included): a
    test marked verilator, which the unit tests' marks leave out, kills it."""
    test = tmp_path / "test_writer.py"
    test.write_text("import pytest\n\n" + TOY_TEST.replace("def test_bucket", "@pytest.mark.verilator\ndef test_bucket"))
    monkeypatch.setattr(M, "UNIT_TESTS", {k: v for k, v in M.UNIT_TESTS.items() if k != TARGET})
    monkeypatch.setattr(M, "WRITER_TESTS", {TARGET: [str(test)]})
    killed = _find(M.enumerate_mutants(M.ROOT, [TARGET]), REACHED, "return->None")
    assert killed.writer and killed.key == TARGET + M.WRITER
    result = M.run_shard(M.Config(targets=[TARGET], tests=["unit"], ids=[killed.id], timeout=120))
    [r] = result["mutants"]
    assert r["status"] == M.KILLED and "test_bucket" in r["detail"] and set(result["timeouts"]) == {killed.key}


def test_check_map_finds_what_is_missing(tmp_path, monkeypatch):
    """A unit with no entry, an entry with a missing file and an entry that is no unit are findings."""
    for rel in ("model/a.py", "model/engine/d.py", "model/engine/__init__.py", "rtl/b.py", "rtl/c.py",
                "rtl/__init__.py"):
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text("X = 1\n")
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "test_a.py").write_text("")
    monkeypatch.setattr(M, "DEFAULT_TARGETS", ["model/a.py"])
    monkeypatch.setattr(M, "UNIT_TESTS", {"model/a.py": ["tests/test_a.py"], "rtl/b.py": ["tests/test_b.py"],
                                          "rtl/gone.py": ["tests/test_a.py"]})
    monkeypatch.setattr(M, "WRITER_TESTS", {"rtl/b.py": ["tests/test_w.py"], "rtl/gone2.py": ["tests/test_a.py"]})
    assert M.check_map(tmp_path) == ["model/engine/d.py: no covering test in UNIT_TESTS",
                                     "rtl/c.py: no covering test in UNIT_TESTS",
                                     "rtl/gone.py: UNIT_TESTS names it, but it is no unit (a model target or an rtl file)",
                                     "rtl/b.py: tests/test_b.py: no such test file",
                                     "rtl/gone2.py: WRITER_TESTS names it, but it is no unit (a model target or an rtl file)",
                                     "rtl/b.py: tests/test_w.py: no such test file"]
    assert M.GROUPS["rtl"](tmp_path) == ["rtl/b.py"] and M.GROUPS["engine"](tmp_path) == ["model/engine/d.py"]


def test_check_map_cli_reports_the_findings(capsys):
    """`tensore mutate --check-map` prints the map (a writer's tests under their unit), collects the
    tests under the run's marks (a writer's under WRITER_MARKS) and finds nothing missing."""
    assert main(["mutate", "--check-map"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert not [ln for ln in out if ln.startswith("FINDING")] and out[-1] == "0 finding(s)"
    assert any(ln.startswith(PE) and LOCKSTEP.split("::")[0] in ln for ln in out)
    loop = out.index(next(ln for ln in out if ln.startswith("rtl/array_loop.py")))
    assert "(none)" in out[loop] and "tests/test_rtl_loopform.py" in out[loop + 1]


def test_rtl_unit_enumerates_and_runs_its_tests_first():
    """An rtl unit's mutants apply to its Amaranth source, operators on Values included; a mutant's
    test set is its unit's tests, then the fast set; `--units rtl` names the group."""
    mutants = M.enumerate_mutants(M.ROOT, [PE])
    assert len({m.id for m in mutants}) == len(mutants) > 100
    source = (M.ROOT / PE).read_text()
    killed = _pe(mutants, PE_KILLED, "Invert-removed")
    assert "~" not in ast.unparse(M.mutated_tree(M.ROOT, killed, source)).split("compute = ", 1)[1].split("\n")[0]
    assert {"Lt->LtE@0", "GtE->Gt@0", "BitAnd->BitOr"} <= {m.op for m in mutants}
    assert M.test_files(M.ROOT, ["unit", "fast"], PE)[:2] == M.UNIT_TESTS[PE]
    assert M.expand_units(M.ROOT, ["rtl", PE]) == M.GROUPS["rtl"](M.ROOT)
    assert M.module_name("rtl/fp/pe_mac.py") == "tensore.rtl.fp.pe_mac"
    assert M.report_name(M.GROUPS["rtl"](M.ROOT)) == "rtl" and M.report_name([PE]) == "rtl_pe"
    d = M.diff(killed, source).splitlines()
    assert d[:2] == [f"--- a/{PE}", f"+++ b/{PE}"] and d[2].startswith(f"@@ -{killed.line - 1},3 ")
    assert d[4:6] == ["-        " + PE_KILLED, "+        compute = live & (sparse | (sel < ai.fmaps))"]


def test_overlay_puts_the_rtl_mutant_in_front():
    """With the overlay, `tensore.rtl.pe` is the mutant's code, for the modules that import from it
    too (rtl/array.py's COL_BITS) and for the PE Amaranth elaborates: the test fails if the overlay
    loads the original."""
    mutant = _pe(M.enumerate_mutants(M.ROOT, [PE]), PE_CONST, "const+1")
    runner = M.Runner(M.Config(targets=[PE], tests=["unit"]))
    try:
        code = runner.dir / "pe.code"
        code.write_bytes(marshal.dumps(compile(M.mutated_tree(M.ROOT, mutant), str(M.ROOT / PE), "exec")))
        env = runner._env(f"{M.module_name(PE)}={M.ROOT / PE}={code}")
        probe = ("from tensore.rtl import pe, array; "
                 "print(pe.COL_BITS, array.COL_BITS, pe.PE('mariana').col_index.shape().width, pe.__file__)")
        out = subprocess.run([sys.executable, "-c", probe], env=env, cwd=M.ROOT, capture_output=True, text=True, check=True)
        assert out.stdout.split() == ["10", "10", "10", str(M.ROOT / PE)]
        env.pop(M.MUTANT_ENV)
        out = subprocess.run([sys.executable, "-c", probe], env=env, cwd=M.ROOT, capture_output=True, text=True, check=True)
        assert out.stdout.split()[:3] == ["9", "9", "9"]
    finally:
        runner.close()


def test_a_measured_child_that_imports_no_unit_is_silent(tmp_path):
    """The unmutated run measures line coverage in every process a test starts: a child that imports
    none of the measured files (a CLI test of an rtl unit's set reading its child's stderr) gets
    nothing from coverage on stderr, and one that imports a unit gets its lines recorded."""
    runner = M.Runner(M.Config(targets=[PE], tests=["unit"]))
    try:
        env = {**runner._env(), M.COVER_ENV: str(tmp_path / "cover"), M.INCLUDE_ENV: str(M.ROOT / PE)}
        out = subprocess.run([sys.executable, "-c", "import json"], env=env, cwd=M.ROOT, capture_output=True, text=True)
        assert (out.returncode, out.stderr) == (0, "")
        out = subprocess.run([sys.executable, "-c", "import tensore.rtl.pe"], env=env, cwd=M.ROOT,
                             capture_output=True, text=True)
        assert (out.returncode, out.stderr) == (0, "")
        assert M.read_cover(tmp_path, {PE: M.ROOT / PE})[PE]
    finally:
        runner.close()


def _result(status_of: dict) -> dict:
    mutants = []
    for k, (file, status) in enumerate(status_of.items()):
        unit = file.split("#")[0]
        mutants.append({"id": f"{unit}:{k + 1}:0:const+1", "file": unit, "line": k + 1, "col": 0, "op": "const+1",
                        "desc": f"{unit}:{k + 1} 1 -> 2", "node": ["Constant", k + 1, 0, k + 1, 1],
                        "original": "x = 1", "mutated": "x = 2", "status": status, "seconds": 1.0, "detail": "",
                        **({"diff": "--- a\n+++ b\n-x = 1\n+x = 2\n"} if status == M.SURVIVED else {})})
    cfg = {**asdict(M.Config(targets=[PE, "rtl/seq.py"])), "root": "/x"}
    return {"config": cfg, "shard": [0, 1], "mutants": mutants, "baseline_seconds": 5.0, "timeout": 60.0,
            "timeouts": {PE: 60.0, "rtl/seq.py": 50.0}, "complete": True, "seconds": 9.0, "sources": {}}


def test_report_per_unit_from_a_synthetic_result(tmp_path):
    """Per unit: killed / survived / timeout / stillborn / equivalent, the score, its tests and time
    cap; the HTML has the unit table and each survivor's diff; the text report one line a unit."""
    result = _result({f"{PE}#1": M.KILLED, f"{PE}#2": M.SURVIVED, f"{PE}#3": M.TIMEOUT, f"{PE}#4": M.CRASHED,
                      f"{PE}#5": M.EQUIVALENT, "rtl/seq.py#6": M.KILLED})
    report = M.merge([result], tmp_path, "synthetic")
    pe = report["units"][PE]
    assert (pe[M.KILLED], pe[M.SURVIVED], pe[M.TIMEOUT], pe[M.CRASHED], pe[M.EQUIVALENT]) == (1, 1, 1, 1, 1)
    assert pe["score"] == 75.0 and pe["tests"] == M.UNIT_TESTS[PE] and pe["timeout_seconds"] == 60.0
    assert report["units"]["rtl/seq.py"]["score"] == 100.0 and report["summary"]["score"] == 80.0
    assert json.loads((tmp_path / "synthetic.json").read_text())["units"] == report["units"]
    page = (tmp_path / "synthetic.html").read_text()
    assert "<h2>Units</h2>" in page and "+x = 2" in page and page.count("<tr class=") == 6
    lines = M.format_report(report).splitlines()
    assert lines[2].split() == [PE, "5", "1", "1", "1", "1", "1", "75.0%"]
    only = M.merge([_result({"rtl/seq.py#1": M.EQUIVALENT})], tmp_path, "equivalent")
    assert only["units"]["rtl/seq.py"]["score"] is None                 # nothing ran: no score
    assert M.format_report(only).splitlines()[2].split()[-1] == "-"
    assert report["files"][PE]["mutants"] == 5                 # the per-file counts stay


def test_a_real_rtl_mutant_is_killed_by_the_lockstep():
    """A PE mutant (no PE of a dense matmul computes) run in Amaranth's simulator: the array
    lockstep, which passes on the original, kills it; rtl/pe.py is unchanged on disk."""
    killed = _pe(M.enumerate_mutants(M.ROOT, [PE]), PE_KILLED, "Invert-removed")
    before = (M.ROOT / PE).read_bytes()
    result = M.run_shard(M.Config(targets=[PE], tests=[LOCKSTEP], ids=[killed.id], timeout=300))
    assert (M.ROOT / PE).read_bytes() == before
    [r] = result["mutants"]
    assert r["status"] == M.KILLED and "test_array_lockstep" in r["detail"], r
    assert result["timeouts"] == {PE: 300} and result["baseline_seconds"] > 0
