"""MAC semantics: the IVP integer widening MAC family (seed 002 sections 4-9), the IEEE FMA
(seed 002 section 5.5, in model/fp.py) and the PE's fused accumulate (SPEC D-10, D-11).

Integer MACs work on 512-bit vectors: 64 x 8-bit, 32 x 16-bit or 16 x 32-bit lanes, into
24 / 48 / 96-bit accumulator lanes that wrap modulo 2^width and never saturate.  Lanes are numpy
arrays (int64 for 24/48-bit accumulators, Python-int object arrays for 96-bit ones)."""
from __future__ import annotations

from fractions import Fraction

import numpy as np

from tensore.model.fp import Flag, Rounding, fma, round_pair, two_sum  # noqa: F401  (re-exported)

VECTOR_BITS = 512
WVEC_ENTRIES = 4
WVEC_BITS = 1536
LANES = {w: VECTOR_BITS // w for w in (8, 16, 32)}           # 64 / 32 / 16 lanes of a vector
ACC_BITS = {w: WVEC_BITS // n for w, n in LANES.items()}      # 24 / 48 / 96-bit accumulator lanes
MAC_WRITE_STAGE = 12    # accumulator written (inputs read at 10, seed 002 section 6.1); II = 1 by forwarding (6.2)


def mac_chain_cycles(n_ops: int) -> int:
    """Cycles from the first issue to the last accumulator write of n dependent MACs (II = 1)."""
    return 0 if n_ops <= 0 else n_ops - 1 + MAC_WRITE_STAGE + 1


def _lanes(x, width: int, signed: bool) -> np.ndarray:
    """Interpret `width`-bit codes as integers (object array for exactness at any width)."""
    v = np.asarray(x)
    if v.dtype.kind not in "uiO":
        raise TypeError(f"MAC operands are integer codes, got {v.dtype}")
    v = v.astype(object) & ((1 << width) - 1)
    if signed:
        v = np.where(v >= (1 << (width - 1)), v - (1 << width), v)
    return v


def mac(acc, terms, *, width: int, signs: str = "ss", subtract: bool = False, pred=None) -> np.ndarray:
    """acc' = acc +- sum_i a_i * b_i per lane, wrapped to the accumulator width.

    terms: [(a, b), ...] — one pair for MULA/MULS, two for the P (pair) forms, four for Q / 4T.
    A scalar `b` is the XR reduce-register broadcast (the *XR8 / *XR16 forms).
    signs: "ss", "uu", "su" (a signed, b unsigned) or "us".  pred: lane mask of the _t forms
    (disabled lanes keep the old accumulator)."""
    if width not in LANES:
        raise ValueError(f"lane width must be 8, 16 or 32, got {width}")
    if signs not in ("ss", "uu", "su", "us"):
        raise ValueError(f"signs must be ss/uu/su/us, got {signs!r}")
    if len(terms) not in (1, 2, 4):
        raise ValueError(f"a MAC sums 1 (MULA), 2 (P) or 4 (Q / 4T) products, got {len(terms)}")
    bits = ACC_BITS[width]
    old = np.asarray(acc).astype(object)
    total = np.zeros(old.shape, object)
    for a, b in terms:
        total = total + _lanes(a, width, signs[0] == "s") * _lanes(b, width, signs[1] == "s")
    new = ((old - total) if subtract else (old + total)) % (1 << bits)
    if pred is not None:
        new = np.where(np.asarray(pred, bool), new, old % (1 << bits))
    return new.astype(np.int64) if bits <= 48 else new


class WvecFile:
    """The 4-entry x 1536-bit wide accumulator file (seed 002 section 7)."""

    def __init__(self):
        self.entries = [0] * WVEC_ENTRIES            # each a 1536-bit Python int

    def _check(self, idx: int, width: int):
        if not 0 <= idx < WVEC_ENTRIES:
            raise ValueError(f"wvec has entries 0..{WVEC_ENTRIES - 1}, got {idx}")
        if width not in LANES:
            raise ValueError(f"lane width must be 8, 16 or 32, got {width}")

    def unpack(self, idx: int, width: int) -> np.ndarray:
        """Drain: the accumulator lanes of entry idx (ivp_unpack_wvec_mov)."""
        self._check(idx, width)
        bits, n = ACC_BITS[width], LANES[width]
        v = self.entries[idx]
        lanes = np.array([(v >> (i * bits)) & ((1 << bits) - 1) for i in range(n)], object)
        return lanes.astype(np.int64) if bits <= 48 else lanes

    def pack(self, idx: int, width: int, lanes=None):
        """Seed (or, without lanes, zero) entry idx (ivp_wvec_pack)."""
        self._check(idx, width)
        bits, n = ACC_BITS[width], LANES[width]
        lanes = np.zeros(n, object) if lanes is None else np.asarray(lanes).astype(object)
        if lanes.shape != (n,):
            raise ValueError(f"{n} lanes of {bits} bits expected, got shape {lanes.shape}")
        v = 0
        for i, lane in enumerate(lanes.tolist()):
            v |= (int(lane) % (1 << bits)) << (i * bits)
        self.entries[idx] = v

    def mac(self, idx: int, terms, *, width: int, **kw):
        """Read-modify-write entry idx with `mac` (wvu read, wvt write)."""
        self.pack(idx, width, mac(self.unpack(idx, width), terms, width=width, **kw))


# --- the PE's fused accumulate (D-10, D-11) ----------------------------------------------------

CANONICAL_NAN = np.uint32(0x7FC00000)


def canonical_nan(x: np.ndarray) -> np.ndarray:
    """float32 values with every NaN replaced by 0x7FC00000 (D-10)."""
    bits = np.array(x, np.float32).view(np.uint32)            # a copy
    np.copyto(bits, CANONICAL_NAN, where=np.isnan(x))
    return bits.view(np.float32)


def fused_sum(psum: np.ndarray, terms: list) -> np.ndarray:
    """RNE_fp32(psum + sum(terms)) with the terms summed exactly and one rounding (D-10, D-11).

    psum: float32; terms: float64 arrays, each exactly a product (or a scaled product): their float64
    sum overflows nowhere, so it is finite where every input is.
    NaN results are NaN (callers canonicalise); subnormals are kept."""
    p0 = psum.astype(np.float64)
    with np.errstate(invalid="ignore", over="ignore"):
        naive = p0 + sum(terms) if terms else p0
    special = ~np.isfinite(p0)
    for t in terms:
        special |= ~np.isfinite(t)
    total = np.zeros(p0.shape)
    slow = np.zeros(p0.shape, bool)
    for t in terms:
        total, err = two_sum(total, np.where(special, 0.0, t))
        slow |= err != 0
    s, e = two_sum(np.where(special, 0.0, p0), total)
    out, _ = round_pair(s, e, "f32", Rounding.RNE, flags=False)
    # signed zero: the exact sum of zeros keeps a common sign, anything else gives +0 (RNE)
    zero = (s == 0) & (e == 0) & ~special
    if zero.any():
        neg = np.signbit(p0)
        for t in terms:
            neg &= np.signbit(t) & (t == 0)
        neg &= p0 == 0
        out = np.where(zero, np.where(neg, np.float32(-0.0), np.float32(0.0)), out)
    if slow.any():
        out[slow] = _fused_sum_exact(p0[slow], [t[slow] for t in terms])
    with np.errstate(invalid="ignore", over="ignore"):
        return np.where(special, naive.astype(np.float32), out).astype(np.float32)


def _fused_sum_exact(p0: np.ndarray, terms: list) -> np.ndarray:
    """The rare elements whose product sum is not exact in float64: exact Fractions, one rounding."""
    s, e = np.empty(p0.shape), np.empty(p0.shape)
    for i in range(p0.size):
        x = Fraction(float(p0.flat[i])) + sum((Fraction(float(t.flat[i])) for t in terms), Fraction(0))
        s.flat[i] = float(x)                            # correctly rounded to double
        e.flat[i] = float(x - Fraction(s.flat[i]))      # sign-faithful remainder
    return round_pair(s, e, "f32", Rounding.RNE, flags=False)[0]
