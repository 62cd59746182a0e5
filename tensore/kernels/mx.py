"""MX block quantisation (OCP Microscaling v1.0, section 6.3; SPEC D-21): blocks of 32 elements
along the contraction, one E8M0 scale each: shared_exp = floor(log2(max |x|)) - emax(element),
elements = RNE(x / 2^shared_exp) saturated to the element format's largest normal."""
from __future__ import annotations

import numpy as np

from tensore.model import dtypes as dt
from tensore.model.dtypes import E8M0_BIAS
from tensore.model.isa.microop import MX_BLOCK


def emax(dtype, gen) -> int:
    """Exponent of the element format's largest finite value."""
    fmt = dt.format_of(dtype, gen)
    top = float(dt.to_fp32(np.array([fmt.max_code], np.uint32), dtype, gen)[0])
    return int(np.frexp(top)[1]) - 1


def quantise(x, dtype, gen, axis: int = 0):
    """(codes, scale codes): x float with K along `axis`, K padded with zeros to a multiple of 32;
    codes have x's layout (padded), scales are [K / 32, other] uint8 E8M0 codes."""
    x = np.asarray(x, np.float64)
    if not np.isfinite(x).all():
        raise ValueError("MX quantisation needs finite inputs")
    xk = np.moveaxis(x, axis, 0)
    k = xk.shape[0]
    kp = -(-k // MX_BLOCK) * MX_BLOCK
    pad = np.zeros((kp,) + xk.shape[1:])
    pad[:k] = xk
    blocks = pad.reshape(kp // MX_BLOCK, MX_BLOCK, -1)
    amax = np.abs(blocks).max(axis=1)                                  # [blocks, other]
    exp = np.where(amax > 0, np.floor(np.log2(np.where(amax > 0, amax, 1.0))), emax(dtype, gen)) - emax(dtype, gen)
    exp = np.clip(exp, -E8M0_BIAS, E8M0_BIAS)
    scaled = (blocks / np.exp2(exp)[:, None, :]).astype(np.float32)    # exact: a power of two
    codes = dt.from_fp32(scaled, dtype, gen, saturate=True).reshape(pad.shape)
    return np.moveaxis(codes, 0, axis), (exp + E8M0_BIAS).astype(np.uint8)


def values(codes, scales, dtype, gen, axis: int = 0) -> np.ndarray:
    """float64 element x 2^(scale - 127) (the dequantised operand)."""
    v = np.moveaxis(dt.to_fp32(np.asarray(codes), dtype, gen).astype(np.float64), axis, 0)
    s = np.repeat(np.asarray(scales, np.float64) - E8M0_BIAS, MX_BLOCK, axis=0)
    return np.moveaxis(v * np.exp2(s), 0, axis)
