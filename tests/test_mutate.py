"""The mutation tool (cosim/mutate.py, D-T96): its mutants are the changes they name, an equivalent
one is found without a run, a run kills a mutant its tests reach and reports one they do not reach
as survived, the repository's files are never written, and the report counts them."""
import ast
from pathlib import Path

import pytest

from tensore.cli import main
from tensore.cosim import mutate as M

TARGET = "model/timing.py"
REACHED = "return max(0, (n - 1).bit_length() - 1)"       # timing.bucket: the test below calls it
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


def test_sample_is_reproducible():
    mutants = M.enumerate_mutants(M.ROOT, [TARGET])
    a, b = M.select(mutants, 10, 7), M.select(mutants, 10, 7)
    assert a == b and len(a) == 10 and a != M.select(mutants, 10, 8)
    assert M.select(mutants, None) == mutants


@pytest.mark.parametrize("argv,msg", [
    (["mutate", "--target", "rtl/pe.py", "--list"], "a target is a .py file under model/"),
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
