"""The PSUM stochastic-rounding generator: one xorshift32 state (D-09)."""
from amaranth.hdl import Module, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from tensore.model.dtypes import XORSHIFT_SHIFTS


def xorshift32_next(state):
    """The next xorshift32 state as an Amaranth expression (shifts 13, 17, 5; 32-bit)."""
    a, b, c = XORSHIFT_SHIFTS
    s = state
    s = (s ^ (s << a))[:32]
    s = s ^ (s >> b)
    s = (s ^ (s << c))[:32]
    return s


class Xorshift32(wiring.Component):
    """One SR state.  `step` advances it; `rand` is the low half of the *new* state (D-09).

    `load` writes `load_value` (PeManageSeed LoadSeed) and wins over `step`.  A zero state stays
    zero, as the model requires."""

    step: In(1)
    load: In(1)
    load_value: In(32)
    state: Out(32)
    rand: Out(16)

    def __init__(self, reset: int):
        if not 0 <= reset < 2 ** 32:
            raise ValueError(f"reset state must be a 32-bit value, got {reset:#x}")
        self._reset = reset
        super().__init__()

    def elaborate(self, platform):
        m = Module()
        reg = Signal(32, init=self._reset)
        nxt = Signal(32)
        m.d.comb += [nxt.eq(xorshift32_next(reg)), self.state.eq(reg), self.rand.eq(nxt[:16])]
        with m.If(self.load):
            m.d.sync += reg.eq(self.load_value)
        with m.Elif(self.step):
            m.d.sync += reg.eq(nxt)
        return m
