"""GEMM and convolution kernels (D-T50, D-T51) on the golden engine against the independent oracle
(cosim/oracle.py, D-T44), not against kernels/numerics.contract, which shares the model's arithmetic.

Per K slice the oracle's exact integer column chains give the fp32 sums; PSUM accumulates with
oracle.add_f32; BF16 cells round with ml_dtypes (RNE, D-07) or, for SR, with the xorshift32 and
(u + r) >> 16 of SPEC D-08 / D-09 written out here, from D-09's reset states as numbers.  Only the
program's own placement (its tiles, K slices and codes) is read from the kernel."""
import ml_dtypes
import numpy as np
import pytest

from tensore.cosim import oracle
from tensore.kernels import conv as Cv
from tensore.kernels import gemm as G
from tensore.model.dtypes import Dtype

MASK32 = np.uint64(0xFFFFFFFF)


def _xorshift(s):
    """xorshift32 (13, 17, 5), SPEC D-09, on uint64 arrays of 32-bit states."""
    s = s ^ ((s << np.uint64(13)) & MASK32)
    s = s ^ (s >> np.uint64(17))
    return s ^ ((s << np.uint64(5)) & MASK32)


def _reset_state(p, b, j):
    return np.uint64(0x9E3779B9) ^ ((p.astype(np.uint64) << np.uint64(8)) | (b.astype(np.uint64) << np.uint64(1)) | j)


def _rne_bf16(x):
    return np.asarray(x, np.float32).astype(ml_dtypes.bfloat16).view(np.uint16)


def _widen(codes):
    return (np.asarray(codes).astype(np.uint32) << 16).view(np.float32)


def _slice_sums(prog) -> list:
    """[N, M] float32 column sums of each K slice, by the oracle."""
    sums = []
    for k0, k1 in prog.k_slices:
        sums.append(oracle.matmul(prog.b_codes[k0:k1], prog.a_codes[:, k0:k1].T, in_dtype=prog.dtype,
                                  gen=prog.gen))
    return sums


def oracle_result(prog) -> np.ndarray:
    """C [M, N] float32 as the engine must leave it, by the oracle's arithmetic."""
    sums = _slice_sums(prog)
    if prog.out_dtype == Dtype.FP32:
        acc = sums[0]
        for s in sums[1:]:
            acc = oracle.add_f32(acc, s)
        return acc.T
    if prog.rounding == "rne":
        cell = _rne_bf16(sums[0])
        for s in sums[1:]:
            cell = _rne_bf16(oracle.add_f32(_widen(cell), s))
        return _widen(cell).T
    out = np.zeros(prog.out_shape, np.float32)
    states = {}
    for tile in sorted(prog.tiles, key=lambda t: t.first_op):       # writes in program order
        cols = np.arange(tile.n)
        part, bank = cols % prog.half, tile.bank + cols // prog.half
        cell = np.zeros((tile.n, tile.m), np.uint16)
        for i, s in enumerate(sums):
            x = s[tile.n0:tile.n0 + tile.n, tile.m0:tile.m0 + tile.m]
            if i:
                x = oracle.add_f32(_widen(cell), x)
            for v in range(tile.m):                                 # vector order; slot = element parity
                key = [(int(p), int(b), v & 1) for p, b in zip(part, bank)]
                st = np.array([states.get(k, _reset_state(np.array(k[0]), np.array(k[1]), k[2])) for k in key],
                              np.uint64)
                st = _xorshift(st)
                states.update(zip(key, st))
                u = x[:, v].view(np.uint32).astype(np.uint64)
                assert np.isfinite(x[:, v]).all()
                cell[:, v] = ((u + (st & np.uint64(0xFFFF))) >> np.uint64(16)).astype(np.uint16)
        out[tile.m0:tile.m0 + tile.m, tile.n0:tile.n0 + tile.n] = _widen(cell).T
    return out


GEMMS = [("mariana", "bf16", "fp32", "rne", (9, 40, 5)), ("mariana", "bf16", "bf16", "rne", (9, 40, 5)),
         ("mariana", "bf16", "bf16", "sr", (9, 40, 5)), ("maverick", "fp16", "bf16", "rne", (6, 20, 12)),
         ("maverick", "bf16", "bf16", "sr", (6, 20, 12)), ("cayman", "fp8_e4m3", "fp32", "rne", (5, 24, 10))]
ARRAY = {"cayman": (8, 8), "mariana": (8, 8), "maverick": (8, 16)}


@pytest.mark.parametrize("gen,dtype,out,rounding,mkn", GEMMS, ids=["-".join(map(str, g[:4])) for g in GEMMS])
def test_gemm_against_the_oracle(gen, dtype, out, rounding, mkn):
    """Bit for bit: the kernel's C from the golden engine, and the oracle's (a fixed seed)."""
    m, k, n = mkn
    rng = np.random.default_rng(2026 + m * k * n)
    rows, cols = ARRAY[gen]
    prog = G.gemm(rng.standard_normal((m, k)), rng.standard_normal((k, n)), dtype=dtype, out_dtype=out, gen=gen,
                  rows=rows, cols=cols, rounding=rounding)
    assert len(prog.k_slices) > 1                                 # the accumulate chain runs
    C, _, _ = G.run(prog)
    want = oracle_result(prog)
    assert np.array_equal(C.view(np.uint32), want.view(np.uint32)), np.argwhere(C != want)[:5]


def test_gemm_with_planted_ties():
    """Integer operands make column sums that are bf16 ties (odd integers in [256, 512), ...): a BF16
    RNE output through the kernel's accumulate chain rounds them to even, as ml_dtypes does."""
    rng = np.random.default_rng(2027)
    A, B = rng.integers(-12, 13, (12, 40)).astype(float), rng.integers(-12, 13, (40, 8)).astype(float)
    prog = G.gemm(A, B, dtype="bf16", out_dtype="bf16", gen="mariana", rows=8, cols=8)
    sums = _slice_sums(prog)
    partial = sums[0]
    ties = 0
    for s in sums[1:]:
        partial = oracle.add_f32(_widen(_rne_bf16(partial)), s)
        ties += int(((partial.view(np.uint32) & 0xFFFF) == 0x8000).sum())
    assert ties >= 20                                              # the ties are there to round
    C, _, _ = G.run(prog)
    assert np.array_equal(C.view(np.uint32), oracle_result(prog).view(np.uint32))


CONVS = [("mariana", (1, 12, 5, 6, 6, 3, 3, 1, 1, 1), "direct", "rne"),
         ("maverick", (2, 9, 5, 5, 10, 2, 2, 2, 1, 1), "im2col", "sr"),
         ("mariana", (1, 4, 6, 6, 5, 3, 3, 1, 0, 2), "auto", "sr")]


@pytest.mark.parametrize("gen,shape,method,rounding", CONVS)
def test_conv_against_the_oracle(gen, shape, method, rounding):
    """A convolution with a BF16 output (RNE and SR), bit for bit against the oracle."""
    b, ci, h, w, co, kh, kw, s, p, d = shape
    rng = np.random.default_rng(sum(shape))
    rows, cols = ARRAY[gen]
    prog = Cv.conv2d(rng.standard_normal((b, ci, h, w)), rng.standard_normal((co, ci, kh, kw)), stride=s, pad=p,
                     dil=d, method=method, gen=gen, rows=rows, cols=cols, out_dtype="bf16", rounding=rounding)
    assert len(prog.k_slices) > 1
    C, _, _ = G.run(prog)
    want = oracle_result(prog)
    assert np.array_equal(C.view(np.uint32), want.view(np.uint32)), np.argwhere(C != want)[:5]
