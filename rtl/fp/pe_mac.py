"""One PE step: psum_out = RNE_fp32(psum_in + exact sum of the step's products) (SPEC D-10..D-12, D-21).

Operands arrive as raw codes with their dtype code; the unpackers are generated from the format
tables of model.dtypes (exponent / mantissa widths, bias, NaN and Inf policy), per generation, so
the RTL and the model read the same definitions.  Products are exact; with `pack` > 1 products
are summed exactly in a fixed-point accumulator anchored at the smallest product lsb the dtype
pair can have, then scaled by the MX block scales (2^(sa + sw)), and one FusedAdd rounds.  The
datapath is as wide as the build's widest significand needs (`sig_width`; D-T62, D-T83)."""
from amaranth.hdl import Cat, Const, Module, Mux, Signal, signed
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from tensore.model import dtypes as dt
from tensore.model.dtypes import Dtype, Gen
from tensore.rtl.fp.fused_add import FusedAdd
from tensore.rtl.fp.raw import EXP_WIDTH, raw_layout, unpack
from tensore.rtl.fp.shifts import shift_left

# fp32_mode operand parts (D-12): which piece of an FP32 operand a sub-step uses
PART_FULL, PART_HI, PART_LO = 0, 1, 2


def element_dtypes(gen, dtypes=None) -> list:
    """The operand dtypes a PE of `gen` multiplies (matmul inputs and MX elements); `dtypes` (a
    specialised build, D-T62) keeps only those."""
    gen = Gen.parse(gen)
    cands = [Dtype.BFLOAT16, Dtype.FP16, Dtype.FP32, Dtype.FP8_EXP3, Dtype.FP8_EXP4, Dtype.FP8_EXP5,
             Dtype.FP8_EXP2, Dtype.FP4_EXP2, Dtype.INT4]
    return [d for d in cands if dt.is_in_enum(d, gen) and (dtypes is None or d in dtypes)]


def parse_dtypes(gen, names) -> tuple | None:
    """A specialised build's dtype set from names ("bf16 fp8_e4m3"), checked against the generation;
    None (the universal PE) for no names."""
    if not names:
        return None
    gen = Gen.parse(gen)
    out = []
    for n in names:
        d = Dtype.parse(n)                          # an unknown name: its one-line ValueError, with suggestions
        if d not in element_dtypes(gen):
            ok = ", ".join(x.name.lower() for x in element_dtypes(gen))
            raise ValueError(f"{d.name.lower()} is not a PE operand dtype of {gen.name} (one of {ok})")
        out.append(d)
    return tuple(sorted(set(out)))


def sig_width(gen, dtypes=None) -> int:
    """The widest significand (hidden bit included) among the build's operand dtypes: the PE's raw
    operands, products and fused add are sized to it (a bf16-only PE multiplies 8-bit significands)."""
    gen = Gen.parse(gen)
    return max(4 if d == Dtype.INT4 else dt.format_of(d, gen).man_bits + 1 for d in element_dtypes(gen, dtypes))


def dtypes_suffix(dtypes) -> str:
    """The module-name suffix of a specialised build ('' for the universal PE)."""
    return "" if not dtypes else "_" + "_".join(Dtype(d).name.lower() for d in dtypes)


class Unpack(wiring.Component):
    """code + dtype -> its raw float (rtl/fp/raw.py); FP32 split by `part`."""

    def __init__(self, gen, e4m3=None, dtypes=None):
        self.gen = Gen.parse(gen)
        self.e4m3, self.dtypes = e4m3, dtypes
        self.sig = sig_width(self.gen, dtypes)
        super().__init__({"code": In(32), "dtype": In(8), "part": In(2), "raw": Out(raw_layout(self.sig))})

    def elaborate(self, platform):
        m = Module()
        out = self.raw
        with m.Switch(self.dtype):
            for d in element_dtypes(self.gen, self.dtypes):
                with m.Case(int(d)):
                    if d == Dtype.INT4:
                        v = self.code[:4]
                        neg = v[3]
                        m.d.comb += [out.sign.eq(neg), out.sig.eq(Mux(neg, (-v.as_signed())[:4], v)), out.exp.eq(0)]
                        continue
                    x = unpack(self.code, dt.format_of(d, self.gen, e4m3=self.e4m3))
                    m.d.comb += [out[k].eq(x[k]) for k in ("nan", "inf") if k in x]
                    m.d.comb += out.sign.eq(x.sign)
                    if d == Dtype.FP32:
                        with m.Switch(self.part):
                            with m.Case(PART_HI):                 # low 10 mantissa bits cleared
                                m.d.comb += [out.sig.eq(x.sig[10:]), out.exp.eq(x.exp + 10)]
                            with m.Case(PART_LO):                 # x - hi: the low 10 bits, x's sign;
                                lo = Mux(x.e != 0xFF, x.f[:10], 0)   # an exact zero is +0 (x - x = +0)
                                m.d.comb += [out.sig.eq(lo), out.exp.eq(x.exp), out.sign.eq(x.sign & (lo != 0)),
                                             out.nan.eq(0), out.inf.eq(0)]
                            with m.Default():
                                m.d.comb += [out.sig.eq(x.sig), out.exp.eq(x.exp)]
                    else:
                        m.d.comb += [out.sig.eq(x.sig), out.exp.eq(x.exp)]
        return m


def _min_lsb(fmt_or_dtype, gen) -> int:
    """The smallest lsb exponent a finite value of the dtype has."""
    if fmt_or_dtype == Dtype.INT4:
        return 0
    fmt = dt.format_of(fmt_or_dtype, gen)
    return fmt.emin - fmt.man_bits


def _max_msb(dtype, gen) -> int:
    if dtype == Dtype.INT4:
        return 3
    fmt = dt.format_of(dtype, gen)
    top_e = (1 << fmt.exp_bits) - (2 if fmt.inf or fmt.nan == "ieee" else 1) - fmt.bias
    return top_e


class PeMac(wiring.Component):
    """psum + sum_j a_j * w_j (exact) with one rounding; `pack` products per step.

    With pack > 1 the step's products are MX / double-row elements (<= 8-bit formats); the MX
    scale exponents `sa`, `sw` (E8M0 value - 127, ignored unless `scaled`) multiply the sum."""

    def __init__(self, gen, pack: int = 1, e4m3=None, dtypes=None):
        self.gen, self.pack, self.e4m3, self.dtypes = Gen.parse(gen), pack, e4m3, dtypes
        small = [d for d in element_dtypes(self.gen, dtypes) if d not in (Dtype.BFLOAT16, Dtype.FP16, Dtype.FP32)]
        self.small = small
        if pack > 1 and not small:
            raise ValueError("more than one element per PE needs an 8-bit or 4-bit element dtype in the build")
        if pack > 1:                                   # fixed-point accumulator of the step's products
            span = max(_max_msb(a, self.gen) - _min_lsb(a, self.gen) for a in small)
            self.acc_width = 2 * span + 2 + (pack - 1).bit_length() + 1
        else:
            self.acc_width = 0
        self.sig = sig_width(self.gen, dtypes)
        self.term_width = max(2 * self.sig, self.acc_width)
        members = {"psum": In(32), "a_dtype": In(8), "w_dtype": In(8), "a_part": In(2), "w_part": In(2),
                   "result": Out(32)}
        for j in range(pack):
            members[f"a{j}"] = In(32)
            members[f"w{j}"] = In(32)
        if pack > 1:
            members.update({"multi": In(1), "scaled": In(1), "sa": In(signed(10)), "sw": In(signed(10)),
                            "sa_nan": In(1), "sw_nan": In(1)})
        if pack > 2:
            members["lanes"] = In(2)          # log2 of the products the step has (the rest are +0 padding)
        super().__init__(members)

    def elaborate(self, platform):
        m = Module()
        m.submodules.add = add = FusedAdd(self.term_width)
        prods = []
        for j in range(self.pack):
            ua, uw = Unpack(self.gen, self.e4m3, self.dtypes), Unpack(self.gen, self.e4m3, self.dtypes)
            m.submodules[f"ua{j}"], m.submodules[f"uw{j}"] = ua, uw
            m.d.comb += [ua.code.eq(getattr(self, f"a{j}")), ua.dtype.eq(self.a_dtype), ua.part.eq(self.a_part),
                         uw.code.eq(getattr(self, f"w{j}")), uw.dtype.eq(self.w_dtype), uw.part.eq(self.w_part)]
            a, w = ua.raw, uw.raw
            mag = Signal(2 * self.sig, name=f"p{j}_mag")
            m.d.comb += mag.eq(a.sig * w.sig)
            lsb = Signal(signed(EXP_WIDTH), name=f"p{j}_lsb")
            m.d.comb += lsb.eq(a.exp + w.exp)
            zero = (a.sig == 0) | (w.sig == 0)
            nan = a.nan | w.nan | (a.inf & (w.sig == 0) & ~w.inf) | (w.inf & (a.sig == 0) & ~a.inf)
            inf = (a.inf | w.inf) & ~nan
            prods.append((a.sign ^ w.sign, mag, lsb, zero, nan, inf))

        s0, mag0, lsb0, _, nan0, inf0 = prods[0]
        single = [add.t_sign.eq(s0), add.t_mag.eq(mag0), add.t_exp.eq(lsb0), add.t_nan.eq(nan0),
                  add.t_inf.eq(inf0)]
        m.d.comb += add.psum.eq(self.psum)
        if self.pack == 1:
            m.d.comb += single
        else:
            m.d.comb += self._multi(m, add, prods, single)
        m.d.comb += self.result.eq(add.result)
        return m

    def _multi(self, m, add, prods, single):
        """Exact fixed-point sum of the products, anchored at the dtype pair's smallest lsb."""
        w = self.acc_width
        anchor = Signal(signed(EXP_WIDTH))
        with m.Switch(Cat(self.a_dtype, self.w_dtype)):
            for da in self.small:
                for dw in self.small:
                    with m.Case(int(da) | (int(dw) << 8)):
                        m.d.comb += anchor.eq(_min_lsb(da, self.gen) + _min_lsb(dw, self.gen))
        acc = Signal(signed(w + 1))
        # the step's products are the first 2^lanes; the others are +0 padding whatever their codes hold
        used = [Const(1) if self.pack <= 2 else j < (Const(1, 4) << self.lanes) for j in range(self.pack)]
        terms = []
        for j, (s, mag, lsb, zero, nan, inf) in enumerate(prods):
            sh = Signal(range(w), name=f"p{j}_shift")
            m.d.comb += sh.eq((lsb - anchor)[:(w - 1).bit_length()])
            placed = shift_left(m, Cat(mag[:16] & used[j].replicate(16), Const(0, w - 16)), sh, f"p{j}_place")
            terms.append(Mux(s, -placed.as_signed(), placed.as_signed()))
        total = terms[0]
        for t in terms[1:]:
            total = total + t
        m.d.comb += acc.eq(total)
        any_nan, pos_inf, neg_inf = Const(0), Const(0), Const(0)
        for (s, mag, lsb, zero, nan, inf), u in zip(prods, used):
            nan, inf = nan & u, inf & u
            any_nan, pos_inf, neg_inf = any_nan | nan, pos_inf | (inf & ~s), neg_inf | (inf & s)
        scale = Signal(signed(EXP_WIDTH))
        m.d.comb += scale.eq(Mux(self.scaled, self.sa + self.sw, 0))
        scale_nan = self.scaled & (self.sa_nan | self.sw_nan)
        # all-zero products keep a sign only when every product is a negative zero (D-10)
        all_neg = Const(1)
        for (s, *_), u in zip(prods, used):
            all_neg = all_neg & (s | ~u)
        multi = [add.t_sign.eq(Mux(pos_inf | neg_inf, neg_inf, Mux(acc == 0, all_neg, acc < 0))),
                 add.t_mag.eq(Mux(acc < 0, -acc, acc)[:w]),
                 add.t_exp.eq(anchor + scale),
                 add.t_nan.eq(any_nan | (pos_inf & neg_inf) | scale_nan),
                 add.t_inf.eq((pos_inf | neg_inf) & ~(pos_inf & neg_inf))]
        out = []
        for a, b in zip(single, multi):
            out.append(a.lhs.eq(Mux(self.multi, b.rhs, a.rhs)))
        return out
