"""The micro-op validity rules written once, evaluated twice (D-T101).

Each `Rule` is a row of one table: its family (the check it belongs to), the opcodes whose checks run
that family, its error code, the field it names, a predicate saying when it fires, and a message.
The predicate is written over a small operations layer (`Ops`: `pick`, `in_`, `all_`, `any_`, `not_`,
`lookup`, `given`, `nonzero`, and the operators `==`, `!=`, `<`, `>`, `&`, `|` on values), the way
model/timing.py writes its formulas once for ints and Amaranth values (D-T70, D-T98).  Two backends
evaluate it:

  `Ints` (here): a decoded Descriptor, Python ints and bools; model/isa/check.py walks the table with
         it and reports a Violation, with its message, for each rule that fires;
  the decoder's (rtl/decoder.py): the descriptor bits as Amaranth values, `pick` = Mux; the decoder
         ORs each rule's predicate into its code's error bit (no messages in hardware).

A predicate uses `v[path]` (a field by dotted path), `v.elems(path)` (an array field's elements),
`v.active_cols` (num_active_cols, MAVERICK's 0 meaning every column), `v.is_mx`, `v.xpose`, `v.pack`,
`v.count(pattern)` (a walked pattern's element count), `v.kind_is(pattern, kind)` (its union
member), `v.array_cols`, `v.gen`, `v.maverick`, `v.op` and the operations of `v`; `only(v)` says,
from static facts alone (generation, layout, `v.has(path)`), whether the rule exists for the
descriptor's layout; `v.stationary_dtype` (the
engine's loaded weights) is the model's only, None in hardware.  A message reads the field values
(`v[path]` are ints there) and runs on the Python side only.  `step` splits a family whose checks walk
a pattern between its rules; the conditions for walking those patterns (`*_ok`, `dst_walk`) are
defined here too.

Two kinds of rule are made from the layout rather than written as rows: the structural rules
(`structure`: reserved bytes and bits zero, enum and dtype membership, field by field, a union's
member where the pattern is that member) and those of walking one pattern (`walk_pattern`: its
kind, counts, address window, MX scales; `mx_source`), whose element size and partitions are the
caller's.  Both sides call the same function; a union's member reads `v[member(v, name, kind) + ...]`
(the model: the decoded record, or the same bytes read as that member, as hardware reads them).

This module imports no Amaranth: the model never needs it.  Which code is reported when several
rules fire is the smallest code on both sides (check.error_code, the decoder's priority encoder), so
the order of the table matters only for the order of check()'s violations: within a family it is the
order the rules had in check.py."""
from __future__ import annotations

import functools
import operator
from dataclasses import dataclass, field, replace
from typing import Callable

from tensore.model import addrmap
from tensore.model import dtypes as dt
from tensore.model.dtypes import Dtype, Gen
from tensore.model.isa.enums import (ErrorCode, FP32Mode, MXPerfMode, Opcode, PeReg, PerfOpt, PsumAccumulate, PsumRound,
                                     ScalarMode, SeedMode, TagWeightMode, TileColSize, TileRowSize, XposeMode)
from tensore.model.isa.layouts import EVENT_NONE, LUT_ENTRIES, NUM_EVENTS, opcodes_of
from tensore.model.isa.struct import Bits, EnumByte, Reserved, Sub, Union, decode_struct, per_struct
from tensore.model.isa.microop import (ARRAY_ROWS, DOUBLE_ROW_FROM, DOUBLE_ROW_PACK, GROUP, GROUPS, MX_BLOCK, PUMP_PACK,
                                       SEED_COLS, SEED_STATES, cols_in, group_step, max_moving, mx_in, pack_in,
                                       psum_half, region_in, runs_array, tagw_in, xpose_in)

E = ErrorCode


class Ops:
    """The operations a rule's predicate is written with.  A backend supplies `true`, `false`, `pick`
    and `not_`; the rest are built from them and the operators of its values."""

    true, false = True, False

    def pick(self, cond, a, b):
        """`a if cond else b` (Amaranth: Mux)."""
        return a if cond else b

    def not_(self, x):
        return not x

    def all_(self, *xs):
        out = self.true
        for x in xs:
            out = out & x
        return out

    def any_(self, *xs):
        out = self.false
        for x in xs:
            out = out | x
        return out

    def in_(self, x, values):
        """x is one of `values` (ints or enum members)."""
        return self.any_(*(x == int(v) for v in values))

    def nonzero(self, x):
        """Some bit of `x` is set (Ints: some byte of a reserved `bytes` field)."""
        return x != 0

    def given(self, cond, then):
        """`cond`, and `then()` where it holds (Ints evaluates `then` only there)."""
        return cond & then()

    def dtype_in(self, x, which):
        """x is one of the generation's dtype codes `which` (dtype_codes)."""
        return self.in_(x, dtype_codes(self.gen, which))

    def once(self, helper):
        """helper(self), for a helper that reads fields only (no walked count): a backend may keep
        its answer for the descriptor (Ints does)."""
        return helper(self)

    def once_walked(self, helper):
        """helper(self), for a helper that reads walked counts too: a backend may keep its answer
        until the next pattern is walked (Ints does)."""
        return helper(self)

    def lookup(self, key, table: dict, default):
        """table[key] for the keys it has, `default` for any other value of `key`."""
        out = default
        for k, value in table.items():
            out = self.pick(key == int(k), value, out)
        return out


class Ints(dict, Ops):
    """The Python backend: a decoded Descriptor's fields as ints (enum members where valid).

    One is made per check() call and reads each thing once (D-T101: the table is written for both
    backends, so the model's speed is made here): it is itself the dict of the fields read so far by
    dotted path (`v[path]` is a dict lookup after the first, `__missing__` reads the descriptor) and
    of the `once` helpers' answers; it keeps `has`, derives `xpose` / `is_mx` / `pack` /
    `active_cols` once, and `select` keeps the rows that exist for the descriptor's static facts."""

    def __init__(self, desc, array_cols=None, stationary_dtype=None):
        fields = desc.fields
        super().__init__(fields)        # the top-level fields, as read
        self.update({path: fields[head][part] for path, head, part in _parts(desc.layout)})
        self.desc, self.array_cols, self.stationary_dtype = desc, array_cols, stationary_dtype
        self.gen, self.op, self.layout = desc.gen, desc.op, desc.layout
        self.maverick = _MAVERICK[desc.gen]
        self.counts = _Counts()         # pattern name -> its element count, as check.pattern walked it
        self.count = self.counts.__getitem__
        self.answers = {}               # the per_walk helpers' answers since the last walk
        self.views = {}                 # (union, member) -> its bytes read as that member
        self.paths = {}                 # dotted path -> has(path)
        self.is_mx, self.xpose = mx_in(self), xpose_in(self)        # microop's derivations (D-T101)
        self.pack, self.active_cols = pack_in(self), cols_in(self)

    __hash__ = object.__hash__          # one descriptor's view, not a value (a dict is unhashable)

    def __missing__(self, path):
        """The field at the dotted `path`, read the first time it is asked for (or a `once` helper's
        answer, `path` the helper)."""
        if callable(path):
            value = self[path] = path(self)
            return value
        head, *rest = _split(path)
        value = self.desc.fields[head]
        if rest and isinstance(value, dict) and "kind" in value and rest[0] not in value:     # a union member
            value = value if value["kind"] == rest[0] else self._view(head, rest[0])
            rest = rest[1:]
        for name in rest:
            value = value[name]
        self[path] = value
        return value

    def _view(self, name, kind):
        """The bytes of the union `name` read as its member `kind` (as the hardware reads every member)."""
        if (name, kind) not in self.views:
            fd = self.desc.layout.field(name)
            chunk = self.desc.raw[fd.offset:fd.offset + fd.kind.size]
            self.views[name, kind] = decode_struct(fd.kind.member(kind), chunk, self.gen)
        return self.views[name, kind]

    def elems(self, path) -> list:
        """The elements of the array field at `path`."""
        return list(self[path])

    def given(self, cond, then):
        return bool(cond) and then()

    not_ = staticmethod(operator.not_)

    def in_(self, x, values):
        try:
            return x in _INT_SETS[values]
        except (KeyError, TypeError):       # first seen, or a set (no hash): _int_set
            return x in _int_set(values)

    def dtype_in(self, x, which):
        return x in _dtype_set(self.gen, which)

    def lookup(self, key, table: dict, default):
        for k, value in table.items():         # Ops.lookup: the last key equal to `key`
            if key == int(k):
                default = value
        return default

    once = dict.__getitem__             # a helper's answer, kept in the dict beside the fields (__missing__)

    def once_walked(self, helper):
        try:
            return self.answers[helper]
        except KeyError:
            value = self.answers[helper] = helper(self)
            return value

    def walked(self, name, count):
        """check.pattern walked the pattern `name`: its `count` (v.count); the answers of the helpers
        that read counts start over (once_walked)."""
        self.counts[name] = count
        self.answers.clear()

    def nonzero(self, x):
        return any(x)                       # a reserved `bytes` field (the only caller, _field_rules)

    def kind_is(self, name, kind):
        """The pattern `name` is a `kind` (a pattern with no union is a tensor3d)."""
        return self[name].get("kind", "tensor3d") == kind

    def has(self, path) -> bool:
        try:
            return self.paths[path]
        except KeyError:
            found = self.paths[path] = self._has(path)
            return found

    def _has(self, path) -> bool:
        value = self.desc.fields
        for name in _split(path):
            if not isinstance(value, dict) or name not in value:
                return False
            value = value[name]
        return True

    def select(self, families: tuple, step=None) -> tuple:
        """`select(families, self.op, self, step)`, made once per static facts: a row's `only` reads
        the generation, opcode, layout (`has`), `array_cols` and `stationary_dtype`, never a field's
        value (tests/test_rules.py checks it)."""
        return per_struct(_SELECTED, self.layout, lambda: tuple(select(families, self.op, self, step)),
                          families, step, self.gen, self.op, self.array_cols, self.stationary_dtype)


class _Counts(dict):
    """Ints.count(name): the element count (per partition) of the pattern `name`, 0 when unusable
    or not walked."""

    def __missing__(self, name):
        return 0


_MAVERICK = {gen: gen.layout == Gen.MAVERICK for gen in Gen}
_SELECTED: dict = {}            # Ints.select's rows per static facts


def _parts(layout) -> tuple:
    """(path, field, part) of every part of a Sub or Bits field of `layout` (`tile_size.col_size_log2`):
    Ints gives them with the top-level fields, as __missing__ would read them (not a union's)."""
    return per_struct(_PARTS, layout, lambda: _find_parts(layout))


def _find_parts(layout) -> tuple:
    out = []
    for fd in layout.fields:
        names = ([n for n, _, _ in fd.kind.parts] if isinstance(fd.kind, Bits) else
                 [f.name for f in fd.kind.struct.fields] if isinstance(fd.kind, Sub) else [])
        if "kind" not in names:                     # a "kind" would read as a union's marker
            out += [(f"{fd.name}.{n}", fd.name, n) for n in names]
    return tuple(out)


_PARTS: dict = {}


@functools.cache
def _split(path) -> tuple:
    return tuple(path.split("."))


def _int_set(values) -> frozenset:
    """`values` as a set of ints (a tuple's, frozenset's or enum's kept in _INT_SETS)."""
    ints = frozenset(int(v) for v in values)
    if isinstance(values, (tuple, frozenset, type)):
        _INT_SETS[values] = ints
    return ints


_INT_SETS: dict = {}            # Ints.in_'s sets: a tuple, frozenset or enum -> its values as ints


def per_descriptor(helper):
    """`helper(v)` reads the descriptor's fields only, never a walked pattern's count: its backend
    may evaluate it once per descriptor.  The name is bound to `v.once(helper)` (Ops.once; Ints
    keeps the answer, the decoder builds it each time, as before), a call without a Python frame
    of its own where Ints knows the answer."""
    return operator.methodcaller("once", helper)


def per_walk(helper):
    """`helper(v)` reads fields and walked counts: its backend may evaluate it once between two
    pattern walks; the name is bound to `v.once_walked(helper)` (Ops.once_walked)."""
    return operator.methodcaller("once_walked", helper)


def _always(v) -> bool:
    return True


@dataclass(frozen=True)
class Rule:
    family: str
    ops: frozenset
    code: ErrorCode
    field: str
    fires: Callable                   # fires(v): the descriptor breaks the rule (a bool / a 1-bit value)
    message: Callable                 # message(v) -> str, on the Python backend
    only: Callable = _always          # only(v) -> bool from static facts: the rule exists for this layout
    step: int = 0                     # check.py walks a family's steps apart where patterns come between
    name: str = field(default="", compare=False)   # family:CODE:field, #k for the k-th of one name


ALL_OPS = frozenset(Opcode)
ARRAY_OPS = frozenset({Opcode.LDWEIGHTS, Opcode.MATMUL})
COMPUTE_OPS = ARRAY_OPS | {Opcode.MATMUL_SPARSE}
TILED_OPS = COMPUTE_OPS | {Opcode.LDTAGS, Opcode.LDWEIGHTS_MX, Opcode.MATMUL_MX}
MATMUL_OPS = frozenset({Opcode.MATMUL, Opcode.MATMUL_SPARSE, Opcode.MATMUL_MX})
SEED_OPS = frozenset({Opcode.PE_MANAGE_SEED})
MX_OPS = frozenset({Opcode.LDWEIGHTS_MX, Opcode.MATMUL_MX})
FP8 = frozenset({Dtype.FP8_EXP2, Dtype.FP8_EXP3, Dtype.FP8_EXP4, Dtype.FP8_EXP5})
MATMUL_FP_INPUTS = {Dtype.FP8_EXP3, Dtype.FP8_EXP4, Dtype.FP8_EXP5, Dtype.BFLOAT16, Dtype.FP16, Dtype.FP32}
LUT_ENTRY_DTYPES = frozenset({Dtype.BFLOAT16, Dtype.FP16, Dtype.FP32})
SEED_IDENTITY_DTYPES = frozenset({Dtype.BFLOAT16, Dtype.FP16, Dtype.FP32R, Dtype.FP8_EXP3, Dtype.FP8_EXP4,
                                  Dtype.FP8_EXP5})
SEED_SAVE_PATTERN = {"start_addr": addrmap.PSUM_BASE, "step_elem": [1, 512], "num_elem": [2, 8]}
TILE_ROWS = {m: 1 << m for m in TileRowSize}
TILE_COLS = {m: 1 << m for m in TileColSize}


def matmul_input_dtypes(gen) -> set:
    """Non-MX matmul inputs: seed 000 section 8 (+ FP8_EXP2 where it exists)."""
    return {d for d in MATMUL_FP_INPUTS | {Dtype.FP8_EXP2} if dt.is_in_enum(d, gen)}


@functools.cache
def elem_bytes(dtype) -> int:
    """Bytes one element of `dtype` occupies in a pattern (4-bit codes: half a byte, counted as 1)."""
    try:
        fmt = dt.format_of(dtype, Gen.MAVERICK)
    except ValueError:
        return 1
    return max(1, fmt.width // 8)


@functools.cache
def dtype_codes(gen, which: str) -> tuple:
    """The byte values of `gen` that are dtypes (`enum`), MX element dtypes (`mx`), transposable
    (`xpose`: 8/16/32-bit data), matmul inputs (`inputs`) or dtypes of 32-bit elements (`wide`); the
    byte values whose elements take 2 or 4 bytes (`bytes2`, `bytes4`: elem_bytes, any generation's)."""
    pred = {"enum": lambda x: dt.is_in_enum(x, gen),
            "mx": lambda x: dt.is_valid_mx_dtype(x, gen),
            "xpose": lambda x: dt.is_valid_dtype(x, gen) and elem_bytes(x) <= 4 and not dt.is_cptc(x),
            "inputs": lambda x: x in matmul_input_dtypes(gen),
            "wide": lambda x: dt.is_in_enum(x, gen) and elem_bytes(x) == 4,
            "bytes2": lambda x: elem_bytes(x) == 2, "bytes4": lambda x: elem_bytes(x) == 4}[which]
    return tuple(x for x in range(256) if pred(x))


@functools.cache
def _dtype_set(gen, which) -> frozenset:
    """dtype_codes(gen, which) as a set (Ints.dtype_in)."""
    return frozenset(dtype_codes(gen, which))


@functools.cache
def out_dtypes(gen) -> frozenset:
    """The matmul output dtypes of `gen`: FP32 (or 0 for it), and BFLOAT16 from MARIANA on."""
    return frozenset({Dtype.INVALID, Dtype.FP32} | ({Dtype.BFLOAT16} if gen >= Gen.MARIANA else set()))


def _dtype_name(code, gen) -> str:
    return Dtype(code).name if dt.is_in_enum(code, gen) else f"0x{int(code):02X}"


@per_descriptor
def _tile_valid(v):
    return v.in_(v["tile_size.row_size_log2"], TileRowSize) & v.in_(v["tile_size.col_size_log2"], TileColSize)


def _not_maverick(v):
    return not v.maverick


def _double_row(v):
    return v["perf_opt"] == PerfOpt.DOUBLE_ROW


def _has_acc(v):
    return v.has("psum_accumulate_flags")


def reg_source_ok(v):
    """PeRegWrite's source is one element: only then is its pattern walked (check.pattern)."""
    return v["src_mem_pattern.num_elem"][0] == 1


def _lut_entries_ok(v):
    return (v["num_entries"] >= 1) & (v["num_entries"] <= LUT_ENTRIES)


def lut_source_ok(v):
    """ConvLutLoad's entry count is in range and its source holds that many: only then is the source
    pattern walked."""
    return _lut_entries_ok(v) & (v["src_mem_pattern.num_elem"][0] == v["num_entries"])


def seed_identity_ok(v):
    """PeManageSeed's identity diagonal has SEED_STATES elements: only then is its pattern walked."""
    return v["identity_mem_pattern.num_elem"][0] == SEED_STATES


def _seed_count_ok(v):
    nums = v["src_seed_mem_pattern.num_elem"]
    return nums[0] * nums[1] == SEED_COLS


def seed_source_ok(v):
    """A LoadSeed reading SEED_COLS INT32 per partition: only then is its source pattern walked."""
    return (v["mode"] == SeedMode.LOAD_SEED) & _seed_count_ok(v)


def _empty(v, name):
    """Every count, step and the address of the pattern `name` are 0."""
    return v.all_(*(x == 0 for x in v.elems(f"{name}.num_elem")), *(x == 0 for x in v.elems(f"{name}.step_elem")),
                  v[f"{name}.start_addr"] == 0)


def _seed_part(v):
    """The partition of the LoadSeed source address, and whether it is in SBUF or PSUM at all."""
    a = v["src_seed_mem_pattern.start_addr"]
    sbuf = a < addrmap.SBUF_END
    psum = (a >= addrmap.PSUM_BASE) & (a < addrmap.PSUM_END)
    return sbuf | psum, v.pick(sbuf, addrmap.split(a, "sbuf")[0], addrmap.split(a, "psum")[0])


def _save_pattern(v):
    want = SEED_SAVE_PATTERN
    return v.all_(v["dst_seed_mem_pattern.start_addr"] == want["start_addr"],
                  *(x == w for x, w in zip(v.elems("dst_seed_mem_pattern.step_elem"), want["step_elem"])),
                  *(x == w for x, w in zip(v.elems("dst_seed_mem_pattern.num_elem"), want["num_elem"])))


# a whole number of PE steps is a mask test: every pack is a power of two
assert all(p & (p - 1) == 0 for p in (DOUBLE_ROW_PACK, *PUMP_PACK.values()))


def mx_count_ok(v):
    """A MARIANA MX source of at least one element: only then are its data and scale windows walked."""
    return v["src_mem_pattern.num_elem"] != 0


def mx_steps_ok(v):
    """... and a whole number of PE steps: only then does a MatmulMX's destination count."""
    return mx_count_ok(v) & ((v["src_mem_pattern.num_elem"] & (v.pack - 1)) == 0)


def _weight_tile(v):
    """Elements per source partition of a weight load: rows x pack per column partition when it
    transposes, else columns x pack per row partition."""
    return v.pick(v.xpose, v["num_active_rows"] * v.pack, v.active_cols * v.pack)


def member(v, name, kind) -> str:
    """The path of the member `kind` of the pattern `name` (`name` itself when it is no union)."""
    layout = v.layout
    return per_struct(_MEMBERS, layout, lambda: f"{name}.{kind}" if isinstance(layout.field(name).kind, Union) else name,
                      name, kind)


_MEMBERS: dict = {}     # (layout, pattern, kind) -> the member's path


def _flag(v, name):
    """flags.<name>, 0 where the layout's flags have no such part."""
    return v[f"flags.{name}"] if v.has(f"flags.{name}") else 0


def _dtype_is(v, which, name="in_dtype"):
    return v.dtype_in(v[name], which)


@per_descriptor
def _operand(v):
    """(in enum, LUT mode, transposing) of a non-MX array operand, as compute_dtype tells them apart:
    MX sources have their own element rule, LUT mode comes before the transpose."""
    plain = _dtype_is(v, "enum") & v.not_(v.is_mx)
    lut = _flag(v, "scalar_mode") == ScalarMode.LUT
    xpose = v.xpose if v.op != Opcode.MATMUL_SPARSE else False     # MatmulSparse never transposes
    return plain, lut, xpose


@per_descriptor
def _seed_move(v):
    """A flags.seed_mode that moves seeds (LOAD_SEED or SAVE_SEED)."""
    return v.in_(_flag(v, "seed_mode"), (SeedMode.LOAD_SEED, SeedMode.SAVE_SEED))


# what a MAVERICK seed micro-op needs: (field, value, as the message names it)
SEED_NEEDS = (("tile_size.row_size_log2", TileRowSize.R64, "r64"), ("tile_size.col_size_log2", TileColSize.C256, "c256"),
              ("in_dtype", Dtype.FP32, "FP32"), ("fp32_mode", FP32Mode.HIGH, "HIGH"),
              ("flags.xpose_mode", XposeMode.ENABLED, "ENABLED"), ("num_active_rows", 1, "1"),
              ("num_active_cols", 0, "0 (256)"), ("out_dtype", Dtype.FP32, "FP32"))


def _seed_need(field, value, want) -> Rule:
    return Rule("seed_mode", ARRAY_OPS, E.BAD_SEED_OP, field,
                lambda v: _seed_move(v) & (v[field] != value),
                lambda v: f"a seed {SeedMode(v['flags.seed_mode']).name} micro-op needs {field} = {want}",
                only=lambda v: v.maverick and v.has(field))


def _save_dst_ok(v):
    """A SaveSeed matmul's destination is a 1x1x2 PSUM tensor."""
    nums = lambda: v.all_(*(x == w for x, w in zip(v.elems(member(v, "dst_mem_pattern", "tensor3d") + ".num_elem"),
                                                   (1, 1, 2))))
    return v.given(v.kind_is("dst_mem_pattern", "tensor3d"), nums)


def _div(v, a, b):
    """a // b, 0 when b is 0."""
    return v.pick(b == 0, 0, a // v.pick(b == 0, 1, b))


_psum_half = functools.cache(psum_half)       # microop.psum_half: a function of two ints


def _slot(v) -> int:
    """Columns that write one PSUM slot: C/2 on MAVERICK (D-01, scaled with the array), 128 before."""
    return _psum_half(v.gen, v.array_cols) if v.maverick else addrmap.PARTITIONS


@per_descriptor
def _slot_cols(v):
    """The active columns of one write slot: the partitions a matmul's destination spans."""
    return v.pick(v.active_cols > _slot(v), _slot(v), v.active_cols)


@per_descriptor
def matmul_seeds(v):
    """A MAVERICK Matmul that moves seeds: its destination is a seed bank (seed_patterns)."""
    return _seed_move(v) if v.maverick and v.op == Opcode.MATMUL else v.false


@per_descriptor
def matmul_transposes(v):
    """A Matmul that transposes (and moves no seeds): transpose_destination."""
    return v.not_(matmul_seeds(v)) & v.xpose if v.op == Opcode.MATMUL else v.false


@per_walk
def _whole_steps(v):
    """A plain Matmul's source is a whole number of PE steps (every pack is a power of two)."""
    return (v.count("src_mem_pattern") & (v.pack - 1)) == 0


@per_descriptor
def _plain(v):
    return v.not_(matmul_seeds(v) | matmul_transposes(v))


@per_walk
def moving(v):
    """The moving vectors a matmul streams into its destination: PE steps of the source (Matmul,
    MatmulMX), or the source elements per fmap (MatmulSparse)."""
    if v.op == Opcode.MATMUL_SPARSE:
        return _div(v, v.count("src_mem_pattern"), v["src_mem_pattern.num_elem"][3])
    if v.op == Opcode.MATMUL_MX:
        return v["src_mem_pattern.num_elem"] // v.pack
    return v.count("src_mem_pattern") // v.pack


@per_walk
def _to_destination(v):
    """The matmul reaches `destination`: a plain Matmul of whole PE steps, every MatmulSparse, a
    MatmulMX of whole PE steps."""
    if v.op == Opcode.MATMUL_SPARSE:
        return v.true
    if v.op == Opcode.MATMUL_MX:
        return mx_steps_ok(v)
    return _plain(v) & _whole_steps(v)


def dst_walk(v):
    """(walked?, element size, partitions) of a matmul's destination pattern: a seed bank (4-byte
    states over C/2 partitions, D-T27), a transpose's (one partition per moving element, D-13), or
    the plain destination's (one per active column of a write slot)."""
    esize = v.pick(v["out_dtype"] == Dtype.BFLOAT16, 2, 4)
    if v.op != Opcode.MATMUL:
        return _to_destination(v), esize, _slot_cols(v)
    seed, xp, n = matmul_seeds(v), matmul_transposes(v), v.count("src_mem_pattern")
    xrows = v.pick(n > addrmap.PARTITIONS, addrmap.PARTITIONS, v.pick(n == 0, 1, n))
    rows = v.pick(seed, _psum_half(v.gen, v.array_cols), v.pick(xp, xrows, _slot_cols(v)))
    return seed | xp | _to_destination(v), v.pick(seed, 4, esize), rows


@per_descriptor
def c256(v):
    """A MAVERICK c256 tile over more columns than one slot: the destination's upper dim splits them."""
    if not v.maverick:
        return v.false
    return (v["tile_size.col_size_log2"] == TileColSize.C256) & (v.active_cols > _slot(v))


@per_walk
def _dst_checked(v):
    """destination compares counts: both walked non-empty and a tensor3d destination."""
    m = v.count("dst_mem_pattern")
    return _to_destination(v) & (moving(v) != 0) & (m != 0) & v.kind_is("dst_mem_pattern", "tensor3d") \
        & v.not_(_flag(v, "seed_mode") == SeedMode.SAVE_SEED if v.maverick else v.false)


def _dst_upper(v):
    """The upper dim of a tensor3d destination (read only where it is one)."""
    return v.elems(member(v, "dst_mem_pattern", "tensor3d") + ".num_elem")[2]


def _event(name) -> Rule:
    return Rule("events", ALL_OPS, E.BAD_EVENT, f"events.{name}",
                lambda v: (v[f"events.{name}"] != EVENT_NONE) & (v[f"events.{name}"] >= NUM_EVENTS),
                lambda v: f"{v[f'events.{name}']} is not an event (0..{NUM_EVENTS - 1}, or {EVENT_NONE:#x} for none)")


_TABLE = [
    # -- events: the wait and set event numbers (after the structural walk) --
    _event("wait_event"), _event("set_event"),

    # -- seed_mode: a Ldweights / Matmul that moves seeds: PE_MANAGE_SEED's job before MAVERICK; on
    #    MAVERICK one FP32 HIGH transposing row over all 256 columns (D-T27) --
    Rule("seed_mode", ARRAY_OPS, E.BAD_SEED_OP, "flags.seed_mode", _seed_move,
         lambda v: "on MARIANA seeds move through PE_MANAGE_SEED", only=_not_maverick),
    *(_seed_need(*need) for need in SEED_NEEDS),
    Rule("seed_mode", frozenset({Opcode.MATMUL}), E.BAD_SEED_OP, "dst_mem_pattern",
         lambda v: v.given(_flag(v, "seed_mode") == SeedMode.SAVE_SEED, lambda: v.not_(_save_dst_ok(v))),
         lambda v: "SaveSeed writes a 1x1x2 PSUM tensor", only=lambda v: v.maverick),

    # -- ldweights: background transpose, tagged weights (step 0), the walked source's size (step 1) --
    Rule("ldweights", frozenset({Opcode.LDWEIGHTS}), E.BAD_ENUM, "bg_xpose_mode",
         lambda v: v["bg_xpose_mode"] != 0,
         lambda v: "background transpose is not modelled; must be 0 (D-T14)", only=lambda v: v.has("bg_xpose_mode")),
    Rule("ldweights", frozenset({Opcode.LDWEIGHTS}), E.BAD_SPARSE, "tag_weight_mode",
         lambda v: (v["tag_weight_mode"] == TagWeightMode.TAG_WEIGHT)
         & v.not_(v.in_(v["in_dtype"], (Dtype.BFLOAT16, Dtype.FP16))),
         lambda v: "TAG_WEIGHT elements are {u16 weight, u16 tag}: in_dtype must be BFLOAT16 or FP16",
         only=lambda v: v.has("tag_weight_mode")),
    Rule("ldweights", frozenset({Opcode.LDWEIGHTS}), E.BAD_PATTERN, "src_mem_pattern",
         lambda v: (v.count("src_mem_pattern") != 0) & (v.count("src_mem_pattern") != _weight_tile(v)),
         lambda v: f"{v.count('src_mem_pattern')} elements per partition; the weight tile needs {_weight_tile(v)}"
                   + (" (transposed: rows x pack per column partition)" if v.xpose else " (columns x elements per PE)"),
         step=1),

    # -- rows_cols: the active block and its tile (seed 000 section 6; MAVERICK TILE_SIZE / TILE_SEL) --
    Rule("rows_cols", TILED_OPS, E.BAD_ACTIVE_RANGE, "num_active_rows",
         lambda v: (v["num_active_rows"] < 1) | (v["num_active_rows"] > ARRAY_ROWS),
         lambda v: f"{v['num_active_rows']} is not in 1..{ARRAY_ROWS}"),
    Rule("rows_cols", TILED_OPS, E.BAD_ACTIVE_RANGE, "num_active_cols",
         lambda v: (v["num_active_cols"] < 1) | (v["num_active_cols"] > ARRAY_ROWS),
         lambda v: f"{v['num_active_cols']} is not in 1..{ARRAY_ROWS}", only=_not_maverick),
    Rule("rows_cols", TILED_OPS, E.BAD_TILE, "tile_sel",
         lambda v: (v["tile_sel.row_sel"] > 1) | (v["tile_sel.col_sel"] > 1),
         lambda v: f"selectors must be <= 1, got {dict(v['tile_sel'])}", only=lambda v: v.maverick),
    Rule("rows_cols", TILED_OPS, E.BAD_TILE, "tile_sel.row_sel",
         lambda v: _tile_valid(v) & (v["tile_sel.row_sel"] == 1) & (v["tile_size.row_size_log2"] == TileRowSize.R128),
         lambda v: "row_sel 1 needs a r64 tile", only=lambda v: v.maverick),
    Rule("rows_cols", TILED_OPS, E.BAD_TILE, "tile_sel.col_sel",
         lambda v: _tile_valid(v) & (v["tile_sel.col_sel"] == 1) & (v["tile_size.col_size_log2"] == TileColSize.C256),
         lambda v: "col_sel 1 needs a c128 tile", only=lambda v: v.maverick),
    Rule("rows_cols", TILED_OPS, E.BAD_TILE, "num_active_rows",
         lambda v: _tile_valid(v) & (v["num_active_rows"] > v.lookup(v["tile_size.row_size_log2"], TILE_ROWS, 0)),
         lambda v: f"{v['num_active_rows']} rows do not fit a r{1 << v['tile_size.row_size_log2']} tile",
         only=lambda v: v.maverick),
    Rule("rows_cols", TILED_OPS, E.BAD_TILE, "num_active_cols",
         lambda v: _tile_valid(v) & (v.active_cols > v.lookup(v["tile_size.col_size_log2"], TILE_COLS, 0)),
         lambda v: f"{v.active_cols} columns do not fit a c{1 << v['tile_size.col_size_log2']} tile",
         only=lambda v: v.maverick),
    Rule("rows_cols", TILED_OPS, E.BAD_TILE, "row_grp",
         lambda v: (v["row_grp"] >= GROUPS) | (v["row_grp"] * GROUP + v["num_active_rows"] > ARRAY_ROWS),
         lambda v: f"row group {v['row_grp']} (rows {v['row_grp'] * GROUP}..) with {v['num_active_rows']} rows "
                   "leaves the array", only=_not_maverick),
    Rule("rows_cols", TILED_OPS, E.BAD_TILE, "col_grp",
         lambda v: (v["col_grp"] >= GROUPS) | (v["col_grp"] * GROUP + v["num_active_cols"] > ARRAY_ROWS),
         lambda v: f"column group {v['col_grp']} (columns {v['col_grp'] * GROUP}..) with {v['num_active_cols']} "
                   "columns leaves the array", only=_not_maverick),
    Rule("rows_cols", TILED_OPS, E.BAD_TILE, "row_grp",            # 64- and 128-row tiles only (D-T97)
         lambda v: v["row_grp"] % group_step(v.gen) != 0,
         lambda v: f"row group {v['row_grp']} starts a 32-row tile; {v.gen.name} has 64- and "
                   "128-row tiles only (row_grp 0 or 2)", only=lambda v: not v.maverick and group_step(v.gen) > 1),
    Rule("rows_cols", TILED_OPS, E.BAD_TILE, "col_grp",
         lambda v: v["col_grp"] % group_step(v.gen) != 0,
         lambda v: f"column group {v['col_grp']} starts a 32-column tile; {v.gen.name} has 64- and "
                   "128-column tiles only (col_grp 0 or 2)", only=lambda v: not v.maverick and group_step(v.gen) > 1),

    # -- compute_dtype: the moving / stationary operand's dtype --
    Rule("compute_dtype", COMPUTE_OPS, E.BAD_LUT, "in_dtype",
         lambda v: _operand(v)[0] & _operand(v)[1] & (v["in_dtype"] != Dtype.UINT8),
         lambda v: "LUT mode operands are UINT8 table indices"),
    Rule("compute_dtype", COMPUTE_OPS, E.BAD_DTYPE, "in_dtype",
         lambda v: _operand(v)[0] & v.not_(_operand(v)[1]) & _operand(v)[2] & v.not_(_dtype_is(v, "xpose")),
         lambda v: f"{Dtype(v['in_dtype']).name} cannot be transposed (8/16/32-bit data only)"),
    Rule("compute_dtype", COMPUTE_OPS, E.BAD_DTYPE, "in_dtype",
         lambda v: _operand(v)[0] & v.not_(_operand(v)[1]) & v.not_(_operand(v)[2]) & v.not_(_dtype_is(v, "inputs")),
         lambda v: f"{Dtype(v['in_dtype']).name} is not a matmul input "
                   f"({', '.join(sorted(x.name for x in matmul_input_dtypes(v.gen)))})"),
    # the fp32 / tf32 no-mix rule against the engine's loaded weights: the model's only (stationary_dtype
    # is the engine's); the decoder applies it to the weight state's answer (D-T31)
    Rule("compute_dtype", COMPUTE_OPS, E.DTYPE_MIX, "in_dtype",
         lambda v: _dtype_is(v, "enum") & ((v.stationary_dtype == Dtype.FP32) != (v["in_dtype"] == Dtype.FP32)),
         lambda v: f"moving {Dtype(v['in_dtype']).name} with stationary {Dtype(v.stationary_dtype).name}: FP32 "
                   "(tf32) operands cannot mix with low precision",
         only=lambda v: v.stationary_dtype is not None and v.op != Opcode.LDWEIGHTS),

    # -- mx_dtype: an MX source's element dtype (where check.py's call site says the source is MX) --
    Rule("mx_dtype", ALL_OPS, E.BAD_MX, "in_dtype",
         lambda v: _dtype_is(v, "enum") & v.not_(_dtype_is(v, "mx")),
         lambda v: f"{Dtype(v['in_dtype']).name} is not an MX element dtype (FP8_EXP2/3/4/5, FP4_EXP2, INT4)",
         only=lambda v: v.has("in_dtype")),

    # -- fp32_mode: FP32 input and its passes (D-12) --
    Rule("fp32_mode", COMPUTE_OPS, E.BAD_FP32_MODE, "fp32_mode",
         lambda v: (v["in_dtype"] == Dtype.FP32) & (v["fp32_mode"] == FP32Mode.NONE),
         lambda v: "FP32 input needs LOW, HIGH or LOW_HIGH"),
    Rule("fp32_mode", COMPUTE_OPS, E.BAD_FP32_MODE, "fp32_mode",
         lambda v: (v["in_dtype"] != Dtype.FP32) & v.in_(v["fp32_mode"], FP32Mode) & (v["fp32_mode"] != FP32Mode.NONE),
         lambda v: "only FP32 input takes an fp32_mode"),

    # -- perf: FP8 double row (D-11, D-T14) within its public limits (D-T97): CAYMAN and later, FP8
    #    input, no column tiling --
    Rule("perf", ARRAY_OPS, E.BAD_ENUM, "perf_opt", _double_row,
         lambda v: f"DOUBLE_ROW does not exist on {v.gen.name} (NeuronCore-v3 and later)",
         only=lambda v: v.has("perf_opt") and v.gen < DOUBLE_ROW_FROM),
    Rule("perf", ARRAY_OPS, E.BAD_DTYPE, "perf_opt",
         lambda v: _double_row(v) & v.not_(v.in_(v["in_dtype"], FP8)),
         lambda v: "DOUBLE_ROW needs FP8 input", only=lambda v: v.has("perf_opt")),
    Rule("perf", ARRAY_OPS, E.BAD_TILE, "col_grp",
         lambda v: _double_row(v) & (v["col_grp"] != 0),
         lambda v: "DOUBLE_ROW cannot be combined with column tiling; col_grp must be 0",
         only=lambda v: v.has("perf_opt") and v.has("col_grp")),

    # -- out_dtype: what a matmul writes to PSUM --
    Rule("out_dtype", MATMUL_OPS, E.BAD_OUT_DTYPE, "out_dtype",
         lambda v: v.not_(v.in_(v["out_dtype"], out_dtypes(v.gen))),
         lambda v: f"{_dtype_name(v['out_dtype'], v.gen)} is not an output dtype on {v.gen.name} "
                   f"({', '.join(sorted(x.name for x in out_dtypes(v.gen)))})"),

    # -- accumulate: the PSUM accumulate flags (seed 000 section 4.1) --
    Rule("accumulate", MATMUL_OPS, E.BAD_ACCUMULATE, "psum_accumulate_flags",
         lambda v: (v["psum_accumulate_flags"] & ~7) != 0,
         lambda v: f"{v['psum_accumulate_flags']:#x} has bits beyond the three flags", only=_has_acc),
    Rule("accumulate", MATMUL_OPS, E.BAD_ACCUMULATE, "psum_accumulate_flags",
         lambda v: ((v["psum_accumulate_flags"] & PsumAccumulate.BEGIN_MATMUL_GROUP) != 0)
         & ((v["psum_accumulate_flags"] & PsumAccumulate.BEGIN_ACCUM_MATMUL_GROUP) != 0),
         lambda v: "BEGIN and BEGIN_ACCUM together", only=_has_acc),
    Rule("accumulate", MATMUL_OPS, E.BAD_ACCUMULATE, "flags.accumulate_flag",
         lambda v: v["flags.accumulate_flag"] != 0,
         lambda v: "MARIANA accumulates by psum_accumulate_flags; accumulate_flag must be 0",
         only=lambda v: not v.maverick and v.has("flags.accumulate_flag")),

    # -- array_op: what Ldweights and Matmul share, besides the families above --
    Rule("array_op", ARRAY_OPS, E.BAD_MX, "perf_mode",
         lambda v: (v["perf_mode"] != MXPerfMode.NONE) & v.not_(v.is_mx),
         lambda v: "QUAD_ROW / OCT_ROW pumps need an MXTensorV2 source", only=lambda v: v.maverick),

    # -- matmul_sparse: what MatmulSparse does not do, and its fmaps --
    Rule("matmul_sparse", frozenset({Opcode.MATMUL_SPARSE}), E.BAD_SPARSE, "flags",
         lambda v: (_flag(v, "xpose_mode") != 0) | (_flag(v, "seed_mode") != 0),
         lambda v: "MatmulSparse does not transpose or move seeds"),
    Rule("matmul_sparse", frozenset({Opcode.MATMUL_SPARSE}), E.BAD_SPARSE, "src_mem_pattern.num_elem[3]",
         lambda v: v.not_(v.in_(v["src_mem_pattern.num_elem"][3], (2, 3, 4))),
         lambda v: f"{v['src_mem_pattern.num_elem'][3]} fmaps; MatmulSparse sends 2, 3 or 4 per partition"),

    # -- mx_op: MARIANA's LdweightsMX / MatmulMX source (step 0), its count in PE steps (step 1, after
    #    the data and scale windows) --
    Rule("mx_op", MX_OPS, E.BAD_MX, "flags",
         lambda v: (_flag(v, "xpose_mode") != 0) | (_flag(v, "seed_mode") != 0) | (_flag(v, "scalar_mode") != 0),
         lambda v: "MX micro-ops do not transpose, move seeds or use the LUT"),
    Rule("mx_op", MX_OPS, E.UNSUPPORTED_PATTERN, "src_mem_pattern.index_addr",
         lambda v: v["src_mem_pattern.index_addr"] != 0,
         lambda v: "indirect MX indexing is not executed (D-T18)"),
    Rule("mx_op", MX_OPS, E.BAD_PATTERN, "src_mem_pattern.num_elem",
         lambda v: v.not_(mx_count_ok(v)),
         lambda v: "count must be >= 1"),
    Rule("mx_op", MX_OPS, E.BAD_PATTERN, "src_mem_pattern.num_elem",
         lambda v: mx_count_ok(v) & v.not_(mx_steps_ok(v)),
         lambda v: f"{v['src_mem_pattern.num_elem']} is not a whole number of {v.pack}-element PE steps", step=1),
    Rule("mx_op", MX_OPS, E.BAD_PATTERN, "src_mem_pattern.num_elem",
         lambda v: mx_steps_ok(v) & (v["src_mem_pattern.num_elem"] != v.active_cols * v.pack),
         lambda v: f"the weight tile needs columns x {v.pack} = {v.active_cols * v.pack} elements per partition",
         only=lambda v: v.op == Opcode.LDWEIGHTS_MX, step=1),

    # -- pe_reg_write: the register, its value, one source element --
    Rule("pe_reg_write", frozenset({Opcode.PE_REG_WRITE}), E.BAD_REGISTER, "reg",
         lambda v: v.not_(v.in_(v["reg"], PeReg)),
         lambda v: f"{v['reg']:#x} is not a PE register"),
    Rule("pe_reg_write", frozenset({Opcode.PE_REG_WRITE}), E.BAD_REGISTER, "value",
         lambda v: (v["reg"] == PeReg.PSUM_ROUND) & v.not_(v.in_(v["value"], PsumRound)),
         lambda v: f"PSUM_ROUND takes 0 (RNE) or 1 (SR), got {v['value']:#x}"),
    Rule("pe_reg_write", frozenset({Opcode.PE_REG_WRITE}), E.BAD_PATTERN, "src_mem_pattern.num_elem",
         lambda v: v.not_(reg_source_ok(v)),
         lambda v: "PeRegWrite fetches one UINT32 from SBUF"),

    # -- conv_lut_load: the LUT entries' dtype and count --
    Rule("conv_lut_load", frozenset({Opcode.CONV_LUT_LOAD}), E.BAD_LUT, "in_dtype",
         lambda v: v.not_(v.in_(v["in_dtype"], LUT_ENTRY_DTYPES)),
         lambda v: "LUT entries are BFLOAT16, FP16 or FP32"),
    Rule("conv_lut_load", frozenset({Opcode.CONV_LUT_LOAD}), E.BAD_LUT, "num_entries",
         lambda v: v.not_(_lut_entries_ok(v)),
         lambda v: f"{v['num_entries']} is not in 1..{LUT_ENTRIES}"),
    Rule("conv_lut_load", frozenset({Opcode.CONV_LUT_LOAD}), E.BAD_LUT, "src_mem_pattern.num_elem",
         lambda v: _lut_entries_ok(v) & v.not_(lut_source_ok(v)),
         lambda v: "the pattern must hold num_entries elements"),

    # -- pe_manage_seed: the seed move's mode and shape (step 0), its LoadSeed source count (step 1,
    #    before the source pattern), the rest (step 2, after it) --
    Rule("pe_manage_seed", SEED_OPS, E.BAD_SEED_OP, "mode",
         lambda v: v.not_(v.in_(v["mode"], (SeedMode.LOAD_SEED, SeedMode.SAVE_SEED))),
         lambda v: "PE_MANAGE_SEED needs LOAD_SEED (1) or SAVE_SEED (2)"),
    Rule("pe_manage_seed", SEED_OPS, E.BAD_SEED_OP, "num_active_rows",
         lambda v: (v["num_active_rows"] != SEED_STATES) | (v["num_active_cols"] != SEED_COLS),
         lambda v: f"PE_MANAGE_SEED runs on {SEED_STATES} rows x {SEED_COLS} columns"),
    Rule("pe_manage_seed", SEED_OPS, E.BAD_SEED_OP, "identity_dtype",
         lambda v: v.not_(v.in_(v["identity_dtype"], SEED_IDENTITY_DTYPES)),
         lambda v: "the identity is BF16, FP16, FP32R or FP8"),
    Rule("pe_manage_seed", SEED_OPS, E.BAD_SEED_OP, "identity_mem_pattern.num_elem",
         lambda v: v.not_(seed_identity_ok(v)),
         lambda v: f"the identity diagonal has {SEED_STATES} elements"),
    Rule("pe_manage_seed", SEED_OPS, E.BAD_SEED_OP, "src_seed_mem_pattern.num_elem",
         lambda v: (v["mode"] == SeedMode.LOAD_SEED) & v.not_(_seed_count_ok(v)),
         lambda v: f"LoadSeed reads {SEED_COLS} INT32 per partition", step=1),
    Rule("pe_manage_seed", SEED_OPS, E.BAD_SEED_OP, "src_seed_mem_pattern.start_addr",
         lambda v: seed_source_ok(v) & _seed_part(v)[0] & (_seed_part(v)[1] != 0),
         lambda v: "seeds sit in SBUF partitions 0-15", step=2),
    Rule("pe_manage_seed", SEED_OPS, E.BAD_SEED_OP, "dst_seed_mem_pattern",
         lambda v: (v["mode"] == SeedMode.LOAD_SEED) & v.not_(_empty(v, "dst_seed_mem_pattern")),
         lambda v: "LoadSeed has no destination pattern (must be 0)", step=2),
    Rule("pe_manage_seed", SEED_OPS, E.BAD_SEED_OP, "dst_seed_mem_pattern",
         lambda v: (v["mode"] == SeedMode.SAVE_SEED) & v.not_(_save_pattern(v)),
         lambda v: "SaveSeed writes num_elem [2, 8], step_elem [1, 512] from 0x02000000 (seed 000 section 5.2)", step=2),
    Rule("pe_manage_seed", SEED_OPS, E.BAD_SEED_OP, "src_seed_mem_pattern",
         lambda v: (v["mode"] == SeedMode.SAVE_SEED) & v.not_(_empty(v, "src_seed_mem_pattern")),
         lambda v: "SaveSeed has no source pattern (must be 0)", step=2),

    # -- ldtags: the tag load's operands --
    Rule("ldtags", frozenset({Opcode.LDTAGS}), E.BAD_SPARSE, "in_dtype",
         lambda v: v["in_dtype"] != Dtype.UINT16,
         lambda v: "tags are packed 4 per UINT16"),
    Rule("ldtags", frozenset({Opcode.LDTAGS}), E.BAD_SPARSE, "force_tag_bits",
         lambda v: v.not_(v.in_(v["force_tag_bits"], (0x0, 0x4, 0x8, 0xC))),
         lambda v: f"{v['force_tag_bits']:#x} is not 0x0/0x4/0x8/0xC"),
    # -- the matmul destinations, walked between steps 1 and 2 (check.py psum_write, rules.dst_walk):
    #    a MAVERICK seed move's bank, a transpose's, a plain matmul's whole PE steps, the destination --
    Rule("seed_patterns", frozenset({Opcode.MATMUL}), E.BAD_SEED_OP, "src_mem_pattern",
         lambda v: matmul_seeds(v) & (_flag(v, "seed_mode") == SeedMode.LOAD_SEED) & (v.count("src_mem_pattern") != 0)
         & (v.count("src_mem_pattern") != 2 * _psum_half(v.gen, v.array_cols)),
         lambda v: f"LoadSeed reads {2 * _psum_half(v.gen, v.array_cols)} INT32 seeds (one per column), "
                   f"the pattern has {v.count('src_mem_pattern')}", only=lambda v: v.maverick, step=2),
    Rule("transpose_destination", frozenset({Opcode.MATMUL}), E.BAD_PATTERN, "src_mem_pattern",
         lambda v: matmul_transposes(v) & (v.count("src_mem_pattern") > _slot_cols(v)),
         lambda v: f"a transpose writes one PSUM partition per moving element, all in one write slot: "
                   f"{v.count('src_mem_pattern')} elements need {v.count('src_mem_pattern')} active columns of one "
                   f"slot (at most {_slot_cols(v)})", step=1),
    Rule("transpose_destination", frozenset({Opcode.MATMUL}), E.BAD_OUT_DTYPE, "out_dtype",
         lambda v: matmul_transposes(v) & (v["out_dtype"] == Dtype.BFLOAT16) & _dtype_is(v, "wide"),
         lambda v: "32-bit data cannot be transposed into 2-byte BF16 cells", step=1),
    Rule("transpose_destination", frozenset({Opcode.MATMUL}), E.BAD_PATTERN, "dst_mem_pattern",
         lambda v: matmul_transposes(v) & (v.count("dst_mem_pattern") != 0)
         & (v.count("dst_mem_pattern") != v["num_active_rows"]),
         lambda v: f"a transpose writes {v['num_active_rows']} elements (one per row) per partition; dst has "
                   f"{v.count('dst_mem_pattern')}", step=2),
    Rule("matmul", frozenset({Opcode.MATMUL}), E.BAD_PATTERN, "src_mem_pattern",
         lambda v: _plain(v) & v.not_(_whole_steps(v)),
         lambda v: f"{v.count('src_mem_pattern')} elements per partition is not a whole number of {v.pack}-element "
                   "PE steps", step=1),
    Rule("destination", MATMUL_OPS, E.BAD_PATTERN, "src_mem_pattern",
         lambda v: _to_destination(v) & (moving(v) > max_moving(v.gen)),
         lambda v: f"{moving(v)} moving vectors; one matmul on {v.gen.name} streams at most {max_moving(v.gen)} "
                   "(D-T97)", only=lambda v: max_moving(v.gen) is not None, step=1),
    Rule("destination", MATMUL_OPS, E.BAD_PATTERN, "dst_mem_pattern.num_elem",
         lambda v: v.given(_dst_checked(v) & c256(v), lambda: _dst_upper(v) != 2),
         lambda v: "with c256 the upper dim of dst must have size 2 (PE columns 0-127 and 128-255)", step=2),
    Rule("destination", MATMUL_OPS, E.BAD_PATTERN, "dst_mem_pattern",
         lambda v: v.given(_dst_checked(v) & c256(v), lambda: _dst_upper(v) == 2)
         & (v.count("dst_mem_pattern") != 2 * moving(v)),
         lambda v: f"dst holds {v.count('dst_mem_pattern') // 2} elements per half, moving has {moving(v)}", step=2),
    Rule("destination", MATMUL_OPS, E.BAD_PATTERN, "dst_mem_pattern",
         lambda v: _dst_checked(v) & v.not_(c256(v)) & (v.count("dst_mem_pattern") != moving(v)),
         lambda v: f"dst has {v.count('dst_mem_pattern')} elements per partition, moving has {moving(v)}", step=2),
]


def _named(table) -> tuple:
    """The table with each rule's name: family:CODE:field, `#k` for the k-th rule of one name."""
    keys = [f"{r.family}:{r.code.name}:{r.field}" for r in table]
    count = {k: keys.count(k) for k in keys}
    seen: dict = {}
    out = []
    for r, k in zip(table, keys):
        seen[k] = seen.get(k, 0) + 1
        out.append(replace(r, name=k if count[k] == 1 else f"{k}#{seen[k]}"))
    return tuple(out)


RULES = _named(_TABLE)
FAMILIES = tuple(dict.fromkeys(r.family for r in RULES))
BY_FAMILY = {fam: tuple(r for r in RULES if r.family == fam) for fam in FAMILIES}


# -- the opcode byte: its rules come before any layout, read by either backend from `v.opcode` -------------
class OpcodeByte(Ops):
    """The Python backend of OPCODE: a descriptor's opcode byte (`opcode`) on its generation."""

    def __init__(self, desc):
        self.opcode, self.gen = int(desc.op), desc.gen


@functools.cache
def gen_opcodes(gen) -> tuple:
    """The opcodes `gen` executes (those with a layout), in order."""
    return tuple(sorted(opcodes_of(gen)))


OPCODE = _named([
    Rule("opcode", ALL_OPS, E.BAD_OPCODE, "header.opcode", lambda v: v.not_(v.in_(v.opcode, Opcode)),
         lambda v: f"0x{v.opcode:02X} is not a PE opcode"),
    Rule("opcode", ALL_OPS, E.OPCODE_NOT_IN_GEN, "header.opcode",
         lambda v: v.in_(v.opcode, Opcode) & v.not_(v.in_(v.opcode, gen_opcodes(v.gen))),
         lambda v: f"{Opcode(v.opcode).name} does not exist on {v.gen.name}"),
])


# -- the structural rules: generated from the layout, not rows of the table ----------------------------
STRUCTURE = ("structure:RESERVED_NONZERO:bytes", "structure:BAD_DTYPE:byte", "structure:BAD_ENUM:byte",
             "structure:RESERVED_NONZERO:bits", "structure:BAD_ENUM:bits")


def _struct_rule(code, what, field, fires, message, union) -> Rule:
    """A structural rule; in a union member `union` (field, kind), it holds where the field is that member."""
    if union is not None:
        fires = _in_member(fires, *union)
    return Rule("structure", ALL_OPS, code, field, fires, message, name=f"structure:{code.name}:{what}")


def _in_member(fires, union, kind):
    """`fires` where the pattern `union` is the member `kind` (only there the model reads its fields)."""
    return lambda v: v.given(v.kind_is(union, kind), lambda: fires(v))


def _field_rules(v, sd, path, name, union):
    """The rules of the fields of `sd`, read through `v` at `path`, named `name` (D-T101)."""
    for fd in sd.fields:
        p, n, kind = path + fd.name, name + fd.name, fd.kind
        if isinstance(kind, Reserved):
            yield _struct_rule(E.RESERVED_NONZERO, "bytes", n, lambda v, p=p: v.nonzero(v[p]),
                               lambda v, p=p: f"reserved bytes must be zero, got {v[p].hex()}", union)
        elif isinstance(kind, EnumByte) and kind.enum is Dtype:
            yield _struct_rule(E.BAD_DTYPE, "byte", n, lambda v, p=p: v.not_(_dtype_is(v, "enum", p)),
                               lambda v, p=p: f"0x{int(v[p]):02X} is not a dtype of {v.gen.name}", union)
        elif isinstance(kind, EnumByte):
            yield _struct_rule(E.BAD_ENUM, "byte", n, lambda v, p=p, e=kind.enum: v.not_(v.in_(v[p], e)),
                               lambda v, p=p, e=kind.enum: f"{v[p]} is not a {e.__name__}", union)
        elif isinstance(kind, Bits):
            for part, _, enum_cls in kind.parts:
                q = f"{p}.{part}"
                if part == "reserved":
                    yield _struct_rule(E.RESERVED_NONZERO, "bits", f"{n}.{part}", lambda v, q=q: v[q] != 0,
                                       lambda v: "reserved bits must be zero", union)
                elif enum_cls is not None:
                    yield _struct_rule(E.BAD_ENUM, "bits", f"{n}.{part}",
                                       lambda v, q=q, e=enum_cls: v.not_(v.in_(v[q], e)),
                                       lambda v, q=q, e=enum_cls: f"{v[q]} is not a {e.__name__}", union)
        elif isinstance(kind, Sub):
            yield from _field_rules(v, kind.struct, p + ".", n + ".", union)
        elif isinstance(kind, Union):
            assert not path, "unions are top-level fields"
            for kind_name, sub in kind.members:
                yield from _field_rules(v, sub, member(v, fd.name, kind_name) + ".", n + ".", (fd.name, kind_name))


def structure(v) -> tuple:
    """The structural rules of the layout `v` reads (D-T101): reserved bytes and bits are zero, enum
    bytes and parts members of their enum, dtype bytes dtypes of the generation; a union member's
    fields where the pattern is that member.  In field order: check.py reports them in it.  Made once
    per backend and layout (a rule reads the descriptor through the `v` it is given)."""
    key = (type(v), id(v.layout))
    if key not in _STRUCTURE:
        _STRUCTURE[key] = tuple(_field_rules(v, v.layout, "", "", None))
    return _STRUCTURE[key]


_STRUCTURE: dict = {}


# -- the pattern walk: rules made per walked pattern (its element size and partitions are the caller's) --
PATTERN = ("pattern:UNSUPPORTED_PATTERN:indirect16b", "tensor:BAD_PATTERN:num_elem", "window:BAD_ADDRESS:memory",
           "window:BAD_ADDRESS:bytes", "window:BAD_ADDRESS:partitions", "mx_pattern:BAD_MX:scale_dtype",
           "mx_pattern:BAD_MX:p_f_dim", "mx_pattern:BAD_PATTERN:num_elem")
_QUAD = PUMP_PACK[MXPerfMode.QUAD_ROW]    # MXTensorV2 p_f_dim: F = 2^2 packed elements x P = 2^3 partitions
MX_BLOCK_P_F_DIM = ((_QUAD.bit_length() - 1) << 4) | ((MX_BLOCK // _QUAD).bit_length() - 1)   # 0x23 (D-21)


def _add(out, name, field, fires, message):
    """A rule of one pattern walk, `fires` its verdict already evaluated on the walk's backend; one
    that is False outright (the model's, mostly) is left out: it would not fire."""
    if fires is not False:
        family, code, _ = name.split(":")
        out.append(Rule(family, ALL_OPS, E[code], field, lambda v: fires, message, name=name))


def _where(addr) -> str:
    loc = addrmap.locate(addr)
    return loc.memory.upper() if loc else "no memory"


_sbuf_bytes = functools.cache(addrmap.sbuf_bytes)        # a function of the generation


def window(v, out, name, addr, memory, esize, steps, nums, rows, when):
    """The rules of a pattern's window, where `when` (D-T101): `addr` in `memory`, the bytes of its
    `steps` x `nums` elements of `esize` bytes in one partition, its `rows` partitions in the array's."""
    sbuf = memory == "sbuf"
    in_mem = addr < addrmap.SBUF_END if sbuf else (addr >= addrmap.PSUM_BASE) & (addr < addrmap.PSUM_END)
    size = _sbuf_bytes(v.gen) if sbuf else addrmap.PSUM_PARTITION_BYTES
    part, off = addrmap.split(addr, memory)
    lo = hi = 0
    for s, n in zip(steps, nums):
        span = s * (n - 1) * esize
        lo, hi = lo + v.pick(span < 0, span, 0), hi + v.pick(span > 0, span, 0)
    ok, mem = when & in_mem, memory.upper()
    _add(out, "window:BAD_ADDRESS:memory", f"{name}.start_addr", when & v.not_(in_mem),
         lambda v: f"{addr:#010x} is in {_where(addr)}; must be in {mem}")
    _add(out, "window:BAD_ADDRESS:bytes", name, ok & ((off + lo < 0) | (off + hi + esize > size)),
         lambda v: f"pattern bytes {off + lo:#x}..{off + hi + esize - 1:#x} leave the {mem} partition "
                   f"(0..{size - 1:#x} on {v.gen.name})")
    if rows is not None:
        _add(out, "window:BAD_ADDRESS:partitions", f"{name}.start_addr", ok & (part + rows > addrmap.PARTITIONS),
             lambda v: f"partitions {part}..{part + rows - 1} run past partition {addrmap.PARTITIONS - 1}")


def _tensor(v, out, path, name, memory, esize, rows, when):
    """A TENSORnD / MEM_PATTERNnD at `path`: every count >= 1, then its window.  Returns its count."""
    nums, steps = v.elems(f"{path}.num_elem"), v.elems(f"{path}.step_elem")
    zero = v.any_(*[n == 0 for n in nums])
    _add(out, "tensor:BAD_PATTERN:num_elem", f"{name}.num_elem", when & zero,
         lambda v: f"every count must be >= 1, got {v[path + '.num_elem']}")
    window(v, out, name, v[f"{path}.start_addr"], memory, esize, steps, nums, rows, when & v.not_(zero))
    count = nums[0]
    for n in nums[1:]:
        count = count * n
    return v.pick(zero, 0, count)


def _mx_tensor(v, out, path, name, memory, esize, rows, when):
    """An MXTENSOR_V2 at `path` (always in SBUF, bytes): its element dtype, scales, counts, data and
    scale windows (D-21; D-T25: one scale byte per vector / column).  Returns its count."""
    out += [replace(r, fires=_in_walk(when, r.fires)) for r in select(("mx_dtype",), v.op, v)]
    scale, p_f_dim = v[f"{path}.scale_dtype"], v[f"{path}.p_f_dim"]
    e8 = scale == Dtype.SFP8_E8
    _add(out, "mx_pattern:BAD_MX:scale_dtype", f"{name}.scale_dtype", when & (scale != Dtype.INVALID) & v.not_(e8),
         lambda v: "MX scales are SFP8_E8 (E8M0), or 0 for none")
    _add(out, "mx_pattern:BAD_MX:p_f_dim", f"{name}.p_f_dim", when & e8 & (p_f_dim != MX_BLOCK_P_F_DIM),
         lambda v: f"the scale block is 8 partitions x 4 elements (p_f_dim {MX_BLOCK_P_F_DIM:#04x}, D-21), "
                   f"got {p_f_dim:#04x}")
    n0, n1 = v.elems(f"{path}.num_elem")
    zero = (n0 == 0) | (n1 == 0)
    _add(out, "mx_pattern:BAD_PATTERN:num_elem", f"{name}.num_elem", when & zero,
         lambda v: f"every count must be >= 1, got {v[path + '.num_elem']}")
    ok, per = when & v.not_(zero), (n0 * n1) // v.pack
    window(v, out, name, v[f"{path}.data_addr"], "sbuf", 1, [1, v[f"{path}.step_elem_data_1"]], [n0, n1], rows, ok)
    window(v, out, f"{name}.scale", v[f"{path}.scale_addr"], "sbuf", 1, [1], [v.pick(per == 0, 1, per)], rows, ok & e8)
    return v.pick(zero, 0, n0 * n1)


def _in_walk(when, fires):
    return lambda v: v.given(when, lambda: fires(v))


def walk_pattern(v, name, memory, esize, rows, when=True) -> tuple:
    """(rules, count) of walking the pattern `name` in `memory`, where `when` (D-T101): an INDIRECT16B
    is refused, an MXTENSOR_V2 has its MX rules and windows, a TENSORnD its counts and window; the
    count is its elements per partition, 0 when unusable.  check.py and the decoder both walk with it."""
    out = []
    if member(v, name, "tensor3d") == name:
        return out, _tensor(v, out, name, name, memory, esize, rows, when)
    ind, t3, mx = [v.kind_is(name, kind) for kind in ("indirect16b", "tensor3d", "mxtensor_v2")]
    _add(out, "pattern:UNSUPPORTED_PATTERN:indirect16b", name, when & ind,
         lambda v: "INDIRECT16B patterns are not executed by the PE (D-T18)")
    counts = [0 if w is False else walk(v, out, member(v, name, kind), name, memory, esize, rows, w)
              for walk, kind, w in ((_tensor, "tensor3d", when & t3), (_mx_tensor, "mxtensor_v2", when & mx))]
    return out, v.pick(t3, counts[0], v.pick(mx, counts[1], 0))     # a member the model knows is not: never walked


def esize_in(v, x):
    """Bytes one element of dtype code `x` takes in a pattern (elem_bytes: 4-bit codes count 1)."""
    return v.pick(v.dtype_in(x, "bytes4"), 4, v.pick(v.dtype_in(x, "bytes2"), 2, 1))


def walk_of(v, name) -> tuple:
    """(memory, element bytes, partitions, when) of the pattern `name` the opcode walks (D-T101):
    check.py and the decoder walk it with walk_pattern where `when` holds."""
    op = v.op
    if name == "dst_mem_pattern":
        walked, esize, rows = dst_walk(v)
        return "psum", esize, rows, walked
    if op == Opcode.PE_MANAGE_SEED:
        if name == "identity_mem_pattern":
            return "sbuf", esize_in(v, v["identity_dtype"]), SEED_STATES, seed_identity_ok(v)
        return "sbuf", 4, SEED_STATES, seed_source_ok(v)
    if op == Opcode.PE_REG_WRITE:
        return "sbuf", 4, 1, reg_source_ok(v)
    if op == Opcode.CONV_LUT_LOAD:
        x = v["in_dtype"]
        return "sbuf", v.pick(v.dtype_in(x, "enum"), esize_in(v, x), 1), 1, lut_source_ok(v)
    if op == Opcode.LDTAGS:
        return "sbuf", 2, v["num_active_rows"], v.true
    if op == Opcode.LDWEIGHTS:
        return "sbuf", v.pick(tagw_in(v), 4, esize_in(v, v["in_dtype"])), \
            v.pick(v.xpose, v.active_cols, v["num_active_rows"]), v.true
    return "sbuf", esize_in(v, v["in_dtype"]), v["num_active_rows"], v.true      # Matmul, MatmulSparse


def array_fits(v, rows: int, cols: int) -> list:
    """The array-size rules of a load or matmul on a rows x cols array (model.engine.Engine.fits; the
    decoder's fit bits, which count where no ISA rule fired): its block (region_in) inside the
    array and, on MAVERICK, inside its tile (tiles scale with the array)."""
    out = []
    if not runs_array(v):
        return out
    row0, n_rows, col0, n_cols = region_in(v, rows, cols)
    if v.maverick:
        trows = v.pick(v["tile_size.row_size_log2"] == TileRowSize.R64, rows // 2, rows)
        tcols = v.pick(v["tile_size.col_size_log2"] == TileColSize.C128, cols // 2, cols)
        _add(out, "fits:BAD_TILE:num_active_rows", "num_active_rows", n_rows > trows,
             lambda v: f"{n_rows} rows do not fit a {trows}-row tile of this {rows}-row array")
        _add(out, "fits:BAD_TILE:num_active_cols", "num_active_cols", n_cols > tcols,
             lambda v: f"{n_cols} columns do not fit a {tcols}-column tile of this {cols}-column array")
    _add(out, "fits:BAD_ACTIVE_RANGE:num_active_rows", "num_active_rows", row0 + n_rows > rows,
         lambda v: f"rows {row0}..{row0 + n_rows - 1} do not fit this {rows}-row array")
    _add(out, "fits:BAD_ACTIVE_RANGE:num_active_cols", "num_active_cols", col0 + n_cols > cols,
         lambda v: f"columns {col0}..{col0 + n_cols - 1} do not fit this {cols}-column array")
    return out


def mx_source(v) -> list:
    """The rules of a MARIANA MX source's data and scale windows (MXMEM_PATTERN1D, D-T18), walked where
    it has elements (mx_count_ok)."""
    n, rows, when, out = v["src_mem_pattern.num_elem"], v["num_active_rows"], mx_count_ok(v), []
    per = n // v.pack
    window(v, out, "src_mem_pattern", v["src_mem_pattern.data_addr"], "sbuf", 1, [v["src_mem_pattern.step_elem"]],
           [n], rows, when)
    window(v, out, "src_mem_pattern.scale", v["src_mem_pattern.scale_addr"], "sbuf", 1, [1], [v.pick(per == 0, 1, per)],
           rows, when)
    return out

def select(families, op, v, step=None):
    """The rules of `families` that apply to opcode `op` on the layout `v` evaluates, in table order
    (family by family, as given; "structure": the structural rules); with `step`, only that step's."""
    return [r for fam in families for r in (structure(v) if fam == "structure" else BY_FAMILY[fam])
            if op in r.ops and step in (None, r.step) and r.only(v)]
