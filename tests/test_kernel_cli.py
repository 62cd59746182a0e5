"""`tensore gemm / conv / plot`: output, exit codes, one-line errors, size checks before any operand
exists, and --help that names every option's default and choices."""
import argparse
import time

import numpy as np
import pytest

from tensore import kernel_cli
from tensore.cli import build_parser, help_needs_default, main
from tensore.model.dtypes import Gen


def test_gemm_prints_estimate_and_numerics(capsys, tmp_path):
    rc = main(["gemm", "--m", "20", "--k", "12", "--n", "10", "--gen", "mariana", "--rows", "8", "--cols", "8",
               "--asm", str(tmp_path / "g.s"), "--plot", str(tmp_path / "g.png")])
    out = capsys.readouterr().out
    assert rc == 0
    assert "PE utilisation" in out and "bit-exact" in out and "picture:" in out
    assert (tmp_path / "g.png").stat().st_size > 10_000
    assert (tmp_path / "g.s").read_text().startswith("ldweights")


@pytest.mark.parametrize("extra", [["--mx", "oct_row", "--dtype", "fp8_e5m2"], ["--sparse", "--dtype", "fp16"]])
def test_gemm_mx_and_sparse(capsys, extra):
    assert main(["gemm", "--m", "9", "--k", "40", "--n", "5", "--gen", "mariana", "--rows", "8", "--cols", "8"]
                + extra) == 0
    out = capsys.readouterr().out
    assert ("MX oct_row" in out or "2:4 sparse" in out) and "bit-exact" in out


def test_conv_and_plot(capsys, tmp_path):
    assert main(["conv", "--gen", "cayman", "--rows", "8", "--cols", "8", "--cin", "8", "--cout", "4",
                 "--height", "5", "--width", "6", "--stride", "2"]) == 0
    assert "(direct)" in capsys.readouterr().out
    assert main(["plot", "timeline", "--gen", "cayman", "--rows", "8", "--cols", "8", "--m", "9", "--k", "9",
                 "--n", "9", "-o", str(tmp_path / "t.png")]) == 0
    assert main(["plot", "sweep", "--gen", "cayman", "--rows", "8", "--cols", "8", "--sizes", "4,8",
                 "--dtypes", "bf16,fp32", "-o", str(tmp_path / "s.png")]) == 0
    assert (tmp_path / "s.png").exists()


@pytest.mark.parametrize("argv,msg", [
    (["gemm", "--m", "0"], "--m must be >= 1"),
    (["gemm", "--dtype", "int8", "--gen", "cayman"], "not a matmul input"),
    (["gemm", "--gen", "cayman", "--out-dtype", "bf16"], "BFLOAT16 from MARIANA"),
    (["gemm", "--dtype", "fp32"], "fp32-mode"),
    (["gemm", "--rows", "6"], "--rows 6"),
    (["conv", "--kh", "40", "--height", "8"], "no output"),
    (["conv", "--method", "direct", "--dtype", "fp8_e4m3", "--double-row", "--gen", "cayman"], "cannot express"),
    (["conv", "--sparse"], "gemm only"),
    (["gemm", "--mx", "quad_row", "--gen", "maverick", "--dtype", "fp8_e4m3"], "MX kernels"),
])
def test_bad_input_is_one_line_exit_2(capsys, argv, msg):
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert msg in err and err.count("\n") == 1 and "Traceback" not in err


def test_unknown_generation_is_a_usage_error(capsys):
    with pytest.raises(SystemExit) as e:
        main(["gemm", "--gen", "nosuch"])
    assert e.value.code == 2 and "invalid choice: 'nosuch'" in capsys.readouterr().err
    assert main(["gemm", "--gen", "MARIANA", "--m", "4", "--k", "4", "--n", "4", "--rows", "4", "--cols", "4"]) == 0


def _no_operands(*_, **__):
    raise AssertionError("operands generated before the size check")


@pytest.mark.parametrize("argv", [["gemm", "--m", "100000", "--k", "1000", "--n", "10"],
                                  ["gemm", "--m", "100000", "--k", "1000", "--n", "10", "--sparse", "--gen", "mariana"],
                                  ["conv", "--batch", "64", "--cin", "64", "--height", "64", "--width", "64",
                                   "--method", "im2col"],
                                  ["plot", "error", "--m", "100000", "--k", "1000", "--n", "10"]])
def test_too_big_is_refused_before_operands_exist(capsys, monkeypatch, argv):
    """The SBUF check runs on the sizes: one line, exit 2, no random operand drawn."""
    monkeypatch.setattr(kernel_cli.np.random, "default_rng", _no_operands)
    t0 = time.perf_counter()
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert time.perf_counter() - t0 < 2
    assert err.count("\n") == 1 and "bytes per SBUF partition" in err and "split the problem" in err


def test_check_size_is_the_layout_gemm_makes():
    from tensore.kernels import gemm as G
    rng = np.random.default_rng(1)
    for kw in ({"gen": "mariana"}, {"gen": "maverick", "cols": 16},
               {"gen": "cayman", "dtype": "fp8_e4m3", "double_row": True},
               {"gen": "mariana", "dtype": "fp8_e5m2", "mx": "oct_row"},
               {"gen": "mariana", "dtype": "fp16", "sparse": True}):
        prog = G.gemm(rng.standard_normal((33, 300)), rng.standard_normal((300, 17)), rows=8, **{"cols": 8, **kw})
        used = G.check_size(33, 300, 17, rows=8, **{"cols": 8, **kw})
        assert (used + 0xFF) & ~0xFF == prog.sbuf.shape[1], kw


def _kernel_parsers():
    sub = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    return {name: sub.choices[name] for name in ("gemm", "conv", "plot")}


def test_every_kernel_option_has_help_with_default_and_choices():
    for name, parser in _kernel_parsers().items():
        fmt = parser._get_formatter()
        for action in parser._actions:
            if isinstance(action, argparse._HelpAction):
                continue
            opt = (name, (action.option_strings or [action.dest])[-1])
            text = fmt._expand_help(action) if action.help else ""
            assert text.strip(), opt
            if help_needs_default(action):
                assert f"default: {action.default}" in text, (opt, text)
            elif action.option_strings and action.nargs != 0:          # a value option without a default
                assert "default" in text, (opt, text)
            if action.choices is not None:
                assert action.metavar is None, opt                      # usage and help show {a,b,...}
        gen = next(a for a in parser._actions if "--gen" in a.option_strings)
        assert gen.choices == [g.name.lower() for g in Gen] and gen.type is str.lower


@pytest.mark.parametrize("cmd", ["gemm", "conv", "plot"])
def test_kernel_help_has_no_none(capsys, cmd):
    with pytest.raises(SystemExit):
        main([cmd, "--help"])
    out = " ".join(capsys.readouterr().out.split())
    assert "(default: None)" not in out and "(default: False)" not in out and "(default: maverick)" in out


@pytest.mark.parametrize("gen,size", [("mariana", "8 x 8"), ("maverick", "8 x 16")])
def test_rows_alone_is_the_same_engine_as_run(capsys, tmp_path, gen, size):
    """--rows R without --cols: R x R (MAVERICK R x 2R) in gemm, conv and plot, as in run / cosim / cost."""
    assert main(["gemm", "--m", "4", "--k", "8", "--n", "4", "--gen", gen, "--rows", "8"]) == 0
    assert f"{gen.upper()} {size}," in capsys.readouterr().out
    assert main(["conv", "--gen", gen, "--rows", "8", "--cin", "4", "--cout", "4", "--height", "3",
                 "--width", "3"]) == 0
    assert f"{gen.upper()} {size}," in capsys.readouterr().out
    from tensore.cli import array_cols
    args = argparse.Namespace(gen=gen, rows=8, cols=None)
    assert kernel_cli.engine_size(args) == (8, array_cols(gen, 8, None)) == (8, int(size.split()[-1]))


def test_random_rows_alone_is_square(tmp_path):
    from tensore import random_cli
    args = build_parser().parse_args(["random", "--gen", "mariana", "--rows", "16"])
    assert random_cli.half_cols(args) == 16
    assert random_cli._full_cols("maverick", 16, None) == 32


def test_counts_are_singular_when_one(capsys):
    """One plural helper (tensore.model.words.plural) for printed counts: 1 matmul, 1 weight load, 1 bank."""
    from tensore.model.words import plural
    assert plural(1, "matmul") == "1 matmul" and plural(0, "bank") == "0 banks"
    assert plural(1234, "cycle", fmt=",") == "1,234 cycles"
    assert main(["gemm", "--m", "4", "--k", "8", "--n", "4", "--gen", "mariana", "--rows", "8", "--cols", "8"]) == 0
    out = capsys.readouterr().out
    assert "1 matmul, 1 weight load;" in out and "PSUM: 1 bank," in out, out
    assert "2 micro-ops" in out and "for the 1 matmul;" in out, out
