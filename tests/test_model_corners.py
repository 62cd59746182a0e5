"""Golden-model corners found by the RTL work (D-T40): transposes wider than one PSUM write slot on
scaled-down MAVERICK arrays, and FP32 MatmulSparse with its fp32_mode."""
import numpy as np
import pytest
import softfloatpy as sf
from tensore.model import addrmap
from tensore.model.array import matmul
from tensore.model.engine import Engine
from tensore.model.isa import ErrorCode, check, error_code
from tensore.model.isa.asm import assemble
from tensore.model.sbuf import Sbuf

from tests.oracles import f32

BANK = 2


def _sbuf(blocks):
    """SBUF with each (offset, codes [partitions, count], bytes per element) written from partition 0."""
    mem = np.zeros((addrmap.PARTITIONS, 1 << 18), np.uint8)
    for off, codes, esize in blocks:
        for p, row in enumerate(np.asarray(codes)):
            raw = row.astype({2: np.uint16, 4: np.uint32}[esize]).tobytes()
            mem[p, off:off + len(raw)] = np.frombuffer(raw, np.uint8)
    return Sbuf(mem)


def _t3(addr, n, step=1):
    return f"(start_addr={addr}, step_elem=[{step},0,0], num_elem=[{n},1,1])"


# --- transposes: one PSUM write slot (D-01, D-13) -------------------------------------------------

def _transpose(gen, rows, n, tile="c256"):
    tile = (f"tile_size=(row_size_log2=r128, col_size_log2={tile}) "
            "flags=(xpose_mode=enabled, accumulate_flag=overwrite)") if gen == "maverick" else \
        "flags=(xpose_mode=enabled) acc=single"
    return (f"matmul in_dtype=bf16 out_dtype=fp32 rows={rows} cols={n} {tile} src={_t3('sbuf(0,0x100)', n)} "
            f"dst={_t3(f'psum(0,{BANK},0)', rows)}\n")


@pytest.mark.parametrize("rows,cols,n", [(4, 8, 4), (4, 8, 5), (4, 8, 6), (4, 8, 8), (8, 8, 6), (8, 16, 8), (8, 16, 9)])
def test_maverick_transpose_fits_one_write_slot(rows, cols, n):
    """A MAVERICK transpose writes PSUM partition n of element n (D-13) through the columns of one
    write slot, C/2 of them (D-01: 128 at full size, as `check` allows there): more elements than
    C/2 are refused with BAD_PATTERN by `check` and by the engine, which changes nothing."""
    half = cols // 2
    codes = (np.arange(rows * n, dtype=np.uint32).reshape(rows, n) * 0x101 + 0x3F00) & 0xFFFF
    text = _transpose("maverick", rows, n)
    want = ErrorCode.NONE if n <= half else ErrorCode.BAD_PATTERN
    assert error_code(check(assemble(text, "maverick"), "maverick", array_cols=cols)) == want
    eng = Engine("maverick", rows=rows, cols=cols, sbuf=_sbuf([(0x100, codes, 2)]))
    trace = eng.run(assemble(text, "maverick"))
    assert [o.error for o in trace.ops] == [want]
    cells = eng.psum.cells(4)[:, BANK * addrmap.PSUM_BANK_BYTES // 4:][:, :rows]
    if want == ErrorCode.NONE:
        assert np.array_equal(cells[:n], codes.T) and not cells[n:].any()
        assert {e.data["partition"] for e in trace.events if e.kind == "psum_write"} == set(range(n))
    else:
        assert not eng.psum.mem.any() and not [e for e in trace.events if e.kind == "psum_write"]


def test_transpose_limits_at_full_size_and_before_maverick():
    """At full size the rule is the one it always was (128 elements, both with a c256 tile); a
    CAYMAN / MARIANA array is one write slot, so a scaled-down one transposes up to its columns."""
    assert error_code(check(assemble(_transpose("maverick", 4, 128), "maverick"), "maverick")) == ErrorCode.NONE
    assert error_code(check(assemble(_transpose("maverick", 4, 128, "c128"), "maverick"), "maverick")) == ErrorCode.NONE
    assert error_code(check(assemble(_transpose("maverick", 4, 129), "maverick"), "maverick")) == ErrorCode.BAD_PATTERN
    codes = np.arange(32, dtype=np.uint32).reshape(4, 8) + 0x3F80
    eng = Engine("mariana", rows=4, cols=8, sbuf=_sbuf([(0x100, codes, 2)]))
    trace = eng.run(assemble(_transpose("mariana", 4, 8), "mariana"))
    assert [o.error for o in trace.ops] == [ErrorCode.NONE]
    assert np.array_equal(eng.psum.cells(4)[:8, BANK * addrmap.PSUM_BANK_BYTES // 4:][:, :4], codes.T)


# --- FP32 MatmulSparse: fp32_mode as in Matmul (D-12) ---------------------------------------------

def _split(x):
    """D-12 operands, computed here on the bit pattern: hi = low 10 mantissa bits cleared, lo = x - hi."""
    hi = (np.float32(x).view(np.uint32) & np.uint32(0xFFFFFC00)).view(np.float32)
    return hi, np.float32(float(x) - float(hi))


def softfloat_sparse(w, a, tags, mode):
    """SoftFloat f32_mulAdd chain per column: PE (r, c) takes fmap tags[r, c] (a tag >= F passes the
    sum on, D-T26); LOW: hi*hi, HIGH: x*w, LOW_HIGH: moving hi*hi, hi*lo, lo*hi, lo*lo (D-12, D-T24)."""
    sf.set_rounding_mode(sf.RoundingMode.NEAR_EVEN)
    k, f, n = a.shape
    out = np.zeros((w.shape[1], n), np.uint32)
    for c in range(w.shape[1]):
        for j in range(n):
            p = f32(0.0)
            for r in range(k):
                if tags[r, c] >= f:
                    continue
                (wh, wl), (ah, al) = _split(w[r, c]), _split(a[r, tags[r, c], j])
                pairs = {"low": [(ah, wh)], "high": [(a[r, tags[r, c], j], w[r, c])],
                         "low_high": [(ah, wh), (ah, wl), (al, wh), (al, wl)]}[mode]
                for x, y in pairs:
                    p = sf.f32_mul_add(f32(x), f32(y), p)
            out[c, j] = int.from_bytes(p.to_bytes(), "big")
    return out


def _fp32_sparse_data(seed, k=6, f=3, m=4, n=5):
    """Random fp32 over a wide exponent range, low mantissa bits set, and one column built to expose
    a double rounding: psum 1, then (1 + 2^-12)(2^-24 (1 - 2^-12 + 2^-24)) = 2^-24 + 2^-60 (exactly
    above the fp32 midpoint 1 + 2^-24; a float64 sum lands on it and rounds to 1)."""
    rng = np.random.default_rng(seed)
    w = (rng.standard_normal((k, m)) * np.exp2(rng.integers(-20, 20, (k, m)))).astype(np.float32)
    a = (rng.standard_normal((k, f, n)) * np.exp2(rng.integers(-20, 20, (k, f, n)))).astype(np.float32)
    tags = rng.integers(0, f, (k, m))
    w[:, 0], tags[:, 0], a[:, 0, 0] = 0.0, 0, 0.0
    w[0, 0], a[0, 0, 0] = 1.0, 1.0
    w[1, 0], a[1, 0, 0] = 1 + 2.0 ** -12, 2.0 ** -24 * (1 - 2.0 ** -12 + 2.0 ** -24)
    return w, a, tags


@pytest.mark.parametrize("mode", ["low", "high", "low_high"])
def test_fp32_sparse_matmul_follows_fp32_mode(mode):
    """model.array.matmul with tags: FP32 MatmulSparse takes fp32_mode's passes, bit-exact to SoftFloat
    (the crafted column also fails any float64-sum-then-cast chain in HIGH)."""
    w, a, tags = _fp32_sparse_data(3)
    got = matmul(w, a, in_dtype="fp32", gen="mariana", fp32_mode=mode, tags=tags)
    assert np.array_equal(got.view(np.uint32), softfloat_sparse(w, a, tags, mode))
    if mode == "high":
        assert got[0, 0] == np.float32(1 + 2.0 ** -23)


def _tag_words(tags):
    """LdTags words: the tag of logical column m in nibble 3 - m mod 4 of word m div 4 (D-T26)."""
    k, m = tags.shape
    words = np.zeros((k, (m + 3) // 4), np.uint32)
    for c in range(m):
        words[:, c // 4] |= tags[:, c].astype(np.uint32) << np.uint32(4 * (3 - c % 4))
    return words


@pytest.mark.parametrize("gen", ["mariana", "maverick"])
@pytest.mark.parametrize("mode", ["low", "high", "low_high"])
def test_fp32_sparse_on_the_engine(gen, mode):
    """The engine's FP32 MatmulSparse (tag 3 with 3 fmaps sent: the PE passes the sum on) against
    SoftFloat, its per-row PE partial sums included."""
    w, a, tags = _fp32_sparse_data(4)
    tags[2, 1:3] = 3
    k, f, n = a.shape
    m = w.shape[1]
    sbuf = _sbuf([(0x100, _tag_words(tags), 2), (0x200, w.view(np.uint32), 4),
                  (0x300, a.reshape(k, f * n).view(np.uint32), 4)])
    tile = "tile_size=(row_size_log2=r128, col_size_log2=c128) " if gen == "maverick" else ""
    acc = "flags=(accumulate_flag=overwrite)" if gen == "maverick" else "acc=single"
    text = (f"ldtags in_dtype=uint16 force_tag_bits=0 rows={k} cols={m} {tile}src={_t3('sbuf(0,0x100)', 1)}\n"
            f"ldweights in_dtype=fp32 fp32_mode={mode} rows={k} cols={m} {tile}src={_t3('sbuf(0,0x200)', m)}\n"
            f"matmul_sparse in_dtype=fp32 fp32_mode={mode} out_dtype=fp32 rows={k} cols={m} {tile}{acc} "
            f"src=(start_addr=sbuf(0,0x300), step_elem=[1,0,0,{n}], num_elem=[{n},1,1,{f}]) "
            f"dst={_t3(f'psum(0,{BANK},0)', n)}\n")
    eng = Engine(gen, rows=8, cols=8, sbuf=sbuf, record_pe=True)
    trace = eng.run(assemble(text, gen))
    assert [o.error for o in trace.ops] == [ErrorCode.NONE] * 3
    got = eng.psum.cells(4)[:m, BANK * addrmap.PSUM_BANK_BYTES // 4:][:, :n]
    want = softfloat_sparse(w, a, tags, mode)
    assert np.array_equal(got, want[::-1])             # default load order: logical m -> column M - 1 - m
    steps = next(r for r in eng._pe_log if r["kind"] == "mm")["steps"]
    assert np.array_equal(np.asarray(steps[2]).view(np.uint32),
                          softfloat_sparse(w[:3], a[:3], tags[:3], mode)[::-1])
    assert trace.ops[-1].uop.passes == (1 if mode == "low" else 4)          # D-12's cycle cost
