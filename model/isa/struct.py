"""Declarative little-endian struct definitions for the 64-byte micro-op descriptors.

A `StructDef` is a list of fields at byte offsets.  The same definition encodes and decodes bytes
here (numpy-free, no Amaranth) and generates the Amaranth `data` layouts in `rtl/isa.py`.
Decoding never raises: raw values that are not enum members stay plain ints, so any 64 bytes
decode and the checker can say what is wrong with them."""
from __future__ import annotations

import enum
import functools
import struct as _struct
from dataclasses import dataclass
from typing import Callable


class Record(dict):
    """A dict with attribute access, for decoded fields."""

    def __getattr__(self, name):
        try:
            return self[name]
        except KeyError:
            raise AttributeError(name) from None

    def __setattr__(self, name, value):
        self[name] = value


@dataclass(frozen=True)
class Int:
    """An integer of `size` bytes."""

    size: int
    signed: bool = False


@dataclass(frozen=True)
class EnumByte:
    """One byte holding a value of `enum` (kept as int when it is not a member)."""

    enum: type
    size: int = 1


@dataclass(frozen=True)
class Bits:
    """A packed byte of bit fields, LSB first: parts = ((name, width, enum-or-None), ...)."""

    parts: tuple
    size: int = 1


@dataclass(frozen=True)
class Array:
    elem: Int
    count: int

    @property
    def size(self) -> int:
        return self.elem.size * self.count


@dataclass(frozen=True)
class Reserved:
    """Bytes that must be zero (checked by model.isa.check)."""

    size: int


@dataclass(frozen=True)
class Ignored:
    """Bytes the PE ignores (the HEADER's three bytes after the opcode, D-20)."""

    size: int


@dataclass(frozen=True)
class Sub:
    struct: "StructDef"

    @property
    def size(self) -> int:
        return self.struct.size


@dataclass(frozen=True)
class Union:
    """Overlaid members of equal size; `select(raw_bytes, gen) -> member name` picks one."""

    members: tuple            # ((name, StructDef), ...)
    select: Callable
    mark: Callable            # mark(member name, fields dict) -> fields with the marker bits set
    unmark: Callable          # unmark(member name, fields dict) -> fields without marker bits

    @property
    def size(self) -> int:
        return self.members[0][1].size

    def member(self, name: str) -> "StructDef":
        for n, s in self.members:
            if n == name:
                return s
        raise ValueError(f"unknown pattern kind {name!r}; expected one of "
                         f"{', '.join(n for n, _ in self.members)}")


@dataclass(frozen=True)
class F:
    offset: int
    name: str
    kind: object


@dataclass(frozen=True)
class StructDef:
    name: str
    fields: tuple
    size: int = 0
    doc: str = ""

    def __post_init__(self):
        pos = 0
        for f in self.fields:
            if f.offset != pos:
                raise ValueError(f"{self.name}.{f.name} at {f.offset}, expected {pos} (gap or overlap)")
            pos += f.kind.size
        if self.size and pos != self.size:
            raise ValueError(f"{self.name} is {pos} bytes, declared {self.size}")
        object.__setattr__(self, "size", pos)

    def field(self, name: str) -> F:
        for f in self.fields:
            if f.name == name:
                return f
        raise KeyError(f"{self.name} has no field {name!r}")

    def names(self) -> list[str]:
        return [f.name for f in self.fields if not isinstance(f.kind, (Reserved, Ignored))]


def struct(name: str, *fields: tuple, size: int = 0, doc: str = "") -> StructDef:
    return StructDef(name, tuple(F(o, n, k) for o, n, k in fields), size, doc)


# --- decoding ---------------------------------------------------------------------------------

def _as_enum(enum_cls, value: int):
    try:
        return enum_cls(value)
    except ValueError:
        return value


def decode_struct(sd: StructDef, data: bytes, gen) -> Record:
    rec = Record()
    for name, lo, hi, read, arg in _readers(sd):
        if read is _INT:
            rec[name] = int.from_bytes(data[lo:hi], "little", signed=arg)
        elif read is _ENUM:
            rec[name] = arg[data[lo]]
        else:
            rec[name] = read(data[lo:hi], gen)
    return rec


_INT, _ENUM = object(), object()        # decode_struct reads these two kinds itself


def per_struct(cache: dict, sd: StructDef, make, *key):
    """make() for the StructDef `sd` (and `key`), kept in `cache` by sd's identity: hashing a frozen
    StructDef hashes every field, too slow for check()'s path (D-T101); the entry holds `sd`, so its
    id stays its own."""
    k = (id(sd), *key)
    try:
        return cache[k][1]
    except KeyError:
        cache[k] = (sd, make())
        return cache[k][1]


def _readers(sd: StructDef) -> tuple:
    """(name, first byte, end, how, its argument) per field of `sd`: _decode_kind's work for each
    kind, chosen once per struct (decode_struct runs once per check(), D-T101).  `how` is _INT
    (signed?), _ENUM (the value for each byte) or read(chunk, gen)."""
    return per_struct(_READERS, sd, lambda: tuple((f.name, f.offset, f.offset + f.kind.size, *_reader(f.kind))
                                                  for f in sd.fields))


_READERS: dict = {}


def _reader(kind) -> tuple:
    """(how, argument) for one field kind; the same value _decode_kind gives."""
    if isinstance(kind, Int):
        return _INT, kind.signed
    if isinstance(kind, EnumByte):
        return _ENUM, _members(kind.enum)
    return _read(kind), None


def _read(kind):
    """read(chunk, gen) for the other kinds."""
    if isinstance(kind, Bits):
        parts = tuple((name, pos, (1 << width) - 1, _members(enum_cls) if enum_cls else None)
                      for (name, width, enum_cls), pos in zip(kind.parts, _offsets(kind.parts)))

        def bits(chunk, gen):
            byte, rec = chunk[0], Record()
            for name, pos, mask, members in parts:
                v = (byte >> pos) & mask
                rec[name] = members[v] if members else v
            return rec
        return bits
    if isinstance(kind, Array) and kind.elem.size in _FORMATS:
        unpack = _struct.Struct(f"<{kind.count}{_FORMATS[kind.elem.size][kind.elem.signed]}").unpack
        return lambda chunk, gen: list(unpack(chunk))
    if isinstance(kind, (Reserved, Ignored)):
        return lambda chunk, gen: bytes(chunk)
    if isinstance(kind, Sub):
        struct = kind.struct
        return lambda chunk, gen: decode_struct(struct, chunk, gen)
    if isinstance(kind, Union):
        def union(chunk, gen):
            name = kind.select(chunk, gen)
            rec = Record(kind=name)
            rec.update(kind.unmark(name, decode_struct(kind.member(name), chunk, gen)))
            return rec
        return union
    return lambda chunk, gen: _decode_kind(kind, chunk, gen)


_FORMATS = {1: "Bb", 2: "Hh", 4: "Ii", 8: "Qq"}       # little-endian element codes by size: [unsigned, signed]


def _offsets(parts) -> list:
    out, pos = [], 0
    for _, width, _ in parts:
        out.append(pos)
        pos += width
    return out


@functools.cache
def _members(enum_cls) -> tuple:
    """_as_enum(enum_cls, v) for every byte value v."""
    return tuple(_as_enum(enum_cls, v) for v in range(256))


def _decode_kind(kind, chunk: bytes, gen):
    if isinstance(kind, Int):
        return int.from_bytes(chunk, "little", signed=kind.signed)
    if isinstance(kind, EnumByte):
        return _as_enum(kind.enum, chunk[0])
    if isinstance(kind, Bits):
        byte, rec, pos = chunk[0], Record(), 0
        for name, width, enum_cls in kind.parts:
            v = (byte >> pos) & ((1 << width) - 1)
            rec[name] = _as_enum(enum_cls, v) if enum_cls else v
            pos += width
        return rec
    if isinstance(kind, Array):
        n = kind.elem.size
        return [int.from_bytes(chunk[i * n:(i + 1) * n], "little", signed=kind.elem.signed)
                for i in range(kind.count)]
    if isinstance(kind, (Reserved, Ignored)):
        return bytes(chunk)
    if isinstance(kind, Sub):
        return decode_struct(kind.struct, chunk, gen)
    if isinstance(kind, Union):
        name = kind.select(chunk, gen)
        rec = Record(kind=name)
        rec.update(kind.unmark(name, decode_struct(kind.member(name), chunk, gen)))
        return rec
    raise TypeError(kind)


# --- encoding ---------------------------------------------------------------------------------

class EncodeError(ValueError):
    """A field value that cannot be encoded (name, range, or type)."""


def _enum_value(enum_cls, value, where: str) -> int:
    if isinstance(value, str):
        key = value.strip().upper()
        refusal = None
        if hasattr(enum_cls, "parse"):              # its own names and aliases, and its own refusal
            try:
                return int(enum_cls.parse(value))
            except ValueError as exc:
                refusal = str(exc)
        try:
            return int(enum_cls[key])
        except KeyError:
            names = ", ".join(m.name.lower() for m in enum_cls)
            raise EncodeError(f"{where}: {refusal or f'{value!r} is not a {enum_cls.__name__} ({names})'}") from None
    if isinstance(value, enum.Enum):
        return int(value.value)
    return _int(value, where)


def _int(value, where: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        try:
            value = int(value)
        except (TypeError, ValueError):
            raise EncodeError(f"{where}: expected an integer, got {value!r}") from None
    return value


def _check_range(v: int, bits: int, signed: bool, where: str) -> int:
    lo, hi = (-(1 << (bits - 1)), (1 << (bits - 1)) - 1) if signed else (0, (1 << bits) - 1)
    if not lo <= v <= hi:
        raise EncodeError(f"{where}: {v} does not fit {'signed' if signed else 'unsigned'} {bits} bits")
    return v


def encode_struct(sd: StructDef, values: dict, gen, where: str = "") -> bytes:
    values = dict(values or {})
    known = {f.name for f in sd.fields}
    extra = set(values) - known - {"kind"}
    if extra:
        raise EncodeError(f"{where or sd.name}: unknown field(s) {', '.join(sorted(extra))}; "
                          f"{sd.name} has {', '.join(sd.names())}")
    out = bytearray()
    for f in sd.fields:
        out += _encode_kind(f.kind, values.get(f.name), gen, f"{where}{f.name}")
    return bytes(out)


def _encode_kind(kind, value, gen, where: str) -> bytes:
    if isinstance(kind, Int):
        v = _check_range(_int(value or 0, where), kind.size * 8, kind.signed, where)
        return v.to_bytes(kind.size, "little", signed=kind.signed)
    if isinstance(kind, EnumByte):
        v = _check_range(_enum_value(kind.enum, 0 if value is None else value, where), 8, False, where)
        return bytes([v])
    if isinstance(kind, Bits):
        value = value or {}
        if isinstance(value, int):
            return bytes([_check_range(value, 8, False, where)])
        names = {p[0] for p in kind.parts}
        extra = set(value) - names
        if extra:
            raise EncodeError(f"{where}: unknown bit field(s) {', '.join(sorted(extra))}; "
                              f"has {', '.join(p[0] for p in kind.parts)}")
        byte, pos = 0, 0
        for name, width, enum_cls in kind.parts:
            raw = value.get(name, 0)
            v = _enum_value(enum_cls, raw, f"{where}.{name}") if enum_cls else _int(raw, f"{where}.{name}")
            byte |= _check_range(v, width, False, f"{where}.{name}") << pos
            pos += width
        return bytes([byte])
    if isinstance(kind, Array):
        value = list(value or [])
        if len(value) > kind.count:
            raise EncodeError(f"{where}: {len(value)} values for {kind.count} elements")
        value += [0] * (kind.count - len(value))
        return b"".join(_encode_kind(kind.elem, v, gen, f"{where}[{i}]") for i, v in enumerate(value))
    if isinstance(kind, (Reserved, Ignored)):
        if value is None:
            return bytes(kind.size)
        if isinstance(value, int):
            return _check_range(value, kind.size * 8, False, where).to_bytes(kind.size, "little")
        data = bytes(value)
        if len(data) != kind.size:
            raise EncodeError(f"{where}: {kind.size} bytes expected, got {len(data)}")
        return data
    if isinstance(kind, Sub):
        return encode_struct(kind.struct, value or {}, gen, f"{where}.")
    if isinstance(kind, Union):
        value = dict(value or {})
        name = value.pop("kind", kind.members[0][0])
        member = kind.member(name)
        return encode_struct(member, kind.mark(name, value), gen, f"{where}.")
    raise TypeError(kind)


def walk(sd: StructDef, base: int = 0, prefix: str = ""):
    """Yield (byte offset, dotted name, kind) for every leaf field, unions by their first member."""
    for f in sd.fields:
        name = f"{prefix}{f.name}"
        if isinstance(f.kind, Sub):
            yield from walk(f.kind.struct, base + f.offset, name + ".")
        else:
            yield base + f.offset, name, f.kind
