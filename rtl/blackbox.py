"""Separately exported blocks (D-T35, D-T39, D-T68): a large design's Verilog holds one definition of
a block (PE, row, array, row port, PSUM partition, crossbar) instantiated many times.

A block says its Verilog module's name (`module_name`), and `combinational = True` when it has no
registers (its module then has no clock and reset ports).  `black_box(block)` stands for it in a
design as an instance of that module (same signature, so the design wires it as it wires the block);
`ports(block)` names the ports as both the exported module and the instance do: a signature member's
path joined by "_" (`st.req.valid` -> `st_req_valid`).  rtl/export.py writes each block of a design
(`blocks()`) once."""
from amaranth.hdl import ClockSignal, Instance, Module, ResetSignal, ValueCastable
from amaranth.hdl._ir import PortDirection
from amaranth.lib import wiring
from amaranth.lib.wiring import In


def ports(component) -> dict:
    """{Verilog port name: (signal, flow)} of `component`'s signature, flattened."""
    out = {}
    for path, member, value in component.signature.flatten(component):
        name = "_".join(map(str, path))
        if name in out:
            raise ValueError(f"two ports of {type(component).__name__} flatten to {name!r}")
        out[name] = (value.as_value() if isinstance(value, ValueCastable) else value, member.flow)
    return out


def convert_ports(component) -> dict:
    """`ports(component)` in the form amaranth.back.verilog.convert(ports=...) takes."""
    return {name: (value, PortDirection.Input if flow == In else PortDirection.Output)
            for name, (value, flow) in ports(component).items()}


class BlackBox(wiring.Component):
    """An instance of `block.module_name` with `block`'s signature; other attributes (gen, cols, ...)
    are the block's."""

    def __init__(self, block):
        super().__init__(block.signature)
        self.block = prototype(block)

    def __getattr__(self, name):
        block = self.__dict__.get("block")
        if block is None:
            raise AttributeError(name)
        return getattr(block, name)

    def elaborate(self, platform):
        m = Module()
        conns = {} if getattr(self.block, "combinational", False) else {"i_clk": ClockSignal(), "i_rst": ResetSignal()}
        for name, (value, flow) in ports(self).items():
            conns[("i_" if flow == In else "o_") + name] = value
        m.submodules.inst = Instance(self.block.module_name, **conns)      # a name no block's signal has
        return m


def prototype(block):
    """`block` as the description of its module (name, signature, Verilog), not a part of a design:
    Amaranth then does not warn that it is never elaborated."""
    block._MustUse__used = True
    return block


def black_box(block, enabled: bool = True):
    """`block` as an instance of its exported module (or `block` itself when not `enabled`)."""
    return BlackBox(block) if enabled else block
