"""cosim/oracle.py, the program library's expectation oracle: its decoders, its exact integer column
chains against Berkeley SoftFloat and the Fraction chain (tests/oracles.py), both of its paths, and
that the library's expectations hold independently of the golden engine's arithmetic: a perturbed
column chain in the engine fails the library."""
import numpy as np
import pytest

import tensore.model.array
import tensore.model.dtypes
import tensore.model.engine.execute
import tensore.model.fp
import tensore.model.mac
from tensore import model
from tensore.cosim import oracle, programs
from tensore.model import addrmap
from tensore.model import dtypes as dt
from tensore.model.dtypes import Dtype, Gen
from tensore.model.engine import Engine
from tensore.model.isa.asm import assemble
from tensore.model.isa.check import matmul_input_dtypes
from tests.fixtures import fp32_bits
from tests.oracles import fused_chain_oracle, softfloat_chain

SPECIAL_F32 = np.float32([0.0, -0.0, np.inf, -np.inf, np.nan, 1e-45, -1e-45, 1.17e-38, 3.4e38, -3.4e38,
                          2.0 ** -100, -(2.0 ** -100), 2.0 ** 100, 1.0, -1.0])


def _nan_canonical(bits):
    bits = np.asarray(bits, np.uint32)
    nan = ((bits & 0x7F800000) == 0x7F800000) & ((bits & 0x7FFFFF) != 0)
    return np.where(nan, np.uint32(0x7FC00000), bits)


@pytest.mark.parametrize("gen", list(Gen), ids=lambda g: g.name)
def test_decode_every_code(gen):
    """ml_dtypes / the E2M5 and INT4 formulas give the values model.dtypes gives, for every code of
    every matmul and MX operand format of the generation."""
    fmts = set(matmul_input_dtypes(gen)) | {d for d in Dtype if dt.is_in_enum(d, gen) and dt.is_valid_mx_dtype(d, gen)}
    assert fmts
    for d in sorted(fmts):
        width = dt.format_of(d, gen).width
        codes = np.arange(1 << width, dtype=np.uint64) if width <= 16 else \
            np.random.default_rng(0).integers(0, 1 << 32, 1 << 16, dtype=np.uint64)
        got = oracle.decode(codes, d, gen).float64()
        want = dt.to_fp32(codes, d, gen).astype(np.float64)
        same = (got == want) & (np.signbit(got) == np.signbit(want)) | (np.isnan(got) & np.isnan(want))
        assert same.all(), (d.name, codes[~same][:4], got[~same][:4], want[~same][:4])


def _codes(rng, dtype, gen, shape, special_fraction=0.2):
    """Normal-ish codes with a fraction replaced by special fp32 values narrowed to the format."""
    vals = (rng.standard_normal(shape) * 2.0 ** rng.integers(-8, 8, shape)).astype(np.float32)
    mask = rng.random(shape) < special_fraction
    vals[mask] = rng.choice(SPECIAL_F32, mask.sum())
    with np.errstate(all="ignore"):
        return dt.from_fp32(vals, dtype, gen)


@pytest.mark.parametrize("dtype,gen", [("bf16", Gen.MARIANA), ("fp16", Gen.CAYMAN), ("fp8_e4m3", Gen.SUNDA),
                                       ("fp8_e4m3", Gen.MAVERICK), ("fp8_e5m2", Gen.MARIANA_PLUS),
                                       ("fp8_e3m4", Gen.CAYMAN), ("fp8_exp2", Gen.MAVERICK)])
def test_single_product_chains_match_softfloat(dtype, gen):
    """One product per row: psum = f32_mulAdd(w, a, psum) down each column (SoftFloat), specials,
    subnormals and overflow included (NaNs compared as NaN)."""
    rng = np.random.default_rng(sum(map(ord, dtype)) + int(gen))
    w, a = _codes(rng, dtype, gen, (12, 5)), _codes(rng, dtype, gen, (12, 6))
    got = fp32_bits(oracle.matmul(w, a, in_dtype=dtype, gen=gen))
    wv, av = oracle.decode(w, dtype, gen).float64(), oracle.decode(a, dtype, gen).float64()
    assert np.array_equal(got, _nan_canonical(softfloat_chain(wv, av)))


def test_fp32_high_matches_softfloat():
    """FP32 HIGH: one exact 48-bit product per row, fused (SoftFloat f32_mulAdd); random patterns,
    special values, an underflow to -0 and an overflow to Inf."""
    rng = np.random.default_rng(7)
    w = rng.integers(0, 1 << 32, (10, 6), dtype=np.uint64)
    a = rng.integers(0, 1 << 32, (10, 5), dtype=np.uint64)
    w[:, :3] = (rng.standard_normal((10, 3)).astype(np.float32)).view(np.uint32)
    a[:, :3] = (rng.standard_normal((10, 3)).astype(np.float32) * 1e-20).view(np.uint32)
    w[:, 4], a[:, 4] = fp32_bits(rng.choice(SPECIAL_F32, 10)), fp32_bits(rng.choice(SPECIAL_F32, 10))
    w[:, 5], a[:, 3] = fp32_bits(np.float32(-(2.0 ** -100))), fp32_bits(np.float32(2.0 ** -100))   # -2^-200: -0
    w[0, 2], a[0, 2] = fp32_bits(np.float32(3e38)), fp32_bits(np.float32(10.0))                     # Inf
    got = fp32_bits(oracle.matmul(w, a, in_dtype="fp32", gen="cayman", fp32_mode="high"))
    want = _nan_canonical(softfloat_chain(w.astype(np.uint32).view(np.float32), a.astype(np.uint32).view(np.float32)))
    assert np.array_equal(got, want)
    assert got[5, 3] == 0x80000000 and got[2, 2] == 0x7F800000


@pytest.mark.parametrize("mode", ["low", "low_high"])
def test_fp32_split_modes_match_the_fraction_chain(mode):
    """LOW (hi * hi) and LOW_HIGH (four fused steps per row) on split operands, by the exact chain."""
    rng = np.random.default_rng(3)
    w = rng.standard_normal((6, 4)).astype(np.float32)
    a = rng.standard_normal((6, 5)).astype(np.float32)
    a[2, 1], w[3, 2] = np.inf, np.nan
    got = fp32_bits(oracle.matmul(w.view(np.uint32), a.view(np.uint32), in_dtype="fp32", gen="mariana", fp32_mode=mode))
    w_hi, w_lo = dt.split_fp32(w)
    a_hi, a_lo = dt.split_fp32(a)
    if mode == "low":
        ws, as_ = w_hi[:, None, :], a_hi[:, None, :]
    else:                               # four one-product steps per row: moving hi*hi, hi*lo, lo*hi, lo*lo
        ws = np.stack([w_hi, w_lo, w_hi, w_lo], 1).reshape(-1, 1, 4)
        as_ = np.stack([a_hi, a_hi, a_lo, a_lo], 1).reshape(-1, 1, 5)
    want = fused_chain_oracle(ws.astype(np.float64), as_.astype(np.float64))
    assert np.array_equal(got, want)


@pytest.mark.parametrize("dtype,gen,perf", [("fp8_e5m2", Gen.CAYMAN, "double_row"), ("fp8_e4m3", Gen.MARIANA, "double_row"),
                                            ("fp8_e4m3", Gen.MARIANA, "quad_row"), ("fp4_e2m1", Gen.MARIANA, "oct_row"),
                                            ("int4", Gen.MAVERICK, "quad_row"), ("fp8_exp2", Gen.MAVERICK, "oct_row"),
                                            ("fp8_e5m2", Gen.MAVERICK, "quad_row_interleave")])
def test_multi_term_steps_match_the_fraction_chain(dtype, gen, perf):
    """Double row and MX steps (exact sum of 2 / 4 / 8 scaled products, one rounding), with random
    codes (NaN, Inf, subnormals) and E8M0 scales at the extremes and NaN."""
    rng = np.random.default_rng(11)
    pack = {"double_row": 2, "quad_row": 4, "quad_row_interleave": 4, "oct_row": 8}[perf]
    k = 64 if perf != "double_row" else 16
    width = dt.format_of(dtype, gen).width
    w = rng.integers(0, 1 << width, (k, 4), dtype=np.uint64)
    a = rng.integers(0, 1 << width, (k, 5), dtype=np.uint64)
    kw, scales = {}, None
    rows = k // pack
    wv = oracle.decode(w, dtype, gen).float64().reshape(rows, pack, 4)
    av = oracle.decode(a, dtype, gen).float64().reshape(rows, pack, 5)
    if perf != "double_row":
        choices = [0, 1, 100, 127, 130, 200, 254, 255]
        sw, sa = rng.choice(choices, (k // 32, 4)), rng.choice(choices, (k // 32, 5))
        kw = {"stationary_scales": sw, "moving_scales": sa}
        exp = lambda s: np.where(s == 255, np.nan, s - 127.0)          # noqa: E731
        blk = np.arange(rows) * pack // 32
        scales = (exp(sw)[blk], exp(sa)[blk])
    got = fp32_bits(oracle.matmul(w, a, in_dtype=dtype, gen=gen, perf_mode=perf, **kw))
    assert np.array_equal(got, fused_chain_oracle(wv, av, scales))


def test_sparse_matches_the_fraction_chain():
    rng = np.random.default_rng(5)
    w = _codes(rng, "fp16", Gen.MARIANA, (8, 4))
    a = _codes(rng, "fp16", Gen.MARIANA, (8, 3, 5))
    tags = rng.integers(0, 3, (8, 4))
    got = fp32_bits(oracle.matmul(w, a, in_dtype="fp16", gen="mariana", tags=tags))
    wv, av = oracle.decode(w, "fp16", "mariana").float64(), oracle.decode(a, "fp16", "mariana").float64()
    want = np.zeros((4, 5), np.uint32)
    for c in range(4):                           # column c reads fmap tags[r, c] in row r
        want[c] = fused_chain_oracle(wv[:, None, c:c + 1], av[np.arange(8), tags[:, c]][:, None, :])[0]
    assert np.array_equal(got, want)


@pytest.mark.parametrize("mode", ["low", "high", "low_high"])
def test_fp32_sparse_follows_fp32_mode(mode):
    """FP32 MatmulSparse takes fp32_mode's passes (D-12, D-T24): the oracle equals the model
    (array.matmul, and with fmaps beyond those sent array.sparse_wide_chain), and each column is the
    oracle's dense FP32 chain of the moving rows its tags pick (checked against SoftFloat above)."""
    from tensore.model.isa.enums import FP32Mode
    rng = np.random.default_rng(21)
    w = rng.standard_normal((8, 4)).astype(np.float32)
    a = (rng.standard_normal((8, 3, 5)) * np.float32(3.0)).astype(np.float32)
    w[2, 1], a[5, 1, 2], a[6, 0, 4], w[7, 3] = np.inf, np.nan, 1e-45, 2.0 ** -100
    tags = rng.integers(0, 3, (8, 4))
    kw = {"in_dtype": "fp32", "gen": "mariana", "fp32_mode": mode}
    got = fp32_bits(oracle.matmul(w.view(np.uint32), a.view(np.uint32), tags=tags, **kw))
    assert np.array_equal(got, _nan_canonical(fp32_bits(model.array.matmul(w, a, tags=tags, **kw))))
    for c in range(4):
        picked = a[np.arange(8), tags[:, c]]                                   # [K, N]
        col = oracle.matmul(w[:, c:c + 1].view(np.uint32), picked.view(np.uint32), **kw)
        assert np.array_equal(fp32_bits(col)[0], got[c])
    others = {m: fp32_bits(oracle.matmul(w.view(np.uint32), a.view(np.uint32), tags=tags, in_dtype="fp32",
                                         gen="mariana", fp32_mode=m)) for m in ("low", "high", "low_high")}
    assert all(not np.array_equal(got, v) for m, v in others.items() if m != mode)
    skip = np.where(rng.random((8, 4)) < 0.3, 3, tags)                         # fmap 3 of 3 sent: passes on
    got = fp32_bits(oracle.matmul(w.view(np.uint32), a.view(np.uint32), tags=skip, **kw))
    psum, _ = model.array.sparse_wide_chain(w, a, skip, FP32Mode[mode.upper()])
    assert np.array_equal(got, _nan_canonical(fp32_bits(psum)))


def test_fraction_path_equals_the_integer_path(monkeypatch):
    """With the int64 path disabled every element goes through Fractions: the same bits."""
    rng = np.random.default_rng(9)
    cases = [(_codes(rng, "bf16", Gen.MARIANA, (16, 6)), _codes(rng, "bf16", Gen.MARIANA, (16, 7)), "bf16", {}),
             (rng.integers(0, 256, (32, 3)), rng.integers(0, 256, (32, 4)), "fp8_e4m3",
              {"perf_mode": "quad_row", "stationary_scales": rng.integers(100, 160, (1, 3)),
               "moving_scales": rng.integers(100, 160, (1, 4))})]
    fast = [fp32_bits(oracle._matmul(w, a, in_dtype=d, gen="mariana", fp32_mode=None, tags=None,
                                 **({"perf_mode": None, "stationary_scales": None, "moving_scales": None} | kw)))
            for w, a, d, kw in cases]
    monkeypatch.setattr(oracle, "FAST_BITS", -1)
    before = oracle.STATS["fraction"]
    slow = [fp32_bits(oracle._matmul(w, a, in_dtype=d, gen="mariana", fp32_mode=None, tags=None,
                                 **({"perf_mode": None, "stationary_scales": None, "moving_scales": None} | kw)))
            for w, a, d, kw in cases]
    assert oracle.STATS["fraction"] - before > 100
    for f, s in zip(fast, slow):
        assert np.array_equal(f, s)


def test_wide_sums_take_the_fraction_path():
    """A psum of 2^100 plus products of 2^-60: a 160-bit aligned sum, rounded exactly."""
    w = np.float32([[2.0 ** 50, 1.0], [2.0 ** -30 * 1.5, -(2.0 ** -30)]])
    a = np.float32([[2.0 ** 50, 3.0], [2.0 ** -30 * 1.25, 2.0 ** -30]])
    before = oracle.STATS["fraction"]
    got = fp32_bits(oracle.matmul(w.view(np.uint32), a.view(np.uint32), in_dtype="fp32", gen="cayman",
                                  fp32_mode="high"))
    assert oracle.STATS["fraction"] > before
    assert np.array_equal(got, _nan_canonical(softfloat_chain(w, a)))


def test_add_f32_is_ieee_addition():
    """The PSUM accumulate: RNE binary32 addition (numpy's IEEE add), canonical NaN."""
    rng = np.random.default_rng(2)
    x = rng.integers(0, 1 << 32, 20000, dtype=np.uint64).astype(np.uint32)
    y = rng.integers(0, 1 << 32, 20000, dtype=np.uint64).astype(np.uint32)
    y[:5000] = (x[:5000] ^ 0x80000000)                       # exact cancellation: +0
    y[5000:10000] = x[5000:10000] + rng.integers(-3, 4, 5000).astype(np.uint32)   # near cancellation
    special = fp32_bits(SPECIAL_F32)
    xs, ys = np.concatenate([x, special.repeat(15)]), np.concatenate([y, np.tile(special, 15)])
    with np.errstate(all="ignore"):
        want = _nan_canonical(fp32_bits(xs.view(np.float32) + ys.view(np.float32)))
    assert np.array_equal(fp32_bits(oracle.add_f32(xs.view(np.float32), ys.view(np.float32))), want)


# --- independence of the library's expectations --------------------------------------------------

def _raise(*args, **kwargs):
    raise AssertionError("the library's expectations must not use the golden model's arithmetic")


def test_library_builds_without_the_model_arithmetic(monkeypatch):
    """Every library program of every generation builds, with the same expectations, while the
    model's chain, fused sum, rounding and decoders raise."""
    reference = {g: programs.library(g) for g in Gen}
    oracle._MEMO.clear()
    for mod, name in ((model.array, "matmul"), (model.array, "column_chain"), (model.array, "_single_product_chain"),
                      (model.mac, "fused_sum"), (model.fp, "round_pair"), (model.fp, "two_sum"),
                      (model.dtypes, "to_fp32"), (model.engine.execute, "column_chain")):
        monkeypatch.setattr(mod, name, _raise)
    for g in Gen:
        for ref, p in zip(reference[g], programs.library(g)):
            assert p.text == ref.text
            for key, (off, bits) in ref.expect_fp32.items():
                assert p.expect_fp32[key][0] == off and np.array_equal(p.expect_fp32[key][1], bits), (g, p.name)
            for key, (off, codes) in ref.expect_bf16.items():
                assert np.array_equal(p.expect_bf16[key][1], codes), (g, p.name)


def _psum_mismatches(p) -> int:
    """Run p on the golden engine; the number of PSUM values that differ from p's expectations."""
    eng = Engine(p.gen, rows=p.rows, cols=p.cols, sbuf=p.sbuf_model())
    for reg, value in p.regs.items():
        eng.write_reg(reg, value)
    eng.run(assemble(p.text, p.gen))
    bad = 0
    for (part, bank), (off, bits) in p.expect_fp32.items():
        start = (bank * addrmap.PSUM_BANK_BYTES + off) // 4
        bad += int((eng.psum.cells(4)[part][start:start + bits.size] != bits).sum())
    for (part, bank), (off, codes) in p.expect_bf16.items():
        start = (bank * addrmap.PSUM_BANK_BYTES + off) // 2
        bad += int((eng.psum.cells(2)[part][start:start + codes.size] != codes).sum())
    return bad


def _flip(bit):
    def perturb(x):
        x = np.asarray(x, np.float32)
        return np.where(np.isfinite(x), (x.view(np.uint32) ^ np.uint32(1 << bit)).view(np.float32), x)
    return perturb


def _perturbed(fn, perturb):
    def wrapper(*args, **kwargs):
        result = fn(*args, **kwargs)
        if isinstance(result, tuple):
            return perturb(result[0]), [perturb(s) for s in result[1]]
        return perturb(result)
    return wrapper


TRANSPOSES = {"transpose", "transpose_pattern"}
SPARSE = {"sparse", "tag_weight", "lut_sparse"}                      # the engine's own sparse chain, not column_chain
BF16_OUT = {"bf16_drain_rne", "bf16_drain_sr", "seed_replay", "c256_sr"}     # matmul results rounded to bf16


@pytest.mark.parametrize("gen", [Gen.SUNDA, Gen.MARIANA, Gen.MAVERICK], ids=lambda g: g.name)
def test_perturbed_column_chain_fails_the_library(gen, monkeypatch):
    """The engine's column_chain with the low bit of every finite result flipped: every program with
    an fp32 matmul expectation fails; with bit 16 flipped (a bf16 code's last bit) the bf16 drains
    fail too.  A perturbed sparse chain fails the sparse programs.  Before the oracle, the library's
    expectations came from the same column_chain and all of them passed."""
    progs = programs.library(gen)
    assert all(_psum_mismatches(p) == 0 for p in progs)
    chain = model.engine.execute.column_chain
    for bit in (0, 16):
        monkeypatch.setattr(model.engine.execute, "column_chain", _perturbed(chain, _flip(bit)))
        passing = {p.name for p in progs if _psum_mismatches(p) == 0}
        immune = TRANSPOSES | SPARSE
        if bit == 0:               # bf16 results (RNE / SR to bf16) hide the fp32 low bit
            immune |= BF16_OUT
        assert passing == immune & {p.name for p in progs}, (bit, passing)
    monkeypatch.setattr(model.engine.execute, "column_chain", chain)
    monkeypatch.setattr(Engine, "_sparse_chain", _perturbed(Engine._sparse_chain, _flip(0)))
    passing = {p.name for p in progs if _psum_mismatches(p) == 0}
    assert passing & SPARSE == set() and "sparse_mixed" not in passing


def test_fp32_split_parts_match_ieee_subtraction():
    """hi clears the low 10 mantissa bits; lo = x - hi by IEEE subtraction: +0 when exact (also for
    negative x and -0), +0 for Inf / NaN (D-12)."""
    rng = np.random.default_rng(4)
    x = np.concatenate([fp32_bits(SPECIAL_F32), fp32_bits(np.float32([-1.0, -2.5, -(2.0 ** -140)])),
                        np.uint32([0x80000400, 0x7F800001, 0xFFFFFFFF]),
                        rng.integers(0, 1 << 32, 4000, dtype=np.uint64).astype(np.uint32)])
    hi, lo = oracle.split_fp32(oracle.from_f32_bits(x), x)
    want_hi, want_lo = dt.split_fp32(x.view(np.float32))
    for got, want in ((hi.float64(), want_hi), (lo.float64(), want_lo)):
        want = want.astype(np.float64)
        same = ((got == want) & (np.signbit(got) == np.signbit(want))) | (np.isnan(got) & np.isnan(want))
        assert same.all(), x[~same][:4]
