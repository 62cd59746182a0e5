"""The PE micro-op ISA: 64-byte descriptors per generation, validity rules, text form.

    encode(op, gen, **fields) -> bytes          decode(data, gen) -> Descriptor
    check(descriptor, gen) -> [Violation]       error_code(violations) -> ErrorCode
"""
from __future__ import annotations

from tensore.model.dtypes import Gen
from tensore.model.isa.enums import (AccumulateGroup, AccumulateMode, ErrorCode, FP32Mode, LoadOrder,
                             MXPerfMode, Opcode, PeReg, PerfOpt, PsumAccumulate, PsumRound,
                             ScalarMode, SeedMode, TagWeightMode, TileColSize, TileRowSize,
                             XposeMode, ZeroRegion)
from tensore.model.isa.layouts import EVENT_NONE, layout_of, opcodes_of
from tensore.model.isa.struct import EncodeError, Record, decode_struct, encode_struct

DESCRIPTOR_BYTES = 64

__all__ = ["encode", "decode", "check", "error_code", "Descriptor", "Violation", "EncodeError",
           "DESCRIPTOR_BYTES", "Opcode", "ErrorCode", "FP32Mode", "MXPerfMode", "PerfOpt",
           "SeedMode", "AccumulateMode", "AccumulateGroup", "PsumAccumulate", "LoadOrder",
           "ZeroRegion", "TileRowSize", "TileColSize", "ScalarMode", "TagWeightMode", "XposeMode",
           "PeReg", "PsumRound", "layout_of", "opcodes_of"]


class Descriptor:
    """A decoded descriptor: `op` (Opcode or raw int), `gen`, `layout`, fields by name, `raw` bytes."""

    def __init__(self, op, gen: Gen, layout, fields: Record, raw: bytes):
        self.op, self.gen, self.layout, self.fields, self.raw = op, gen, layout, fields, raw

    def __getattr__(self, name):
        fields = self.__dict__.get("fields")
        if fields is not None and name in fields:
            return fields[name]
        raise AttributeError(f"{self.layout.name if self.layout else 'descriptor'} has no field {name!r}")

    def __repr__(self):
        name = self.op.name if isinstance(self.op, Opcode) else f"0x{self.op:02X}"
        return f"<Descriptor {name} {self.gen.name} {self.layout.name if self.layout else '?'}>"

    def __eq__(self, other):
        return isinstance(other, Descriptor) and (self.gen, self.raw) == (other.gen, other.raw)

    def __hash__(self):
        return hash((self.gen, self.raw))


def encode(op, gen, **fields) -> bytes:
    """Encode one descriptor.  Sub-structs are dicts; enums by member, name or value."""
    gen = Gen.parse(gen)
    try:
        opcode = Opcode[op.upper()] if isinstance(op, str) else Opcode(op)
    except (KeyError, ValueError):
        raise EncodeError(f"unknown opcode {op!r}; PE opcodes are "
                          f"{', '.join(o.name.lower() for o in Opcode)}") from None
    if opcode not in opcodes_of(gen):
        raise EncodeError(f"{opcode.name} does not exist on {gen.name}")
    layout = layout_of(opcode, gen)
    header = dict(fields.pop("header", {}) or {})
    header["opcode"] = opcode
    events = {"wait_event": EVENT_NONE, "set_event": EVENT_NONE, **(fields.pop("events", {}) or {})}
    data = encode_struct(layout, {"header": header, "events": events, **fields}, gen)
    assert len(data) == DESCRIPTOR_BYTES
    return data


def decode(data, gen) -> Descriptor:
    """Decode 64 bytes.  Never raises on content: unknown opcodes give a Descriptor with no layout."""
    gen = Gen.parse(gen)
    data = bytes(data)
    if len(data) != DESCRIPTOR_BYTES:
        raise ValueError(f"a descriptor is {DESCRIPTOR_BYTES} bytes, got {len(data)}")
    try:
        op = Opcode(data[0])
    except ValueError:
        return Descriptor(data[0], gen, None, Record(), data)
    if op not in opcodes_of(gen):
        return Descriptor(op, gen, None, Record(), data)
    layout = layout_of(op, gen)
    return Descriptor(op, gen, layout, decode_struct(layout, data, gen), data)


from tensore.model.isa.check import Violation, check, error_code  # noqa: E402  (check uses Descriptor)
