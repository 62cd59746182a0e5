"""MX addressing (SPEC D-21, docs/decisions.md D-T25): which partition holds a row's block scale and
how many vectors an element-order tile has, for the load unit, the launch unit and the row ports."""
from amaranth.hdl import Mux

from tensore.model.isa.microop import MX_BLOCK, MX_TILE


def block_first_row(row, pack):
    """The first array row (partition) of `row`'s scale block: a block is MX_BLOCK elements,
    `pack` (4 or 8) per partition."""
    return row & Mux(pack == 8, ~(MX_BLOCK // 8 - 1), ~(MX_BLOCK // 4 - 1))


def tile(count):
    """The vectors (or columns) of one tile of the tiled element order: min(MX_TILE, count)."""
    return Mux(count < MX_TILE, count, MX_TILE)
