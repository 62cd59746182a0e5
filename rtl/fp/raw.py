"""The raw float: a code unpacked once into sign, significand, exponent and class (hardfloat's split).

`unpack` reads any float format of the model's tables (model.dtypes: exponent / mantissa widths,
bias, NaN and Inf policy) into the fields every consumer uses: the PE's operand unpack
(rtl/fp/pe_mac.py), the fused add's psum operand (rtl/fp/fused_add.py), a PSUM write's value
(rtl/psum.py) and the MX block scales (E8M0).  `RAW` is the same record as a layout, for ports."""
from amaranth.hdl import Cat, Mux, signed
from amaranth.lib import data

from tensore.model import dtypes as dt

EXP_WIDTH = 12                       # signed exponents: products and MX scales stay within +-1024
SIG = 24                             # an fp32 significand with its hidden bit


def raw_layout(sig_width: int = SIG) -> data.StructLayout:
    """sign, significand (hidden bit included), exponent of its lsb, Inf and NaN flags."""
    return data.StructLayout({"sign": 1, "sig": sig_width, "exp": signed(EXP_WIDTH), "inf": 1, "nan": 1})


class Raw(dict):
    """The fields of one unpacked code, as expressions: sign, sig, exp, inf, nan (the `raw_layout`
    members), and zero, e (biased exponent field), f (mantissa field).  A field a format does not
    have (inf of a format without Inf) is absent; `get` it with a default."""

    def __getattr__(self, name):
        try:
            return self[name]
        except KeyError:
            raise AttributeError(name) from None


def unpack(code, fmt, *, top: bool = False) -> Raw:
    """The fields of `code` in FloatFormat `fmt`.  `exp` is the exponent of the significand's lsb,
    or of its top bit (the hidden bit's place) with `top`."""
    eb, mb = fmt.exp_bits, fmt.man_bits
    e, f = code[mb:mb + eb], code[:mb]
    allones = (1 << eb) - 1
    low = fmt.emin if top else fmt.emin - mb          # a subnormal's exponent: emin
    out = Raw(e=e, f=f, sig=Cat(f, e != 0), exp=Mux(e == 0, low, e - fmt.bias if top else e - fmt.bias - mb),
              zero=(e == 0) & (f == 0))
    if fmt.signed:
        out["sign"] = code[eb + mb]
    if fmt.nan == "ieee":
        out.update(nan=(e == allones) & (f != 0), inf=(e == allones) & (f == 0))
    elif fmt.nan == "fn":
        out["nan"] = (e == allones) & (f == (1 << mb) - 1)
    elif fmt.nan == "allones":
        out["nan"] = e == allones
    return out


def unpack_fp32(bits, *, top: bool = False) -> Raw:
    """An fp32 bit pattern's fields (the one fp32 unpacker)."""
    return unpack(bits, dt.FP32, top=top)


def e8m0_scale(code):
    """An E8M0 block scale (D-05, D-21): (exponent = code - bias, NaN flag)."""
    return code - dt.E8M0.bias, unpack(code, dt.E8M0).nan
