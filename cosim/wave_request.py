"""Waveform requests (D-T66): the format follows the file's suffix (`.fst`, recommended, or `.vcd`) on
every simulator, `depth` levels of hierarchy from the simulated top (0: everything, PEs included).

    Trace.of(path, depth)        -> Trace(fmt, depth); a one-line ValueError for another suffix
    convert_vcd(src, dst, depth) -> `src` (a VCD, e.g. Amaranth's) as `dst` (.vcd or .fst), cut to `depth`
    hierarchy(path)              -> (scopes holding signals, signals) of a VCD or FST file
    variables(path)              -> [(scope names, name, width)] of a VCD or FST file
    typed_variables(path)        -> [(scope names, name, width, kind)], kind as VCD spells it (`wire`, `integer`, ...)

Verilator and Icarus write both formats themselves; Amaranth's simulator writes VCD, which
`convert_vcd` turns into FST through pylibfst (GTKWave's FST writer).  Depth counts the cosim
wrapper (Verilator, Icarus) or the engine (Amaranth) as level 1."""
from __future__ import annotations

import os
import shutil
from dataclasses import dataclass
from pathlib import Path

FORMATS = ("fst", "vcd")


@dataclass(frozen=True)
class Trace:
    fmt: str = "vcd"
    depth: int = 0                   # levels of hierarchy; 0: everything

    @classmethod
    def of(cls, path, depth: int = 0) -> "Trace":
        return cls(format_of(path), check_depth(depth))

    @property
    def key(self) -> str:
        return f"{self.fmt}-d{self.depth}"


def format_of(path) -> str:
    """The waveform format a file name asks for."""
    suffix = Path(path).suffix.lower().lstrip(".")
    if suffix not in FORMATS:
        raise ValueError(f"waveform file {path}: name it .fst (compact, recommended) or .vcd")
    return suffix


def check_depth(depth) -> int:
    if depth is None:
        return 0
    if int(depth) != depth or depth < 0:
        raise ValueError(f"--waves-depth {depth}: a number of hierarchy levels >= 1, or 0 for everything")
    return int(depth)


def _var(line: str):
    """(kind, width, id, name) of a `$var` line."""
    t = line.split()
    return t[1], int(t[2]), t[3], " ".join(t[4:-1])


def _header(lines, depth: int, skip_levels: int):
    """Walk a VCD header: yield ('scope', name) / ('upscope',) / ('var', kind, width, id, name) /
    ('timescale', text) for what `depth` keeps, and at the end ('dropped', the ids it drops)."""
    level, dropped, text = 0, set(), ""
    for line in lines:
        text = f"{text} {line.strip()}".strip()
        if not text.endswith("$end"):
            continue
        words, text = text.split(), ""
        deep = depth and level - skip_levels > depth
        if words[0] == "$scope":
            level += 1
            if not (depth and level - skip_levels > depth):
                yield ("scope", words[2])
        elif words[0] == "$upscope":
            if not deep:
                yield ("upscope",)
            level -= 1
        elif words[0] == "$var":
            kind, width, ident, name = _var(" ".join(words))
            if deep:
                dropped.add(ident)
            else:
                yield ("var", kind, width, ident, name)
        elif words[0] == "$timescale":
            yield ("timescale", "".join(words[1:-1]))
        elif words[0] == "$enddefinitions":
            break
    yield ("dropped", dropped)


def _changes(lines, dropped: set):
    """Yield ('time', t) and ('value', kind, text, id) of a VCD body, skipping `dropped` ids."""
    for line in lines:
        s = line.strip()
        if not s or s[0] == "$":
            continue
        if s[0] == "#":
            yield ("time", int(s[1:]))
            continue
        if s[0] in "bBrRsS":
            value, ident = s[1:].split(None, 1)
            kind = s[0].lower()
        else:
            value, ident, kind = s[0], s[1:].strip(), "1"
        if ident not in dropped:
            yield ("value", kind, value, ident)


def _skip_levels(path: Path) -> int:
    """Amaranth wraps the design in a `bench` scope: level 0."""
    with open(path) as f:
        for line in f:
            if line.startswith("$scope"):
                return 1 if line.split()[2] == "bench" else 0
    return 0


def convert_vcd(src, dst, depth: int = 0) -> Path:
    """Write the VCD `src` as `dst` in the format its suffix names, keeping `depth` levels."""
    src, dst = Path(src), Path(dst)
    fmt = format_of(dst)
    dst.parent.mkdir(parents=True, exist_ok=True)
    if fmt == "vcd" and not depth:
        if src.resolve() != dst.resolve():
            shutil.copyfile(src, dst)
        return dst
    skip = _skip_levels(src)
    tmp = dst.with_name(dst.name + ".part")
    with open(src) as lines:
        (_vcd_filter if fmt == "vcd" else _to_fst)(lines, tmp, depth, skip)
    os.replace(tmp, dst)
    return dst


def _vcd_filter(lines, dst: Path, depth: int, skip: int) -> None:
    with open(dst, "w") as out:
        out.write(f"$comment tensore: cut to depth {depth} $end\n")
        for item in _header(lines, depth, skip):
            if item[0] == "scope":
                out.write(f"$scope module {item[1]} $end\n")
            elif item[0] == "upscope":
                out.write("$upscope $end\n")
            elif item[0] == "var":
                out.write(f"$var {item[1]} {item[2]} {item[3]} {item[4]} $end\n")
            elif item[0] == "timescale":
                out.write(f"$timescale {item[1]} $end\n")
            else:
                dropped = item[1]
        out.write("$enddefinitions $end\n")
        for item in _changes(lines, dropped):
            if item[0] == "time":
                out.write(f"#{item[1]}\n")
            elif item[1] == "1":
                out.write(f"{item[2]}{item[3]}\n")
            else:
                out.write(f"{item[1]}{item[2]} {item[3]}\n")


def _to_fst(lines, dst: Path, depth: int, skip: int) -> None:
    """The VCD through pylibfst's writer (GTKWave's fstapi)."""
    from pylibfst import ffi, lib
    kinds = {"wire": lib.FST_VT_VCD_WIRE, "reg": lib.FST_VT_VCD_REG, "integer": lib.FST_VT_VCD_INTEGER,
             "real": lib.FST_VT_VCD_REAL, "string": lib.FST_VT_GEN_STRING, "parameter": lib.FST_VT_VCD_PARAMETER}
    ctx = lib.fstWriterCreate(str(dst).encode(), 1)
    if ctx == ffi.NULL:
        raise OSError(f"cannot write {dst}")
    handles, widths = {}, {}
    try:
        lib.fstWriterSetPackType(ctx, lib.FST_WR_PT_LZ4)
        for item in _header(lines, depth, skip):
            if item[0] == "scope":
                lib.fstWriterSetScope(ctx, lib.FST_ST_VCD_MODULE, item[1].encode(), ffi.NULL)
            elif item[0] == "upscope":
                lib.fstWriterSetUpscope(ctx)
            elif item[0] == "var":
                kind, width, ident, name = item[1:]
                handles[ident] = lib.fstWriterCreateVar(ctx, kinds.get(kind, lib.FST_VT_VCD_WIRE), lib.FST_VD_IMPLICIT,
                                                        width, name.encode(), handles.get(ident, 0))
                widths[ident] = width
            elif item[0] == "timescale":
                lib.fstWriterSetTimescaleFromString(ctx, item[1].encode())
            else:
                dropped = item[1]
        for item in _changes(lines, dropped):
            if item[0] == "time":
                lib.fstWriterEmitTimeChange(ctx, item[1])
                continue
            _, kind, value, ident = item
            h = handles[ident]
            if kind == "r":
                lib.fstWriterEmitValueChange(ctx, h, ffi.new("double *", float(value)))
            elif kind == "s":
                raw = value.encode()
                lib.fstWriterEmitVariableLengthValueChange(ctx, h, raw, len(raw))
            else:
                w = widths[ident]
                pad = value[0] if value[0] in "xXzZ" else "0"
                lib.fstWriterEmitValueChange(ctx, h, value.rjust(w, pad)[-w:].encode())
    finally:
        lib.fstWriterClose(ctx)


def _fst_kinds(lib) -> dict:
    """{FST variable type: its name as VCD spells it}: `wire`, `integer`, `parameter`, `logic`, ..."""
    return {getattr(lib, k): k.split("_", 3)[3].lower() for k in dir(lib)
            if k.startswith(("FST_VT_VCD_", "FST_VT_SV_", "FST_VT_GEN_"))}


def _fst_variables(path) -> list:
    from pylibfst import ffi, lib, string
    kinds = _fst_kinds(lib)
    ctx = lib.fstReaderOpen(str(path).encode())
    if ctx == ffi.NULL:
        raise OSError(f"cannot read {path} as FST")
    scope, out = [], []
    try:
        lib.fstReaderIterateHierRewind(ctx)
        while (h := lib.fstReaderIterateHier(ctx)) != ffi.NULL:
            if h.htyp == lib.FST_HT_SCOPE:
                scope.append(string(h.u.scope.name))
            elif h.htyp == lib.FST_HT_UPSCOPE:
                scope.pop()
            elif h.htyp == lib.FST_HT_VAR:
                out.append((tuple(scope), string(h.u.var.name), int(h.u.var.length), kinds.get(h.u.var.typ, "")))
    finally:
        lib.fstReaderClose(ctx)
    return out


def _vcd_variables(path) -> list:
    scope, out, text = [], [], ""
    with open(path) as f:
        for line in f:
            text = f"{text} {line.strip()}".strip()
            if not text.endswith("$end"):
                continue
            words, text = text.split(), ""
            if words[0] == "$scope":
                scope.append(words[2])
            elif words[0] == "$upscope":
                scope.pop()
            elif words[0] == "$var":
                kind, width, _, name = _var(" ".join(words))
                out.append((tuple(scope), name, width, kind))
            elif words[0] == "$enddefinitions":
                break
    return out


def typed_variables(path) -> list:
    """(scope names, name, width in bits, kind) of every signal of a waveform file, VCD or FST (told
    apart by content), names as the file stores them (Icarus and Verilator append ` [msb:lsb]`), the
    kind as VCD spells it (`wire`, `reg`, `integer`, `parameter`, ...; FST's SystemVerilog types
    `logic`, `int`, ...)."""
    with open(path, "rb") as f:
        head = f.read(64).lstrip()
    return _vcd_variables(path) if head[:1] == b"$" else _fst_variables(path)


def variables(path) -> list:
    """(scope names, name, width in bits) of every signal of a waveform file, VCD or FST."""
    return [v[:3] for v in typed_variables(path)]


def hierarchy(path) -> tuple:
    """(the scopes that hold signals, the signals) of a waveform file, VCD or FST, as full dotted
    names."""
    found = variables(path)
    return list(dict.fromkeys(".".join(s) for s, _, _ in found)), [".".join([*s, n]) for s, n, _ in found]


def signals(path) -> list:
    """The full signal names of a waveform file, VCD or FST."""
    return hierarchy(path)[1]
