"""The micro-op: what one descriptor asks of the engine, worked out once (D-T69).

`microop(desc, rows, cols)` turns a decoded, valid descriptor into a `MicroOp` for an array of
rows x cols PEs: the sequencer's class (`Kind`), the matmul rhythm class (`MmKind`), elements per
PE step (`pack`), array passes per vector, transpose, MX and its element order (`MxOrder`),
barrier, the block of PEs, the source and destination patterns, the PSUM group, the perf counter,
the moving vectors.
model/engine/ runs micro-ops.  The per-field derivations (`xpose_in`, `mx_in`, `pack_in`, `passes_in`,
`order_in`, `cols_in`, `lcf_in`, `group_in`, `runs_array`, `region_in`, `counter_in`, `vectors_in`) are written once over the operations layer of
model/isa/rules.py (D-T101) and hold on descriptors that may be invalid: model/isa/check.py reads them
through `rules.Ints`, the RTL decoder evaluates them on Amaranth values into its micro-op record,
generated from `UOP_FIELDS` (rtl/isa.py), its enums from these."""
from __future__ import annotations

import enum
from dataclasses import dataclass

import numpy as np
from tensore.model import addrmap
from tensore.model.dtypes import Dtype, Gen
from tensore.model.isa.enums import (
    AccumulateMode,
    FP32Mode,
    LoadOrder,
    MXPerfMode,
    Opcode,
    PeReg,
    PerfOpt,
    PsumAccumulate,
    ScalarMode,
    SeedMode,
    TagWeightMode,
    TileColSize,
    TileRowSize,
    XposeMode,
    ZeroRegion,
)
from tensore.model.timing import PERF_BANKS, PERF_COUNTERS, counter_index

# -- the array (SPEC section 1, seed 000 section 11) ----------------------------------------------------
ARRAY_ROWS = 1 << TileRowSize.R128  # rows R at full size (the contraction dim): 128
GROUP = 32                         # row_grp / col_grp unit (D-T22)
GROUPS = ARRAY_ROWS // GROUP       # row and column groups of a full CAYMAN / MARIANA array


def full_cols(gen) -> int:
    """Columns C at full size: 256 on MAVERICK, 128 before (seed 000 section 11)."""
    return 1 << (TileColSize.C256 if Gen.parse(gen).layout == Gen.MAVERICK else TileColSize.C128)


def psum_half(gen, array_cols: int | None = None) -> int:
    """Columns per PSUM write slot: half the array on MAVERICK (c256, D-01), the whole array before."""
    cols = array_cols or full_cols(gen)
    return cols // 2 if Gen.parse(gen).layout == Gen.MAVERICK else cols


# -- pumps and MX (D-11, D-21, D-T25) -------------------------------------------------------------------
class MxOrder(enum.IntEnum):
    """Element order of a packed pattern: element index of (vector v, slot j) among V vectors (D-T25)."""

    PACKED = 0        # v * pack + j (QUAD_ROW, OCT_ROW, FP8 double row)
    INTERLEAVE = 1    # j * V + v
    TILED = 2         # tiles of MX_TILE vectors: (v div T) * T * pack + j * T + v mod T


MX_BLOCK = 32                      # contraction elements sharing one E8M0 scale (D-21)
MX_TILE = 32                       # vectors per tile of the *_TILED orders (D-T25)
DOUBLE_ROW_PACK = 2                # FP8 double row: two products per PE step (D-T14)
DOUBLE_ROW_FROM = Gen.CAYMAN       # double row exists on NeuronCore-v3 and v4 (nc_matmul "Performance mode", D-T97)
TILE32_FROM = Gen.CAYMAN           # 32-row / 32-column tiles exist on NeuronCore-v3 and v4 (nc_matmul "Tiling mode", D-T97)
MAX_MOVING_BEFORE_V4 = 512         # moving vectors of one matmul on NeuronCore-v2 / v3 (nc_matmul, D-T97)


def group_step(gen) -> int:
    """The row_grp / col_grp a block may start at is a multiple of this: tiles are 64 or 128 rows and
    columns before TILE32_FROM, so a block starts at row / column 0 or 64 there (D-T97)."""
    return 1 if gen >= TILE32_FROM else 2


def row_tile(gen, rows: int) -> int:
    """The rows of a row tile on an array of `rows` rows (nc_matmul "Tiling mode", D-T100): 4 x 32
    from TILE32_FROM, 2 x 64 before it and on MAVERICK (r64 tiles), scaled with the array."""
    halves = Gen.parse(gen) < TILE32_FROM or Gen.parse(gen).layout == Gen.MAVERICK
    return min(rows, max(1, rows // GROUPS) * (2 if halves else 1))


def max_moving(gen) -> int | None:
    """Moving vectors one matmul may stream: 512 before MARIANA; from MARIANA only the PSUM window
    bounds it (4096 fp32 / 8192 bf16 cells, the public NeuronCore-v4 figure) (D-T97)."""
    return MAX_MOVING_BEFORE_V4 if Gen.parse(gen) < Gen.MARIANA else None


PUMPS = {                          # MX_PERF_MODE -> (elements per PE step, element order)
    MXPerfMode.NONE: (1, MxOrder.PACKED),
    MXPerfMode.QUAD_ROW: (4, MxOrder.PACKED),
    MXPerfMode.QUAD_ROW_INTERLEAVE: (4, MxOrder.INTERLEAVE),
    MXPerfMode.QUAD_ROW_TILED: (4, MxOrder.TILED),
    MXPerfMode.OCT_ROW: (8, MxOrder.PACKED),
    MXPerfMode.OCT_ROW_INTERLEAVE: (8, MxOrder.INTERLEAVE),
    MXPerfMode.OCT_ROW_TILED: (8, MxOrder.TILED),
}
PUMP_PACK = {mode: pack for mode, (pack, _) in PUMPS.items()}
PUMP_ORDER = {mode: order for mode, (_, order) in PUMPS.items()}
MAX_PACK = max(PUMP_PACK.values())               # pack slots of a PE (D-T34)
FP32_PASSES = {FP32Mode.NONE: 1, FP32Mode.LOW: 1, FP32Mode.HIGH: 4, FP32Mode.LOW_HIGH: 4}   # D-12, D-T24
MX_OPS = frozenset({Opcode.LDWEIGHTS_MX, Opcode.MATMUL_MX})

# -- seeds (seed 000 section 5, D-T27) --------------------------------------------------------------
SEED_STATES = addrmap.PSUM_BANKS * addrmap.PSUM_SR_SLOTS   # SR states per partition: PeManageSeed's identity rows
SEED_COLS = addrmap.PARTITIONS                  # PeManageSeed's columns: one per PSUM partition


class Kind(enum.IntEnum):
    """What the sequencer does with a micro-op (rtl/seq.py, docs/timing.md)."""

    LOAD = 0          # Ldweights, LdweightsMX, LdTags: the weight-load port
    MATMUL = 1        # Matmul, MatmulSparse, MatmulMX (MAVERICK seed micro-ops too)
    REGWRITE = 2      # PeRegWrite
    OTHER = 3         # not an executable opcode
    LUT = 4           # ConvLutLoad
    SEED = 5          # PeManageSeed: an identity load, then a seed transpose


class MmKind(enum.IntEnum):
    """A matmul's rhythm class: a matmul of another class (or pass count) waits for the last
    matmul to complete (docs/timing.md)."""

    MM = 0
    SPARSE = 1
    XPOSE = 2         # transposes and seed moves


KIND_OF = {Opcode.LDWEIGHTS: Kind.LOAD, Opcode.LDWEIGHTS_MX: Kind.LOAD, Opcode.LDTAGS: Kind.LOAD,
           Opcode.MATMUL: Kind.MATMUL, Opcode.MATMUL_SPARSE: Kind.MATMUL, Opcode.MATMUL_MX: Kind.MATMUL,
           Opcode.PE_REG_WRITE: Kind.REGWRITE, Opcode.CONV_LUT_LOAD: Kind.LUT, Opcode.PE_MANAGE_SEED: Kind.SEED}
PERF_BANKS_OF = {Kind.LOAD: ("weight_load",), Kind.MATMUL: ("matmul",), Kind.REGWRITE: ("pe_regwrite",),
                 Kind.SEED: ("weight_load", "matmul")}       # D-T30
assert {b for banks in PERF_BANKS_OF.values() for b in banks} == set(PERF_BANKS)
BARRIER_OPS = frozenset({Opcode.PE_REG_WRITE, Opcode.CONV_LUT_LOAD, Opcode.PE_MANAGE_SEED})


# -- per-field derivations (any decoded descriptor, valid or not) -----------------------------------
# Written once over the operations layer of model/isa/rules.py (D-T101): `v` is its Python backend
# (`rules.Ints`, ints and bools) or the decoder's (Amaranth values); `v.has` is a static fact.
def _field(v, path, default=0):
    """The field at `path`, `default` where the layout has none."""
    return v[path] if v.has(path) else default


def _first_is(v, paths, value, default):
    """The first of `paths` the layout has holds `value` (`default` where it has none of them)."""
    path = next((p for p in paths if v.has(p)), None)
    return default if path is None else v[path] == value


def xpose_in(v):
    """xpose_mode (MARIANA / MAVERICK flags) or transpose_mode (CAYMAN) is ENABLED (D-13)."""
    return _first_is(v, ("flags.xpose_mode", "transpose_mode"), XposeMode.ENABLED, v.false)


def mx_in(v):
    """MARIANA's LdweightsMX / MatmulMX, or a MAVERICK MXTensorV2 source (seed 000 section 7)."""
    if v.op in MX_OPS:
        return v.true
    return v.kind_is("src_mem_pattern", "mxtensor_v2") if v.has("src_mem_pattern") else v.false


def pack_in(v):
    """Elements per PE step: 2 (FP8 double row), 4 / 8 (MX pumps, `v.is_mx`), else 1."""
    out = 1
    if v.has("perf_mode"):
        out = v.pick(v.is_mx, v.lookup(v["perf_mode"], PUMP_PACK, 1), out)
    if v.has("perf_opt"):
        out = v.pick(v["perf_opt"] == PerfOpt.DOUBLE_ROW, DOUBLE_ROW_PACK, out)
    return out


def order_in(v):
    """The element order of an MX pattern (`v.is_mx`), PACKED for every other."""
    if not v.has("perf_mode"):
        return MxOrder.PACKED
    return v.pick(v.is_mx, v.lookup(v["perf_mode"], PUMP_ORDER, MxOrder.PACKED), MxOrder.PACKED)


def passes_in(v):
    """Array passes per moving vector: 4 for a non-transposing fp32 HIGH / LOW_HIGH matmul (D-12)."""
    if KIND_OF.get(v.op) != Kind.MATMUL or not v.has("fp32_mode"):
        return 1
    return v.pick(v.xpose, 1, v.lookup(v["fp32_mode"], FP32_PASSES, 1))


def cols_in(v):
    """num_active_cols, with MAVERICK's 0 meaning every column (`v.array_cols`, 256 at full size)."""
    cols = _field(v, "num_active_cols")
    if v.maverick:
        return v.pick(cols == 0, v.array_cols or full_cols(v.gen), cols)
    return cols


def tagw_in(v):
    """A load of TAG_WEIGHT elements, 4 bytes each (D-T16)."""
    return v["tag_weight_mode"] == TagWeightMode.TAG_WEIGHT if v.has("tag_weight_mode") else v.false


def lcf_in(v):
    """load_order (MAVERICK flags, CAYMAN / MARIANA field) is LAST_COL_FIRST, the default (D-14)."""
    return _first_is(v, ("flags.load_order", "load_order"), LoadOrder.LAST_COL_FIRST, v.true)


def group_in(v):
    """(accumulate?, begins a group?): CAYMAN / MARIANA psum_accumulate_flags, MAVERICK accumulate_flag."""
    if v.has("psum_accumulate_flags"):
        begin = (v["psum_accumulate_flags"] & PsumAccumulate.BEGIN_MATMUL_GROUP) != 0
        return v.not_(begin), begin
    if v.has("flags.accumulate_flag"):
        return v["flags.accumulate_flag"] == AccumulateMode.ACCUMULATE, v.false
    return v.false, v.false


def _ints(desc, array_cols=None):
    """The descriptor on the Python backend (rules.Ints, which builds on this module)."""
    from tensore.model.isa.rules import Ints
    return Ints(desc, array_cols)


def _flag(desc, name, default=0):
    return desc.fields.get("flags", {}).get(name, default)


def transposes(desc) -> bool:
    """xpose_in of a decoded descriptor."""
    return xpose_in(_ints(desc))


def seed_mode(desc):
    """The flags' seed_mode (MAVERICK seed micro-ops), raw when it is not a SeedMode."""
    return _flag(desc, "seed_mode", SeedMode.NONE)


def is_mx(desc) -> bool:
    """mx_in of a decoded descriptor."""
    return _ints(desc).is_mx


def pack_of(desc) -> int:
    """pack_in of a decoded descriptor."""
    return _ints(desc).pack


def mx_order(desc) -> MxOrder:
    """order_in of a decoded descriptor."""
    return order_in(_ints(desc))


def passes_of(desc) -> int:
    """passes_in of a decoded descriptor."""
    return passes_in(_ints(desc))


def mm_kind(desc) -> MmKind:
    """A matmul's rhythm class (MM for every other micro-op)."""
    if desc.op == Opcode.PE_MANAGE_SEED or KIND_OF.get(desc.op) == Kind.MATMUL and transposes(desc):
        return MmKind.XPOSE
    return MmKind.SPARSE if desc.op == Opcode.MATMUL_SPARSE else MmKind.MM


def is_barrier(desc) -> bool:
    """PeRegWrite, ConvLutLoad, PeManageSeed and every seed_mode micro-op wait for everything (D-T30)."""
    return desc.op in BARRIER_OPS or bool(seed_mode(desc))


def active_cols(desc, array_cols: int | None = None) -> int:
    """cols_in of a decoded descriptor on an array of `array_cols` columns."""
    return _ints(desc, array_cols).active_cols


def runs_array(v) -> bool:
    """A load or a matmul: a micro-op whose block of PEs (region_in) the array runs; the array-size
    rules (rules.array_fits) and the perf counter's block (counter_in) are of these alone."""
    return KIND_OF.get(v.op) in (Kind.LOAD, Kind.MATMUL)


def region_in(v, rows: int, cols: int) -> tuple:
    """(row0, rows, col0, cols): the descriptor's block of physical PEs on a rows x cols array
    (row_grp / col_grp in quarters of it; MAVERICK r64 / c128 tiles in halves; `v.array_cols` is
    `cols`); PeManageSeed's is its identity load's and seed transpose's, SEED_STATES x SEED_COLS at
    the top left (D-T27)."""
    if v.op == Opcode.PE_MANAGE_SEED:
        return 0, min(SEED_STATES, rows), 0, min(SEED_COLS, cols)
    if v.maverick and v.has("tile_size"):
        row0 = v.pick(v["tile_size.row_size_log2"] == TileRowSize.R64, v["tile_sel.row_sel"] * (rows // 2), 0)
        col0 = v.pick(v["tile_size.col_size_log2"] == TileColSize.C128, v["tile_sel.col_sel"] * (cols // 2), 0)
    else:
        row0, col0 = _field(v, "row_grp") * (rows // GROUPS), _field(v, "col_grp") * (cols // GROUPS)
    return row0, _field(v, "num_active_rows"), col0, v.active_cols


def counter_in(v, rows: int, cols: int):
    """The perf counter (D-22, D-T30) on a rows x cols array: the block's rows x cols of a load or
    matmul, SEED_STATES x SEED_COLS of PeManageSeed, 0 for the others (D-T101)."""
    if v.op == Opcode.PE_MANAGE_SEED:
        return counter_index(SEED_STATES, SEED_COLS)
    if not runs_array(v):
        return 0
    _, n_rows, _, n_cols = region_in(v, rows, cols)
    return counter_index(n_rows, n_cols)


def vectors_in(v):
    """The vectors a micro-op streams (D-T101): PeManageSeed's SEED_STATES (its seed transpose), one
    for a MAVERICK seed move, num_active_rows partitions for a transpose, rules.moving's for another
    matmul (`v.count` the walked source's), 0 for the others."""
    from tensore.model.isa.rules import matmul_seeds, matmul_transposes, moving
    if v.op == Opcode.PE_MANAGE_SEED:
        return SEED_STATES
    if KIND_OF.get(v.op) != Kind.MATMUL:
        return 0
    if v.op != Opcode.MATMUL:
        return moving(v)
    return v.pick(matmul_seeds(v), 1, v.pick(matmul_transposes(v), v["num_active_rows"], moving(v)))


def region_of(desc, rows: int, cols: int) -> tuple:
    """region_in of a decoded descriptor."""
    return region_in(_ints(desc, cols), rows, cols)


@dataclass(frozen=True)
class Pattern:
    """An access pattern: ADDR4 `addr` (marker bits cleared), element `steps` and counts `nums`,
    dim 0 innermost.  MX data is one dim (MXMEM_PATTERN1D) or MXTensorV2's [1, step_elem_data_1]
    x num_elem; `scale_addr` is where its E8M0 block scales sit (None: no scales, exponent 0)."""

    addr: int
    steps: tuple
    nums: tuple
    scale_addr: int | None = None

    @property
    def count(self) -> int:
        return int(np.prod(self.nums, dtype=np.int64))

    def elements(self, limit: int | None = None) -> np.ndarray:
        """Element offsets (in elements) in pattern order; the first `limit` only, if given (a legal
        pattern may name hundreds of millions of elements of which a micro-op reads a few)."""
        total = int(np.prod(self.nums, dtype=np.int64))
        index = np.arange(total if limit is None else min(total, limit), dtype=np.int64)
        offs = np.zeros(index.size, np.int64)
        for s, n in zip(self.steps, self.nums):
            offs += (index % n) * s
            index //= n
        return offs


def pattern_of(desc, name: str = "src_mem_pattern") -> Pattern:
    p = desc.fields[name]
    if "data_addr" in p and "index_addr" in p:                       # MXMEM_PATTERN1D (E8M0 by definition)
        return Pattern(p["data_addr"], (p["step_elem"],), (p["num_elem"],), p["scale_addr"])
    if "data_addr" in p:                                            # MXTENSOR_V2
        scales = p["scale_addr"] if p["scale_dtype"] == Dtype.SFP8_E8 else None
        return Pattern(p["data_addr"], (1, p["step_elem_data_1"]), tuple(p["num_elem"]), scales)
    return Pattern(p["start_addr"], tuple(p["step_elem"]), tuple(p["num_elem"]))


# -- the micro-op ------------------------------------------------------------------------------------
@dataclass(frozen=True)
class MicroOp:
    """A valid descriptor as the engine runs it.  Field names are the RTL record's (UOP_FIELDS)."""

    op: Opcode
    kind: Kind
    mmkind: MmKind
    barrier: bool
    row0: int
    rows: int
    col0: int
    cols: int
    dtype: Dtype | None          # in_dtype (PeManageSeed: identity_dtype)
    fp32_mode: FP32Mode
    passes: int
    pack: int
    xpose: bool                  # a transpose (PeManageSeed: its seed transpose)
    seed: SeedMode               # a seed move (MAVERICK seed_mode, PeManageSeed's mode)
    mx: bool
    mxmode: MxOrder
    lut: bool                    # scalar_mode LUT (D-T15)
    tagw: bool                   # TAG_WEIGHT elements (D-T16)
    lcf: bool                    # LAST_COL_FIRST: stationary element m in column col0 + cols - 1 - m (D-14)
    src: Pattern | None
    dst: Pattern | None
    out_bf16: bool
    accumulate: bool             # accumulate into PSUM (never for transposes and seed moves)
    begin: bool                  # begins a group: the zero region clears at its first write (D-17)
    zero_banks: int              # banks the group's first write clears (0: none)
    counter: int                 # perf counter index (D-22) in each of `banks`
    banks: tuple
    vectors: int = 0             # moving vectors (vectors_in)

    @property
    def block(self) -> tuple:
        return self.row0, self.rows, self.col0, self.cols


def microop(desc, rows: int, cols: int) -> MicroOp:
    """The micro-op of a valid descriptor on a rows x cols array."""
    f, op, v = desc.fields, desc.op, _ints(desc, cols)
    kind = KIND_OF[op]
    row0, n_rows, col0, n_cols = region_in(v, rows, cols)
    dtype = f.get("in_dtype", f.get("identity_dtype"))
    seed = f["mode"] if op == Opcode.PE_MANAGE_SEED else seed_mode(desc)     # PeManageSeed: a seed transpose
    xpose = v.xpose or op == Opcode.PE_MANAGE_SEED
    accumulate, begin = group_in(v)
    src = pattern_of(desc) if "src_mem_pattern" in f else None
    if src is not None:
        v.walked("src_mem_pattern", src.count)         # rules.moving's count (check.py walked it so)
    zero = 1 << int(f["psum_zero_region"]) if begin and "psum_zero_region" in f else 0
    return MicroOp(
        op=op, kind=kind, mmkind=mm_kind(desc), barrier=is_barrier(desc),
        row0=row0, rows=n_rows, col0=col0, cols=n_cols,
        dtype=Dtype(dtype) if dtype is not None else None, fp32_mode=FP32Mode(f.get("fp32_mode", 0)),
        passes=passes_in(v), pack=v.pack, xpose=xpose, seed=SeedMode(seed),
        mx=v.is_mx, mxmode=order_in(v), lut=_flag(desc, "scalar_mode") == ScalarMode.LUT,
        tagw=tagw_in(v), lcf=lcf_in(v),
        src=src,
        dst=pattern_of(desc, "dst_mem_pattern") if "dst_mem_pattern" in f else None,
        out_bf16=f.get("out_dtype") == Dtype.BFLOAT16, accumulate=accumulate and not xpose, begin=begin,
        zero_banks=zero, counter=counter_in(v, rows, cols), banks=PERF_BANKS_OF.get(kind, ()),
        vectors=vectors_in(v))


# -- the RTL record: field widths (rtl/isa.uop_layout builds the Amaranth layout) ---------------------
@dataclass(frozen=True)
class Field:
    """An unsigned (or signed) field of `width` bits, `count` of them when count > 1."""

    width: int
    signed: bool = False
    count: int = 1


def _bits(n: int) -> int:
    """Bits of an unsigned field holding 0..n."""
    return int(n).bit_length()


_STEP, _NUM, _DIMS = Field(16, True), Field(16), 3          # TENSOR3D steps (int16) and counts (uint16)
_PART, _SOFF = Field(addrmap.PARTITION_BITS), Field(addrmap.SBUF_OFFSET_BITS)
_MAXC = max(full_cols(g) for g in Gen)
UOP_FIELDS = {
    "op": Field(8), "kind": Kind, "supported": Field(1), "barrier": Field(1),
    "wait_event": Field(8), "set_event": Field(8),
    "row0": Field(_bits(ARRAY_ROWS)), "rows": Field(_bits(ARRAY_ROWS)),
    "col0": Field(_bits(_MAXC)), "cols": Field(_bits(_MAXC)),
    "dtype": Field(8), "fp32_mode": Field(_bits(max(FP32Mode))), "passes": Field(_bits(max(FP32_PASSES.values()))),
    "pack": Field(_bits(MAX_PACK)), "lcf": Field(1),
    "src_part": _PART, "src_off": _SOFF, "src_step": Field(16, True, _DIMS), "src_num": Field(16, False, _DIMS),
    "esize": Field(_bits(4)),
    "dst_part": _PART, "dst_off": Field(addrmap.PSUM_OFFSET_BITS), "dst_step": Field(16, True, _DIMS),
    "dst_num": Field(16, False, _DIMS), "out_bf16": Field(1), "accumulate": Field(1), "zero": Field(1),
    "zero_log2": Field(_bits(max(ZeroRegion))), "c256": Field(1), "vectors": Field(32),
    "reg": Field(_bits(0xFF)), "value": Field(32), "counter": Field(_bits(PERF_COUNTERS - 1)),
    "mmkind": MmKind,                  # the rhythm-change rule of docs/timing.md
    "tags": Field(1), "force_tags": Field(4),                     # LdTags (force_tag_bits)
    "tagw": Field(1),                  # Ldweights TAG_WEIGHT: {u16 weight, u16 tag} elements
    "fmaps": Field(_bits(4)), "fstride": _STEP,                   # MatmulSparse: fmaps per vector, step_elem[3]
    "lut": Field(1),                   # scalar_mode LUT: UINT8 codes index the ConvLutLoad table
    "xpose": Field(1),                 # a transposing Matmul (D-13): `cols` = elements per partition
    "seed": Field(_bits(max(SeedMode))),   # SeedMode of a seed transpose: states in (LOAD) or out (SAVE)
    "id_part": _PART, "id_off": _SOFF, "id_step": _STEP, "id_esize": Field(_bits(4)),   # PeManageSeed identity
    # MX (D-21, D-T25): element order, 4-bit codes, E8M0 block scales (src_* hold the data pattern as
    # one dimension: element e at src_off + e * src_step[0] bytes, or nibbles when `nib`)
    "mx": Field(1), "mxmode": MxOrder, "nib": Field(1), "sc_part": _PART, "sc_off": _SOFF, "sc_valid": Field(1),
}
assert max(PeReg) <= 0xFF
