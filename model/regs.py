"""The arr_seq register file as the host and the engine see it, driven by the generated map
(model/arr_seq_regs.py from rtl/regs/arr_seq.rdl).  Accesses: rw, ro, wo, rw1c, pulse."""
from __future__ import annotations

from tensore.model.arr_seq_regs import REGISTERS


class RegisterFile:
    def __init__(self):
        self.by_offset = {r["offset"]: name for name, r in REGISTERS.items()}
        self.values = {name: self._reset(r) for name, r in REGISTERS.items()}

    @staticmethod
    def _reset(reg) -> int:
        return sum((f["reset"] or 0) << f["lsb"] for f in reg["fields"].values())

    def _name(self, offset: int) -> str:
        if offset not in self.by_offset:
            raise ValueError(f"no arr_seq register at offset {offset:#x}")
        return self.by_offset[offset]

    # -- host side -----------------------------------------------------------------------------
    def read(self, offset: int) -> int:
        """Host read: write-only and pulse fields read as 0."""
        name = self._name(offset)
        value = 0
        for f in REGISTERS[name]["fields"].values():
            if f["access"] not in ("wo", "pulse"):
                value |= self.values[name] & (((1 << f["width"]) - 1) << f["lsb"])
        return value

    def write(self, offset: int, data: int) -> dict:
        """Host write; returns {field: 1} for the pulse fields it fired."""
        name = self._name(offset)
        pulses = {}
        value = self.values[name]
        for fname, f in REGISTERS[name]["fields"].items():
            mask = ((1 << f["width"]) - 1) << f["lsb"]
            bits = data & mask
            if f["access"] == "rw":
                value = (value & ~mask) | bits
            elif f["access"] == "rw1c":
                value &= ~bits
            elif f["access"] == "pulse" and bits:
                pulses[fname] = 1
        self.values[name] = value
        return pulses

    # -- engine side ---------------------------------------------------------------------------
    def get(self, name: str, field: str) -> int:
        f = REGISTERS[name]["fields"][field]
        return (self.values[name] >> f["lsb"]) & ((1 << f["width"]) - 1)

    def set(self, name: str, field: str, value: int):
        f = REGISTERS[name]["fields"][field]
        mask = ((1 << f["width"]) - 1) << f["lsb"]
        self.values[name] = (self.values[name] & ~mask) | ((value << f["lsb"]) & mask)

    def add(self, name: str, field: str, amount: int = 1):
        f = REGISTERS[name]["fields"][field]
        self.set(name, field, (self.get(name, field) + amount) & ((1 << f["width"]) - 1))

    def counter64(self, bank: str, index: int) -> int:
        lo = self.get(f"{bank}[{index}].instr_cnt_lsb", "value")
        hi = self.get(f"{bank}[{index}].instr_cnt_msb", "value")
        return lo | (hi << 32)

    def count64(self, bank: str, index: int):
        v = (self.counter64(bank, index) + 1) & (2 ** 64 - 1)
        self.set(f"{bank}[{index}].instr_cnt_lsb", "value", v & 0xFFFFFFFF)
        self.set(f"{bank}[{index}].instr_cnt_msb", "value", v >> 32)

    def offset_of(self, name: str) -> int:
        return REGISTERS[name]["offset"]
