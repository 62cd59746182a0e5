"""Exact floating-point rounding on numpy arrays, and the IEEE FMA (seed 002 section 5.5).

A value is held exactly as an unevaluated float64 pair x = s + e (TwoSum gives one for any sum of
two doubles).  `round_pair` rounds it once to fp32 or fp16 in any IEEE rounding mode and reports the
five IEEE flags.  Tininess is detected after rounding and NaN results are the canonical quiet NaN,
as in Berkeley SoftFloat's RISC-V specialization (our test oracle).
"""
from __future__ import annotations

import enum

import numpy as np


class Rounding(enum.IntEnum):
    """IEEE 754 rounding-direction attributes (SoftFloat's numbering)."""

    RNE = 0   # roundTiesToEven
    RTZ = 1   # roundTowardZero
    RDN = 2   # roundTowardNegative
    RUP = 3   # roundTowardPositive
    RMM = 4   # roundTiesToAway


class Flag(enum.IntFlag):
    """IEEE exception flags (SoftFloat's bit values)."""

    INEXACT = 1
    UNDERFLOW = 2
    OVERFLOW = 4
    DIVBYZERO = 8
    INVALID = 16


_TARGETS = {
    # dtype: (numpy float type, unsigned view, emin, precision p, emax, canonical NaN bits)
    "f32": (np.float32, np.uint32, -126, 24, 127, 0x7FC00000),
    "f16": (np.float16, np.uint16, -14, 11, 15, 0x7E00),
}


def two_sum(a: np.ndarray, b: np.ndarray):
    """s = fl(a + b) and e = (a + b) - s exactly (Knuth), for finite float64 arrays."""
    s = a + b
    bb = s - a
    e = (a - (s - bb)) + (b - bb)
    return s, e


def _sign_of(d, e):
    """sign(d + e) for |e| tiny next to a non-zero d: sign(d), or sign(e) when d == 0."""
    return np.where(d != 0, np.sign(d), np.sign(e))


def _neighbour(c0v, direction, T, big):
    """The next target value from c0v (float64, possibly the virtual +-2^(emax+1), which casts to
    +-inf) toward the sign of `direction`; from the virtual value outward it stays (inf's next is inf)."""
    with np.errstate(invalid="ignore", over="ignore"):
        nb = np.nextafter(c0v.astype(T), np.copysign(np.inf, direction).astype(T)).astype(np.float64)
    return np.where(np.isinf(nb), np.copysign(big, nb), nb)


def round_pair(s: np.ndarray, e: np.ndarray, target: str = "f32", mode: Rounding = Rounding.RNE,
               *, flags: bool = True):
    """Round the exact finite value s + e (float64 arrays, |e| <= ulp(s)/2) once to `target`.

    Returns (values of the target dtype, uint8 flag array or None)."""
    T, _, emin, p, emax, _ = _TARGETS[target]
    mode = Rounding(mode)
    big = 2.0 ** (emax + 1)
    result, ovf, inexact = _round_core(s, e, T, mode, big)
    if not flags:
        return result, None
    f = np.where(inexact | ovf, Flag.INEXACT, 0).astype(np.uint8)
    f |= np.where(ovf, Flag.OVERFLOW, 0).astype(np.uint8)
    # tininess after rounding: round x * 2^(p+1) with the same precision, compare with 2^(emin+p+1)
    k = 2.0 ** (p + 1)
    maybe = np.abs(s) < 2.0 ** (emin + 1)
    if maybe.any():
        ys, _, _ = _round_core(s * k, e * k, T, mode, big)
        tiny = maybe & (np.abs(ys) < 2.0 ** (emin + p + 1))
        f |= np.where(tiny & inexact, Flag.UNDERFLOW, 0).astype(np.uint8)
    return result, f


def _round_core(s, e, T, mode, big):
    """(rounded values of T, overflow mask, inexact mask) for the exact values s + e."""
    with np.errstate(over="ignore", invalid="ignore"):
        c0 = s.astype(T)
    c0v = np.where(np.isinf(c0), np.copysign(big, s), c0.astype(np.float64))
    d = s - c0v
    sgn = _sign_of(d, e)                                     # sign(x - c0v); 0: exact, nb unused
    nb = _neighbour(c0v, sgn, T, big)
    if mode in (Rounding.RNE, Rounding.RMM):
        mid = (c0v + nb) / 2
        to_mid = _sign_of(s - mid, e) * sgn                 # >0: beyond the midpoint
        at_mid = ((s - mid) == 0) & (e == 0)
        pick_nb = (sgn != 0) & (to_mid > 0)
        if mode == Rounding.RMM:
            pick_nb |= (sgn != 0) & at_mid & (np.abs(nb) > np.abs(c0v))
        r = np.where(pick_nb, nb, c0v)
    else:
        lower = np.where(sgn < 0, nb, c0v)
        upper = np.where(sgn > 0, nb, c0v)
        if mode == Rounding.RDN:
            r = lower
        elif mode == Rounding.RUP:
            r = upper
        else:
            r = np.where(s > 0, lower, upper)                # |e| <= ulp(s) / 2: x has s's sign
    ovf = np.abs(r) >= big
    inexact = sgn != 0
    to_inf = np.full(r.shape, mode in (Rounding.RNE, Rounding.RMM))
    if mode == Rounding.RUP:
        to_inf = r > 0
    elif mode == Rounding.RDN:
        to_inf = r < 0
    fmax = float(np.finfo(T).max)
    r = np.where(ovf, np.where(to_inf, np.copysign(np.inf, r), np.copysign(fmax, r)), r)
    with np.errstate(over="ignore"):
        return r.astype(T), ovf, inexact


def _decode(bits: np.ndarray, target: str) -> np.ndarray:
    T, U = _TARGETS[target][:2]
    return np.asarray(bits).astype(U).view(T).astype(np.float64)


def _is_snan(bits, target):
    T, U, _, p, _, _ = _TARGETS[target]
    b = np.asarray(bits).astype(np.uint64)
    width = 32 if target == "f32" else 16
    expmask = ((1 << (width - p)) - 1) << (p - 1)           # exponent field, all ones
    man = b & ((1 << (p - 1)) - 1)
    quiet = 1 << (p - 2)
    return ((b & expmask) == expmask) & (man != 0) & ((man & quiet) == 0)


def fma(a_bits, b_bits, c_bits, target: str = "f32", mode: Rounding = Rounding.RNE):
    """IEEE fused multiply-add a*b + c with one rounding: (result bits, flags), elementwise.

    `target` is "f32" or "f16"; inputs are unsigned bit-pattern arrays of that format."""
    T, U, _, _, _, qnan = _TARGETS[target]
    a, b, c = (_decode(x, target) for x in (a_bits, b_bits, c_bits))
    a, b, c = np.broadcast_arrays(a, b, c)
    with np.errstate(invalid="ignore", over="ignore"):
        prod = a * b                                    # exact: 48 (fp32) or 22 (fp16) bits
        nan_in = np.isnan(a) | np.isnan(b) | np.isnan(c)
        inf_times_zero = (np.isinf(a) & (b == 0)) | (np.isinf(b) & (a == 0))
        inf_minus_inf = np.isinf(prod) & np.isinf(c) & (np.sign(prod) != np.sign(c)) & ~np.isnan(prod)
    snan = _is_snan(a_bits, target) | _is_snan(b_bits, target) | _is_snan(c_bits, target)
    invalid = snan | inf_times_zero | inf_minus_inf
    special = nan_in | inf_times_zero | inf_minus_inf | np.isinf(prod) | np.isinf(c)
    fin = ~special
    s, e = two_sum(np.where(fin, prod, 0.0), np.where(fin, c, 0.0))
    res, flags = round_pair(s, e, target, mode)
    res = res.view(U).copy()
    # exact zero: IEEE sign rules (same-sign zeros keep it; a cancellation is +0, or -0 toward -inf)
    zero = fin & (s == 0) & (e == 0)
    same = (np.signbit(prod) == np.signbit(c)) & (prod == 0) & (c == 0)
    zsign = np.where(same, np.signbit(c), mode == Rounding.RDN)
    sign_bit = U(1 << (8 * np.dtype(U).itemsize - 1))
    res = np.where(zero, np.where(zsign, sign_bit, U(0)), res)
    # specials
    with np.errstate(invalid="ignore"):
        inf_val = np.where(np.isinf(prod), prod, c).astype(T).view(U)
    res = np.where(special, inf_val, res)
    is_nan = nan_in | inf_times_zero | inf_minus_inf
    res = np.where(is_nan, U(qnan), res).astype(U)
    flags = np.where(fin, flags, 0).astype(np.uint8) | np.where(invalid, Flag.INVALID, 0).astype(np.uint8)
    return res, flags
