"""Small netlist helpers shared by the engine's units (rtl/top.py)."""
from amaranth.hdl import Cat, Const, Mux, Shape, Signal, Value


def wire(m, value, name, shape=None):
    """`value` through a named comb signal: an expression used in many statements is then built once
    (Amaranth's lowering copies a shared expression into every statement that reads it, D-T41 (3))."""
    sig = Signal(shape if shape is not None else value.shape(), name=name)
    m.d.comb += sig.eq(value)
    return sig


def span(m, name, lo, n, count):
    """A `count`-bit mask (a named signal) of the indices lo <= i < lo + n: two shifts of ones. Not
    `((1 << n) - 1) << lo`: its subtraction is as wide as the shift's output (count + 2^len(n) bits)
    and costs its width squared in Amaranth's combinational-cycle check; not a comparator pair per
    index: the mask's bits would be as many nets, and ports reading it bit-level."""
    ones = Const((1 << count) - 1, count)
    hi = Signal(max(len(lo), len(n)) + 1, name=f"{name}_end")
    mask = Signal(count, name=name)
    m.d.comb += [hi.eq(lo + n), mask.eq((ones << lo)[:count] & ~(ones << hi)[:count])]
    return mask


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


def record(layout, **fields):
    """The bits of a `layout` (StructLayout) record from the values of its fields, each cut or
    extended (by its signedness, as `eq` does) to its field's width: one value to drive a bus of
    records in one statement (Amaranth checks every bit of a signal for each statement that drives a
    part of it)."""
    out = []
    for name, f in sorted(layout, key=lambda nf: nf[1].offset):
        w, v = Shape.cast(f.shape).width, Value.cast(fields[name])
        if len(v) >= w:
            out.append(v[:w])
        else:
            out.append(Cat(v, v[-1].replicate(w - len(v)) if v.shape().signed else Const(0, w - len(v))))
    return Cat(*out)
