"""The links between the engine's units, as signatures from the driving side (D-T103, D-T68), so
rtl/top.py joins units with `connect()`: a member Out is driven by the link's source, In by its sinks.

Each link is a `wiring.Signature` of named fields rather than a `stream.Signature` of one payload:
only the descriptor stream has backpressure (the others are scheduled by the sequencer's timing
rules, so they are always ready), and a field per member keeps the exported modules' per-field
ports (`wl_row`, `issue_uop`, ...: a sub-signature's path joined by "_", rtl/blackbox.py), which
the Verilog writers and the testbenches name."""
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from tensore.model.isa import DESCRIPTOR_BYTES
from tensore.model.timing import LOAD_COLS
from tensore.rtl.interfaces import Bus
from tensore.rtl.isa import uop_layout
from tensore.rtl.pe import COL_BITS, weight_layout
from tensore.rtl.rowport import MV_ELEMS, REC_LAYOUT, xit_layout

T = 32          # timestamp width: the sequencer's free-running cycle count and the cycles it names

# host -> sequencer: descriptors (512 bits, byte k = bits 8k..8k+7), the one link with backpressure
DESCRIPTOR_STREAM = wiring.Signature({"valid": Out(1), "ready": In(1), "data": Out(8 * DESCRIPTOR_BYTES)})
# host -> sequencer: the register bus (docs/regs/arr_seq.md)
REGISTER_BUS = wiring.Signature({"addr": Out(12), "wdata": Out(32), "we": Out(1), "rdata": In(32)})
# load unit -> sequencer: a fetched PeRegWrite value (its register index), in the cycle it applies
REG_FETCH = wiring.Signature({"apply": Out(1), "value": Out(32), "index": Out(8)})


def issue_link() -> wiring.Signature:
    """Sequencer -> load, launch and column-load units: the micro-op issued this cycle (`valid`,
    `uop`), with what one of them needs beside it: `bypass` (PeRegWrite takes no SBUF read, the
    load unit), `seed_at` (a PeManageSeed's transpose cycle, the launch unit), `skew4` (a
    column-serial load's rows skew by 4, D-T99)."""
    return wiring.Signature({"valid": Out(1), "uop": Out(uop_layout()), "bypass": Out(1), "seed_at": Out(T),
                             "skew4": Out(1)})


def row_feed(rounds: int) -> wiring.Signature:
    """Launch unit -> row ports: the head of the request chain (rtl/rows.py): vector v's launch
    record (`rec`), row 0's transpose iterator (`xit`, `rounds` of the rows' elements), and
    `req_shift`, the chain moves at the end of this cycle."""
    return wiring.Signature({"rec": Out(REC_LAYOUT), "xit": Out(xit_layout(rounds)), "req_shift": Out(1)})


def weight_load(rows: int, cols: int, pack: int) -> wiring.Signature:
    """Load unit -> array: one row's weights (`data`, a record per column) into the columns of `cols`."""
    return wiring.Signature({"valid": Out(1), "row": Out(range(rows)), "cols": Out(cols),
                             "data": Out(Bus(weight_layout(pack), cols))})


def tag_load(rows: int, cols: int) -> wiring.Signature:
    """Load unit -> array: one row's 4-bit tags into the columns of `cols` (LdTags, TAG_WEIGHT, D-T16)."""
    return wiring.Signature({"valid": Out(1), "row": Out(range(rows)), "cols": Out(cols), "data": Out(Bus(4, cols))})


def column_writes(rows: int, pack: int) -> wiring.Signature:
    """Column-load unit -> array: per row a mask of LOAD_COLS columns from `col` and their weight
    records (rtl/column_load.py, D-T99)."""
    return wiring.Signature({"valid": Out(Bus(LOAD_COLS, rows)), "col": Out(Bus(COL_BITS, rows)),
                             "data": Out(Bus(Bus(weight_layout(pack), LOAD_COLS), rows))})


def lut_link(rows: int) -> wiring.Signature:
    """Row ports -> load unit's ConvLutLoad table (D-T15): each row's MV_ELEMS table indices out, the
    entries and the table's dtype back."""
    return wiring.Signature({"index": Out(Bus(8, rows * MV_ELEMS)), "entry": In(Bus(32, rows * MV_ELEMS)),
                             "dtype": In(8)})
