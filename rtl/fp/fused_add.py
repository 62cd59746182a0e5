"""The PE's fused accumulate: result = RNE_fp32(psum + term), one rounding (SPEC D-10, D-11).

`term` is an exact value (sign, WT-bit magnitude, signed exponent of its lsb) -- one product, or
the exact sum of a PE step's products -- plus NaN/Inf flags.  The datapath, as a hardware adder
builds it (every signal at most W + 5 bits, W = max(WT, 24); rtl/fp/shifts.py):

1. the term is normalised (logarithmic leading-zero count), so both operands are W-bit fields
   with a known top exponent (a subnormal psum's field is not normalised; see below);
2. the operand with the smaller top exponent is shifted right into a window of W + 2 bits below
   the larger one's top, the bits shifted out ORed into a sticky bit below the window;
3. the two are added or subtracted (a negative difference, possible only against a subnormal
   psum, is negated), the sum normalised, and rounded to nearest even at the fp32 lsb of its
   binade, or at 2^-149 for subnormal results;
4. special cases: NaN (canonical 0x7FC00000), Inf, Inf - Inf, and the signed-zero rules.

Why the result is the correctly rounded exact sum: with a shift of 0 or 1 nothing reaches the
sticky bit, so the sum is exact; with a shift of 2 or more at most one bit cancels, so at least
W >= 24 bits stay above the two guard bits and the sticky bit.  A subnormal psum (top 2^-126)
puts the window's bottom at or below 2^-152, under the guard bit of any result (lsb >= 2^-149).

Combinational; the PE registers around it."""
from amaranth.hdl import Cat, Const, Module, Mux, Signal, signed, unsigned
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from tensore.rtl.fp.raw import EXP_WIDTH, unpack_fp32
from tensore.rtl.fp.shifts import normalize, shift_right_sticky

CANONICAL_NAN = 0x7FC00000


class FusedAdd(wiring.Component):
    """psum (fp32 bits) + term (sign, magnitude, lsb exponent) -> fp32 bits, RNE, canonical NaN."""

    def __init__(self, term_width: int):
        self.term_width = term_width
        super().__init__({
            "psum": In(32),
            "t_sign": In(1),
            "t_mag": In(term_width),
            "t_exp": In(signed(EXP_WIDTH)),
            "t_nan": In(1),
            "t_inf": In(1),
            "result": Out(32),
        })

    def elaborate(self, platform):
        m = Module()
        wt = self.term_width
        W = max(wt, 24)
        ew = EXP_WIDTH + 2
        a = unpack_fp32(self.psum, top=True)
        s_a, a_nan, a_inf, a_zero = a.sign, a.nan, a.inf, a.zero
        t_zero = self.t_mag == 0

        # W-bit fields and the exponents of their top bits
        nt, lz_t = normalize(m, self.t_mag, "t")
        top_a, top_t = Signal(signed(ew)), Signal(signed(ew))
        m.d.comb += [top_a.eq(a.exp), top_t.eq(self.t_exp + (wt - 1) - lz_t)]
        f_big, f_small = Signal(W), Signal(W)
        s_big, s_small = Signal(), Signal()
        top, d = Signal(signed(ew)), Signal(ew)
        fa, ft = Cat(Const(0, W - 24), a.sig), Cat(Const(0, W - wt), nt)
        with m.If(top_a >= top_t):
            m.d.comb += [f_big.eq(fa), f_small.eq(ft), s_big.eq(s_a), s_small.eq(self.t_sign), top.eq(top_a),
                         d.eq(top_a - top_t)]
        with m.Else():
            m.d.comb += [f_big.eq(ft), f_small.eq(fa), s_big.eq(self.t_sign), s_small.eq(s_a), top.eq(top_t),
                         d.eq(top_t - top_a)]

        # window: [carry | W field bits | 2 guard bits | sticky], bit i weighs 2^(top - W - 2 + i)
        shifted, sticky = shift_right_sticky(m, Cat(Const(0, 2), f_small), d, "align")
        x_big = Cat(Const(0, 3), f_big, Const(0, 1))
        x_small = Cat(sticky, shifted, Const(0, 1))
        total, sign = Signal(W + 4), Signal()
        diff = Signal(signed(W + 5))
        m.d.comb += diff.eq(x_big - x_small)
        with m.If(s_big == s_small):
            m.d.comb += [total.eq(x_big + x_small), sign.eq(s_big)]
        with m.Elif(diff < 0):
            m.d.comb += [total.eq(-diff), sign.eq(s_small)]
        with m.Else():
            m.d.comb += [total.eq(diff), sign.eq(s_big)]

        # normalise and round
        n, lz = normalize(m, total, "sum")
        ex = Signal(signed(ew))                  # floor(log2 |result|)
        m.d.comb += ex.eq(top + 1 - lz)
        head = n[W + 4 - 25:]                    # 24 result bits and the guard bit
        rest = n[:W + 4 - 25] != 0
        k = Signal(ew)                           # extra right shift of a subnormal result
        m.d.comb += k.eq(Mux(ex < -126, -126 - ex, 0))
        kept, lost = shift_right_sticky(m, head, k, "sub")
        mant = Signal(25)
        m.d.comb += mant.eq(kept[1:] + (kept[0] & (rest | lost | kept[1])))
        biased = Signal(signed(ew + 1))
        m.d.comb += biased.eq(Mux(ex > -126, ex, -126) + 126)
        mag = Signal(unsigned(40))
        m.d.comb += mag.eq((biased.as_unsigned()[:ew] << 23) + mant)
        overflow = (biased >= 255) | (mag >= 0x7F800000)
        finite = Signal(32)
        m.d.comb += finite.eq(Cat(Mux(overflow, Const(0x7F800000, 31), mag[:31]), sign))

        # specials and zeros
        with m.If(a_nan | self.t_nan | (a_inf & self.t_inf & (s_a ^ self.t_sign))):
            m.d.comb += self.result.eq(CANONICAL_NAN)
        with m.Elif(a_inf):
            m.d.comb += self.result.eq(self.psum)
        with m.Elif(self.t_inf):
            m.d.comb += self.result.eq(Cat(Const(0x7F800000, 31), self.t_sign))
        with m.Elif(t_zero & a_zero):
            m.d.comb += self.result.eq(Cat(Const(0, 31), s_a & self.t_sign))
        with m.Elif(t_zero):
            m.d.comb += self.result.eq(self.psum)
        with m.Elif(total == 0):                 # exact cancellation: +0 under RNE
            m.d.comb += self.result.eq(0)
        with m.Else():
            m.d.comb += self.result.eq(finite)
        return m


def drive_term(add: FusedAdd, raw) -> list:
    """Statements presenting a raw float (rtl/fp/raw.py fields) as the fused add's term."""
    return [add.t_sign.eq(raw["sign"]), add.t_mag.eq(raw["sig"]), add.t_exp.eq(raw["exp"]),
            add.t_nan.eq(raw["nan"]), add.t_inf.eq(raw["inf"])]
