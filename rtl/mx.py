"""MX addressing (SPEC D-21, docs/decisions.md D-T25): which partition holds a row's block scale, how
many vectors an element-order tile has, and where an element of a 2-D data pattern sits, for the
decoder, the load unit, the launch unit and the row ports.

A MAVERICK MXTensorV2 data pattern is 2-D (model.isa.microop.Pattern): element e at
(e mod n0) * step0 + (e div n0) * step1 (step0 = 1; MARIANA's MXMEM_PATTERN1D is the n1 = 1 case).
The gathers take a vector's (or a weight row's) elements in the element order as arithmetic
progressions: the moving request `pack` codes `stride` apart, the stationary request a 3-dim
pattern.  That follows a 2-D pattern whose rows hold whole units of the order (`rows_aligned`):
PACKED with pack | n0, INTERLEAVE (and a single tile of TILED) with pack | n1, TILED with rows of
one tile (n0 = 32 x pack) or of one slot of a tile (n0 = 32, pack | n1); other 2-D patterns are
`unsupported` (D-T40 (5))."""
from amaranth.hdl import Mux

from tensore.model.isa.microop import MX_BLOCK, MX_TILE


def block_first_row(row, pack):
    """The first array row (partition) of `row`'s scale block: a block is MX_BLOCK elements,
    `pack` (4 or 8) per partition."""
    return row & Mux(pack == 8, ~(MX_BLOCK // 8 - 1), ~(MX_BLOCK // 4 - 1))


def tile(count):
    """The vectors (or columns) of one tile of the tiled element order: min(MX_TILE, count)."""
    return Mux(count < MX_TILE, count, MX_TILE)


def element_address(e, num, step):
    """The address (elements; nibbles for 4-bit codes) of element e of a 2-D pattern, relative to
    its first: e mod num[0] along dim 0, e div num[0] along dim 1."""
    n0 = Mux(num[0] == 0, 1, num[0])           # (0 only between micro-ops: no division by zero)
    return (e % n0) * step[0] + (e // n0) * step[1]


def per_pack(n, pack):
    """n / pack for a pack of 1, 2, 4 or 8 elements: a shift."""
    return Mux(pack[3], n >> 3, Mux(pack[2], n >> 2, Mux(pack[1], n >> 1, n)))


def one_tile(count):
    """TILED over at most one tile is INTERLEAVE (element j * count + v)."""
    return count <= MX_TILE


def rows_aligned(packed, inter, tiled, pack, count, n0, n1):
    """Whether the gathers follow a 2-D pattern of n0 x n1 elements for `count` vectors (or weight
    columns) of `pack` elements in the order (`packed` / `inter` / `tiled`, Amaranth bits); pack is
    1, 2, 4 or 8."""
    def divides(p, n):
        return (n & (p - 1)) == 0
    inter = inter | tiled & one_tile(count)
    tiled = tiled & ~one_tile(count)
    return (n1 == 1) | packed & divides(pack, n0) | inter & divides(pack, n1) | \
        tiled & ((n0 == MX_TILE * pack) | (n0 == MX_TILE) & divides(pack, n1))
