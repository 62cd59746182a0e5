"""Bad input to every `tensore` subcommand (SPEC section 9): one line on stderr, exit 2, no traceback.

The sweep enumerates the subcommands and their options from the argparse parser, so a new
subcommand or option is swept without editing this file: every integer option below its range (and
above it, and a non-number), every array size (0, negative, odd, a size the generation refuses),
every input file missing, a directory or a dangling link, every typed option given nonsense, every
choice given a value outside it.  It runs in-process; work (the golden engine's run, an export, a
Verilator build, a simulation) raises, so no case may get that far."""
import argparse
import os

import pytest

from tensore import cli
from tensore.args import check_array_args, input_file, input_path

# integer options still of bare `type=int`, each checked by its command before any work (the kernel
# commands' _positive): (subcommand, option) -> the smallest value it accepts
RUNTIME_CHECKED = {**{("gemm", f"--{d}"): 1 for d in "mkn"}, **{("plot", f"--{d}"): 1 for d in "mkn"},
                   **{("conv", f"--{d}"): 1 for d in ("batch", "cin", "height", "width", "cout", "kh", "kw",
                                                       "stride", "dil")}, ("conv", "--pad"): 0}
UNTYPED = (None, str, str.lower)
PROGRAM = "pe_reg_write reg=psum_round value=1 src=(start_addr=0, step_elem=[1], num_elem=[1])\n"


class StartedWork(BaseException):
    """Raised by anything that does real work; a BaseException so no `except Exception` hides it."""


@pytest.fixture
def no_work(monkeypatch):
    from tensore import rtl_run
    from tensore.cosim import harness, hdl, lockstep, regress
    from tensore.model.engine import Engine
    from tensore.rtl import export

    def refuse(*_, **__):
        raise StartedWork("a bad-input case reached real work")
    for owner, name in ((Engine, "run"), (hdl, "export_cached"), (hdl, "build_cached"), (hdl, "run"),
                        (harness, "build"), (export, "export_engine"), (lockstep, "run"), (lockstep, "check"),
                        (regress, "run_random"), (regress, "run_shard"), (rtl_run, "run_rtl")):
        monkeypatch.setattr(owner, name, refuse)


def subcommands() -> dict:
    parser = cli.build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return dict(sub.choices)


def _option(action) -> str | None:
    longs = [s for s in action.option_strings if s.startswith("--")]
    return (longs or action.option_strings or [None])[0]


def base_argv(p, files) -> list:
    """Values for the required arguments of subparser `p`: an input file, a choice, a generation."""
    argv = []
    for a in p._actions:
        if a.option_strings and not a.required:
            continue
        if isinstance(a, argparse._HelpAction):
            continue
        if a.type in (input_file, input_path):
            value = [files["program"]]
        elif a.choices:
            value = ["cayman" if "cayman" in a.choices else list(a.choices)[0]]
        else:
            value = ["x"]
        argv += ([_option(a)] if a.option_strings else []) + value
    return argv


def bad_values(name, a, files) -> list:
    """The values of action `a` (of subcommand `name`) that must be refused."""
    t = a.type
    out = []
    if getattr(t, "output", False):                              # a file or directory to write
        suffixes = t.suffixes or ("",)
        ok = next((x for x in suffixes if x), "")
        out.append(files["program"] + "/out" + ok)                # under a file, not a directory
        if not t.parents:                                         # (else the command creates it)
            out.append(files["nodir"] + "/out" + ok)              # in a directory that does not exist
        if t.suffixes:
            out.append(files["dir"] + "/out.jpgx")                # a suffix the writer does not take
    elif t not in UNTYPED:
        out.append("x!y")                                         # neither a number nor a name
    lo = getattr(t, "lo", None)
    if t is int and not a.choices:
        lo = RUNTIME_CHECKED.get((name, _option(a)))
        assert lo is not None, f"{name} {_option(a)}: an integer option with no declared range (args.int_at_least)"
    if lo is not None:
        out += [str(lo - 1), "1.5"]
        if getattr(t, "hi", None) is not None:
            out.append(str(t.hi + 1))
        if getattr(t, "size", False):
            out += ["0", "-4", "6", "130", "1000"]
    if a.choices and not isinstance(a.choices, dict):
        out.append("999" if t is int else "nosuch")
    if t in (input_file, input_path):
        out += [files["missing"], files["dangling"]] + ([files["dir"]] if t is input_file else [])
        if os.geteuid() != 0:                                     # root reads a mode-000 file
            out.append(files["unreadable"])
    return out


def cases(files):
    for name, p in sorted(subcommands().items()):
        base = base_argv(p, files)
        yield name, [name, *base, "--no-such-option"]
        for a in p._actions:
            if isinstance(a, (argparse._HelpAction, argparse._VersionAction)) or a.nargs == 0:
                continue
            for value in bad_values(name, a, files):
                if a.option_strings:
                    yield name, [name, *base, _option(a), value]
                else:                                             # a positional: replace its base value
                    i = [x for x in p._actions if not x.option_strings].index(a)
                    pos = [j for j, x in enumerate(base) if not x.startswith("-") and
                           (j == 0 or not base[j - 1].startswith("-"))]
                    argv = list(base)
                    argv[pos[i]] = value
                    yield name, [name, *argv]


@pytest.fixture
def files(tmp_path):
    prog = tmp_path / "p.s"
    prog.write_text(PROGRAM)
    unreadable = tmp_path / "secret.s"
    unreadable.write_text(PROGRAM)
    unreadable.chmod(0)
    (tmp_path / "dangling").symlink_to(tmp_path / "gone")
    return {"program": str(prog), "missing": str(tmp_path / "missing.s"), "dir": str(tmp_path),
            "nodir": str(tmp_path / "nodir" / "deeper"),
            "dangling": str(tmp_path / "dangling"), "unreadable": str(unreadable)}


def test_every_bad_input_is_one_line_and_exit_2(files, no_work, capsys):
    """SPEC section 9 over every subcommand, option and bad value (the sweep above)."""
    swept, failures = set(), []
    for name, argv in cases(files):
        swept.add(name)
        try:
            rc = cli.main(argv)
        except SystemExit as exc:
            rc = exc.code
        err = capsys.readouterr().err
        if rc != 2 or err.count("\n") != 1 or not err.endswith("\n") or "Traceback" in err:
            failures.append(f"{' '.join(argv)} -> exit {rc}, stderr {err!r}")
    assert not failures, f"{len(failures)} case(s):\n" + "\n".join(failures[:20])
    assert swept == set(subcommands())


@pytest.mark.parametrize("argv,msg", [
    (["verilog", "--rows", "0"], "argument --rows: 0 is below 4"),
    (["verilog", "--psum-partitions", "0"], "argument --psum-partitions: 0 is below 1"),
    (["verilog", "--psum-partitions", "129"], "argument --psum-partitions: 129 is above 128"),
    (["verilog", "--rows", "6", "--gen", "cayman"], "array 6x6: rows must be a multiple of 4"),
    (["verilog", "--gen", "maverick", "--cols", "12"], "array 16x12: rows must be a multiple of 4 up to 128, "
     "columns a multiple of 8 up to 256"),
    (["random", "--gen", "cayman", "--rows", "6"], "array 6x6"),
    (["coverage", "--rows", "0"], "argument --rows: 0 is below 4"),
    (["run", "missing.s", "--gen", "cayman"], "argument program: missing.s: no such file"),
    (["gemm", "--rtl", "--plot", "out.jpgx"], "out.jpgx: unsupported suffix .jpgx for a picture (one of: "),
    (["gemm", "-o", "no_such_dir_49/out.npz"], "no_such_dir_49/out.npz: directory "),
    (["conv", "--asm", "no_such_dir_49/c.s"], "no_such_dir_49 does not exist"),
    (["plot", "error", "-o", "."], "argument output: .: unsupported suffix (none) for a picture"),
])
def test_the_reviewed_cases(no_work, capsys, argv, msg):
    """The review's cases, each with its message: one size rule (model.engine.check_array) for
    every subcommand, as `run` has it."""
    try:
        rc = cli.main(argv)
    except SystemExit as exc:
        rc = exc.code
    err = capsys.readouterr().err
    assert rc == 2 and msg in err and err.count("\n") == 1, err


@pytest.mark.parametrize("content", ["", "# only a comment\n\n", b""], ids=["empty text", "comments", "empty bytes"])
@pytest.mark.parametrize("cmd", ["run", "cost", "cosim", "asm"])
def test_an_empty_program_is_refused(tmp_path, no_work, capsys, content, cmd):
    """A program with no micro-op is one line and exit 2 on every command that reads one, before
    any work (a run of nothing would pass and say nothing)."""
    path = tmp_path / "empty.s"
    path.write_bytes(content) if isinstance(content, bytes) else path.write_text(content)
    try:
        rc = cli.main([cmd, str(path), "--gen", "cayman"])
    except SystemExit as exc:
        rc = exc.code
    err = capsys.readouterr().err
    assert rc == 2 and "no micro-ops" in err and err.count("\n") == 1, err


def test_one_size_rule():
    """check_array_args takes the engine's own rule: what the golden Engine refuses, every
    subcommand refuses, for each generation (model.engine.check_array)."""
    from tensore.model.dtypes import Gen
    from tensore.model.engine import Engine
    for gen in Gen:
        for rows, cols in ((4, 4), (6, 8), (8, 12), (128, 256), (132, 8), (8, 136)):
            try:
                Engine(gen, rows=rows, cols=cols)
                ok = True
            except ValueError:
                ok = False
            args = argparse.Namespace(gen=gen.name.lower(), rows=rows, cols=cols)
            assert (check_array_args(args) is None) == ok, (gen, rows, cols)
