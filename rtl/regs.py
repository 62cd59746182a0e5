"""The arr_seq register block, generated from the compiled SystemRDL map (model/arr_seq_regs.py,
written by `tensore regs` from rtl/regs/arr_seq.rdl) — no register is written here by hand.

Bus (docs/regs/arr_seq.md has the map): `addr` (byte address), `wdata`, `we` (a whole-word write
in this cycle), `rdata` (the addressed register, combinational; write-only and pulse fields read 0).
Field behaviour on a bus write: rw replaces, rw1c clears the bits written as 1, pulse fires
`<reg>__<field>__pulse` for one cycle.  Hardware side: every field the RDL lets hardware write has
`hw__<reg>__<field>__we` / `hw__<reg>__<field>__d` (hardware wins over a bus write in the same
cycle); every field hardware reads is on `<reg>__<field>`."""
from amaranth.hdl import Module, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from tensore.model.arr_seq_regs import REGISTERS


def port_name(reg: str) -> str:
    return reg.replace("[", "_").replace("]", "").replace(".", "_")


def _reset(reg) -> int:
    return sum((f["reset"] or 0) << f["lsb"] for f in reg["fields"].values())


class RegisterBlock(wiring.Component):
    def __init__(self, registers: dict = REGISTERS):
        self.registers = registers
        members = {"addr": In(12), "wdata": In(32), "we": In(1), "rdata": Out(32)}
        for name, reg in registers.items():
            for fname, f in reg["fields"].items():
                base = f"{port_name(name)}__{fname}"
                if f["hw"] in ("w", "rw"):
                    members[f"hw__{base}__we"] = In(1)
                    members[f"hw__{base}__d"] = In(f["width"])
                if f["hw"] in ("r", "rw") and f["access"] != "pulse":
                    members[base] = Out(f["width"])
                if f["access"] == "pulse":
                    members[f"{base}__pulse"] = Out(1)
        super().__init__(members)

    def elaborate(self, platform):
        m = Module()
        values = {name: Signal(32, init=_reset(reg), name=port_name(name)) for name, reg in self.registers.items()}
        with m.Switch(self.addr):
            for name, reg in self.registers.items():
                value = values[name]
                readable = sum(((1 << f["width"]) - 1) << f["lsb"] for f in reg["fields"].values()
                               if f["access"] not in ("wo", "pulse"))
                with m.Case(reg["offset"]):
                    m.d.comb += self.rdata.eq(value & readable)
                    for fname, f in reg["fields"].items():
                        sl = value[f["lsb"]:f["lsb"] + f["width"]]
                        bits = self.wdata[f["lsb"]:f["lsb"] + f["width"]]
                        with m.If(self.we):
                            if f["access"] == "rw":
                                m.d.sync += sl.eq(bits)
                            elif f["access"] == "rw1c":
                                m.d.sync += sl.eq(sl & ~bits)
                            elif f["access"] == "pulse":
                                m.d.comb += getattr(self, f"{port_name(name)}__{fname}__pulse").eq(bits != 0)
        for name, reg in self.registers.items():
            self._hardware(m, name, reg, values[name])
        return m

    def _hardware(self, m, name, reg, value):
        for fname, f in reg["fields"].items():
            base = f"{port_name(name)}__{fname}"
            sl = value[f["lsb"]:f["lsb"] + f["width"]]
            if f["hw"] in ("w", "rw"):
                with m.If(getattr(self, f"hw__{base}__we")):          # after the bus: hardware wins
                    m.d.sync += sl.eq(getattr(self, f"hw__{base}__d"))
            if f["hw"] in ("r", "rw") and f["access"] != "pulse":
                m.d.comb += getattr(self, base).eq(sl)
