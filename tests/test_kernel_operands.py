"""`tensore gemm / conv` on the user's own operands (D-T88) and their result files and RTL runs
(D-T89): --a/--b and --x/--w give the program the Python API makes of the same arrays, sizes from
the shapes; inexact, integer, non-finite or misshapen operands are a one-line exit 2; --sbuf-out
and --asm rerun with `tensore run` to the same -o file; --rtl on Verilator writes the RTL's PSUM
writes and C read from them; KernelProgram.read from tampered RTL writes; the simulation progress
(cosim/progress.py, the compiled harness's "progress" lines) and run_summary's -v.

The two tests that simulate share one Verilator build: the MARIANA 8 x 8 engine of 8 elements per
PE that tests/test_cosim_hdl.py's library run builds (an MX oct_row GEMM needs that pack), in the
same xdist group; everything else runs the golden engine only."""
import re
import time

import ml_dtypes
import numpy as np
import pytest

from tensore.cli import main, run_summary
from tensore.cosim import harness, progress, toolchain
from tensore.kernels import gemm as G
from tensore.kernels.conv import conv2d
from tensore.outputs import psum_write_rows

ENGINE = ["--gen", "mariana", "--rows", "8", "--cols", "8"]
API = dict(gen="mariana", rows=8, cols=8)
RUN_KEYS = ("psum", "sr_state", "psum_writes")          # what `tensore run -o` writes
SEED = 20261204


def _save(path, arr) -> str:
    np.save(path, arr)
    return str(path)


def _bf16_pair(seed=SEED, m=12, k=20, n=10):
    rng = np.random.default_rng(seed)
    return (rng.standard_normal((m, k)).astype(ml_dtypes.bfloat16),
            rng.standard_normal((k, n)).astype(ml_dtypes.bfloat16))


def _api_c(A, B, **kw) -> np.ndarray:
    """C of the same GEMM made through the Python API (tensore.kernels.gemm.gemm)."""
    C, _, _ = G.run(G.gemm(np.asarray(A, np.float64), np.asarray(B, np.float64), **API, **kw), trace="aggregate")
    return C


def _one_line_error(capsys, argv, *needles):
    """`argv` exits 2 with one line on stderr, no traceback, holding every needle."""
    assert main(argv) == 2, argv
    out, err = capsys.readouterr()
    assert err.count("\n") == 1 and "Traceback" not in err, err
    for needle in needles:
        assert needle in err, (needle, err)
    return err


def _rows(a) -> set:
    return {tuple(int(v) for v in r) for r in np.asarray(a).reshape(-1, 4)}


# -- gemm --a --b -------------------------------------------------------------------------------------------

@pytest.mark.parametrize("kind", ["bfloat16", "float32", "npz"])
def test_own_bf16_operands_are_the_python_api_bit_for_bit(capsys, tmp_path, kind):
    """ml_dtypes bfloat16 arrays (raw void elements in the file, their bits with --raw-bits), float32
    arrays of bf16 values and a .npz of one array (B as FILE.npz:NAME) give C equal bit for bit to
    gemm() on the same values; sizes come from the shapes (no --m / --k / --n)."""
    A, B = _bf16_pair(m=13, k=21, n=11)
    extra = []
    if kind == "bfloat16":
        a, b = _save(tmp_path / "A.npy", A), _save(tmp_path / "B.npy", B)
        extra = ["--raw-bits"]
    elif kind == "float32":
        a, b = _save(tmp_path / "A.npy", A.astype(np.float32)), _save(tmp_path / "B.npy", B.astype(np.float32))
    else:
        np.savez(tmp_path / "ops.npz", a=A.astype(np.float32), b=B.astype(np.float32))
        np.savez(tmp_path / "a.npz", A.astype(np.float32))
        a, b = str(tmp_path / "a.npz"), f"{tmp_path / 'ops.npz'}:b"
    rc = main(["gemm", "--a", a, "--b", b, *ENGINE, *extra, "-o", str(tmp_path / "out.npz")])
    out = capsys.readouterr().out
    assert rc == 0, out
    assert "gemm: 13x21x11 bfloat16" in out and "every value exact in bfloat16" in out and "bit-exact" in out
    res = np.load(tmp_path / "out.npz")
    want = _api_c(A, B)
    assert res["c"].shape == (13, 11) and res["c_bits"].dtype == np.uint32
    assert np.array_equal(res["c_bits"], want.view(np.uint32))
    assert np.array_equal(res["c"].view(np.uint32), want.view(np.uint32))


def test_fp8_operands_are_the_python_api_bit_for_bit(capsys, tmp_path):
    """--dtype fp8_e4m3 --raw-bits on MARIANA (OCP E4M3FN) from np.save of ml_dtypes float8_e4m3fn
    arrays (also as FP8 double row)."""
    rng = np.random.default_rng(SEED + 1)
    A = rng.standard_normal((12, 20)).astype(ml_dtypes.float8_e4m3fn)
    B = rng.standard_normal((20, 10)).astype(ml_dtypes.float8_e4m3fn)
    a, b = _save(tmp_path / "A.npy", A), _save(tmp_path / "B.npy", B)
    for extra, kw in (([], {}), (["--double-row"], {"double_row": True})):
        rc = main(["gemm", "--a", a, "--b", b, "--dtype", "fp8_e4m3", "--raw-bits", *ENGINE, *extra,
                   "-o", str(tmp_path / "o.npz")])
        out = capsys.readouterr().out
        assert rc == 0 and "every value exact in fp8_exp4" in out, out
        want = _api_c(A, B, dtype="fp8_e4m3", **kw)
        assert np.array_equal(np.load(tmp_path / "o.npz")["c_bits"], want.view(np.uint32)), extra


def test_explicit_size_must_agree_with_the_operands(capsys, tmp_path):
    """--m that disagrees with A's rows: exit 2, one line naming both; one that agrees runs."""
    A, B = _bf16_pair()
    a, b = _save(tmp_path / "A.npy", A.astype(np.float32)), _save(tmp_path / "B.npy", B.astype(np.float32))
    _one_line_error(capsys, ["gemm", "--a", a, "--b", b, "--m", "13", *ENGINE], "--m 13 disagrees", "m = 12")
    _one_line_error(capsys, ["gemm", "--a", a, "--b", b, "--n", "9", *ENGINE], "--n 9 disagrees")
    assert main(["gemm", "--a", a, "--b", b, "--m", "12", "--k", "20", *ENGINE]) == 0


def test_inexact_values_are_refused_naming_quantise(capsys, tmp_path):
    """float64 N(0, 1) values are not bf16 values: exit 2, one line that names --quantise."""
    rng = np.random.default_rng(SEED)
    a = _save(tmp_path / "A.npy", rng.standard_normal((12, 20)))
    _, B = _bf16_pair()
    b = _save(tmp_path / "B.npy", B.astype(np.float32))
    _one_line_error(capsys, ["gemm", "--a", a, "--b", b, *ENGINE], "A.npy: operand A", "not bf16 values", "--quantise")


def test_quantise_rounds_and_says_how_many_values_changed(capsys, tmp_path):
    """--quantise: runs, C is gemm() of the same float64 arrays (which rounds them RNE), and the
    operands line counts the values rounding changed (B, already bf16, none)."""
    rng = np.random.default_rng(SEED)
    A = rng.standard_normal((12, 20))
    A[0, :5] = [0.5, 1.0, -2.0, 0.0, 0.375]             # five values bf16 holds
    _, B = _bf16_pair()
    a, b = _save(tmp_path / "A.npy", A), _save(tmp_path / "B.npy", B.astype(np.float64))
    changed = int((A.astype(ml_dtypes.bfloat16).astype(np.float64) != A).sum())
    assert changed == 240 - 5
    assert main(["gemm", "--a", a, "--b", b, "--quantise", *ENGINE, "-o", str(tmp_path / "o.npz")]) == 0
    out = capsys.readouterr().out
    assert f"--quantise rounded to bfloat16: A {changed} of 240, B 0 of 200 values changed" in out, out
    assert np.array_equal(np.load(tmp_path / "o.npz")["c_bits"], _api_c(A, B).view(np.uint32))


def _bad_operands(tmp_path) -> dict:
    raw, B = _bf16_pair()
    f32 = raw.astype(np.float32)
    nan = f32.copy()
    nan[1, 2] = np.nan
    inf = f32.copy()
    inf[0, 0] = np.inf
    B = B.astype(np.float32)
    files = {"A": f32, "B": B, "raw": raw, "int": np.ones((12, 20), np.int32), "nan": nan, "inf": inf,
             "rank3": np.ones((2, 12, 20), np.float32), "short": B[:15], "empty": np.zeros((0, 20), np.float32)}
    paths = {k: _save(tmp_path / f"{k}.npy", v) for k, v in files.items()}
    (tmp_path / "text.npy").write_text("not numpy\n")
    np.savez(tmp_path / "two.npz", a=f32, b=f32)
    paths |= {"text": str(tmp_path / "text.npy"), "two": str(tmp_path / "two.npz")}
    return paths


@pytest.mark.parametrize("case,args,needles", [
    ("integers", ["--a", "{int}", "--b", "{B}"], ["operand A has int32 elements (integers)"]),
    ("nan", ["--a", "{nan}", "--b", "{B}"], ["NaN / Inf", "at [1, 2]"]),
    ("inf", ["--a", "{inf}", "--b", "{B}"], ["NaN / Inf", "at [0, 0]"]),
    ("rank 3", ["--a", "{rank3}", "--b", "{B}"], ["rank 3", "must have rank 2"]),
    ("empty", ["--a", "{empty}", "--b", "{B}"], ["is empty"]),
    ("only --a", ["--a", "{A}"], ["--a and --b: both operands from files, or neither"]),
    ("only --b", ["--b", "{B}"], ["--a and --b: both operands from files, or neither"]),
    ("inner mismatch", ["--a", "{A}", "--b", "{short}"], ["do not agree", "[12, 20]", "[15, 10]"]),
    ("raw bf16", ["--a", "{raw}", "--b", "{B}"], ["raw 2-byte elements", "--raw-bits", "BFLOAT16", "float32"]),
    ("raw bf16 as fp16", ["--a", "{raw}", "--b", "{B}", "--dtype", "fp16"], ["raw 2-byte elements", "--raw-bits"]),
    ("raw bf16 as fp8", ["--a", "{raw}", "--b", "{B}", "--dtype", "fp8_e4m3", "--raw-bits"],
     ["raw 2-byte elements", "would be 1-byte"]),
    ("not numpy", ["--a", "{text}", "--b", "{B}"], ["not a numpy .npy or .npz file"]),
    ("npz of two", ["--a", "{two}", "--b", "{B}"], ["more than one array", ":NAME"]),
    ("missing", ["--a", "{A}.gone", "--b", "{B}"], ["A.npy.gone: no such file"]),
])
def test_bad_operands_are_one_line_exit_2(capsys, tmp_path, case, args, needles):
    paths = _bad_operands(tmp_path)
    _one_line_error(capsys, ["gemm", *(a.format(**paths) for a in args), *ENGINE], *needles)


# -- raw void files and ml_dtypes arrays: never bits of another format --------------------------------------

def test_raw_bf16_file_is_refused_unless_raw_bits(capsys, tmp_path):
    """bf16 values saved with np.save (raw <V2 elements): refused, one line naming --raw-bits, as fp16
    (whose bits they are not; one of them would be an fp16 NaN, not the data's fault) and as bf16
    alike; `--raw-bits --dtype bf16` gives C bit for bit as the same values saved as float32."""
    A, B = _bf16_pair()
    A[3, 4] = ml_dtypes.bfloat16(2.0 ** 125)          # bits 0x7E00: an fp16 NaN
    assert A.view(np.uint16)[3, 4] == 0x7E00
    a, b = _save(tmp_path / "A.npy", A), _save(tmp_path / "B.npy", B)
    assert np.load(a).dtype == np.dtype("V2")
    err = _one_line_error(capsys, ["gemm", "--a", a, "--b", b, "--dtype", "fp16", *ENGINE],
                          "A.npy: operand A", "raw 2-byte elements", "--raw-bits", "FP16", "float32")
    assert "NaN" not in err, err
    _one_line_error(capsys, ["gemm", "--a", a, "--b", b, "--dtype", "bf16", *ENGINE], "--raw-bits", "BFLOAT16")
    A[3, 4] = 0.5
    a = _save(tmp_path / "A.npy", A)
    a32, b32 = _save(tmp_path / "A32.npy", A.astype(np.float32)), _save(tmp_path / "B32.npy", B.astype(np.float32))
    assert main(["gemm", "--a", a, "--b", b, "--dtype", "bf16", "--raw-bits", *ENGINE, "-o", str(tmp_path / "r.npz")]) == 0
    assert main(["gemm", "--a", a32, "--b", b32, "--dtype", "bf16", *ENGINE, "-o", str(tmp_path / "v.npz")]) == 0
    capsys.readouterr()
    raw, val = np.load(tmp_path / "r.npz")["c_bits"], np.load(tmp_path / "v.npz")["c_bits"]
    assert np.array_equal(raw, val)
    want = A.astype(np.float64) @ B.astype(np.float64)
    assert np.allclose(raw.view(np.float32), want, rtol=1e-5, atol=1e-5)


def test_fp8_e4m3fn_file_given_as_e5m2_is_never_its_bits(capsys, tmp_path):
    """np.save of an ml_dtypes float8_e4m3fn array with --dtype fp8_e5m2 (same width, other format):
    refused, one line naming --raw-bits; the same values as float32 are taken by value: refused
    naming --quantise where e5m2 lacks one, rounded by value with --quantise (gemm() of the values)."""
    rng = np.random.default_rng(SEED + 2)
    A = rng.standard_normal((12, 20)).astype(ml_dtypes.float8_e4m3fn)
    B = rng.standard_normal((20, 10)).astype(ml_dtypes.float8_e4m3fn)
    a, b = _save(tmp_path / "A.npy", A), _save(tmp_path / "B.npy", B)
    for dtype in ("fp8_e5m2", "e5m2"):
        _one_line_error(capsys, ["gemm", "--a", a, "--b", b, "--dtype", dtype, *ENGINE],
                        "raw 1-byte elements", "--raw-bits", "FP8_EXP5")
    a32, b32 = _save(tmp_path / "A32.npy", A.astype(np.float32)), _save(tmp_path / "B32.npy", B.astype(np.float32))
    _one_line_error(capsys, ["gemm", "--a", a32, "--b", b32, "--dtype", "fp8_e5m2", *ENGINE],
                    "not e5m2 values", "--quantise")
    assert main(["gemm", "--a", a32, "--b", b32, "--dtype", "fp8_e5m2", "--quantise", *ENGINE,
                 "-o", str(tmp_path / "o.npz")]) == 0
    capsys.readouterr()
    want = _api_c(A.astype(np.float64), B.astype(np.float64), dtype="fp8_e5m2")
    assert np.array_equal(np.load(tmp_path / "o.npz")["c_bits"], want.view(np.uint32))


_VALUES = [0.0, 1.0, -2.0, 0.5, 1.5, -0.25, 3.0, 0.75]          # a value of every format below
_ML_TYPES = [ml_dtypes.bfloat16, np.float16, ml_dtypes.float8_e4m3fn, ml_dtypes.float8_e4m3,
             ml_dtypes.float8_e5m2, ml_dtypes.float8_e3m4]
_LACKS = {"bf16": np.float16(1 + 2 ** -10), "fp16": ml_dtypes.bfloat16(2 ** -30),   # a value of another
         "fp8": ml_dtypes.bfloat16(1 + 2 ** -7)}                                       # format, not of dtype


@pytest.mark.parametrize("gen", ["cayman", "mariana"])
@pytest.mark.parametrize("dtype", ["bf16", "fp16", "fp8_e4m3", "fp8_e5m2", "fp8_e3m4"])
def test_codes_of_takes_other_float_formats_by_value(gen, dtype):
    """dtypes.codes_of (what an exact operand goes through) on an array of another float format
    (numpy float16, ml_dtypes bfloat16 / float8_*) gives the codes of its values, never its bits: the
    values decode back unchanged; a value the format lacks is refused. FP8_EXP4 is IEEE-style E4M3 on
    CAYMAN (256 is Inf there by the bits of float8_e4m3fn) and OCP E4M3FN on MARIANA."""
    from tensore.model import dtypes as dt
    for t in _ML_TYPES:
        x = np.array(_VALUES, t)
        codes = dt.codes_of(x, dtype, gen)
        assert np.array_equal(dt.to_fp32(codes, dtype, gen), np.array(_VALUES, np.float32)), (t, dtype, gen)
    big = np.array([256.0], ml_dtypes.float8_e4m3fn)                   # bits 0x78: E4M3's +Inf
    if dtype == "fp8_e4m3" and gen == "cayman":
        with pytest.raises(ValueError, match="not e4m3 values"):
            dt.codes_of(big, dtype, gen)
    elif dtype != "fp8_e3m4":
        assert dt.to_fp32(dt.codes_of(big, dtype, gen), dtype, gen)[0] == 256.0
    with pytest.raises(ValueError, match="values are not"):
        dt.codes_of(np.array([_LACKS.get(dtype, _LACKS["fp8"])]), dtype, gen)


# -- conv --x --w -------------------------------------------------------------------------------------------

CONV = dict(batch=1, cin=8, height=5, width=6, cout=4, kh=3, kw=3)


def _conv_shapes(layout):
    n, c, h, w = CONV["batch"], CONV["cin"], CONV["height"], CONV["width"]
    return ((n, c, h, w) if layout == "nchw" else (n, h, w, c)), (CONV["cout"], c, CONV["kh"], CONV["kw"])


@pytest.mark.parametrize("layout", ["nchw", "nhwc"])
def test_conv_own_operands_are_the_random_paths_program(capsys, tmp_path, layout):
    """The arrays the random path draws (--seed), given as --x / --w files with --quantise: the same
    program text, SBUF image and results as the random run, sizes from the shapes."""
    x_shape, w_shape = _conv_shapes(layout)
    rng = np.random.default_rng(7)                   # the random path's draws: X, then W
    X, W = rng.standard_normal(x_shape), rng.standard_normal(w_shape)
    x, w = _save(tmp_path / "X.npy", X), _save(tmp_path / "W.npy", W)
    common = [*ENGINE, "--layout", layout, "--stride", "2"]
    sizes = [t for k, v in CONV.items() for t in (f"--{k}", str(v))]
    assert main(["conv", *sizes, "--seed", "7", *common, "--asm", str(tmp_path / "r.s"),
                 "--sbuf-out", str(tmp_path / "r.npz"), "-o", str(tmp_path / "r_out.npz")]) == 0
    capsys.readouterr()
    assert main(["conv", "--x", x, "--w", w, "--quantise", *common, "--asm", str(tmp_path / "o.s"),
                 "--sbuf-out", str(tmp_path / "o.npz"), "-o", str(tmp_path / "o_out.npz")]) == 0
    assert "--quantise rounded to bfloat16" in capsys.readouterr().out
    assert (tmp_path / "o.s").read_text() == (tmp_path / "r.s").read_text()
    assert np.array_equal(np.load(tmp_path / "o.npz")["sbuf"], np.load(tmp_path / "r.npz")["sbuf"])
    own, rnd = np.load(tmp_path / "o_out.npz"), np.load(tmp_path / "r_out.npz")
    assert set(own.files) == set(rnd.files) >= {*RUN_KEYS, "c", "c_bits", "y"}
    for k in own.files:
        assert np.array_equal(own[k], rnd[k], equal_nan=True), k


@pytest.mark.parametrize("layout", ["nchw", "nhwc"])
def test_conv_exact_operands_are_conv2d(capsys, tmp_path, layout):
    """Exact bf16 X and W (np.save of ml_dtypes arrays): refused without --raw-bits; with it y is
    conv2d()'s image of the same arrays, in the layout."""
    x_shape, w_shape = _conv_shapes(layout)
    rng = np.random.default_rng(SEED)
    X = rng.standard_normal(x_shape).astype(ml_dtypes.bfloat16)
    W = rng.standard_normal(w_shape).astype(ml_dtypes.bfloat16)
    x, w = _save(tmp_path / "X.npy", X), _save(tmp_path / "W.npy", W)
    _one_line_error(capsys, ["conv", "--x", x, "--w", w, *ENGINE, "--layout", layout], "X.npy: operand X", "--raw-bits")
    rc = main(["conv", "--x", x, "--w", w, *ENGINE, "--raw-bits", "--layout", layout, "--pad", "1",
               "-o", str(tmp_path / "o.npz")])
    assert rc == 0 and "every value exact in bfloat16" in capsys.readouterr().out
    prog = conv2d(X.astype(np.float64), W.astype(np.float64), pad=1, layout=layout, **API)
    C, _, _ = G.run(prog, trace="aggregate")
    y = np.load(tmp_path / "o.npz")["y"]
    assert y.shape == prog.to_image(C).shape and y.shape[0] == 1
    assert y.shape[3 if layout == "nhwc" else 1] == CONV["cout"]
    assert np.array_equal(y.view(np.uint32), prog.to_image(C).view(np.uint32))


@pytest.mark.parametrize("layout", ["nchw", "nhwc"])
def test_conv_channel_mismatch_is_one_line_exit_2(capsys, tmp_path, layout):
    x_shape, _ = _conv_shapes(layout)
    x = _save(tmp_path / "X.npy", np.ones(x_shape, np.float32))
    w = _save(tmp_path / "W.npy", np.ones((4, 3, 3, 3), np.float32))      # C_in 3, X has 8
    _one_line_error(capsys, ["conv", "--x", x, "--w", w, "--layout", layout, *ENGINE],
                    "has 8 input channels", "has 3")
    _one_line_error(capsys, ["conv", "--x", x, *ENGINE], "--x and --w")
    _one_line_error(capsys, ["conv", "--x", x, "--w", w, "--cin", "3", "--layout", layout, *ENGINE], "has 3")


# -- --asm + --sbuf-out rerun with `tensore run`, the same -o layout ---------------------------------------

@pytest.mark.parametrize("image,extra", [("s.npz", []), ("s.npy", ["--out-dtype", "bf16", "--rounding", "sr"])])
def test_sbuf_out_reruns_with_run_to_the_same_results(capsys, tmp_path, image, extra):
    """gemm --asm --sbuf-out -o, then `tensore run PROG.s --sbuf FILE -o`: the same psum, sr_state
    and psum_writes (dtypes, shapes, values); the printed rerun command names the files."""
    A, B = _bf16_pair(m=30, k=20, n=20)
    prog, sbuf = tmp_path / "p.s", tmp_path / image
    assert main(["gemm", "--a", _save(tmp_path / "A.npy", A), "--b", _save(tmp_path / "B.npy", B), "--raw-bits",
                 *ENGINE, *extra,
                 "--asm", str(prog), "--sbuf-out", str(sbuf), "-o", str(tmp_path / "g.npz")]) == 0
    out = capsys.readouterr().out
    assert f"rerun: tensore cosim {prog} --gen mariana --rows 8 --cols 8 --sbuf {sbuf}" in out, out
    assert main(["run", str(prog), *ENGINE, "--sbuf", str(sbuf), "-o", str(tmp_path / "run.npz")]) == 0
    capsys.readouterr()
    g, r = np.load(tmp_path / "g.npz"), np.load(tmp_path / "run.npz")
    assert set(r.files) == set(RUN_KEYS) and set(RUN_KEYS) <= set(g.files)
    assert {"c", "c_bits"} <= set(g.files) and "rtl_psum_writes" not in g.files
    for k in RUN_KEYS:
        assert g[k].dtype == r[k].dtype and np.array_equal(g[k], r[k]), k
    assert r["psum_writes"].shape[1] == 4 and len(r["psum_writes"]) > 0
    if extra:                                        # bf16 cells: 16-bit patterns; SR moved the states
        assert g["c_bits"].dtype == np.uint16 and int(g["psum_writes"][:, 3].max()) < 1 << 16
        assert g["sr_state"].any()


# -- KernelProgram.read from the RTL's writes --------------------------------------------------------------

@pytest.mark.parametrize("out_dtype", ["fp32", "bf16"])
def test_read_takes_c_from_the_rtl_writes(out_dtype):
    """read(trace, rtl_writes=rows): the golden rows give C; one final write's bits changed changes
    that cell only (to those bits); the row removed leaves it NaN; the rows' order does not matter."""
    A, B = _bf16_pair(m=20, k=20, n=12)
    prog = G.gemm(A.astype(np.float64), B.astype(np.float64), out_dtype=out_dtype, **API)
    C, trace, _ = G.run(prog, trace="aggregate")
    rows = psum_write_rows(trace)
    bits = lambda c: c.view(np.uint32)              # noqa: E731
    assert np.array_equal(bits(prog.read(trace, rtl_writes=rows)), bits(C))
    assert np.array_equal(bits(prog.read(trace, rtl_writes=rows[::-1].copy())), bits(C))
    i = int(np.argmax(rows[:, 0]))                   # a write of the last matmul: final for its cell
    tampered = rows.copy()
    tampered[i, 3] ^= 1 << 2
    got = prog.read(trace, rtl_writes=tampered)
    diff = np.argwhere(bits(got) != bits(C))
    assert len(diff) == 1, diff
    cell = tuple(diff[0])
    want = np.uint32(tampered[i, 3]) << np.uint32(16 if out_dtype == "bf16" else 0)
    assert bits(got)[cell] == want
    gone = prog.read(trace, rtl_writes=np.delete(rows, i, axis=0))
    assert np.isnan(gone[cell]) and np.isnan(gone).sum() == 1
    assert np.array_equal(bits(np.where(np.isnan(gone), C, gone)), bits(C))
    assert np.isnan(prog.read(trace, rtl_writes=np.zeros((0, 4), np.int64))).all()


# -- progress of a simulation ------------------------------------------------------------------------------

def test_simulation_progress_shows_cycles_and_rate(capfd, monkeypatch):
    """TENSORE_PROGRESS_AFTER=0 and a log: a plain line (not a terminal) with the stage, cycles done of
    the total and cycles/s; a silent log shows nothing, and neither does a run shorter than the
    default 2 s."""
    monkeypatch.setenv(progress.SIM_AFTER_ENV, "0")
    with progress.simulation(print, "gemm on Verilator", 5000) as p:
        assert p.active
        time.sleep(0.05)
        p.update(done=2500)
    err = capfd.readouterr().err
    assert "simulation: gemm on Verilator" in err and "/5,000 cycles" in err and "cycles/s" in err, err
    last = err.strip().splitlines()[-1]
    assert "done, 2,500/5,000 cycles" in last and re.search(r"[\d,]+ cycles/s", last), last
    with progress.simulation(progress.silent, "quiet", 5000) as p:
        p.update(done=10)
    monkeypatch.delenv(progress.SIM_AFTER_ENV)
    with progress.simulation(print, "short", 5000) as p:
        p.update(done=10)
    assert capfd.readouterr().err == ""


_FAKE_HARNESS = """#!/bin/sh
[ -n "$TENSORE_HARNESS_PROGRESS" ] || { echo "asked for no progress" >&2; exit 3; }
echo "progress 0 64 0.25" >&2
echo "progress 1 10" >&2
echo "%Warning: a harness message" >&2
echo "progress x y" >&2
: > "$2"
exit ${FAKE_EXIT:-0}
"""


class _Recorder:
    """progress.simulation's stand-in: records the cycles the harness's lines report."""

    def __init__(self, log, stage, cycles):
        self.stage, self.total, self.done, self.active = stage, cycles, [], log is not progress.silent

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return None

    def update(self, *, done=None, seconds=None, **_):
        self.done.append(done)
        self.seconds = getattr(self, "seconds", []) + [seconds]


def test_harness_progress_lines_are_parsed(tmp_path, monkeypatch):
    """cosim/harness.py _execute: with a log, the harness is asked for progress (its environment) and
    each "progress JOB CYCLES [SECONDS]" line is cycles of all the jobs (job 1 starts after job 0's
    cycles) and the simulation loop's seconds so far; at the end the total over the jobs' loop
    seconds (the summary's measure); other lines are the error text of a failed run, progress lines not."""
    exe = tmp_path / "harness"
    exe.write_text(_FAKE_HARNESS)
    exe.chmod(0o755)
    seen = []
    monkeypatch.setattr(harness, "simulation", lambda *a: seen.append(_Recorder(*a)) or seen[-1])
    monkeypatch.setattr(harness, "_job", lambda lks, **kw: b"")
    parsed = [(None,) * 6 + (1.5,), (None,) * 6 + (0.5,)]     # (..., seconds): each job's loop
    monkeypatch.setattr(harness, "_results", lambda data, lks, **kw: parsed)
    lks = [type("LK", (), {"end": end, "program": type("P", (), {"name": n})})() for n, end in (("a", 100), ("b", 50))]
    assert harness._execute(lks, {"exe": str(exe), "dir": str(tmp_path)}, log=print) == parsed
    assert seen[-1].total == 150 and seen[-1].stage == "a, b on Verilator"
    assert seen[-1].done == [64, 110, 150]           # 0 + 64, 100 + 10, then every cycle at the end
    assert seen[-1].seconds == [0.25, None, 2.0]     # the loop's seconds; an old build's line has none
    monkeypatch.setenv("FAKE_EXIT", "1")
    with pytest.raises(RuntimeError, match="exit 1") as e:
        harness._execute(lks, {"exe": str(exe), "dir": str(tmp_path)}, log=print)
    assert "a harness message" in str(e.value) and "progress 0 64" not in str(e.value)
    assert "progress x y" in str(e.value)            # not a progress line: kept
    assert seen[-1].done[-1] is None                 # a failed run does not claim every cycle


# -- run_summary: a line per executed micro-op with -v or for a short program ---------------------------

def test_run_summary_lists_micro_ops_only_with_v_past_16():
    """A program of more than 16 micro-ops: without -v no per-op lines and "(N micro-ops executed: -v
    lists each)"; with -v a line per op.  A short program lists them either way."""
    A, B = _bf16_pair(m=30, k=20, n=50)
    long_prog = G.gemm(A.astype(np.float64), B.astype(np.float64), **API)
    A, B = _bf16_pair()
    short_prog = G.gemm(A.astype(np.float64), B.astype(np.float64), **API)
    for prog, n in ((long_prog, 42), (short_prog, 12)):
        _, trace, eng = G.run(prog)
        assert len(trace.ops) == n
        quiet, loud = run_summary(eng, trace, verbose=False), run_summary(eng, trace, verbose=True)
        per_op = [f"  #{i} {trace.ops[i].name}: issue " for i in range(n)]
        assert all(line in loud for line in per_op) and "-v lists each" not in loud
        if n > 16:
            assert not any(line in quiet for line in per_op), quiet
            assert f"({n} micro-ops executed: -v lists each)" in quiet
        else:
            assert quiet == loud


# -- the RTL: gemm --rtl and cosim -o on Verilator (one build, shared with tests/test_cosim_hdl.py) ---------

# MX oct_row needs 8 elements per PE: the library's MARIANA 8 x 8 build (tests/test_cosim_hdl.PACK); 30 micro-ops
MX_GEMM = ["--dtype", "fp8_e5m2", "--mx", "oct_row", *ENGINE]


@pytest.fixture
def library_build_opt(monkeypatch):
    """The C++ optimisation the library's build has ($TENSORE_OPT, else -O1): `--opt auto` of an 8 x 8
    engine would otherwise pick -O0, a second build outside `make test`."""
    monkeypatch.setenv(toolchain.OPT_ENV, toolchain.cxx_opt(None))


def _mx_operands(tmp_path):
    rng = np.random.default_rng(SEED)
    return _save(tmp_path / "A.npy", rng.standard_normal((8, 320))), _save(tmp_path / "B.npy", rng.standard_normal((320, 24)))


@pytest.mark.slow
@pytest.mark.verilator
@pytest.mark.xdist_group("mariana")
def test_gemm_rtl_on_verilator_writes_the_rtls_results(capfd, tmp_path, monkeypatch, library_build_opt):
    """gemm --rtl --sim verilator -o: exit 0, lockstep OK; rtl_psum_writes are psum_writes (as a set
    of rows) and C read from them is C bit for bit; with TENSORE_PROGRESS_AFTER=0 the simulation's
    progress (cycles, cycles/s) is on stderr; 30 micro-ops without -v are one count line."""
    monkeypatch.setenv(progress.SIM_AFTER_ENV, "0")
    a, b = _mx_operands(tmp_path)
    out_file = tmp_path / "g.npz"
    rc = main(["gemm", "--a", a, "--b", b, "--quantise", *MX_GEMM, "--rtl", "--sim", "verilator",
               "-o", str(out_file)])
    out, err = capfd.readouterr()
    assert rc == 0, out + err
    assert "lockstep vs golden engine: OK" in out and "RTL on verilator" in out and "Traceback" not in err
    assert "--quantise rounded to MX oct_row" in out
    assert "simulation: gemm on Verilator" in err and "cycles/s" in err, err
    assert "(30 micro-ops executed: -v lists each)" in out and "  #0 ldweights" not in out, out
    res = np.load(out_file)
    assert {*RUN_KEYS, "rtl_psum_writes", "c", "c_bits", "rtl_c", "rtl_c_bits"} <= set(res.files)
    assert res["rtl_psum_writes"].dtype == np.int64 and res["rtl_psum_writes"].shape == res["psum_writes"].shape
    assert _rows(res["rtl_psum_writes"]) == _rows(res["psum_writes"])
    assert np.array_equal(res["rtl_c_bits"], res["c_bits"]) and not np.isnan(res["rtl_c"]).any()


@pytest.mark.slow
@pytest.mark.verilator
@pytest.mark.xdist_group("mariana")
def test_cosim_output_has_the_rtl_writes(capfd, tmp_path, library_build_opt):
    """gemm --asm --sbuf-out -o, then `tensore cosim PROG.s --sbuf FILE -o -v` (the same build):
    its file has gemm's psum, sr_state, psum_writes and rtl_psum_writes of the same rows; -v lists
    every micro-op."""
    a, b = _mx_operands(tmp_path)
    prog, sbuf = tmp_path / "p.s", tmp_path / "s.npz"
    assert main(["gemm", "--a", a, "--b", b, "--quantise", *MX_GEMM, "--asm", str(prog), "--sbuf-out", str(sbuf),
                 "-o", str(tmp_path / "g.npz")]) == 0
    line = next(ln for ln in capfd.readouterr().out.splitlines() if "rerun: tensore cosim" in ln)
    rerun = line.split("rerun: tensore ")[1].split()
    rc = main([*rerun, "-o", str(tmp_path / "c.npz"), "-v"])
    out, err = capfd.readouterr()
    assert rc == 0 and "lockstep vs golden engine: OK" in out, out + err
    assert all(f"  #{i} " in out for i in range(30)) and "-v lists each" not in out
    g, c = np.load(tmp_path / "g.npz"), np.load(tmp_path / "c.npz")
    assert set(c.files) == {*RUN_KEYS, "rtl_psum_writes"}
    for k in RUN_KEYS:
        assert np.array_equal(g[k], c[k]), k
    assert len(c["rtl_psum_writes"]) == len(g["psum_writes"])
    assert _rows(c["rtl_psum_writes"]) == _rows(g["psum_writes"])
