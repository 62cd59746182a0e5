"""The NEURON_ISA_TPB_DTYPE code space and its numeric codecs (seed 004, SPEC sections 2-3).

Everything here is numpy + ml_dtypes-free arithmetic on bit patterns: codes are unsigned integer
arrays, values are float32 arrays.  FP32 is the hub of every cast (seed 004 section 2.3).
The format tables below are the single definition the RTL unpackers are generated from.
"""
from __future__ import annotations

import enum
import functools
from dataclasses import dataclass

import numpy as np

__all__ = [
    "Gen", "Dtype", "Role", "FloatFormat", "IntFormat",
    "TONGA_DTYPES", "BASE_DTYPES", "dtypes_of", "enum_count", "is_in_enum", "roles_of", "format_of",
    "has_basic_alias", "pack_dtype_pair", "unpack_dtype_pair",
    "dtype_invalid_check", "dtype_fp32r_illegal_check", "dtype_uint64_illegal_check",
    "dtype_int64_illegal_check", "dtype_4bit_illegal_check", "dtype_scale_illegal_check",
    "is_valid_dtype", "is_valid_dtype_64", "is_valid_int_dtype", "is_valid_int_dtype_datapath",
    "is_valid_fp_dtype_datapath", "is_valid_mx_dtype", "is_signed_int", "is_unsigned_int",
    "is_valid_32b_int_dtype", "is_valid_64b_int_dtype", "is_valid_dtype_for_sdma", "is_cptc",
    "cptc_bits", "GATES", "gate_table",
    "to_fp32", "from_fp32", "cast", "sr_bf16", "xorshift32", "split_fp32", "pack_nibbles",
    "unpack_nibbles", "code_dtype", "NUMPY_FORMATS", "numpy_format", "codes_of", "unknown_dtype",
]


class Gen(enum.IntEnum):
    """Chip generations, ordered so that `gen >= Gen.MARIANA` reads as "MARIANA or later"."""

    SUNDA = 0         # NC-v2, CAYMAN struct layout
    CAYMAN = 1        # NC-v3
    MARIANA = 2       # NC-v4
    MARIANA_PLUS = 3  # NC-v4, same ISA as MARIANA
    MAVERICK = 4      # NC-v5

    @classmethod
    def parse(cls, value) -> "Gen":
        """Accept a Gen, its integer value or its (case-insensitive) name."""
        if isinstance(value, cls):
            return value
        if isinstance(value, str):
            try:
                return cls[value.strip().upper().replace("-", "_")]
            except KeyError:
                raise ValueError(f"unknown generation {value!r}; expected one of "
                                 f"{', '.join(g.name.lower() for g in cls)}") from None
        try:
            return cls(int(value))
        except (ValueError, TypeError):
            raise ValueError(f"unknown generation {value!r}") from None

    @property
    def nc_version(self) -> int:
        """The NeuronCore version of the generation (NC-v2 .. NC-v5)."""
        return {0: 2, 1: 3, 2: 4, 3: 4, 4: 5}[int(self)]

    @property
    def layout(self) -> "Gen":
        """The generation whose descriptor layouts this one uses (seed 000 sections 3.2, 4, 11)."""
        return {Gen.SUNDA: Gen.CAYMAN, Gen.MARIANA_PLUS: Gen.MARIANA}.get(self, self)


class Dtype(enum.IntEnum):
    """NEURON_ISA_TPB_DTYPE, one byte (SPEC section 2)."""

    INVALID = 0x00
    UINT64 = 0x01
    INT8 = 0x02
    UINT8 = 0x03
    INT16 = 0x04
    UINT16 = 0x05
    BFLOAT16 = 0x06
    FP16 = 0x07
    INT32 = 0x08
    UINT32 = 0x09
    FP32 = 0x0A
    FP32R = 0x0B
    INT64 = 0x0C
    FP8_EXP3 = 0x0D
    FP8_EXP4 = 0x0E
    FP8_EXP5 = 0x0F
    FP4_EXP2 = 0x10
    FP8_EXP2 = 0x11
    INT4 = 0x12
    SFP8_E8 = 0x13
    SFP8_E7 = 0x14
    SFP8_E6 = 0x15
    SFP8_E5 = 0x16
    CPTC1 = 0x19
    CPTC2 = 0x1A
    CPTC3 = 0x1B
    CPTC4 = 0x1C
    CPTC5 = 0x1D
    CPTC6 = 0x1E
    CPTC7 = 0x1F

    @classmethod
    def parse(cls, value) -> "Dtype":
        """Accept a Dtype, its code, its name, or a short alias (bf16, fp8_e4m3, ...)."""
        if isinstance(value, cls):
            return value
        if isinstance(value, str):
            key = value.strip().upper()
            key = _DTYPE_ALIASES.get(key, key)
            try:
                return cls[key]
            except KeyError:
                raise ValueError(unknown_dtype(value)) from None
        try:
            return cls(int(value))
        except (ValueError, TypeError):
            raise ValueError(f"unknown dtype code {value!r}") from None


_DTYPE_ALIASES = {
    "BF16": "BFLOAT16", "F16": "FP16", "HALF": "FP16", "F32": "FP32", "FLOAT32": "FP32",
    "FP22": "FP32R", "E3M4": "FP8_EXP3", "FP8_E3M4": "FP8_EXP3", "E4M3": "FP8_EXP4",
    "FP8_E4M3": "FP8_EXP4", "E5M2": "FP8_EXP5", "FP8_E5M2": "FP8_EXP5", "E2M5": "FP8_EXP2",
    "FP8_E2M5": "FP8_EXP2", "E2M1": "FP4_EXP2", "FP4": "FP4_EXP2", "FP4_E2M1": "FP4_EXP2",
    "E8M0": "SFP8_E8", "I8": "INT8", "U8": "UINT8", "I16": "INT16", "U16": "UINT16",
    "I32": "INT32", "U32": "UINT32", "I64": "INT64", "U64": "UINT64", "I4": "INT4",
}


def unknown_dtype(name: str) -> str:
    """The message for a name that is no dtype: the closest names (difflib), then every name with
    its aliases (Dtype.parse accepts both)."""
    import difflib
    aliases: dict[str, list[str]] = {}
    for alias, canonical in _DTYPE_ALIASES.items():
        aliases.setdefault(canonical, []).append(alias.lower())
    names = [d.name.lower() for d in Dtype] + sorted(map(str.lower, _DTYPE_ALIASES))
    close = difflib.get_close_matches(str(name).strip().lower(), names, n=3)
    guess = f"; did you mean {' or '.join(', '.join(close).rsplit(', ', 1))}?" if close else ";"
    listed = ", ".join(d.name.lower() + (f" ({', '.join(aliases[d.name])})" if d.name in aliases else "")
                       for d in Dtype)
    return f"unknown dtype {name!r}{guess} dtypes (aliases): {listed}"


class Role(enum.Flag):
    """What a code may be used for (SPEC section 2, seed 004 section 2.7)."""

    INVALID = enum.auto()
    COMPUTE = enum.auto()
    TRANSPORT = enum.auto()
    SCALE = enum.auto()          # MX block scale only
    OUTPUT_ONLY = enum.auto()    # FP32R
    PSUM = enum.auto()           # may live in a PSUM cell
    MX_ELEMENT = enum.auto()
    GATED = enum.auto()          # needs an Allow* permission (UINT64 / INT64 / FP32R)


_R = Role
_ROLES = {
    Dtype.INVALID: _R.INVALID,
    Dtype.UINT64: _R.GATED, Dtype.INT64: _R.GATED,
    Dtype.INT8: _R.COMPUTE, Dtype.UINT8: _R.COMPUTE, Dtype.INT16: _R.COMPUTE,
    Dtype.UINT16: _R.COMPUTE, Dtype.BFLOAT16: _R.COMPUTE | _R.PSUM, Dtype.FP16: _R.COMPUTE,
    Dtype.INT32: _R.COMPUTE, Dtype.UINT32: _R.COMPUTE | _R.TRANSPORT,
    Dtype.FP32: _R.COMPUTE | _R.PSUM, Dtype.FP32R: _R.OUTPUT_ONLY | _R.GATED,
    Dtype.FP8_EXP3: _R.COMPUTE | _R.MX_ELEMENT, Dtype.FP8_EXP4: _R.COMPUTE | _R.MX_ELEMENT,
    Dtype.FP8_EXP5: _R.COMPUTE | _R.MX_ELEMENT,
    Dtype.FP4_EXP2: _R.TRANSPORT | _R.MX_ELEMENT, Dtype.FP8_EXP2: _R.MX_ELEMENT,
    Dtype.INT4: _R.TRANSPORT | _R.MX_ELEMENT,
    Dtype.SFP8_E8: _R.SCALE, Dtype.SFP8_E7: _R.SCALE, Dtype.SFP8_E6: _R.SCALE,
    Dtype.SFP8_E5: _R.SCALE,
    **{Dtype(c): _R.TRANSPORT for c in range(0x19, 0x20)},
}

BASE_DTYPES = frozenset(Dtype(c) for c in range(0x10))
TONGA_DTYPES = frozenset({Dtype.INVALID, Dtype.UINT8, Dtype.UINT16, Dtype.BFLOAT16, Dtype.FP16,
                          Dtype.INT32, Dtype.FP32, Dtype.INT64})
_MARIANA_ADDS = frozenset({Dtype.FP4_EXP2, *(Dtype(c) for c in range(0x19, 0x20))})
_MAVERICK_ADDS = frozenset({Dtype.FP8_EXP2, Dtype.INT4, Dtype.SFP8_E8, Dtype.SFP8_E7,
                            Dtype.SFP8_E6, Dtype.SFP8_E5})


def dtypes_of(gen) -> frozenset:
    """The enumerators of a generation's NEURON_ISA_TPB_DTYPE (a strict superset chain)."""
    gen = Gen.parse(gen)
    codes = BASE_DTYPES
    if gen >= Gen.MARIANA:
        codes = codes | _MARIANA_ADDS
    if gen >= Gen.MAVERICK:
        codes = codes | _MAVERICK_ADDS
    return codes


def enum_count(gen) -> int:
    """How many enumerators the generation's NEURON_ISA_TPB_DTYPE has (16 / 16 / 24 / 24 / 30)."""
    return len(dtypes_of(gen))


def is_in_enum(dtype, gen) -> bool:
    """`is_valid_enum(EnumList::Dtype, dtype)` for the generation; any byte value is accepted."""
    try:
        return Dtype(int(dtype)) in dtypes_of(gen)
    except ValueError:
        return False


def roles_of(dtype) -> Role:
    """What a dtype code may be used for (compute, transport, scale, PSUM, ...)."""
    return _ROLES[Dtype.parse(dtype)]


def has_basic_alias(gen) -> bool:
    """NEURON_ISA_TPB_DTYPE_BASIC exists on MARIANA and MAVERICK only (seed 004 section 1b)."""
    return Gen.parse(gen) >= Gen.MARIANA


def pack_dtype_pair(lo, hi) -> int:
    """DTYPE_PAIR {dtype_lo:4, dtype_hi:4}: only the nibble-packable codes 0x0..0xF fit."""
    lo, hi = int(lo), int(hi)
    for name, code in (("dtype_lo", lo), ("dtype_hi", hi)):
        if not 0 <= code <= 0xF:
            raise ValueError(f"{name} 0x{code:02X} does not fit a DTYPE_PAIR nibble (codes 0x0..0xF)")
    return lo | (hi << 4)


def unpack_dtype_pair(byte) -> tuple[Dtype, Dtype]:
    """(dtype_lo, dtype_hi) of a DTYPE_PAIR byte; the inverse of pack_dtype_pair."""
    byte = int(byte)
    if not 0 <= byte <= 0xFF:
        raise ValueError(f"DTYPE_PAIR is one byte, got {byte}")
    return Dtype(byte & 0xF), Dtype(byte >> 4)


# --- validity gates (seed 004 section 1c, verbatim), per generation ---------------------------

def _code(dtype) -> int:
    code = int(dtype)
    if not 0 <= code <= 0xFF:
        raise ValueError(f"a dtype is one byte, got {code}")
    return code


def dtype_invalid_check(dtype) -> bool:
    """False for the INVALID code (0x00)."""
    return _code(dtype) != Dtype.INVALID


def dtype_fp32r_illegal_check(dtype, allow_fp32r: bool) -> bool:
    """False for FP32R unless allowed."""
    return _code(dtype) != Dtype.FP32R or bool(allow_fp32r)


def dtype_uint64_illegal_check(dtype, allow_u64: bool) -> bool:
    """False for UINT64 unless allowed."""
    return _code(dtype) != Dtype.UINT64 or bool(allow_u64)


def dtype_int64_illegal_check(dtype, allow_i64: bool) -> bool:
    """False for INT64 unless allowed."""
    return _code(dtype) != Dtype.INT64 or bool(allow_i64)


def dtype_4bit_illegal_check(dtype, allow_fp4: bool, gen) -> bool:
    """A MAVERICK addition to the gates (seed 004 section 1c GOTCHA): earlier gens have no such check."""
    if Gen.parse(gen) < Gen.MAVERICK:
        return True
    return _code(dtype) not in (Dtype.FP4_EXP2, Dtype.INT4) or bool(allow_fp4)


def dtype_scale_illegal_check(dtype, allow_scale: bool, gen) -> bool:
    """A MAVERICK addition to the gates (seed 004 section 1c GOTCHA): earlier gens have no such check."""
    if Gen.parse(gen) < Gen.MAVERICK:
        return True
    return _code(dtype) not in (Dtype.SFP8_E8, Dtype.SFP8_E7, Dtype.SFP8_E6, Dtype.SFP8_E5) \
        or bool(allow_scale)


def is_valid_dtype(dtype, gen, allow_fp32r: bool = False) -> bool:
    """The universal scalar gate: rejects INVALID, 64-bit, (MAVERICK) 4-bit and scale codes."""
    return (dtype_invalid_check(dtype)
            and dtype_fp32r_illegal_check(dtype, allow_fp32r)
            and dtype_uint64_illegal_check(dtype, False)
            and dtype_int64_illegal_check(dtype, False)
            and dtype_4bit_illegal_check(dtype, False, gen)
            and dtype_scale_illegal_check(dtype, False, gen)
            and is_in_enum(dtype, gen))


def is_valid_dtype_64(dtype, gen, allow_fp32r: bool = False, allow_u64: bool = False,
                      allow_i64: bool = False) -> bool:
    """The 64-bit-capable gate (TensorReduce), parameterised on every permission."""
    return (dtype_invalid_check(dtype)
            and dtype_fp32r_illegal_check(dtype, allow_fp32r)
            and dtype_uint64_illegal_check(dtype, allow_u64)
            and dtype_int64_illegal_check(dtype, allow_i64)
            and is_in_enum(dtype, gen))


def _member(dtype, gen, members) -> bool:
    return is_in_enum(dtype, gen) and _code(dtype) in members


_D = Dtype
_INT_ALL = {_D.INT8, _D.INT16, _D.INT32, _D.INT64, _D.UINT8, _D.UINT16, _D.UINT32, _D.UINT64}
_INT_DATAPATH = {_D.INT8, _D.INT16, _D.INT32, _D.UINT8, _D.UINT16, _D.UINT32}
_FP_DATAPATH = {_D.FP8_EXP3, _D.FP8_EXP4, _D.FP8_EXP5, _D.FP16, _D.BFLOAT16, _D.FP32}
_MX = {_D.FP8_EXP2, _D.FP8_EXP3, _D.FP8_EXP4, _D.FP8_EXP5, _D.FP4_EXP2, _D.INT4}


def is_valid_int_dtype(dtype, gen) -> bool:
    """Any integer code of the generation, 8 to 64 bits, signed or not."""
    return _member(dtype, gen, _INT_ALL)


def is_valid_int_dtype_datapath(dtype, gen) -> bool:
    """An integer code the datapath computes on (8 to 32 bits)."""
    return _member(dtype, gen, _INT_DATAPATH)


def is_valid_fp_dtype_datapath(dtype, gen, allow_fp32r: bool = False) -> bool:
    """A float code the datapath computes on (FP8 E3M4 / E4M3 / E5M2, FP16, BF16, FP32; FP32R if allowed)."""
    return _member(dtype, gen, _FP_DATAPATH | ({_D.FP32R} if allow_fp32r else set()))


def is_valid_mx_dtype(dtype, gen) -> bool:
    """An MX element code of the generation (FP8, FP4 E2M1, INT4)."""
    return _member(dtype, gen, _MX)


def is_signed_int(dtype, gen) -> bool:
    """INT8 / INT16 / INT32 / INT64."""
    return _member(dtype, gen, {_D.INT8, _D.INT16, _D.INT32, _D.INT64})


def is_unsigned_int(dtype, gen) -> bool:
    """UINT8 / UINT16 / UINT32 / UINT64."""
    return _member(dtype, gen, {_D.UINT8, _D.UINT16, _D.UINT32, _D.UINT64})


def is_valid_32b_int_dtype(dtype, gen) -> bool:
    """INT32 / UINT32."""
    return _member(dtype, gen, {_D.INT32, _D.UINT32})


def is_valid_64b_int_dtype(dtype, gen) -> bool:
    """INT64 / UINT64."""
    return _member(dtype, gen, {_D.INT64, _D.UINT64})


def is_valid_dtype_for_sdma(dtype, gen, allow_fp32r: bool = False) -> bool:
    """is_valid_dtype && is_valid_enum(DtypeBasic).  SUNDA/CAYMAN have no BASIC alias; their
    whole enum is the base set, so the BASIC test is the 0x0..0xF range there too (decision D-T01)."""
    return is_valid_dtype(dtype, gen, allow_fp32r) and _code(dtype) in BASE_DTYPES


def is_cptc(dtype) -> bool:
    """(code & 0xF8) == 0x18 && (code & 0x7) != 0 (seed 004 section 3); 0x18 is the reserved anchor."""
    code = _code(dtype)
    return (code & 0xF8) == 0x18 and (code & 0x7) != 0


def cptc_bits(dtype) -> int:
    """The bits per element of a CPTC transport code (1..7)."""
    if not is_cptc(dtype):
        raise ValueError(f"0x{_code(dtype):02X} is not a CPTC code")
    return _code(dtype) & 0x7


GATES = {
    "is_valid_dtype": is_valid_dtype,
    "is_valid_dtype_64": is_valid_dtype_64,
    "is_valid_int_dtype": is_valid_int_dtype,
    "is_valid_int_dtype_datapath": is_valid_int_dtype_datapath,
    "is_valid_fp_dtype_datapath": is_valid_fp_dtype_datapath,
    "is_valid_mx_dtype": is_valid_mx_dtype,
    "is_signed_int": is_signed_int,
    "is_unsigned_int": is_unsigned_int,
    "is_valid_32b_int_dtype": is_valid_32b_int_dtype,
    "is_valid_64b_int_dtype": is_valid_64b_int_dtype,
    "is_valid_dtype_for_sdma": is_valid_dtype_for_sdma,
    "is_cptc": lambda dtype, gen: is_cptc(dtype) and is_in_enum(dtype, gen),
}


def gate_table(name: str, gen, **allow) -> np.ndarray:
    """The gate's verdict for all 256 byte values, as a bool array indexed by code."""
    gate = GATES[name]
    return np.array([gate(code, gen, **allow) for code in range(256)], dtype=bool)


# --- formats ----------------------------------------------------------------------------------

@dataclass(frozen=True)
class FloatFormat:
    """A binary floating-point format (sign, exponent, mantissa), with its special-value policy.

    nan:       "ieee" (exponent all ones, mantissa != 0), "fn" (only the all-ones magnitude),
               "allones" (unsigned: the all-ones code), or "none".
    on_nan:    what narrowing does with a NaN input: "quiet" (canonical quiet NaN with the sign),
               "payload" (numpy fp16: keep the top payload bits), "flipzero" (ml_dtypes e2m1fn: a
               zero with the opposite sign), "zero" (+0).
    overflow:  "inf", "nan" or "saturate" when the rounded value is beyond max.
    """

    name: str
    exp_bits: int
    man_bits: int
    bias: int
    signed: bool = True
    inf: bool = True
    nan: str = "ieee"
    subnormals: bool = True
    on_nan: str = "quiet"
    overflow: str = "inf"
    nan_payload_decode: bool = False   # decode keeps the NaN payload (bf16 / fp16 / fp32)
    fp32_subnormal_e8m0: bool = False  # ml_dtypes e8m0fnu: an fp32 subnormal -> code (frac > 0x400000)
    storage_bits: int = 0              # container width; 0 means the format's own width

    @property
    def bits(self) -> int:
        """Significant bits of a code: sign + exponent + mantissa."""
        return int(self.signed) + self.exp_bits + self.man_bits

    @property
    def width(self) -> int:
        """Bits a code occupies in memory (FP32R: 32)."""
        return self.storage_bits or self.bits

    @property
    def emin(self) -> int:
        """Exponent of the smallest normal value (of code 1 << man_bits, or of code 0 without subnormals)."""
        return 1 - self.bias if self.subnormals else -self.bias

    @property
    def max_code(self) -> int:
        """The largest finite magnitude code."""
        allones = (1 << (self.exp_bits + self.man_bits)) - 1
        if self.inf:
            return allones - (1 << self.man_bits)      # exponent all ones is Inf/NaN
        if self.nan in ("fn", "allones"):
            return allones - 1
        return allones

    @property
    def sign_bit(self) -> int:
        """The sign bit's mask (0 for unsigned formats)."""
        return 1 << (self.exp_bits + self.man_bits) if self.signed else 0

    @property
    def nan_code(self) -> int:
        """The canonical (positive) NaN code this format produces, or -1 when it has none."""
        if self.nan == "ieee":
            return ((1 << self.exp_bits) - 1) << self.man_bits | (1 << (self.man_bits - 1))
        if self.nan in ("fn", "allones"):
            return (1 << (self.exp_bits + self.man_bits)) - 1
        return -1

    @property
    def inf_code(self) -> int:
        """The +Inf code, or -1 when the format has no infinity."""
        return ((1 << self.exp_bits) - 1) << self.man_bits if self.inf else -1

    def value_of_code(self, code: int):
        """Exact value of one magnitude+sign code as a Fraction (None for NaN, +-inf as float)."""
        from fractions import Fraction
        sign = -1 if (self.signed and code & self.sign_bit) else 1
        mag = code & ((1 << (self.exp_bits + self.man_bits)) - 1)
        if self.nan == "ieee" and mag > self.inf_code or self.nan in ("fn", "allones") and mag == self.nan_code:
            return None
        if self.inf and mag == self.inf_code:
            return sign * float("inf")
        e, m = mag >> self.man_bits, mag & ((1 << self.man_bits) - 1)
        if e == 0 and self.subnormals:
            return sign * Fraction(m, 1 << self.man_bits) * Fraction(2) ** self.emin
        return sign * (1 + Fraction(m, 1 << self.man_bits)) * Fraction(2) ** (e - self.bias)


@dataclass(frozen=True)
class IntFormat:
    """A two's-complement or unsigned integer format of `bits` bits."""

    name: str
    bits: int
    signed: bool

    @property
    def width(self) -> int:
        """Bits a code occupies in memory."""
        return self.bits


F = FloatFormat
BF16 = F("bf16", 8, 7, 127, nan_payload_decode=True)
FP16 = F("fp16", 5, 10, 15, on_nan="payload", nan_payload_decode=True)
FP32 = F("fp32", 8, 23, 127, nan_payload_decode=True)
FP32R = F("fp32r", 8, 13, 127, storage_bits=32)         # FP22 value in the top 22 bits of 4 bytes
E3M4 = F("e3m4", 3, 4, 3)
E4M3 = F("e4m3", 4, 3, 7)                               # IEEE-style, max 240 (D-02, SUNDA/CAYMAN)
E4M3FN = F("e4m3fn", 4, 3, 7, inf=False, nan="fn", overflow="nan")   # OCP, max 448 (D-02)
E5M2 = F("e5m2", 5, 2, 15)
E2M5 = F("e2m5", 2, 5, 1, inf=False, nan="none", overflow="saturate", on_nan="zero")  # D-04
E2M1 = F("e2m1", 2, 1, 1, inf=False, nan="none", overflow="saturate", on_nan="flipzero")
E8M0 = F("e8m0", 8, 0, 127, signed=False, inf=False, nan="allones", subnormals=False, overflow="nan",
         fp32_subnormal_e8m0=True)                    # D-05, with ml_dtypes' subnormal reading (D-T03)
E7M1 = F("e7m1", 7, 1, 63, signed=False, inf=False, nan="allones", subnormals=False, overflow="nan")
E6M2 = F("e6m2", 6, 2, 31, signed=False, inf=False, nan="allones", subnormals=False, overflow="nan")
E5M3 = F("e5m3", 5, 3, 15, signed=False, inf=False, nan="allones", subnormals=False, overflow="nan")
del F
E8M0_BIAS, E8M0_NAN = E8M0.bias, E8M0.nan_code      # an MX block scale is 2^(code - 127), 0xFF NaN (D-05)


def e8m0_exponents(codes) -> np.ndarray:
    """MX block-scale exponents of E8M0 codes: code - 127 as float64, NaN for the NaN code (D-21)."""
    c = np.asarray(codes).astype(np.int64)
    return np.where(c == E8M0_NAN, np.nan, c - float(E8M0_BIAS))

_INT_FORMATS = {
    Dtype.INT4: IntFormat("int4", 4, True), Dtype.INT8: IntFormat("int8", 8, True),
    Dtype.UINT8: IntFormat("uint8", 8, False), Dtype.INT16: IntFormat("int16", 16, True),
    Dtype.UINT16: IntFormat("uint16", 16, False), Dtype.INT32: IntFormat("int32", 32, True),
    Dtype.UINT32: IntFormat("uint32", 32, False), Dtype.INT64: IntFormat("int64", 64, True),
    Dtype.UINT64: IntFormat("uint64", 64, False),
}
_FLOAT_FORMATS = {
    Dtype.BFLOAT16: BF16, Dtype.FP16: FP16, Dtype.FP32: FP32, Dtype.FP32R: FP32R,
    Dtype.FP8_EXP3: E3M4, Dtype.FP8_EXP5: E5M2, Dtype.FP8_EXP2: E2M5, Dtype.FP4_EXP2: E2M1,
    Dtype.SFP8_E8: E8M0, Dtype.SFP8_E7: E7M1, Dtype.SFP8_E6: E6M2, Dtype.SFP8_E5: E5M3,
}


def format_of(dtype, gen, *, e4m3: str | None = None) -> FloatFormat | IntFormat:
    """The numeric format of a code in a generation.

    `e4m3` overrides D-02 for FP8_EXP4: "ieee" (max 240) or "fn" (OCP, max 448)."""
    dtype, gen = Dtype.parse(dtype), Gen.parse(gen)
    if dtype not in dtypes_of(gen):
        raise ValueError(f"{dtype.name} (0x{dtype:02X}) does not exist on {gen.name}")
    if dtype == Dtype.FP8_EXP4:
        flavour = e4m3 or ("fn" if gen >= Gen.MARIANA else "ieee")
        if flavour not in ("ieee", "fn"):
            raise ValueError(f"e4m3 flavour must be 'ieee' or 'fn', got {flavour!r}")
        return E4M3FN if flavour == "fn" else E4M3
    if dtype in _FLOAT_FORMATS:
        return _FLOAT_FORMATS[dtype]
    if dtype in _INT_FORMATS:
        return _INT_FORMATS[dtype]
    if is_cptc(dtype):
        raise ValueError(f"{dtype.name} is a transport-only CPTC code ({cptc_bits(dtype)}-bit "
                         "trellis stream); it has no numeric value")
    raise ValueError(f"{dtype.name} has no numeric format")


def code_dtype(fmt) -> np.dtype:
    """The unsigned numpy container for a format's codes."""
    width = fmt.width
    return np.dtype(np.uint8 if width <= 8 else np.uint16 if width <= 16 else
                    np.uint32 if width <= 32 else np.uint64)


# --- numpy arrays in, codes out ----------------------------------------------------------------

# numpy / ml_dtypes element types whose elements are codes of one of the formats above, by dtype name
# (ml_dtypes is recognised by name, not imported)
NUMPY_FORMATS = {
    "uint8": _INT_FORMATS[Dtype.UINT8], "int8": _INT_FORMATS[Dtype.INT8],
    "uint16": _INT_FORMATS[Dtype.UINT16], "int16": _INT_FORMATS[Dtype.INT16],
    "uint32": _INT_FORMATS[Dtype.UINT32], "int32": _INT_FORMATS[Dtype.INT32],
    "float16": FP16, "float32": FP32, "bfloat16": BF16, "float8_e4m3fn": E4M3FN, "float8_e4m3": E4M3,
    "float8_e5m2": E5M2, "float8_e3m4": E3M4, "float8_e8m0fnu": E8M0, "float4_e2m1fn": E2M1,
    "int4": _INT_FORMATS[Dtype.INT4],
}


def numpy_format(np_dtype) -> FloatFormat | IntFormat | None:
    """The format whose codes the elements of a numpy or ml_dtypes dtype are, or None (float64,
    int64, bool, ml_dtypes' fnuz / float6 types, raw void, big-endian storage, ...)."""
    d = np.dtype(np_dtype)
    return None if d.byteorder == ">" else NUMPY_FORMATS.get(d.name)


def _is_float_values(d: np.dtype) -> bool:
    """numpy floats and ml_dtypes float types (kind 'V' or 'f', name float* / bfloat16)."""
    return d.kind == "f" or (d.isbuiltin == 2 and d.name.startswith(("float", "bfloat")))


def codes_of(x, dtype, gen, *, e4m3: str | None = None, name: str = "array") -> np.ndarray:
    """Codes of `dtype` for `x`, without rounding.

    An ml_dtypes or numpy array whose element type is the format itself (bfloat16 for BFLOAT16,
    float32 for FP32, float8_e4m3fn for MARIANA's FP8_EXP4, int8 for INT8, ...) gives its bit
    patterns.  Other integer arrays (numpy int / uint) are codes already and pass unchanged (the
    codecs check their range).  Any other float array (float16 / 32 / 64, ml_dtypes floats) is
    values: each must be a value of the format (NaN only where the format has one), else
    ValueError naming the first that is not; round explicitly first, e.g. with from_fp32 (RNE).
    Other element types (bool, complex, object, ml_dtypes integers of another width) raise
    TypeError."""
    fmt = format_of(dtype, gen, e4m3=e4m3)
    arr = np.asarray(x)
    if arr.dtype.byteorder == ">":
        arr = arr.astype(arr.dtype.newbyteorder("<"))
    d = arr.dtype
    if numpy_format(d) is fmt:
        return arr.view(code_dtype(fmt)) & np.asarray((1 << fmt.width) - 1, code_dtype(fmt))
    if d.kind in "ui":
        return arr
    if not _is_float_values(d):
        raise TypeError(f"{name}: {d} elements are neither codes (unsigned integers) nor float values; "
                        f"give {fmt.name} codes, or values as numpy / ml_dtypes floats")
    with np.errstate(invalid="ignore", over="ignore"):
        x32 = arr.astype(np.float32)
        bad = ~((x32.astype(np.float64) == arr.astype(np.float64)) | np.isnan(x32))
    nearest = ""
    if not bad.any():                      # every value is a float32: round trip through the format
        codes = from_fp32(x32, dtype, gen, e4m3=e4m3)
        back = to_fp32(codes, dtype, gen, e4m3=e4m3)
        bad = (back.view(np.uint32) != x32.view(np.uint32)) & ~(np.isnan(back) & np.isnan(x32))
        if not bad.any():
            return codes
        nearest = f", which rounds to {float(back[bad][0])!r}"
    raise ValueError(f"{name}: {int(bad.sum())} of {arr.size} values are not {fmt.name} values (the first is "
                     f"{float(arr[bad][0])!r}{nearest}); round explicitly, e.g. "
                     f"from_fp32(x, {Dtype.parse(dtype).name}, gen) rounds float32 to nearest even")


# --- decoding (widening to fp32 is exact for every float format) ------------------------------

def _as_codes(codes, fmt) -> np.ndarray:
    arr = np.asarray(codes)
    if arr.dtype.kind not in "ui" and arr.size:
        raise TypeError(f"codes must be an integer array of bit patterns, got {arr.dtype} "
                        "(codes_of turns float / ml_dtypes arrays into codes)")
    if arr.dtype.kind == "i" and arr.size and arr.min() < 0:
        raise ValueError("codes are unsigned bit patterns; got a negative value")
    arr = arr.astype(np.uint64)
    if arr.size and int(arr.max()) >> fmt.width:
        raise ValueError(f"code 0x{int(arr.max()):X} does not fit {fmt.name} ({fmt.width} bits)")
    return arr


def _decode_float(codes: np.ndarray, fmt: FloatFormat) -> np.ndarray:
    """Exact fp32 bit patterns of float codes (vectorized integer arithmetic)."""
    c = codes.astype(np.int64)
    if fmt is FP32R:
        return (codes & 0xFFFFFC00).astype(np.uint32)
    neg = (c & fmt.sign_bit) != 0 if fmt.signed else np.zeros(c.shape, bool)
    mag = c & ((1 << (fmt.exp_bits + fmt.man_bits)) - 1)
    e, m = np.divmod(mag, 1 << fmt.man_bits)
    if fmt.subnormals:
        sig = np.where(e == 0, m, m | (1 << fmt.man_bits))
        exp = np.where(e == 0, fmt.emin, e - fmt.bias) - fmt.man_bits
    else:
        sig, exp = m | (1 << fmt.man_bits), e - fmt.bias - fmt.man_bits
    with np.errstate(over="ignore"):     # exponent-all-ones codes; replaced by Inf/NaN below
        value = np.ldexp(sig.astype(np.float64), exp.astype(np.int32)).astype(np.float32)
    bits = value.view(np.uint32) | (neg.astype(np.uint32) << 31)
    if fmt.inf:
        bits = np.where(mag == fmt.inf_code, np.uint32(0x7F800000) | (neg.astype(np.uint32) << 31), bits)
    if fmt.nan == "ieee":
        is_nan = mag > fmt.inf_code
    elif fmt.nan in ("fn", "allones"):
        is_nan = mag == fmt.nan_code
    else:
        is_nan = np.zeros(c.shape, bool)
    if fmt.nan_payload_decode:
        nan_bits = (0x7F800000 | (m << (23 - fmt.man_bits))).astype(np.uint32) | (neg.astype(np.uint32) << 31)
    else:
        nan_bits = np.uint32(0x7FC00000) | (neg.astype(np.uint32) << 31)
    return np.where(is_nan, nan_bits, bits).astype(np.uint32)


@functools.cache
def _decode_table(fmt: FloatFormat) -> np.ndarray:
    return _decode_float(np.arange(1 << fmt.bits, dtype=np.uint64), fmt)


def to_fp32(codes, dtype, gen, *, e4m3: str | None = None) -> np.ndarray:
    """Widen codes of `dtype` to float32 (exact for floats; integers round to nearest even)."""
    fmt = format_of(dtype, gen, e4m3=e4m3)
    arr = _as_codes(codes, fmt)
    if isinstance(fmt, IntFormat):
        if fmt.signed:
            top = 64 - fmt.bits              # sign-extend: the code's top bit to bit 63 and back
            return _int_to_fp32((arr << np.uint64(top)).view(np.int64) >> top)
        return _int_to_fp32(arr)
    if fmt.bits <= 16:
        bits = _decode_table(fmt)[arr.astype(np.intp)]
    elif fmt is FP32:
        bits = arr.astype(np.uint32)
    else:
        bits = _decode_float(arr, fmt)
    return bits.view(np.float32)


def _int_to_fp32(vals: np.ndarray) -> np.ndarray:
    """Integers to float32 with one round-to-nearest-even (no double rounding through float64)."""
    if vals.dtype == np.uint64:
        big = vals >= (1 << 53)
    else:
        big = np.abs(vals.astype(np.float64)) >= 2.0 ** 53
    out = vals.astype(np.float64).astype(np.float32)
    if big.any():
        # float64 would round first: build round-to-odd at 53 bits, then round to 24 bits (exact).
        v = vals[big]
        neg = v < 0 if v.dtype.kind == "i" else np.zeros(v.shape, bool)
        mag = np.where(neg, (-(v.astype(np.int64) + 1)).astype(np.uint64) + np.uint64(1), v.astype(np.uint64))
        shift = np.floor(np.log2(mag.astype(np.float64))).astype(np.int64) - 52   # >= 1: mag >= 2^53
        kept = mag >> shift.astype(np.uint64)
        sticky = (kept << shift.astype(np.uint64)) != mag
        kept = kept | sticky.astype(np.uint64)      # round to odd keeps later RNE exact
        r = np.ldexp(kept.astype(np.float64), shift.astype(np.int32)).astype(np.float32)
        out[big] = np.where(neg, -r, r)
    return out


# --- encoding (narrowing from fp32) -----------------------------------------------------------

def _narrow_float(x: np.ndarray, fmt: FloatFormat, saturate: bool) -> np.ndarray:
    """Round float32 values to `fmt` codes with round-to-nearest-even (SPEC D-07)."""
    u = x.view(np.uint32).astype(np.int64)
    neg = (u >> 31) != 0
    E, frac = (u >> 23) & 0xFF, u & 0x7FFFFF
    is_nan = (E == 0xFF) & (frac != 0)
    is_inf = (E == 0xFF) & (frac == 0)
    is_zero = (E == 0) & (frac == 0)
    sig = np.where(E == 0, frac, frac | (1 << 23))
    lsb = np.maximum(E, 1) - 150                                  # exponent of sig's lsb
    with np.errstate(invalid="ignore"):  # a signalling NaN; Inf and NaN codes are replaced below
        log2 = np.frexp(x.astype(np.float64))[1].astype(np.int64) - 1        # floor(log2|x|)
    ex = np.where(is_zero, fmt.emin - 1, log2)
    q = np.maximum(ex, fmt.emin) - fmt.man_bits                   # exponent of the result lsb
    sh = np.minimum(q - lsb, 40)
    kept = sig >> sh
    rem = sig - (kept << sh)
    half = (1 << sh) >> 1
    up = (rem > half) | ((rem == half) & ((kept & 1) == 1))         # sh >= 23 - 13: never 0
    mant = kept + up
    mag = ((np.maximum(ex, fmt.emin) + fmt.bias - 1) << fmt.man_bits) + mant
    if not fmt.subnormals:
        mag = np.where(ex < fmt.emin, 0, mag)                     # no zero: clamp up to code 0
    over = mag > fmt.max_code
    if saturate or fmt.overflow == "saturate":
        over_code = fmt.max_code
    elif fmt.overflow == "inf":
        over_code = fmt.inf_code
    else:
        over_code = fmt.nan_code
    mag = np.where(over, over_code, mag)
    inf_code = fmt.max_code if (saturate or not fmt.inf) else fmt.inf_code
    if not fmt.inf and fmt.nan != "none" and not saturate:
        inf_code = fmt.nan_code
    mag = np.where(is_inf, inf_code, mag)
    sign = np.where(neg, fmt.sign_bit, 0)
    code = mag | sign
    if fmt.on_nan == "quiet":
        nan = fmt.nan_code | sign
    elif fmt.on_nan == "payload":
        pay = frac >> (23 - fmt.man_bits)
        pay = np.where(pay == 0, 1, pay)
        nan = fmt.inf_code | pay | sign
    elif fmt.on_nan == "flipzero":
        nan = np.where(neg, 0, fmt.sign_bit)
    else:
        nan = 0
    code = np.where(is_nan, nan, code)
    if fmt.fp32_subnormal_e8m0:
        code = np.where(E == 0, (frac > 0x400000).astype(np.int64), code)   # zero: NaN code below
    if not fmt.signed:   # unsigned scales: zero, negatives, NaN and Inf have no code but NaN
        code = np.where(is_zero | neg | is_nan | is_inf, fmt.nan_code, code)
    return code.astype(code_dtype(fmt))


def _narrow_int(x: np.ndarray, fmt: IntFormat) -> np.ndarray:
    """Round toward zero and saturate; NaN becomes 0 (D-07)."""
    v = np.trunc(x.astype(np.float64))
    v[np.isnan(v)] = 0.0
    lo, hi = (-(1 << (fmt.bits - 1)), (1 << (fmt.bits - 1)) - 1) if fmt.signed else (0, (1 << fmt.bits) - 1)
    mask = (1 << fmt.bits) - 1
    below, above = v <= float(lo), v >= float(hi)     # float(2**63 - 1) is 2**63: saturates
    mid = ~(below | above)
    out = np.zeros(v.shape, np.uint64)
    vm = v[mid]
    out[mid] = vm.astype(np.int64).view(np.uint64) if fmt.signed else vm.astype(np.uint64)
    out[below] = lo & mask
    out[above] = hi & mask
    return (out & np.uint64(mask)).astype(code_dtype(fmt))


def from_fp32(x, dtype, gen, *, rounding: str = "rne", saturate: bool = False, rand=None,
              e4m3: str | None = None) -> np.ndarray:
    """Narrow float32 values to codes of `dtype`.

    rounding="rne" (D-07) or "sr" (stochastic, BFLOAT16 only, D-08, with 16-bit words in `rand`).
    saturate=True clamps overflow and +-Inf to +-max instead of Inf/NaN."""
    fmt = format_of(dtype, gen, e4m3=e4m3)
    arr = np.asarray(x)
    if arr.dtype != np.float32:
        if arr.dtype.kind not in "fiu":
            raise TypeError(f"from_fp32 takes float32 values, got {arr.dtype}")
        arr = arr.astype(np.float32)
    if rounding == "sr":
        if fmt is not BF16:
            raise ValueError("stochastic rounding is defined only for fp32 -> BFLOAT16 (D-08)")
        if rand is None:
            raise ValueError("rounding='sr' needs 16-bit random words in rand=")
        out = sr_bf16(arr.view(np.uint32), rand)
        if saturate:
            out = np.where((out & 0x7FFF) == 0x7F80, out - 1, out).astype(np.uint16)   # +-Inf -> +-max
        return out
    if rounding != "rne":
        raise ValueError(f"rounding must be 'rne' or 'sr', got {rounding!r}")
    if isinstance(fmt, IntFormat):
        return _narrow_int(arr, fmt)
    if fmt is FP32:
        out = arr.view(np.uint32).copy()
        if saturate:
            inf = (out & 0x7FFFFFFF) == 0x7F800000
            out[inf] -= 1                               # the pattern below +-Inf is +-max
        return out
    if fmt is BF16 and not saturate:
        codes = _narrow_bf16(arr)
    elif fmt.man_bits <= 5:
        u = arr.view(np.uint32)
        codes = _narrow_table(fmt, saturate)[(u >> 16) | ((u & 0xFFFF) != 0)]
    else:
        codes = _narrow_float(arr, fmt, saturate)
    if fmt is FP32R:
        codes = _fp32r_bits(codes)
    return codes


def _narrow_bf16(x: np.ndarray) -> np.ndarray:
    """fp32 -> bf16 with RNE in three integer passes; NaN -> 0x7FC0 with the sign (ml_dtypes)."""
    u = x.view(np.uint32)
    out = ((u + np.uint32(0x7FFF) + ((u >> 16) & 1)) >> 16).astype(np.uint16)
    nan = (u & 0x7FFFFFFF) > 0x7F800000
    if nan.any():
        out[nan] = ((u[nan] >> 16) & 0x8000) | 0x7FC0
    return out


@functools.cache
def _narrow_table(fmt: FloatFormat, saturate: bool) -> np.ndarray:
    """Codes for every fp32 value rounded to odd at 16 bits (7 mantissa bits + sticky).

    Rounding to odd with p bits and then to nearest with q <= p - 2 bits equals rounding to
    nearest directly, so this table is exact for formats of at most 5 mantissa bits."""
    keys = (np.arange(1 << 16, dtype=np.uint32) << 16).view(np.float32)
    return _narrow_float(keys, fmt, saturate)


def _fp32r_bits(codes: np.ndarray) -> np.ndarray:
    """FP32R codes are fp32 patterns whose low 10 mantissa bits are zero (decision D-T02): the
    22-bit sign | exponent | mantissa of the rounding, 10 bits up."""
    return codes.astype(np.uint32) << np.uint32(10)


def cast(codes, in_dtype, out_dtype, gen, **options) -> np.ndarray:
    """Any-to-any conversion through the FP32 hub: narrow_from_fp32(widen_to_fp32(x))."""
    e4m3 = options.pop("e4m3", None)
    return from_fp32(to_fp32(codes, in_dtype, gen, e4m3=e4m3), out_dtype, gen, e4m3=e4m3, **options)


# --- stochastic rounding and its generator (D-08, D-09) ---------------------------------------

def sr_bf16(x_bits_u32, rand_u16) -> np.ndarray:
    """fp32 -> bf16 stochastic rounding: (u + r) >> 16 on the pattern; NaN -> 0x7FC0|sign; Inf kept."""
    u = np.asarray(x_bits_u32)
    if u.dtype.kind not in "ui":
        raise TypeError("sr_bf16 takes fp32 bit patterns as unsigned integers")
    u = u.astype(np.uint64)
    r = np.asarray(rand_u16)
    if r.dtype.kind not in "ui":
        raise TypeError("sr_bf16 takes 16-bit random words as unsigned integers")
    r = r.astype(np.uint64)
    if r.size and int(r.max()) > 0xFFFF:
        raise ValueError("random words for SR are 16 bits wide")
    u, r = np.broadcast_arrays(u, r)
    is_nan = (u & 0x7FFFFFFF) > 0x7F800000
    out = (u + r) >> 16                      # +-Inf's low 16 bits are zero: r never carries out of it
    out = np.where(is_nan, ((u >> 16) & 0x8000) | 0x7FC0, out)
    return out.astype(np.uint16)


XORSHIFT_SHIFTS = (13, 17, 5)   # D-09; the RTL uses the same constants


def xorshift32(states) -> np.ndarray:
    """One step of xorshift32 (13, 17, 5) on every state; a zero state stays zero (D-09)."""
    s = np.asarray(states)
    if s.dtype.kind not in "ui":
        raise TypeError("xorshift32 states are unsigned 32-bit integers")
    s = s.astype(np.uint32)
    a, b, c = (np.uint32(k) for k in XORSHIFT_SHIFTS)
    s = s ^ (s << a)
    s = s ^ (s >> b)
    s = s ^ (s << c)
    return s


def split_fp32(x) -> tuple[np.ndarray, np.ndarray]:
    """fp32_mode split (D-12): hi = x with the low 10 mantissa bits cleared, lo = x - hi (exact)."""
    x = np.asarray(x, dtype=np.float32)
    hi = (x.view(np.uint32) & np.uint32(0xFFFFFC00)).view(np.float32)
    with np.errstate(invalid="ignore"):
        lo = np.where(np.isfinite(x), x - hi, np.float32(0)).astype(np.float32)
    return hi, lo


# --- sub-byte packing (D-06) ------------------------------------------------------------------

def pack_nibbles(codes) -> np.ndarray:
    """Two 4-bit codes per byte, low nibble first (INT4 and FP4_EXP2 transport, D-06)."""
    c = np.asarray(codes)
    if c.dtype.kind not in "ui" or (c.size and (c.min() < 0 or c.max() > 0xF)):
        raise ValueError("nibble codes must be integers 0..15")
    c = c.astype(np.uint8).ravel()
    if c.size % 2:
        c = np.concatenate([c, np.zeros(1, np.uint8)])
    return (c[0::2] | (c[1::2] << 4)).astype(np.uint8)


def unpack_nibbles(data, count: int | None = None) -> np.ndarray:
    """The inverse of pack_nibbles: 4-bit codes, low nibble first, optionally the first `count`."""
    b = np.asarray(data, dtype=np.uint8).ravel()
    out = np.stack([b & 0xF, b >> 4], axis=1).ravel()
    if count is not None:
        if count > out.size:
            raise ValueError(f"{count} nibbles asked for, {out.size} present")
        out = out[:count]
    return out
