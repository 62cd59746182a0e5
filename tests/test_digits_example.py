"""docs/digits.md runs as it says: docs/examples/digits/digits.py classifies scikit-learn's digits with
its two matmuls on the golden engine (the page's printed output, so the page cannot drift), on the RTL
of a small engine bit for bit as the golden engine, and `tensore gemm --quantise` on its saved
operands gives the script's layer-1 product."""
import importlib.util
import re
import shlex
from pathlib import Path

import numpy as np
import pytest

from tensore.cosim import toolchain

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "docs" / "examples" / "digits" / "digits.py"
PAGE = ROOT / "docs" / "digits.md"
FENCE = re.compile(r"^```([^\n]*)\n(.*?)^```$", re.S | re.M)
SECONDS = re.compile(r"\b\d+\.\d+ s\b")          # run times: the only numbers that vary between runs


def digits():
    spec = importlib.util.spec_from_file_location("digits_example", SCRIPT)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def page_runs() -> list:
    """(commands, printed output) of each `sh` block of the page followed by a `text` block."""
    blocks = [(m.group(1).strip(), m.group(2)) for m in FENCE.finditer(PAGE.read_text())]
    return [([ln for ln in text.splitlines() if ln.strip()], out) for (info, text), (info2, out)
            in zip(blocks, blocks[1:]) if info == "sh" and info2 == "text"]


def script_argv(command: str) -> list:
    words = shlex.split(command)
    assert words[:2] == ["python", "docs/examples/digits/digits.py"], command
    return words[2:]


def page_run(flag: str) -> tuple:
    """The page's (argv, output lines) of its script command with `flag`."""
    runs = [(cmds, out) for cmds, out in page_runs() if len(cmds) == 1 and flag in cmds[0]]
    assert len(runs) == 1, flag
    return script_argv(runs[0][0][0]), runs[0][1].splitlines()


def numbers(out: str) -> dict:
    acc = re.search(r"accuracy: tensore ([\d.]+)%, numpy float32 ([\d.]+)% \((\d+) images\)", out)
    same = re.search(r"same class on (\d+)/(\d+) images", out)
    err = re.search(r"hidden ([\d.]+), logits ([\d.]+)", out)
    return dict(acc_t=float(acc[1]) / 100, acc_n=float(acc[2]) / 100, images=int(acc[3]), agree=int(same[1]),
                hidden_err=float(err[1]), logit_err=float(err[2]))


def test_golden_run_is_the_page(tmp_path, monkeypatch, capsys):
    """The page's golden command (all 450 test images, 128 x 128): its output line for line, accuracy
    above 90% for both, the same class as numpy float32 on every image, and the picture (small)."""
    argv, want = page_run("--plot")
    (tmp_path / "docs").mkdir()
    monkeypatch.chdir(tmp_path)
    assert digits().main(argv) == 0
    out = capsys.readouterr().out
    assert out.splitlines() == want
    n = numbers(out)
    assert n["images"] == 450 and n["acc_t"] > 0.9 and n["acc_n"] > 0.9 and n["agree"] == 450
    assert n["hidden_err"] < 0.05 and n["logit_err"] < 0.5
    png = tmp_path / argv[argv.index("--plot") + 1]
    assert png.read_bytes()[:4] == b"\x89PNG" and png.stat().st_size < 100_000
    assert (ROOT / "docs" / "digits.png").stat().st_size < 100_000                  # the committed one


def test_rtl_command_golden_part_is_the_page(capsys):
    """The page's --rtl command without the RTL: its golden lines (16 x 16) as the page shows them."""
    argv, want = page_run("--rtl")
    assert digits().main([a for a in argv if a != "--rtl"]) == 0
    out = capsys.readouterr().out.splitlines()
    rtl = next(i for i, line in enumerate(want) if line.startswith("tensore engine RTL"))
    assert out == want[:rtl]
    assert "RTL logits bit-identical to the golden engine's: yes (4500 values); same class on 450/450" in want


def test_tensore_gemm_on_saved_operands(tmp_path, monkeypatch, capsys):
    """The page's `--save` then `tensore gemm --quantise`: the output as the page shows it (run times
    aside), and its C bit for bit the script's layer-1 product (the same kernel on the same operands)."""
    from tensore.cli import main as tensore
    from tensore.kernels import gemm as G
    (cmds, want), = [(c, o) for c, o in page_runs() if len(c) == 2]
    monkeypatch.chdir(tmp_path)
    assert digits().main(script_argv(cmds[0])) == 0
    capsys.readouterr()
    words = shlex.split(cmds[1])
    assert words[0] == "tensore" and tensore(words[1:]) == 0
    out = capsys.readouterr().out
    assert SECONDS.sub("t s", out) == SECONDS.sub("t s", want)
    x, w1 = np.load("build/digits/x.npy"), np.load("build/digits/w1.npy")
    assert x.shape == (450, 64) and w1.shape == (64, 32) and x.dtype == w1.dtype == np.float32
    ours = G.run(G.gemm(x, w1, dtype="bf16", gen="mariana", rows=16, cols=16), trace="aggregate")[0]
    assert np.array_equal(np.load("build/digits/layer1.npz")["c_bits"], ours.view(np.uint32))


@pytest.fixture
def library_build_opt(monkeypatch):
    """The C++ optimisation of the library's MARIANA 8 x 8 build ($TENSORE_OPT, else -O1): no second build."""
    monkeypatch.setenv(toolchain.OPT_ENV, toolchain.cxx_opt(None))


@pytest.mark.slow
@pytest.mark.verilator
@pytest.mark.xdist_group("mariana")
def test_rtl_is_the_golden_engine_bit_for_bit(capsys, library_build_opt):
    """24 images on the RTL of an 8 x 8 MARIANA engine, built as the program library's (8 elements per
    PE): both layers in lockstep, the logits bit-identical to the golden engine's."""
    mod = digits()
    mod.PACK = 8
    assert mod.main(["--images", "24", "--rows", "8", "--rtl"]) == 0
    out = capsys.readouterr().out
    assert out.count("lockstep vs golden engine: OK") == 2, out
    assert "RTL logits bit-identical to the golden engine's: yes (240 values); same class on 24/24" in out, out
    n = numbers(out)
    assert n["images"] == 24 and n["agree"] == 24 and n["acc_t"] > 0.85


@pytest.mark.slow
@pytest.mark.cosim
def test_rtl_command_is_the_page(capsys):
    """The page's --rtl command as it stands (a 16 x 16 build of its own): its whole output."""
    argv, want = page_run("--rtl")
    assert digits().main(argv) == 0
    assert capsys.readouterr().out.splitlines() == want
