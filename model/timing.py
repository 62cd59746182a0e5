"""The timing contract of the engine (docs/timing.md): the numbers and formulas the golden cycle
model and the RTL share.  Cycles count from the engine's first clock after reset (cycle 0).

The formulas are written once for both (D-T70): they use only `+`, `-`, `&` and shifts, so they
take Python ints (model/engine/) and Amaranth values (rtl/seq.py) alike; `passes` is 1 or 4."""
from __future__ import annotations

from dataclasses import dataclass

from tensore.model.arr_seq_regs import REGISTERS

DECODE_CYCLES = 1          # a descriptor at the FIFO head is decoded and checked in one cycle
PSUM_RMW_CYCLES = 1        # column output -> PSUM cell written one cycle later (read, add, write)
FIFO_DEPTH = {0: 16, 1: 1}  # queue_cfg.fifo_size_sel
DEFAULT_SBUF_LATENCY = 2   # cycles from an SBUF read request to its data
MAX_IN_FLIGHT = 16         # issued micro-ops not yet complete (D-T38)

# perf counters (D-22, D-T30): the banks and their counters as the register map declares them
_LSB = "].instr_cnt_lsb"
PERF_BANKS = tuple(dict.fromkeys(n.split("[")[0] for n in REGISTERS if n.endswith(_LSB)))
PERF_COUNTERS = sum(1 for n in REGISTERS if n.startswith(PERF_BANKS[0] + "[") and n.endswith(_LSB))
BUCKETS = 7                # active counts 2, 4, ..., 128 (columns beyond 128 in the last)
assert PERF_COUNTERS == BUCKETS * BUCKETS


@dataclass(frozen=True)
class Profile:
    """A timing profile: which issue rules the golden engine (model/engine/issue.py) and the RTL
    sequencer (rtl/seq.py) apply, one definition both evaluate (D-T98).  `public` (the default): AWS's public
    Tensor Engine cost rules (nki.isa.nc_matmul, the architecture guides) with the hardware they
    need.  `contract`: the issue rules of docs/timing.md without them, one operation at a time
    (the reference the row-serial schedule and its tests are written against, D-T102).
      row_wavefront: a weight load waits for the previous matmul's swap front to pass its own rows
                     (load_front_issue), not every PE of the array (weights_swapped).
      issue_floor:   a matmul whose PE block overlaps the previous matmul's issues no sooner than
                     floor_cycles after it (nc_matmul's cost, MM_INIT_LATENCY).
      column_loads:  a plain weight load (`column_load`) writes each row LOAD_COLS columns per group
                     behind the previous matmul's swap front, rows skewed by its passes (D-T99):
                     the load runs while that matmul computes (rtl/column_load.py).
      row_tiles:     row tiles side by side (D-T100): a matmul's moving stream enters at its first
                     row and its sums leave below its last row tile (`tile_span`), each row tile with
                     its own moving port, so matmuls on disjoint row tiles run together (nc_matmul,
                     "Tiling mode")."""

    name: str
    row_wavefront: bool = False
    issue_floor: bool = False
    column_loads: bool = False
    row_tiles: bool = False

    def __str__(self) -> str:
        return self.name


PROFILES = {p.name: p for p in (Profile("public", row_wavefront=True, issue_floor=True, column_loads=True,
                                         row_tiles=True),
                                 Profile("contract"))}
MM_INIT = 64               # MM_INIT_LATENCY: the matmul initiation interval floor (nc_matmul), cycles
DEFAULT_PROFILE = "public"


def profile(name) -> Profile:
    """The profile called `name` (a Profile passes through); ValueError naming the choices."""
    if isinstance(name, Profile):
        return name
    found = PROFILES.get(str(name).lower())
    if found is None:
        raise ValueError(f"timing profile {name!r}: one of {', '.join(PROFILES)}")
    return found


def tile_span(rows, tile):
    """The rows a matmul of `rows` rows spans under `row_tiles`: whole row tiles of `tile` rows (a
    power of two), from its first row (a tile's first, D-T100) to the sum tap below its last tile."""
    shift = tile.bit_length() - 1
    return ((rows + tile - 1) >> shift) << shift


def times_passes(x, passes):
    """x * passes for passes 1 or 4: a shift by passes // 2 (on Amaranth values a 2-bit shifter)."""
    return x << (passes >> 1)


def write_cycle(t_data, rows, passes, c, v):
    """The PSUM write of column c, vector v of a matmul whose first vector arrives at t_data on an
    array of `rows` rows: the sum leaves the bottom at t_data + passes * (v + rows + c) (D-15, D-T29)."""
    return t_data + times_passes(v + rows + c, passes) + PSUM_RMW_CYCLES


def load_complete(t, rows, latency):
    """A weight or tag load issued at t: its last row's shadow write (row k at t + k + latency)."""
    return t + rows - 1 + latency


def load_port_free(t, rows):
    """A load issued at t has sent its last row request at t + rows - 1."""
    return t + rows


def sparse_end(t, vectors, cols):
    """A MatmulSparse issued at t has used the tags of every column by t + vectors + cols (LdTags waits)."""
    return t + vectors + cols


def weights_swapped(t_data, passes, rows, cols):
    """The cycle by which every PE of a matmul has taken its first vector (and swapped)."""
    return t_data + times_passes(rows + cols, passes)


def load_front_issue(t_data, passes, row0, rows, cols, latency):
    """The earliest issue of a weight load into rows row0 .. row0 + rows - 1 after a matmul whose first
    vector arrives at t_data (the row wavefront, D-T98): row r's shadow write (the `shadow_write`
    event, cycle t + r - row0 + latency) comes no earlier than the last cycle PE (r, cols - 1) works
    on its first vector, t_data + passes * (r + cols) - 1, when it has taken its weights.  The swap
    front moves `passes` cycles a row and the writes one, so the last row binds."""
    return t_data + times_passes(row0 + rows + cols - 1, passes) - rows - latency


def floor_cycles(xpose, rows, cols, vectors, passes, pick):
    """The public cost of a matmul before the next one on its PE block may issue (D-T98):
    min(MM_INIT, N_stationary) x passes for a matmul (N_stationary: its columns; the moving part,
    vectors x passes, is mm_port_free's), max(P, min(MM_INIT, F)) for a transpose (P: its rows, F:
    its vectors).  `pick(cond, a, b)` is `a if cond else b`: Python's for ints, Mux for Amaranth."""
    stationary = pick(cols < MM_INIT, cols, MM_INIT)
    free = pick(vectors < MM_INIT, vectors, MM_INIT)
    return pick(xpose, pick(rows > free, rows, free), times_passes(stationary, passes))


LOAD_COLS = 2              # columns a row writes per cycle on the column-serial port (D-T99): 2 x 128 input


def column_load(tags, tagw, xpose, mx, lut, lcf):
    """Whether a weight load takes the column-serial port under `column_loads` (D-T99): a plain one
    (no tags, transpose, MX scales or LUT codes) in first-column-first order; the others load a row
    per cycle as before."""
    return (tags | tagw | xpose | mx | lut | lcf) == 0


def column_groups(cols):
    """Column groups of a row of a column-serial load: LOAD_COLS columns each."""
    return (cols + LOAD_COLS - 1) >> (LOAD_COLS.bit_length() - 1)


def column_write(t, skew, k, g, latency):
    """A column-serial load issued at t writes row k (of its own rows) and its column group g in
    cycle t + skew * (k + g) + latency: the groups run down the rows, a row each `skew` cycles (the
    passes of the matmul whose front the load follows), and each row requests its SBUF partition as
    a group reaches it (D-T99)."""
    return t + times_passes(k + g, skew) + latency


def column_load_issue(t_data, passes, row0, col0, cols, latency):
    """The earliest issue of a column-serial load into columns col0 .. col0 + cols - 1 after a matmul
    whose first vector arrives at t_data, rows skewed by its `passes`: PE (r, c)'s write
    (column_write) comes no earlier than the last cycle it works on its first vector,
    t_data + passes * (r + c + 1) - 1.  Rows skew as the front does, so every row binds alike; the
    front crosses a group's two columns in 2 x passes cycles and the writes in passes, so the last
    column binds."""
    return t_data + times_passes(row0 + col0 + cols - column_groups(cols) + 1, passes) - 1 - latency


def column_load_end(t, skew, rows, cols):
    """The cycle after a column-serial load issued at t has made its last write request (row
    rows - 1, its last group): a matmul of other passes, or a row-serial load, waits for it."""
    return t + times_passes(rows + column_groups(cols) - 2, skew) + 1


def column_port_free(t, skew, cols):
    """A column-serial load issued at t has sent its last group down the rows at t + skew * (G - 1):
    the next one starts a group slot later."""
    return t + times_passes(column_groups(cols), skew)


def column_port_next(port, end, skew, row0, rows, next_row0, pick):
    """The earliest issue of a column-serial load whose rows start at `next_row0` after the previous
    one's on rows row0 .. row0 + rows - 1, groups `skew` cycles a row, port free at `port`
    (column_port_free) and last request out at `end` (column_load_end).  A row's stage holds one
    group and a load's groups enter at its first row, so one entering below the previous load's first
    row and within its rows would reach a shared row before the previous load's last group has left
    it: that group would be dropped (the stage takes the entering one) or, on a shared PE, write after
    the later load.  Such a load waits `skew` cycles more per row between the two first rows, so its
    groups trail the previous one's in every shared row, or for the previous load's end, whichever
    comes first (its last row's group needs its stage only for its request).  A row-serial load
    leaves port == end.  `pick(cond, a, b)` is `a if cond else b`: Python's for ints, Mux for Amaranth."""
    behind = port + times_passes(next_row0 - row0, skew)
    return pick((row0 < next_row0) & (next_row0 < row0 + rows), pick(behind < end, behind, end), port)


def blocks_overlap(a, b):
    """Whether PE blocks (row0, rows, col0, cols) share a PE (`&` of comparisons: ints and values)."""
    return (a[0] < b[0] + b[1]) & (b[0] < a[0] + a[1]) & (a[2] < b[2] + b[3]) & (b[2] < a[2] + a[3])


def mm_port_free(t, vectors, passes):
    """A matmul issued at t streams its last vector into the array at t + passes * (vectors - 1)."""
    return t + times_passes(vectors, passes)


def tile_stream(row0, rows, xpose, array_rows, tile, pick):
    """(entry row, rows to its sum tap) of a matmul's moving stream under `row_tiles` (D-T100): its
    first row and its whole tiles (tile_span), but a transpose's, whose element c rides column c from
    row c, from row 0 over the array.  `pick(cond, a, b)`: Python's `a if cond else b` or Mux."""
    return pick(xpose, 0, row0), pick(xpose, array_rows, tile_span(rows, tile))


def entry_free(port, passes, rows_below):
    """Under `row_tiles` (D-T100): a stream whose moving port frees at `port` (mm_port_free) has
    passed the entry of the row tile `rows_below` rows below its own first row `passes * rows_below`
    later; a stream entering there takes the request chain's stage from then on."""
    return port + times_passes(rows_below, passes)


def tap_of(entry, span, tile):
    """The tap (0 below the first row tile) a stream's sums leave at: below its last tile (D-T100)."""
    return (entry + span) // tile - 1


def psum_box(part, cols, off, steps, nums, esize, pick):
    """(first partition, partition end, first byte, byte end) a matmul's PSUM writes fall in: `cols`
    partitions from `part` and its destination pattern's whole extent from byte `off` (a superset of
    the elements it writes), for the write order of row tiles (D-T100)."""
    lo, hi = off, off + esize
    for s, n in zip(steps, nums):
        reach = (n - 1) * s * esize
        lo, hi = lo + pick(s < 0, reach, 0), hi + pick(s < 0, 0, reach)
    return part, part + cols, lo, hi


def boxes_overlap(a, b):
    """Whether two psum_box boxes share a PSUM byte."""
    return (a[0] < b[1]) & (b[0] < a[1]) & (a[2] < b[3]) & (b[2] < a[3])


def write_lead(latency, span, col0, passes):
    """Cycles from a matmul's issue to its first PSUM write (column col0, vector 0) when its sums run
    `span` rows from its entry to their tap: write_cycle with t_data = issue + latency."""
    return latency + times_passes(span + col0, passes) + PSUM_RMW_CYCLES


def in_rhythm(t, t_issue, passes):
    """A `passes`-pass matmul may issue at t only in step with the matmul issued at t_issue (D-T38)."""
    return ((t - t_issue) & (passes - 1)) == 0


def seed_transpose_issue(t, rows, latency):
    """PeManageSeed issued at t: its seed transpose issues after the `rows`-row identity load."""
    return load_complete(t, rows, latency) + 1


@dataclass(frozen=True)
class ArrayTiming:
    """Where and when data is in the array, for one matmul (D-15).

    Physical row r, physical column c, vector v (0-based), `passes` cycles per vector (4 for the
    fp32 HIGH / LOW_HIGH modes, D-12), t_data = the cycle the first moving vector arrives from SBUF
    at row `row0` (0; under `row_tiles` the matmul's first row, D-T100).
      PE (r, c) works on vector v in cycles  t_data + passes*(v + r - row0 + c) ... + passes - 1
      the (c, v) sum sits in the tap register of column c in cycle  t_data + passes*(v + rows + c)
      and PSUM is written PSUM_RMW_CYCLES later (the cell is read in the output cycle)
    """

    t_data: int
    rows: int                  # rows the sums run from row0 to their tap: the array's R (fixed latency: to the
    passes: int                # bottom), under `row_tiles` the matmul's tile_span
    row0: int

    def __post_init__(self):
        assert self.passes in (1, 4), self.passes

    def pe_cycle(self, r: int, c: int, v: int) -> int:
        return self.t_data + times_passes(v + r - self.row0 + c, self.passes)

    @property
    def front(self) -> int:
        """t_data as the issue rules' formulas take it (a stream entering at row 0): t_data - passes * row0."""
        return self.t_data - times_passes(self.row0, self.passes)

    def output_cycle(self, c: int, v: int) -> int:
        """The cycle the (c, v) sum is in the bottom register of column c."""
        return self.write_cycle(c, v) - PSUM_RMW_CYCLES

    def write_cycle(self, c: int, v: int) -> int:
        return write_cycle(self.t_data, self.rows, self.passes, c, v)


def bucket(n):
    """Perf-counter bucket of an active row / column count: 2,4,...,128 -> 0..6 (D-22), counts below
    2 in 0 and beyond 128 in 6.  Comparisons summed: ints (the model) and Amaranth values (the
    decoder) alike (D-T70, D-T101)."""
    return sum(n > (1 << k) for k in range(1, BUCKETS))


def counter_index(rows, cols):
    """The perf counter of a rows x cols block (D-22), written once for the model and the decoder (D-T101)."""
    return bucket(rows) * BUCKETS + bucket(cols)
