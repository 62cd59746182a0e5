"""Instances of separately exported modules: a large design's Verilog then holds one definition of
a block (PE, row, PSUM partition) instantiated many times instead of thousands of copies."""
from amaranth.hdl import ClockSignal, Instance, ResetSignal
from amaranth.lib.wiring import In


def instance_of(component, module_name: str) -> Instance:
    """An Instance of `module_name` whose ports are `component`'s signature members plus clk / rst
    (the names Amaranth's Verilog backend gives the exported module's ports)."""
    ports = {"i_clk": ClockSignal(), "i_rst": ResetSignal()}
    for name, member in component.signature.members.items():
        value = getattr(component, name)
        ports[f"{'i' if member.flow == In else 'o'}_{name}"] = value.as_value() if hasattr(value, "as_value") else value
    return Instance(module_name, **ports)
