"""The PE's fused accumulate: result = RNE_fp32(psum + term), one rounding (SPEC D-10, D-11).

`term` is an exact value (sign, WT-bit magnitude, signed exponent of its lsb) — one product, or
the exact sum of a PE step's products — plus NaN/Inf flags.  The datapath:

1. normalise the term (leading-zero count) so its top bit is known;
2. place both operands in a window of WT + 24 + 3 bits whose top is one above the larger top;
   the larger operand fits whole, bits of the other that fall below the window are ORed into a
   sticky bit kept below the window;
3. add or subtract (larger magnitude minus smaller), normalise, and round to nearest even at the
   fp32 lsb of the result's binade (or at 2^-149 for subnormal results);
4. special cases: NaN (canonical 0x7FC00000), Inf, Inf - Inf, and the signed-zero rules.

Combinational; the PE registers around it."""
from amaranth.hdl import Cat, Const, Module, Mux, Signal, signed, unsigned
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

CANONICAL_NAN = 0x7FC00000
EXP_WIDTH = 12                       # signed exponents: products and MX scales stay within +-1024


def leading_zeros(m: Module, value: Signal, name: str) -> Signal:
    """Count of leading zeros of `value` (len(value) when it is zero)."""
    width = len(value)
    lz = Signal(range(width + 1), name=name)
    m.d.comb += lz.eq(width)
    for i in range(width):                       # the highest set bit wins (last assignment)
        with m.If(value[i]):
            m.d.comb += lz.eq(width - 1 - i)
    return lz


def shift_right_sticky(m: Module, value, amount, limit: int, name: str):
    """(value >> amount, OR of the bits shifted out); `amount` >= `limit` shifts everything out."""
    width = len(value)
    amt = Signal(range(limit + 1), name=f"{name}_amt")
    m.d.comb += amt.eq(Mux(amount >= limit, limit, amount))
    shifted = Signal(width, name=f"{name}_shr")
    m.d.comb += shifted.eq(value >> amt)
    sticky = Signal(name=f"{name}_sticky")
    m.d.comb += sticky.eq((shifted << amt)[:width] != value)
    return shifted, sticky


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
        ww = wt + 24 + 3                         # window bits; one more sticky bit below it
        ew = EXP_WIDTH + 2

        # psum operand
        s_a = self.psum[31]
        e_a = self.psum[23:31]
        f_a = self.psum[:23]
        a_nan = (e_a == 0xFF) & (f_a != 0)
        a_inf = (e_a == 0xFF) & (f_a == 0)
        m_a = Cat(f_a, e_a != 0)
        lsb_a = Signal(signed(ew))
        m.d.comb += lsb_a.eq(Mux(e_a == 0, -149, e_a - 150))
        a_zero = m_a == 0

        # term operand, normalised
        t_zero = self.t_mag == 0
        lz_t = leading_zeros(m, self.t_mag, "lz_term")
        m_t = Signal(wt)
        m.d.comb += m_t.eq((self.t_mag << lz_t)[:wt])
        msb_t = Signal(signed(ew))
        m.d.comb += msb_t.eq(self.t_exp + (wt - 1) - lz_t)
        msb_a = Signal(signed(ew))
        m.d.comb += msb_a.eq(lsb_a + 23)

        # window: bit ww-1 has weight 2^top where top = max(msb_a, msb_t) + 1
        top = Signal(signed(ew))
        m.d.comb += top.eq(Mux(t_zero | (msb_a > msb_t), msb_a, msb_t) + 1)
        lw = Signal(signed(ew))                  # exponent of window bit 0
        m.d.comb += lw.eq(top - (ww - 1))

        def place(mag, lsb_exp, name):
            """The operand as (window bits, sticky)."""
            pos = Signal(signed(ew), name=f"{name}_pos")
            m.d.comb += pos.eq(lsb_exp - lw)
            left = Signal(ww, name=f"{name}_left")
            m.d.comb += left.eq((mag << pos[:8])[:ww])        # pos >= 0 always fits (< ww)
            right, sticky = shift_right_sticky(m, mag, -pos, len(mag) + 1, name)
            placed = Signal(ww, name=f"{name}_placed")
            st = Signal(name=f"{name}_st")
            with m.If(pos >= 0):
                m.d.comb += [placed.eq(left), st.eq(0)]
            with m.Else():
                m.d.comb += [placed.eq(right), st.eq(sticky)]
            return Cat(st, placed)                            # sticky sits one bit below the window

        x_a = place(m_a, lsb_a, "a")
        x_t = place(m_t, msb_t - (wt - 1), "t")

        # add / subtract magnitudes
        sub = s_a ^ self.t_sign
        a_bigger = x_a >= x_t
        total = Signal(ww + 2)
        sign = Signal()
        with m.If(sub):
            m.d.comb += [total.eq(Mux(a_bigger, x_a - x_t, x_t - x_a)),
                         sign.eq(Mux(a_bigger, s_a, self.t_sign))]
        with m.Else():
            m.d.comb += [total.eq(x_a + x_t), sign.eq(s_a)]

        # normalise and round: bit i of `total` weighs 2^(lw - 1 + i)
        lz_r = leading_zeros(m, total, "lz_sum")
        p = Signal(signed(ew))                   # index of the top bit
        m.d.comb += p.eq((ww + 1) - lz_r)
        ex = Signal(signed(ew))                  # floor(log2 |result|)
        m.d.comb += ex.eq(lw - 1 + p)
        lp = Signal(signed(ew))                  # index of the result's lsb in `total`
        lp_norm, lp_sub = p - 23, -149 - (lw - 1)
        m.d.comb += lp.eq(Mux(lp_norm > lp_sub, lp_norm, lp_sub))
        q = Signal(26)
        up = Signal()
        with m.If(lp <= 0):                      # exact: fewer than 24 bits, nothing below
            m.d.comb += [q.eq((total << (-lp)[:5])[:26]), up.eq(0)]
        with m.Else():
            kept, below = shift_right_sticky(m, total, lp - 1, len(total) + 1, "round")
            guard = kept[0]
            m.d.comb += [q.eq(kept[1:27]), up.eq(guard & (below | kept[1]))]
        mant = Signal(26)
        m.d.comb += mant.eq(q + up)
        biased = Signal(signed(ew + 1))
        m.d.comb += biased.eq(Mux(ex > -126, ex, -126) + 126)
        mag = Signal(unsigned(40))
        m.d.comb += mag.eq((biased.as_unsigned()[:ew] << 23) + mant)
        overflow = (biased >= 255) | (mag >= 0x7F800000)
        finite = Signal(32)
        m.d.comb += finite.eq(Cat(Mux(overflow, Const(0x7F800000, 31), mag[:31]), sign))

        # specials and zeros
        with m.If(a_nan | self.t_nan | (a_inf & self.t_inf & sub)):
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
