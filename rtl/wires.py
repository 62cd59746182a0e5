"""Small netlist helpers shared by the engine's units (rtl/top.py)."""
from amaranth.hdl import Const, Mux, Signal


def wire(m, value, name, shape=None):
    """`value` through a named comb signal: an expression used in many statements is then built once
    (Amaranth's lowering copies a shared expression into every statement that reads it, D-T41 (3))."""
    sig = Signal(shape if shape is not None else value.shape(), name=name)
    m.d.comb += sig.eq(value)
    return sig


def any_of(bits):
    """The OR of `bits` (values of any width; 0 for none)."""
    out = Const(0, 1)
    for b in bits:
        out = out | b
    return out


def first_of(pairs, width):
    """The value of the first (condition, value) pair whose condition holds, else 0."""
    out = Const(0, width)
    for cond, value in reversed(pairs):
        out = Mux(cond, value, out)
    return out
