"""Amaranth `data` layouts of the micro-op descriptors, generated from model.isa's StructDefs.

One definition, two users: the numpy model encodes and decodes bytes with `model.isa.struct`, the
RTL decoder views a 512-bit descriptor through the layouts built here (little-endian: byte k of
the descriptor is bits [8k, 8k+8) of the word)."""
from __future__ import annotations

import functools

from amaranth.hdl import signed, unsigned
from amaranth.lib import data

from tensore.model.dtypes import Gen
from tensore.model.isa.layouts import layout_of, opcodes_of
from tensore.model.isa.struct import Array, Bits, EnumByte, Ignored, Int, Reserved, StructDef, Sub, Union


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
