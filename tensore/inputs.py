"""The input files of every command (D-T65): micro-op programs and SBUF images.

A program is assembly text (docs/isa.md) or binary 64-byte descriptors, told apart by content, not
by the file name.  An SBUF image is a numpy file: `.npz` (the array named `sbuf` unless another name
is asked for, also as `file.npz:name`) or `.npy`, of uint8 bytes or of an engine element type, read
without rounding by `tensore.model.sbuf.image_bytes`.  `-` is standard input.  Every problem is an
`InputError` (a ValueError) with a one-line message naming the file."""
from __future__ import annotations

import io
import re
import sys
import zipfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from tensore.model.isa import DESCRIPTOR_BYTES
from tensore.model.sbuf import image_bytes

SBUF_ARRAY = "sbuf"                   # the array of a .npz that holds the SBUF image
_CONTROL = re.compile(rb"[\x00-\x08\x0e-\x1f\x7f]")        # bytes no program text holds
_NPZ_MAGIC = (b"PK\x03\x04", b"PK\x05\x06")               # a zip archive (np.savez), also empty
_NPY_MAGIC = b"\x93NUMPY"


class InputError(ValueError):
    """An input file that cannot be used as asked; the message is one line naming the file."""


@dataclass
class ProgramFile:
    """A program as read: its descriptors, and its source when it is assembly text."""

    path: str
    data: bytes
    text: str | None = None

    @property
    def name(self) -> str:
        """The program's name: the file name without its suffix (`stdin` for `-`)."""
        return "stdin" if self.path == "-" else Path(self.path).stem

    @property
    def binary(self) -> bool:
        """True when the file held descriptors rather than assembly text."""
        return self.text is None

    def source_text(self, gen) -> str:
        """Assembly text of the program: the file's own, or the lossless disassembly of its bytes."""
        if self.text is not None:
            return self.text
        from tensore.model.isa.asm import disassemble
        return disassemble(self.data, gen, annotate=False)


def read_bytes(path) -> bytes:
    """The bytes of `path` (`-`: standard input)."""
    if str(path) == "-":
        return sys.stdin.buffer.read()
    try:
        return Path(path).read_bytes()
    except OSError as exc:
        raise InputError(f"{path}: cannot read: {exc.strerror or exc}") from None


def text_or_why(raw: bytes) -> tuple[str | None, str]:
    """(the text, "") when `raw` is program text: UTF-8 without control bytes other than tab, line
    and page breaks; else (None, why not)."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        return None, f"byte {raw[exc.start]:#04x} at offset {exc.start} is not UTF-8"
    m = _CONTROL.search(raw)
    if m:
        return None, f"control byte {raw[m.start()]:#04x} at offset {m.start()}"
    return text.removeprefix("\ufeff"), ""


def read_program(path, gen) -> ProgramFile:
    """Read a program: assembly text (assembled for `gen`; errors carry file:line:column) or a whole
    number of binary descriptors; at least one micro-op (an empty program is refused, not run)."""
    from tensore.model.isa.asm import assemble
    raw = read_bytes(path)
    text, why = text_or_why(raw)
    if text is not None:
        prog = ProgramFile(str(path), assemble(text, gen, source=str(path)), text)
    elif len(raw) % DESCRIPTOR_BYTES:
        raise InputError(f"{path}: neither assembly text ({why}) nor binary descriptors ({len(raw)} bytes "
                         f"is not a multiple of {DESCRIPTOR_BYTES})")
    else:
        prog = ProgramFile(str(path), raw)
    if not prog.data:
        raise InputError(f"{path}: no micro-ops ({'only blanks and comments' if text is not None else 'an empty file'}); "
                         "a program needs at least one (docs/isa.md)")
    return prog


def split_array_name(spec) -> tuple[str, str | None]:
    """(path, array name or None) of `file.npz` or `file.npz:name` (a file whose own name has a colon wins)."""
    spec = str(spec)
    path, sep, name = spec.rpartition(":")
    if sep and name and path and not Path(spec).exists() and (path == "-" or Path(path).exists()):
        return path, name
    return spec, None


def read_array(path, name: str | None = None, *, default: str | None = None, what: str = "array",
               missing=None, not_numpy: str | None = None) -> tuple:
    """(array, its description `file` or `file.npz:name`) of a .npy or .npz file, told apart by
    content.  A .npz gives the array `name` (or the name after a colon in `path`), else `default`,
    else its only array; `missing(path, name, held)` words the error of a name the file lacks and
    `not_numpy` the hint for a file of neither kind."""
    path, name = split_array_name(path) if name is None else (str(path), name)
    raw = read_bytes(path)
    try:
        if raw.startswith(_NPY_MAGIC) and name is not None:
            raise InputError(f"{path}: a .npy file holds one array; an array name ('{name}') picks one of a .npz")
        if raw.startswith(_NPZ_MAGIC):
            with np.load(io.BytesIO(raw), allow_pickle=False) as z:
                key = name or default or (z.files[0] if len(z.files) == 1 else None)
                if key not in z.files:
                    held = ", ".join(_describe(z, k) for k in z.files) or "no arrays"
                    if missing is not None:
                        raise InputError(missing(path, key, held))
                    why = f"no array '{key}'" if key else "more than one array"
                    raise InputError(f"{path}: {why} ({what}); the file holds {held}; pick one as {path}:NAME")
                return z[key], f"{path}:{key}"
        if raw.startswith(_NPY_MAGIC):
            return np.load(io.BytesIO(raw), allow_pickle=False), str(path)
        raise InputError(f"{path}: not a numpy .npy or .npz file; {not_numpy or what + ': np.save, or np.savez'}")
    except (ValueError, OSError, EOFError, zipfile.BadZipFile) as exc:
        if isinstance(exc, InputError):
            raise
        raise InputError(f"{path}: unreadable numpy file: {_one_line(exc)}") from None


def load_sbuf(path, name: str | None = None) -> np.ndarray:
    """An SBUF image as [partitions, bytes] uint8 from a .npz (its array `name`, default `sbuf`, or
    the name after a colon in `path`) or a .npy file, told apart by content; see image_bytes for
    the element types accepted."""
    arr, what = read_array(path, name, default=SBUF_ARRAY, what="the SBUF image", missing=lambda p, key, held: (
        f"{p}: no array '{key}' (the SBUF image); the file holds {held}; "
        f"save the image as '{SBUF_ARRAY}' or pick an array as {p}:NAME"),
        not_numpy=f"an SBUF image is an array [partitions, bytes] of uint8 (np.save, or np.savez(file, {SBUF_ARRAY}=image))")
    try:
        return image_bytes(arr, name=what)
    except ValueError as exc:
        raise InputError(str(exc)) from None


def load_operand(spec, *, role: str, ndim: int, dtype, gen, exact: bool = True,
                 raw_bits: bool = False) -> np.ndarray:
    """A kernel operand (D-T88) as float64 values: an array of rank `ndim` from a .npy / .npz file
    (one array, or `FILE.npz:NAME`), every value finite.  Float arrays are values, whatever their
    format (numpy float16 / 32 / 64, ml_dtypes bfloat16, float8_*): with `exact` every one must be a
    value of `dtype` on `gen` (dtypes.codes_of takes the bits of the format itself only).  Raw void
    elements (what np.save writes for an ml_dtypes array) do not say their format: they are refused
    unless `raw_bits` says they are bit patterns of `dtype`, and then must be of its width.  Integer
    arrays are refused (codes or values: neither is a guess to make), as is any other element type."""
    from tensore.model import dtypes as dt
    arr, what = read_array(spec, what=f"operand {role}")
    name = f"{what}: operand {role}"
    d, fmt = arr.dtype, dt.format_of(dtype, gen)
    if arr.ndim != ndim:
        raise InputError(f"{name} has rank {arr.ndim} (shape {list(arr.shape)}); it must have rank {ndim}")
    if 0 in arr.shape:
        raise InputError(f"{name} is empty (shape {list(arr.shape)})")
    raw = d.kind == "V" and d.names is None and not dt._is_float_values(d)
    if raw and not raw_bits:
        raise InputError(f"{name} holds raw {d.itemsize}-byte elements (np.save of an ml_dtypes array?), whose "
                         f"format the file cannot tell; --raw-bits if they are bit patterns of "
                         f"{dt.Dtype.parse(dtype).name} ({fmt.name}), else save the values as float32: "
                         "np.save(f, a.astype(np.float32))")
    if raw and d.itemsize * 8 != fmt.width:
        raise InputError(f"{name} has raw {d.itemsize}-byte elements; as bit patterns of "
                         f"{dt.Dtype.parse(dtype).name} they would be {fmt.width // 8}-byte")
    if not raw and not dt._is_float_values(d):
        kind = "integers" if d.kind in "iub" else "not numbers"
        raise InputError(f"{name} has {d} elements ({kind}); give its values as floats (float16 / float32 / "
                         "float64, or ml_dtypes bfloat16 / float8 types)")
    if raw:
        wide = dt.to_fp32(arr.view(dt.code_dtype(fmt)), dtype, gen).astype(np.float64)
    else:
        with np.errstate(invalid="ignore", over="ignore"):
            wide = arr.astype(np.float64)
    bad = ~np.isfinite(wide)
    if bad.any():
        i = [int(x) for x in np.argwhere(bad)[0]]
        raise InputError(f"{name} holds {int(bad.sum())} NaN / Inf value(s), the first {float(wide[tuple(i)])!r} "
                         f"at {i}; the kernels' numerics report needs finite operands")
    if raw or not exact:
        return wide
    try:
        codes = dt.codes_of(arr, dtype, gen, name=name)
    except ValueError as exc:
        why = _one_line(exc).split("; round explicitly")[0]
        raise InputError(f"{why}; give values of the format, or --quantise to round them (RNE)") from None
    return dt.to_fp32(codes, dtype, gen).astype(np.float64)


def _describe(z, key: str) -> str:
    """`key` (dtype [shape]) of an array in an open .npz, from its header only."""
    fmt = np.lib.format
    try:
        with z.zip.open(key + ".npy") as f:
            reader = {(1, 0): fmt.read_array_header_1_0, (2, 0): fmt.read_array_header_2_0}.get(fmt.read_magic(f))
            if reader is None:
                return f"'{key}'"
            shape, _, dtype = reader(f)
        return f"'{key}' ({dtype} {list(shape)})"
    except (ValueError, KeyError, OSError, zipfile.BadZipFile):     # a listing only: the name suffices
        return f"'{key}'"


def _one_line(exc: Exception) -> str:
    return " ".join(str(exc).split()) or type(exc).__name__
