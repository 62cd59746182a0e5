"""Signed INT4 products through the RTL PE step (rtl/fp/pe_mac.py) in Amaranth's simulator, against
plain integer arithmetic: every pair of the 16 codes, alone and as a two-product MX step."""
import numpy as np
from amaranth.sim import Simulator

from tensore.model.dtypes import Dtype
from tensore.rtl.fp.pe_mac import PeMac

PSUM = 0x3F000000                                  # 0.5: every sum below is exact in fp32
CODES = range(16)
INT4 = {"psum": PSUM, "a_dtype": int(Dtype.INT4), "w_dtype": int(Dtype.INT4)}


def _int4(code: int) -> int:
    """A 4-bit two's complement code's value."""
    return code - 16 if code >= 8 else code


def _fp32_bits(x: float) -> int:
    return int(np.array([x], np.float32).view(np.uint32)[0])


def _run(dut, cases, drive):
    """Each case's `result` bits, the ports set as `drive(case)` names them."""
    out = []

    async def bench(ctx):
        for c in cases:
            for port, value in drive(c).items():
                ctx.set(getattr(dut, port), value)
            out.append(ctx.get(dut.result))

    sim = Simulator(dut)
    sim.add_testbench(bench)
    sim.run()
    return out


def test_int4_products_every_code_pair():
    """psum + a * w for every pair of INT4 codes, both operands signed."""
    dut = PeMac("maverick", 1)
    cases = [(a, w) for a in CODES for w in CODES]
    got = _run(dut, cases, lambda c: dict(INT4, a0=c[0], w0=c[1]))
    want = [_fp32_bits(0.5 + _int4(a) * _int4(w)) for a, w in cases]
    assert [hex(x) for x in got] == [hex(x) for x in want]


def test_int4_mx_step_sums_two_signed_products():
    """A two-product INT4 step (unscaled): psum + a0 * w0 + a1 * w1 with each code against its mirror."""
    dut = PeMac("maverick", 2)
    cases = [(a, w, 15 - a, (w + 5) % 16) for a in CODES for w in CODES[::3]]
    got = _run(dut, cases, lambda c: dict(INT4, multi=1, scaled=0, a0=c[0], w0=c[1], a1=c[2], w1=c[3]))
    want = [_fp32_bits(0.5 + _int4(a0) * _int4(w0) + _int4(a1) * _int4(w1)) for a0, w0, a1, w1 in cases]
    assert [hex(x) for x in got] == [hex(x) for x in want]
