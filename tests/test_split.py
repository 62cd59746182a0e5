"""A GEMM as independent programs side by side (tensore/kernels/split.py, D-T94): the split covers
C, its parts are the whole GEMM element for element, `gemm --rtl --jobs 2` runs them at once on one
Verilator build and fails when a merged element differs."""
import argparse

import numpy as np
import pytest

from tensore.cli import main
from tensore.cosim import toolchain
from tensore.kernel_cli import SPLIT_CYCLES, _jobs
from tensore.kernels import gemm as G
from tensore.kernels import split

SEED = 20261204
ENGINE = ["--gen", "mariana", "--rows", "8", "--cols", "8"]
# MX oct_row: 8 elements per PE, the library's MARIANA 8 x 8 build (tests/test_cosim_hdl.py), as
# tests/test_kernel_operands.py's RTL runs
MX_GEMM = ["--dtype", "fp8_e5m2", "--mx", "oct_row", "--quantise", *ENGINE]


def test_split_rows_cover_every_row_once():
    for m in (1, 2, 7, 300):
        for parts in (1, 2, 3, 8):
            ranges = split.split_rows(m, parts)
            assert len(ranges) == min(parts, m)
            assert [r for a, b in ranges for r in range(a, b)] == list(range(m))
            assert max(b - a for a, b in ranges) - min(b - a for a, b in ranges) <= 1


@pytest.mark.parametrize("kw", [dict(dtype="bf16"), dict(dtype="bf16", out_dtype="bf16"),
                                dict(dtype="fp8_e4m3", mx="quad_row"), dict(dtype="fp32", fp32_mode="high")],
                         ids=["bf16", "bf16-out", "mx", "fp32"])
@pytest.mark.parametrize("n,axis", [(20, "n"), (8, "m")])
def test_parts_are_the_whole_gemm(kw, n, axis):
    """Each element of the parts' golden C is the whole GEMM's, bit for bit (RNE): 3 column tiles
    of 8 split along N, one tile along M."""
    rng = np.random.default_rng(SEED)
    A, B = rng.standard_normal((45, 64)), rng.standard_normal((64, n))
    kw = dict(gen="mariana", rows=8, cols=8, **kw)
    parts = split.split_gemm(A, B, 3, **kw)
    if axis == "n":
        assert [p.cols for p in parts] == [(0, 8), (8, 16), (16, 20)] and {p.rows for p in parts} == {(0, 45)}
    else:
        assert [p.rows for p in parts] == [(0, 15), (15, 30), (30, 45)] and {p.cols for p in parts} == {(0, n)}
    whole = G.run(G.gemm(A, B, **kw), trace="aggregate")[0]
    merged = split.merge(parts, [{"c_rtl": G.run(p.prog, trace="aggregate")[0]} for p in parts], whole.shape)
    assert np.array_equal(merged.view(np.uint32), whole.view(np.uint32))


def _args(**kw):
    base = dict(rtl=True, jobs="auto", sim="verilator", dask=None)
    return argparse.Namespace(**(base | kw))


def test_jobs_follow_the_size_and_the_simulator():
    prog = G.gemm(np.ones((4, 8)), np.ones((8, 8)), gen="mariana", rows=8, cols=8)
    prog.split = ()
    assert _jobs(prog, _args(), SPLIT_CYCLES - 1) == 1
    assert _jobs(prog, _args(), SPLIT_CYCLES) == min(2, __import__("os").cpu_count() or 1)
    assert _jobs(prog, _args(sim="icarus"), SPLIT_CYCLES) == 1
    assert _jobs(prog, _args(jobs=3), 10) == 3
    assert _jobs(prog, _args(rtl=False, jobs=3), 10) == 1
    with pytest.raises(ValueError, match="--jobs 2: the split runs on Verilator"):
        _jobs(prog, _args(jobs=2, sim="amaranth"), 10)


def test_a_differing_part_fails_the_run(monkeypatch, capsys):
    """The merged C is compared with the whole GEMM's: one flipped bit in a part's RTL C is exit 1."""
    def fake(parts, **kw):
        res = [{"name": p.prog.name, "mismatch": None, "cycles": 10, "checks": 1, "seconds": 0.1,
                "c_rtl": G.run(p.prog, trace="aggregate")[0]} for p in parts]
        res[1]["c_rtl"].view(np.uint32)[0, 0] ^= 1
        return res, 0.1, argparse.Namespace(label="fake")
    monkeypatch.setattr(split, "run_parts", fake)
    assert main(["gemm", "--m", "8", "--k", "8", "--n", "8", *ENGINE, "--rtl", "--jobs", "2"]) == 1
    assert "DIFFERS from the whole GEMM's golden C" in capsys.readouterr().out


@pytest.fixture
def library_build_opt(monkeypatch):
    """The library build's C++ optimisation ($TENSORE_OPT, else -O1): no second build."""
    monkeypatch.setenv(toolchain.OPT_ENV, toolchain.cxx_opt(None))


def _operands(tmp_path):
    rng = np.random.default_rng(SEED)
    a, b = tmp_path / "A.npy", tmp_path / "B.npy"
    np.save(a, rng.standard_normal((8, 320)))
    np.save(b, rng.standard_normal((320, 24)))
    return str(a), str(b)


@pytest.mark.slow
@pytest.mark.verilator
@pytest.mark.xdist_group("mariana")
def test_gemm_jobs_2_on_verilator(capfd, tmp_path, library_build_opt):
    """gemm --rtl --jobs 2: two programs on the one build, both in lockstep, C merged from the RTL's
    writes bit-exact to the golden C, written to -o."""
    a, b = _operands(tmp_path)
    out_file = tmp_path / "g.npz"
    rc = main(["gemm", "--a", a, "--b", b, *MX_GEMM, "--rtl", "--jobs", "2", "-o", str(out_file)])
    out, err = capfd.readouterr()
    assert rc == 0, out + err
    assert "2 programs (rows 0-8, columns 0-16; rows 0-8, columns 16-24 of C)" in out and out.count("lockstep vs golden engine: OK") == 2, out
    assert "bit-exact to the whole GEMM's golden C" in out and "mariana_8x8_p8" in out, out
    res = np.load(out_file)
    assert np.array_equal(res["rtl_c_bits"], res["c_bits"]) and "rtl_psum_writes" not in res.files


@pytest.mark.slow
@pytest.mark.cosim                     # a LocalCluster: worker processes start and import tensore
@pytest.mark.verilator
@pytest.mark.xdist_group("mariana")
def test_gemm_parts_on_a_dask_cluster(capfd, tmp_path, library_build_opt):
    a, b = _operands(tmp_path)
    rc = main(["gemm", "--a", a, "--b", b, *MX_GEMM, "--rtl", "--dask", "local"])
    out, err = capfd.readouterr()
    assert rc == 0, out + err
    assert "on dask local" in out and out.count("lockstep vs golden engine: OK") == 2, out
