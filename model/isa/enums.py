"""Micro-op enums (seed 000 sections 2-5, 7, 9, 11; SPEC section 7) and the error codes (SPEC 9).

Each is an IntEnum with the byte value the wire uses; the RTL builds its Amaranth enums from these."""
import enum


class Opcode(enum.IntEnum):
    """NEURON_ISA_TPB_OPCODE, the PE subset (seed 000 section 2)."""

    LDWEIGHTS = 0x01
    MATMUL = 0x02
    PE_REG_WRITE = 0x03
    LDTAGS = 0x06
    MATMUL_SPARSE = 0x07
    PE_MANAGE_SEED = 0x08
    LDWEIGHTS_MX = 0x09
    MATMUL_MX = 0x0A
    CONV_LUT_LOAD = 0xE4


class FP32Mode(enum.IntEnum):
    """NEURON_ISA_TPB_PE_FP32MODE (seed 000 section 4.3; passes per D-12)."""

    NONE = 0
    LOW = 1
    HIGH = 2
    LOW_HIGH = 3


class MXPerfMode(enum.IntEnum):
    """NEURON_ISA_TPB_MX_PERF_MODE (seed 000 section 7)."""

    NONE = 0
    QUAD_ROW = 1
    QUAD_ROW_INTERLEAVE = 2
    QUAD_ROW_TILED = 3
    OCT_ROW = 4
    OCT_ROW_INTERLEAVE = 5
    OCT_ROW_TILED = 6


class PerfOpt(enum.IntEnum):
    """CAYMAN/MARIANA `perf_opt` byte: the FP8 double-row pump (decision D-T14)."""

    NONE = 0
    DOUBLE_ROW = 1


class SeedMode(enum.IntEnum):
    """NEURON_ISA_TPB_PE_SEED_MODE; the enum wins over the stale prose (seed 000 section 5)."""

    NONE = 0
    LOAD_SEED = 1
    SAVE_SEED = 2


class AccumulateMode(enum.IntEnum):
    """MATMUL_FLAGS.accumulate_flag (MAVERICK)."""

    OVERWRITE = 0
    ACCUMULATE = 1


class PsumAccumulate(enum.IntFlag):
    """MATMUL_PSUM_ACCUMULATE_FLAGS bits (CAYMAN/MARIANA), seed 000 section 4.1."""

    BEGIN_MATMUL_GROUP = 1
    END_MATMUL_GROUP = 2
    BEGIN_ACCUM_MATMUL_GROUP = 4


class AccumulateGroup(enum.IntEnum):
    """The derived group modes (static consts): the common values of psum_accumulate_flags."""

    MULTI_MID = 0
    MULTI_START = 1
    MULTI_END = 2
    SINGLE = 3


class LoadOrder(enum.IntEnum):
    """NEURON_ISA_TPB_PE_LW_ORDER (D-14)."""

    LAST_COL_FIRST = 0
    FIRST_COL_FIRST = 1


class ZeroRegion(enum.IntEnum):
    """NEURON_ISA_TPB_MATMUL_ZERO_REGION: banks cleared on a group's first write (D-17)."""

    BANKS_1 = 0
    BANKS_2 = 1
    BANKS_4 = 2
    BANKS_8 = 3


class TileRowSize(enum.IntEnum):
    """TILE_SIZE.row_size_log2 (MAVERICK): r64 / r128."""

    R64 = 6
    R128 = 7


class TileColSize(enum.IntEnum):
    """TILE_SIZE.col_size_log2 = TILE_COL_SIZE (common.h: C128 = 7, C256 = 8)."""

    C128 = 7
    C256 = 8


class ScalarMode(enum.IntEnum):
    """LD_WEIGHT_FLAGS / MATMUL_FLAGS scalar_mode:2 (decision D-T15)."""

    NONE = 0
    LUT = 1          # UINT8 operands are indices into the ConvLutLoad table


class TagWeightMode(enum.IntEnum):
    """Ldweights tag_weight_mode (seed 000 section 9; placement is decision D-T16)."""

    NONE = 0
    TAG_WEIGHT = 1   # interleaved {u16 weight, u16 tag} UINT32 elements


class XposeMode(enum.IntEnum):
    DISABLED = 0
    ENABLED = 1


class PeReg(enum.IntEnum):
    """PE registers written by PeRegWrite (decision D-T17)."""

    PSUM_ROUND = 0x00        # 0 = RNE, 1 = SR for BF16 PSUM writes (D-18)


class PsumRound(enum.IntEnum):
    RNE = 0
    SR = 1


class ErrorCode(enum.IntEnum):
    """Why a descriptor was refused (SPEC section 9).  The engine reports the smallest code among
    the violations it finds, so model and RTL agree on one code for the same bytes."""

    NONE = 0x00
    BAD_OPCODE = 0x01          # not a PE opcode at all
    OPCODE_NOT_IN_GEN = 0x02   # a PE opcode this generation does not have
    RESERVED_NONZERO = 0x03    # a reserved byte or bit is not zero
    BAD_ENUM = 0x04            # a field holds a value outside its enum
    BAD_DTYPE = 0x05           # a dtype code illegal for this field / generation
    DTYPE_MIX = 0x06           # fp32 / tf32 mixed with a low-precision operand
    BAD_FP32_MODE = 0x07       # fp32_mode does not match in_dtype
    BAD_OUT_DTYPE = 0x08
    BAD_ACTIVE_RANGE = 0x09    # num_active_rows / cols out of range
    BAD_TILE = 0x0A            # tile_size / tile_sel / row_grp / col_grp inconsistent
    BAD_ADDRESS = 0x0B         # wrong memory (SBUF vs PSUM) or outside it
    BAD_PATTERN = 0x0C         # access-pattern shape (counts, c256 upper dim, sparse fmaps)
    BAD_SEED_OP = 0x0D         # PeManageSeed / seed_mode contract
    BAD_MX = 0x0E              # MX element set, scale dtype, perf mode
    BAD_SPARSE = 0x0F          # LdTags / MatmulSparse contract
    BAD_REGISTER = 0x10        # PeRegWrite register or value
    BAD_LUT = 0x11             # ConvLutLoad contract or LUT mode without a table entry type
    BAD_EVENT = 0x12           # event number out of range
    BAD_ACCUMULATE = 0x13      # psum accumulate flags / zero region
    UNSUPPORTED_PATTERN = 0x14  # INDIRECT16B patterns are decoded but not executed by the PE
