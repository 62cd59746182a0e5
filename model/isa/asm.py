"""The text form of micro-op programs (docs/isa.md): one descriptor per line.

    matmul in_dtype=bf16 rows=128 cols=128 src=(start_addr=sbuf(0,0x100), num_elem=[64,1,1]) ...

Disassembly is lossless (every non-zero byte is printed, undecodable descriptors as `.raw`), so
assemble(disassemble(b)) == b for any bytes."""
from __future__ import annotations

import enum
import re
from dataclasses import dataclass

from tensore.model import addrmap
from tensore.model.dtypes import Gen
from tensore.model.isa import DESCRIPTOR_BYTES, decode, encode, layout_of
from tensore.model.isa.check import check, error_code
from tensore.model.isa.enums import AccumulateGroup
from tensore.model.isa.struct import (Array, Bits, EncodeError, EnumByte, Ignored, Int, Reserved, Sub,
                              Union)

ALIASES = {"rows": "num_active_rows", "cols": "num_active_cols", "src": "src_mem_pattern",
           "dst": "dst_mem_pattern", "acc": "psum_accumulate_flags", "zero": "psum_zero_region",
           "wait": "events.wait_event", "set": "events.set_event"}


class AsmError(ValueError):
    def __init__(self, message: str, line: int = 0, col: int = 0, source: str = "<asm>"):
        self.line, self.col = line, col
        where = f"{source}:{line}:{col}: " if line else ""
        super().__init__(f"{where}{message}")


@dataclass
class _Tok:
    kind: str
    text: str
    col: int


_TOKEN = re.compile(r"\s*(?:(?P<num>-?0[xX][0-9a-fA-F_]+|-?\d+)|(?P<id>[A-Za-z_.][A-Za-z0-9_.]*)"
                    r"|(?P<p>[=,()\[\]]))")


def _tokens(text: str, lineno: int) -> list[_Tok]:
    out, pos = [], 0
    text = text.rstrip()
    while pos < len(text):
        m = _TOKEN.match(text, pos)
        if not m or m.end() == pos:
            rest = text[pos:].lstrip()
            raise AsmError(f"unexpected character {rest[:1]!r}", lineno, len(text) - len(rest) + 1)
        kind = m.lastgroup
        pos = m.end()
        if kind == "num" and re.match(r"[\w.]", text[pos:pos + 1]):      # 4.5, 12abc
            word = m.group(kind) + re.match(r"[\w.]*", text[pos:]).group()
            raise AsmError(f"{word!r} is not a value: numbers are integers (decimal or 0x hex)", lineno,
                           m.start(kind) + 1)
        out.append(_Tok(kind, m.group(kind), m.start(kind) + 1))
    return out


class _Parser:
    def __init__(self, toks, lineno):
        self.toks, self.i, self.line = toks, 0, lineno
        self.key_cols = {}                   # every key's (alias-resolved) name -> its first column

    def peek(self):
        return self.toks[self.i] if self.i < len(self.toks) else None

    def take(self, text=None, kind=None):
        tok = self.peek()
        if tok is None:
            col = (self.toks[-1].col + len(self.toks[-1].text)) if self.toks else 1
            raise AsmError(f"expected {text or kind} at end of line", self.line, col)
        if (text and tok.text != text) or (kind and tok.kind != kind):
            raise AsmError(f"expected {text or kind}, got {tok.text!r}", self.line, tok.col)
        self.i += 1
        return tok

    def value(self):
        tok = self.peek()
        if tok is None:
            return self.take(kind="value")
        if tok.kind == "num":
            self.i += 1
            return int(tok.text.replace("_", ""), 0)
        if tok.text == "[":
            self.i += 1
            items = []
            while self.peek() is not None and self.peek().text != "]":
                items.append(self.value())
                if self.peek() is not None and self.peek().text == ",":
                    self.i += 1
            self.take("]")
            return items
        if tok.text == "(":
            return self.fields()
        if tok.kind == "id":
            self.i += 1
            nxt = self.peek()
            if nxt is not None and nxt.text == "(":
                return self.call(tok)
            return tok.text
        raise AsmError(f"unexpected {tok.text!r}", self.line, tok.col)

    def fields(self):
        self.take("(")
        out = {}
        while self.peek() is not None and self.peek().text != ")":
            key = self.take(kind="id")
            self.take("=")
            self.key_cols.setdefault(ALIASES.get(key.text, key.text), key.col)
            _assign(out, ALIASES.get(key.text, key.text), self.value(), self.line, key.col)
            if self.peek() is not None and self.peek().text == ",":
                self.i += 1
        self.take(")")
        return out

    def call(self, name_tok):
        name = name_tok.text.lower()
        if name in ("sbuf", "psum"):
            self.take("(")
            args = []
            while self.peek() is not None and self.peek().text != ")":
                arg = self.value()
                if not isinstance(arg, int):
                    raise AsmError(f"{name}() takes integers", self.line, name_tok.col)
                args.append(arg)
                if self.peek() is not None and self.peek().text == ",":
                    self.i += 1
            self.take(")")
            try:
                return addrmap.sbuf_addr(*args) if name == "sbuf" else addrmap.psum_addr(*args)
            except (TypeError, ValueError) as exc:
                raise AsmError(str(exc) if isinstance(exc, ValueError) else
                               f"{name}() takes {'(partition, offset)' if name == 'sbuf' else '(partition, bank, offset)'}",
                               self.line, name_tok.col) from None
        fields = self.fields()
        fields["kind"] = name
        return fields


def _assign(target: dict, dotted: str, value, line, col):
    parts = dotted.split(".")
    for p in parts[:-1]:
        node = target.setdefault(p, {})
        if not isinstance(node, dict):
            raise AsmError(f"{p} is given twice", line, col)
        target = node
    if parts[-1] in target:
        raise AsmError(f"{dotted} is given twice", line, col)
    target[parts[-1]] = value


def parse_line(text: str, lineno: int = 1):
    """(opcode name or '.raw', fields dict) for one line, or None for a blank/comment line."""
    code = text.split("#", 1)[0]
    if not code.strip():
        return None
    toks = _tokens(code, lineno)
    p = _Parser(toks, lineno)
    op = p.take(kind="id")
    if op.text == ".raw":
        tok = p.take(kind="num")
        return ".raw", {"value": int(tok.text, 16), "col": tok.col, "digits": len(tok.text) - 2}
    fields, cols = {}, {}
    while p.peek() is not None:
        key = p.take(kind="id")
        p.take("=")
        name = ALIASES.get(key.text, key.text)
        cols[name.split(".")[0]] = key.col
        _assign(fields, name, p.value(), lineno, key.col)
    for name, col in p.key_cols.items():     # keys inside (...), for errors that name them
        cols.setdefault(name, col)
    return op.text.lower(), fields, op.col, cols


def _no_zero(enum_cls) -> bool:
    """An enum with no member 0: a field of it left at zero can never be valid (tile_size, D-T64)."""
    return enum_cls is not None and all(int(m) != 0 for m in enum_cls)


def _required_parts(kind) -> list:
    """(part name, enum) of a Bits field's parts with no valid zero."""
    return [(p, e) for p, _, e in kind.parts if _no_zero(e)] if isinstance(kind, Bits) else []


def _missing_required(layout, fields: dict) -> list:
    """(field, parts) the text leaves out although zero is not valid for them (D-T64).  A field
    written explicitly, also as `field=0`, is never missing."""
    out = []
    for f in layout.fields:
        given = fields.get(f.name)
        parts = _required_parts(f.kind)
        if parts and not isinstance(given, int):
            missing = [p for p, _ in parts if p not in (given or {})]
            if missing:
                out.append((f, missing))
        elif isinstance(f.kind, EnumByte) and _no_zero(f.kind.enum) and f.name not in fields:
            out.append((f, []))
    return out


def _required_message(op: str, gen: Gen, f, missing: list) -> str:
    """One line: the field, its members and an example (each enum's largest member; for tile_size
    the whole array)."""
    name = f.name + (f".{missing[0]}" if len(missing) == 1 and len(_required_parts(f.kind)) > 1 else "")
    if isinstance(f.kind, Bits):
        parts = _required_parts(f.kind)
        example = f"{f.name}=({', '.join(f'{p}={list(e)[-1].name.lower()}' for p, e in parts)})"
        members = "; ".join(f"{p}: {', '.join(m.name.lower() for m in e)}" for p, e in parts)
    else:
        example = f"{f.name}={list(f.kind.enum)[-1].name.lower()}"
        members = ", ".join(m.name.lower() for m in f.kind.enum)
    return (f"{op} on {gen.name} needs {name} (no valid zero; {members}): e.g. {example}; "
            f"{f.name}=0 encodes the zero, which the engine refuses")


def _encode_error(message: str, op: str, gen: Gen, cols: dict) -> tuple[str, int | None]:
    """An encoder error as the assembler reports it, with the column of the field it names: an
    unknown field's own key, else the top-level field's; `acc` on MAVERICK points to the flags."""
    unknown = re.match(r"(\S*): unknown (?:bit )?field\(s\) ([\w, ]+);", message)
    if not unknown:
        return message, cols.get(re.split(r"[.:\[]", message, 1)[0])
    message = re.sub(r"^(\S+)\.: ", r"\1: ", message)              # "src_mem_pattern.: " of a sub-struct
    names = unknown.group(2).split(", ")
    at = min((cols[n] for n in names if n in cols), default=None)
    if re.fullmatch(r"[A-Z0-9_]+", unknown.group(1)):       # a layout name: the descriptor's own fields
        message = re.sub(r"^[A-Z0-9_]+: (.*); [A-Z0-9_]+ has ", rf"{op} on {gen.name}: \1; its fields are ", message)
    if "psum_accumulate_flags" in names and gen.layout == Gen.MAVERICK:
        message += ("; MAVERICK has no psum_accumulate_flags (acc=): a matmul adds into PSUM with "
                    "flags=(accumulate_flag=accumulate) and overwrites with flags=(accumulate_flag=overwrite)")
    return message, at


def descriptor_lines(text: str) -> list[int]:
    """The source line of each descriptor of an assembled program (1-based)."""
    return [n for n, line in enumerate(text.splitlines(), 1) if parse_line(line, n) is not None]


def assemble(text: str, gen, source: str = "<asm>") -> bytes:
    """Assemble a program; errors carry line and column."""
    gen = Gen.parse(gen)
    out = bytearray()
    for lineno, line in enumerate(text.splitlines(), 1):
        try:
            parsed = parse_line(line, lineno)
        except AsmError as exc:
            raise AsmError(str(exc).split(": ", 1)[-1] if exc.line else str(exc), exc.line, exc.col, source) from None
        if parsed is None:
            continue
        if parsed[0] == ".raw":
            info = parsed[1]
            if info["digits"] != 2 * DESCRIPTOR_BYTES:
                raise AsmError(f".raw takes {2 * DESCRIPTOR_BYTES} hex digits, got {info['digits']}",
                               lineno, info["col"], source)
            out += info["value"].to_bytes(DESCRIPTOR_BYTES, "big")
            continue
        op, fields, col, cols = parsed
        if "psum_accumulate_flags" in fields and isinstance(fields["psum_accumulate_flags"], str):
            name = fields["psum_accumulate_flags"].upper()
            if name not in AccumulateGroup.__members__:
                raise AsmError(f"acc={fields['psum_accumulate_flags']!r}: expected "
                               f"{', '.join(m.lower() for m in AccumulateGroup.__members__)} or a number",
                               lineno, col, source)
            fields["psum_accumulate_flags"] = int(AccumulateGroup[name])
        try:
            out += encode(op, gen, **fields)
        except EncodeError as exc:
            message, at = _encode_error(str(exc), op, gen, cols)
            raise AsmError(message, lineno, at or col, source) from None
        for f, missing in _missing_required(layout_of(out[-DESCRIPTOR_BYTES], gen), fields)[:1]:
            raise AsmError(_required_message(op, gen, f, missing), lineno, cols.get(f.name, col), source)
    return bytes(out)


# --- disassembly --------------------------------------------------------------------------------

def _fmt_addr(v: int) -> str:
    loc = addrmap.locate(v)
    if loc is None:
        return f"{v:#x}"
    if loc.memory == "sbuf":
        return f"sbuf({loc.partition},{loc.offset:#x})"
    return f"psum({loc.partition},{loc.bank},{loc.offset % addrmap.PSUM_BANK_BYTES:#x})"


def _fmt(kind, value, name: str):
    """Text for a non-default value, or None when it is all zero."""
    if isinstance(kind, Int):
        if not value:
            return None
        if name == "psum_accumulate_flags" and value in AccumulateGroup._value2member_map_:
            return AccumulateGroup(value).name.lower()
        return _fmt_addr(value) if name.endswith("addr") else (f"{value:#x}" if value > 255 else str(value))
    if isinstance(kind, EnumByte):
        if value == 0 and not _no_zero(kind.enum):
            return None
        return value.name.lower() if isinstance(value, enum.Enum) else str(int(value))
    if isinstance(kind, Bits):                  # parts with no valid zero are written even when zero (D-T64)
        required = {p for p, _ in _required_parts(kind)}
        parts = [f"{p}={v.name.lower() if isinstance(v, enum.Enum) else v}"
                 for (p, _, _), v in zip(kind.parts, value.values()) if v or p in required]
        return f"({', '.join(parts)})" if parts else None
    if isinstance(kind, Array):
        return f"[{','.join(str(v) for v in value)}]" if any(value) else None
    if isinstance(kind, (Reserved, Ignored)):
        return f"{int.from_bytes(value, 'little'):#x}" if any(value) else None
    if isinstance(kind, Sub):
        inner = _fmt_struct(kind.struct, value)
        return f"({inner})" if inner else None
    if isinstance(kind, Union):
        inner = _fmt_struct(kind.member(value["kind"]), value)
        if value["kind"] == kind.members[0][0] and not inner:
            return None
        return f"{value['kind']}({inner})"
    raise TypeError(kind)


def _fmt_struct(sd, rec) -> str:
    out = []
    for f in sd.fields:
        text = _fmt(f.kind, rec[f.name], f.name)
        if text is not None:
            out.append(f"{f.name}={text}")
    return ", ".join(out)


def disassemble_one(desc) -> str:
    if desc.layout is None:
        return f".raw 0x{desc.raw.hex()}"
    parts = [desc.op.name.lower()]
    for f in desc.layout.fields:
        if f.name == "header":
            pad = desc.fields["header"]["pad"]
            if any(pad):
                parts.append(f"header.pad={int.from_bytes(pad, 'little'):#x}")
            continue
        if f.name == "events":
            ev = desc.fields["events"]
            for k in ("wait_event", "set_event"):
                if ev[k] != 0xFF:
                    parts.append(f"events.{k}={ev[k]}")
            if any(ev["reserved"]):
                parts.append(f"events.reserved={int.from_bytes(ev['reserved'], 'little'):#x}")
            continue
        text = _fmt(f.kind, desc.fields[f.name], f.name)
        if text is not None:
            parts.append(f"{f.name}={text}")
    return " ".join(parts)


def disassemble(data: bytes, gen, *, annotate: bool = True) -> str:
    """One line per descriptor; with `annotate`, each invalid one is followed by its violations."""
    gen = Gen.parse(gen)
    if len(data) % DESCRIPTOR_BYTES:
        raise ValueError(f"a program is a whole number of {DESCRIPTOR_BYTES}-byte descriptors, "
                         f"got {len(data)} bytes")
    lines = []
    for i in range(0, len(data), DESCRIPTOR_BYTES):
        desc = decode(data[i:i + DESCRIPTOR_BYTES], gen)
        lines.append(disassemble_one(desc))
        if annotate:
            violations = check(desc)
            if violations:
                lines.append(f"  # ^ descriptor {i // DESCRIPTOR_BYTES}: error {error_code(violations).name}")
                lines.extend(f"  #   {v}" for v in violations)
    return "\n".join(lines) + "\n"
