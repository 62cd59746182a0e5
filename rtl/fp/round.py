"""fp32 -> bf16 rounding of PSUM writes (SPEC D-07, D-08, D-18): nearest even, or stochastic with
the 16 random bits of the partition's xorshift32 state (rtl/rng.py)."""
from amaranth.hdl import Cat, Const, Mux

from tensore.rtl.fp.raw import unpack_fp32

BF16_QNAN = 0x7FC0


def bf16_rne(bits):
    """The bf16 code nearest to fp32 `bits`, ties to even (finite and Inf inputs)."""
    return (bits + 0x7FFF + bits[16])[16:32]


def bf16_sr(bits, rand16):
    """D-08: (bits + r) >> 16 on the 32-bit pattern; +-Inf unchanged."""
    return Mux(unpack_fp32(bits).inf, bits[16:], (bits + rand16)[16:32])


def bf16_round(bits, rand16, sr):
    """fp32 `bits` to bf16, SR when `sr`, else RNE; a NaN becomes the quiet NaN with its sign."""
    return Mux(unpack_fp32(bits).nan, Cat(Const(BF16_QNAN, 15), bits[31]), Mux(sr, bf16_sr(bits, rand16),
                                                                                bf16_rne(bits)))
