"""rtl/seq.py with row tiles (`public`, D-T100) on its own: a moving port per row tile, its entry
freed once a longer stream has passed it (timing.entry_free), the loads after the last matmul of
each tile they write, a matmul's completion at the tap below its tiles; every descriptor issues in
the golden engine's cycle."""
from dataclasses import replace

import pytest

from tensore.cosim import random_programs as R
from tensore.cosim.programs import library
from tests.test_row_tiles import _entry_program, _tile_race_program, taps_program
from tests.test_rtl_seq import _check, _run


def _tiles(progs):
    return [replace(p, timing="public") for p in progs]


def test_tile_programs():
    """A stream entering below one over every row, two loads and matmuls on one tile's rows 4..7, a
    matmul leaving higher up held by the write order (taps_program) and random programs of 2-row
    tiles: issue cycles, refusals and counters as the golden engine's."""
    progs = [_entry_program(), _entry_program(2), _tile_race_program(), taps_program()]
    progs += _tiles(R.generate("mariana", s, blocks=12) for s in range(3))
    _check(_run(progs))


@pytest.mark.parametrize("gen", ["cayman", "mavericK"])
def test_library_under_tiles(gen):
    """Every fourth library program of the generation (8 x 8, MAVERICK 8 x 16) under `public`."""
    progs = [p for p in library(gen) if p.rows == 8][::4]
    assert len(progs) >= 6
    _check(_run(_tiles(progs)))
