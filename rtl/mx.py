"""MX addressing (SPEC D-21, docs/decisions.md D-T25, D-T40 (5)): which partition holds a row's block
scale, how many vectors an element-order tile has, and the 2-D element map the SBUF ports apply, for
the load unit, the launch unit and the row ports.

An MX data pattern is 2-D (model.isa.microop.Pattern): element e at (e mod n0) * step0 +
(e div n0) * step1 (MAVERICK MXTensorV2: step0 = 1, step1 = step_elem_data_1; MARIANA's
MXMEM_PATTERN1D: n0 = num_elem, step0 = step_elem, step1 = 0), in elements (bytes), or nibbles for
4-bit codes.  The gathers name elements by their index e: a vector's `pack` codes are an arithmetic
progression of indices, a weight row's lanes x pack elements a 3-dim pattern of indices (the element
order, D-T25), and the SBUF port maps each index to its address (`MAP_FIELDS`)."""
from amaranth.hdl import Mux, signed

from tensore.model.isa.microop import MX_BLOCK, MX_TILE

# The element map of a gather (both SBUF ports' requests): index e at (e mod n0) * s0 + (e div n0) * s1
# elements from the request's start; a plain pattern's map is the identity (n0 = 1, s0 = 0, s1 = 1).
MAP_FIELDS = {"map_n0": 16, "map_s0": signed(16), "map_s1": signed(16)}
IDENTITY_MAP = {"map_n0": 1, "map_s0": 0, "map_s1": 1}


def mapped(e: int, n0: int, s0: int, s1: int) -> int:
    """The address (elements from the start) of index e under a map (the SBUF ports' rule; the
    testbenches' reference)."""
    n0 = max(n0, 1)
    return (e % n0) * s0 + (e // n0) * s1


def map_of(num, step):
    """The map of an MX data pattern (uop src_num, src_step: dims 0 and 1), as MAP_FIELDS values."""
    return {"map_n0": num[0], "map_s0": step[0], "map_s1": step[1]}


def block_first_row(row, pack):
    """The first array row (partition) of `row`'s scale block: a block is MX_BLOCK elements,
    `pack` (4 or 8) per partition."""
    return row & Mux(pack == 8, ~(MX_BLOCK // 8 - 1), ~(MX_BLOCK // 4 - 1))


def tile(count):
    """The vectors (or columns) of one tile of the tiled element order: min(MX_TILE, count)."""
    return Mux(count < MX_TILE, count, MX_TILE)
