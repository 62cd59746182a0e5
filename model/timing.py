"""The timing contract of the engine (docs/timing.md): the numbers and formulas the golden cycle
model and the RTL share.  Cycles count from the engine's first clock after reset (cycle 0)."""
from __future__ import annotations

from dataclasses import dataclass

DECODE_CYCLES = 1          # a descriptor at the FIFO head is decoded and checked in one cycle
PSUM_RMW_CYCLES = 1        # column output -> PSUM cell written one cycle later (read, add, write)
FIFO_DEPTH = {0: 16, 1: 1}  # queue_cfg.fifo_size_sel
DEFAULT_SBUF_LATENCY = 2   # cycles from an SBUF read request to its data
MAX_IN_FLIGHT = 16         # issued micro-ops not yet complete (D-T38)


@dataclass(frozen=True)
class ArrayTiming:
    """Where and when data is in the array, for one matmul (D-15).

    Physical row r, physical column c, vector v (0-based), `passes` cycles per vector (4 for the
    fp32 HIGH / LOW_HIGH modes, D-12), t_data = the cycle the first moving vector arrives from SBUF.
      PE (r, c) works on vector v in cycles  t_data + passes*(v + r + c) ... + passes - 1
      the (c, v) sum sits in the bottom register of column c in cycle  t_data + passes*(v + R + c)
      and PSUM is written PSUM_RMW_CYCLES later (the cell is read in the output cycle)
    """

    t_data: int
    rows: int                  # physical rows R of the array (fixed latency: the sum always runs to the bottom)
    passes: int = 1

    def pe_cycle(self, r: int, c: int, v: int) -> int:
        return self.t_data + self.passes * (v + r + c)

    def output_cycle(self, c: int, v: int) -> int:
        """The cycle the (c, v) sum is in the bottom register of column c."""
        return self.t_data + self.passes * (v + self.rows + c)

    def write_cycle(self, c: int, v: int) -> int:
        return self.output_cycle(c, v) + PSUM_RMW_CYCLES


def bucket(n: int) -> int:
    """Perf-counter bucket of an active row / column count: 2,4,...,128 -> 0..6 (D-22)."""
    n = max(1, min(int(n), 128))
    return max(0, (n - 1).bit_length() - 1)


def counter_index(rows: int, cols: int) -> int:
    return bucket(rows) * 7 + bucket(cols)
