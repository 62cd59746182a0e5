"""Amaranth `data` layouts and enums generated from model.isa: the micro-op descriptors (StructDefs)
and the decoded micro-op record (model.isa.microop.UOP_FIELDS).

One definition, two users: the numpy model encodes and decodes bytes with `model.isa.struct`, the
RTL decoder views a 512-bit descriptor through the layouts built here (little-endian: byte k of
the descriptor is bits [8k, 8k+8) of the word) and hands the sequencer a `uop_layout()` record
whose kinds and orders are `amaranth.lib.enum` twins of the model's IntEnums (D-T69)."""
from __future__ import annotations

import enum as py_enum
import functools

from amaranth.hdl import signed, unsigned
from amaranth.lib import data, enum
from tensore.model.dtypes import Gen
from tensore.model.isa import microop
from tensore.model.isa.layouts import layout_of, opcodes_of
from tensore.model.isa.struct import (
    Array,
    Bits,
    EnumByte,
    Ignored,
    Int,
    Reserved,
    StructDef,
    Sub,
    Union,
)


def hw_enum(model_enum: type[py_enum.IntEnum]) -> type[enum.Enum]:
    """An `amaranth.lib.enum.Enum` with the members of a model IntEnum and the narrowest shape."""
    shape = unsigned(max(int(m) for m in model_enum).bit_length())
    ns = enum.EnumType.__prepare__(model_enum.__name__, (enum.Enum,), shape=shape)
    for m in model_enum:
        ns[m.name] = int(m)
    hw = enum.EnumType(model_enum.__name__, (enum.Enum,), ns, shape=shape)
    hw.__doc__, hw.__module__ = model_enum.__doc__, __name__
    return hw


Kind = hw_enum(microop.Kind)
MmKind = hw_enum(microop.MmKind)
MxOrder = hw_enum(microop.MxOrder)
_HW_ENUMS = {microop.Kind: Kind, microop.MmKind: MmKind, microop.MxOrder: MxOrder}


def hw_member(member):
    """The RTL twin of a model enum member (microop.Kind.LOAD -> Kind.LOAD)."""
    return _HW_ENUMS[type(member)](int(member))


def _uop_shape(spec):
    if spec in _HW_ENUMS:
        return _HW_ENUMS[spec]
    shape = signed(spec.width) if spec.signed else unsigned(spec.width)
    return data.ArrayLayout(shape, spec.count) if spec.count > 1 else shape


@functools.cache
def uop_layout() -> data.StructLayout:
    """The decoded micro-op record (rtl/decoder.py -> rtl/seq.py -> rtl/top.py), field for field
    model.isa.microop.UOP_FIELDS."""
    return data.StructLayout({name: _uop_shape(spec) for name, spec in microop.UOP_FIELDS.items()})


def _shape(kind):
    if isinstance(kind, Int):
        return signed(kind.size * 8) if kind.signed else unsigned(kind.size * 8)
    if isinstance(kind, (EnumByte, Reserved, Ignored)):
        return unsigned(kind.size * 8)
    if isinstance(kind, Bits):
        return data.StructLayout({name: unsigned(width) for name, width, _ in kind.parts})
    if isinstance(kind, Array):
        return data.ArrayLayout(_shape(kind.elem), kind.count)
    if isinstance(kind, Sub):
        return struct_layout(kind.struct)
    if isinstance(kind, Union):
        return data.UnionLayout({name: struct_layout(sd) for name, sd in kind.members})
    raise TypeError(kind)


@functools.cache
def struct_layout(sd: StructDef) -> data.StructLayout:
    """The StructLayout of `sd`: fields in byte order, reserved bytes included, sd.size * 8 bits."""
    layout = data.StructLayout({f.name: _shape(f.kind) for f in sd.fields})
    assert layout.size == sd.size * 8, (sd.name, layout.size)
    return layout


def descriptor_layouts(gen) -> dict:
    """{Opcode: StructLayout} for every opcode the generation executes."""
    gen = Gen.parse(gen)
    return {op: struct_layout(layout_of(op, gen)) for op in sorted(opcodes_of(gen))}
