"""The command line's usability rules: refusals fail `cosim` as they fail `run`, summaries count the
program's descriptors, dtype typos get suggestions, every option says what it is and its default,
`cosim`'s C++ optimisation follows the engine's size, and `regs` writes where it is told."""
import argparse
from pathlib import Path

import numpy as np
import pytest

from tensore.cli import build_parser, help_needs_default, main
from tensore.cosim import programs

REPRO = Path(__file__).parent / "repro"


def _acc16(tmp_path, **kw) -> Path:
    """The library's MARIANA accumulate group for a 16 x 16 array (its SBUF image beside it)."""
    p = programs.accumulate_group("mariana", rows=16, cols=16, n=4, **kw)
    (tmp_path / "acc16.s").write_text(p.text)
    np.savez(tmp_path / "acc16.npz", sbuf=p.sbuf)
    return tmp_path / "acc16.s"


# -- cosim fails on refused and faulted micro-ops, as run does ---------------------------------------------

def test_cosim_of_refused_micro_ops_exits_1(tmp_path, capsys, monkeypatch):
    """A program for 16 rows on an 8-row engine: every micro-op refused; cosim exits 1 as run does,
    says how many were refused, and builds nothing."""
    monkeypatch.setenv("TENSORE_CACHE", str(tmp_path / "cache"))
    src = _acc16(tmp_path)
    args = [str(src), "--gen", "mariana", "--rows", "8", "--sbuf", str(tmp_path / "acc16.npz")]
    assert main(["run", *args]) == 1
    run_err = capsys.readouterr().err
    for sim in ("amaranth", "verilator"):
        assert main(["cosim", *args, "--sim", sim]) == 1
        out, err = capsys.readouterr()
        assert "6 descriptors, 0 executed, 6 refused" in out and "lockstep vs golden engine: OK" not in out
        assert err == run_err and "error: 6 micro-ops refused; the first is #0 ldweights" in err
    assert not (tmp_path / "cache").exists()                # nothing exported or built


def test_cosim_of_a_micro_op_reporting_an_error_exits_1(tmp_path, capsys):
    """A PeRegWrite that issues and reports BAD_REGISTER when executed (D-T38 (6)): exit 1, as run."""
    (tmp_path / "p.s").write_text((REPRO / "pe_reg_write_value_maverick.s").read_text())
    np.savez(tmp_path / "sb.npz", sbuf=np.load(REPRO / "pe_reg_write_value_maverick.npz")["sbuf"])
    args = [str(tmp_path / "p.s"), "--gen", "maverick", "--rows", "8", "--cols", "16",
            "--sbuf", str(tmp_path / "sb.npz")]
    assert main(["cosim", *args, "--sim", "amaranth"]) == 1
    err = capsys.readouterr().err
    assert "error: 1 micro-op reported an error when executed; the first is #0 pe_reg_write (BAD_REGISTER)" in err


@pytest.mark.cosim
def test_cosim_allow_refused_runs_the_rtl(tmp_path, capsys):
    """--allow-refused: the RTL runs and its refusals are checked against the golden engine's."""
    src = _acc16(tmp_path)
    assert main(["cosim", str(src), "--gen", "mariana", "--rows", "8", "--sbuf", str(tmp_path / "acc16.npz"),
                 "--sim", "amaranth", "--allow-refused"]) == 0
    out = capsys.readouterr().out
    assert "lockstep vs golden engine: OK" in out and "micro-ops refused: 6 of 6" in out


# -- a stalled run counts the program's descriptors ----------------------------------------------------------

def test_stalled_run_counts_every_descriptor(tmp_path, capsys):
    """A wait on an event nothing sets stops the run at the first descriptor: the summary counts the
    program's 6 descriptors, not the 1 reached."""
    text = programs.accumulate_group("mariana").text.replace("ldweights ", "ldweights wait=3 ", 1)
    (tmp_path / "p.s").write_text(text)
    assert main(["run", str(tmp_path / "p.s"), "--gen", "mariana", "--rows", "8"]) == 1
    out = capsys.readouterr().out
    assert "MARIANA 8x8: 6 descriptors (5 not reached), 0 executed" in out and "stalled: descriptor 0" in out


# -- dtype names: aliases and suggestions --------------------------------------------------------------------

def test_dtype_typo_lists_aliases_and_suggests(tmp_path, capsys):
    (tmp_path / "p.s").write_text("matmul in_dtype=fp8_e4m4 out_dtype=fp32 rows=8 cols=8\n")
    assert main(["asm", str(tmp_path / "p.s"), "--gen", "mariana"]) == 2
    err = capsys.readouterr().err
    where = f"{tmp_path / 'p.s'}:1:8: "
    assert err.count("\n") == 1 and where + "in_dtype: unknown dtype 'fp8_e4m4'; did you mean fp8_e4m3" in err
    assert "bfloat16 (bf16)" in err and "fp8_exp4 (e4m3, fp8_e4m3)" in err
    assert main(["gemm", "--dtype", "bf61", "--m", "4", "--k", "4", "--n", "4"]) == 2          # kernel --dtype
    err = capsys.readouterr().err
    assert "unknown dtype 'bf61'; did you mean bf16?" in err and "bfloat16 (bf16)" in err


# -- every option has help, its default and its choices ------------------------------------------------------

def _help_offenders() -> set:
    """(subcommand, option) of every option whose --help text is empty, omits a default it has, or
    hides its choices behind a metavar without naming the first and last."""
    sub = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    bad = set()
    for name, parser in sub.choices.items():
        fmt = parser._get_formatter()
        for action in parser._actions:
            if isinstance(action, argparse._HelpAction):
                continue
            text = fmt._get_help_string(action) if action.help else ""
            hidden = action.choices is not None and action.metavar is not None and \
                not all(str(c) in text for c in (list(action.choices)[0], list(action.choices)[-1]))
            if not text.strip() or (help_needs_default(action) and "default" not in text) or hidden:
                bad.add((name, (action.option_strings or [action.dest])[-1]))
    return bad


def test_every_option_of_every_subcommand_has_help():
    assert _help_offenders() == set()


def test_help_shows_defaults_and_no_none(capsys):
    for cmd, want in (("cosim", "PE rows of the engine (default: 8)"), ("check-waves", "(default: 8)"),
                      ("testbench", "(default: build/testbench)"), ("coverage", "(default: every one)")):
        with pytest.raises(SystemExit):
            main([cmd, "--help"])
        out = " ".join(capsys.readouterr().out.split())
        assert want in out and "(default: None)" not in out and "(default: False)" not in out, cmd


# -- cosim's C++ optimisation follows the engine's size ------------------------------------------------------

class _Stop(Exception):
    pass


def test_cosim_opt_auto_follows_the_engine_size(tmp_path, monkeypatch):
    """--opt auto (the default): -O0 below 64 x 64 PEs, -O1 from there; $TENSORE_OPT when set (None:
    toolchain.cxx_opt reads it); an explicit --opt over both."""
    from tensore.cosim import hdl
    seen = []

    def fake_run(prog, **kw):
        seen.append(kw["opt"])
        raise _Stop
    monkeypatch.setattr(hdl, "run", fake_run)
    p = programs.accumulate_group("mariana")
    (tmp_path / "acc.s").write_text(p.text)
    np.savez(tmp_path / "in.npz", sbuf=p.sbuf)
    base = ["cosim", str(tmp_path / "acc.s"), "--gen", "mariana", "--sbuf", str(tmp_path / "in.npz")]
    monkeypatch.delenv("TENSORE_OPT", raising=False)
    for extra, want in ((["--rows", "8"], "-O0"), (["--rows", "32", "--cols", "64"], "-O0"), (["--rows", "64"], "-O1"),
                        (["--rows", "128"], "-O1"), (["--rows", "128", "--opt", "0"], "-O0")):
        with pytest.raises(_Stop):
            main(base + extra)
        assert seen.pop() == want, extra
    monkeypatch.setenv("TENSORE_OPT", "-O2")
    for extra, want in ((["--rows", "128"], None), (["--rows", "8", "--opt", "3"], "-O3")):
        with pytest.raises(_Stop):
            main(base + extra)
        assert seen.pop() == want, extra
    with pytest.raises(SystemExit, match="2"):
        main(base + ["--opt", "fast"])


# -- regs writes under its output directory --------------------------------------------------------------

def test_regs_writes_under_the_working_directory(tmp_path, monkeypatch, capsys):
    """From another directory: build/regs there, paths printed as written, the package untouched."""
    from tensore import regs
    committed = [regs.ROOT / p for p in regs.OUTPUTS.values()]
    before = [p.stat().st_mtime_ns for p in committed]
    monkeypatch.chdir(tmp_path)
    assert main(["regs"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out == [f"wrote {Path('build/regs') / p}" for p in regs.OUTPUTS.values()]
    assert [p.stat().st_mtime_ns for p in committed] == before
    for p in regs.OUTPUTS.values():
        assert (tmp_path / "build/regs" / p).read_text() == (regs.ROOT / p).read_text()
    assert main(["regs", "-o", str(tmp_path / "elsewhere")]) == 0
    assert capsys.readouterr().out.startswith(f"wrote {tmp_path / 'elsewhere' / 'rtl/regs/arr_seq.h'}\n")


def test_regs_in_tree_only_in_a_checkout(tmp_path, monkeypatch, capsys):
    """--in-tree rewrites the checkout's artefacts (here a stand-in checkout); an installed package
    has none to rewrite: exit 2."""
    from tensore import regs
    fake = tmp_path / "checkout"
    (fake / "rtl/regs").mkdir(parents=True)
    (fake / "docs").mkdir()
    (fake / "rtl/regs/arr_seq.rdl").write_text("")
    monkeypatch.setattr(regs, "ROOT", fake)
    assert main(["regs", "--in-tree"]) == 0
    assert capsys.readouterr().out.splitlines() == [f"wrote {fake / p}" for p in regs.OUTPUTS.values()]
    monkeypatch.setattr(regs, "ROOT", tmp_path / "site-packages")
    assert main(["regs", "--in-tree"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "installed package" in err and "-o DIR" in err
