"""Bounded shifters and a logarithmic leading-zero count: fixed-width stages of constant shifts, so
no signal grows past its operand (Amaranth widens `x << n` by 2^len(n) - 1 bits; STYLE.md)."""
from amaranth.hdl import Cat, Const, Module, Mux, Signal


def normalize(m: Module, value, name: str):
    """(value << lz, lz): the value shifted left until its top bit is set, and the leading-zero count
    (len(value) for zero), by halving: one stage per bit of the count."""
    width = len(value)
    stages = max(1, (width - 1).bit_length())
    x = Signal(width, name=f"{name}_in")
    m.d.comb += x.eq(value)
    bits = []
    for k in reversed(range(stages)):
        step = 1 << k
        if step >= width:
            bits.append(Const(0, 1))
            continue
        top_zero = Signal(name=f"{name}_z{k}")
        m.d.comb += top_zero.eq(x[width - step:] == 0)
        nxt = Signal(width, name=f"{name}_s{k}")
        m.d.comb += nxt.eq(Mux(top_zero, Cat(Const(0, step), x[:width - step]), x))
        bits.append(top_zero)
        x = nxt
    lz = Signal(range(width + 1), name=f"{name}_lz")
    zero = Signal(name=f"{name}_zero")
    m.d.comb += [zero.eq(x[width - 1] == 0), lz.eq(Mux(zero, width, Cat(*reversed(bits))))]
    return x, lz


def shift_left(m: Module, value, amount, name: str):
    """value << amount in len(value) bits (bits shifted past the top are dropped)."""
    width = len(value)
    x = value
    for k in range(len(amount)):
        step = 1 << k
        nxt = Signal(width, name=f"{name}_l{k}")
        m.d.comb += nxt.eq(Mux(amount[k], Cat(Const(0, min(step, width)), x[:max(0, width - step)])[:width], x)
                           if step < width else Mux(amount[k], 0, x))
        x = nxt
    return x


def shift_right_sticky(m: Module, value, amount, name: str):
    """(value >> amount, OR of the bits shifted out), in len(value) bits: `amount` is clamped to
    len(value) (everything shifted out)."""
    width = len(value)
    bits = max(1, width.bit_length())
    amt = Signal(bits, name=f"{name}_amt")
    m.d.comb += amt.eq(Mux(amount >= width, width, amount))
    x, sticky = value, Const(0, 1)
    for k in range(bits):
        step = 1 << k
        nxt = Signal(width, name=f"{name}_r{k}")
        st = Signal(name=f"{name}_st{k}")
        if step < width:
            m.d.comb += [nxt.eq(Mux(amt[k], x[step:], x)), st.eq(sticky | (amt[k] & (x[:step] != 0)))]
        else:
            m.d.comb += [nxt.eq(Mux(amt[k], 0, x)), st.eq(sticky | (amt[k] & (x != 0)))]
        x, sticky = nxt, st
    return x, sticky
