"""The PSUM write crossbar: each column's output to a write port of its partition (D-T40 (6), D-T42).

Column c presents its write (strobe, partition, byte offset, value and flags; seed states) in the
column-output cycle.  The writes one partition receives in a cycle take its ports in the order the
model applies them (model/engine/psum_order.py): micro-ops oldest first, and within a micro-op
column half (slot) 0 before slot 1.  The write records run along the columns in launch order, so an older
micro-op's columns are further along: the crossbar takes the columns from the last to the first,
except that a c256 micro-op's slot-1 write (column x + half) follows its own slot-0 write to the same
partition (column x) when both are in the cycle: `pair[x]`, found by the write-back unit.  Port k
of partition p is its k-th write; more writes than ports, or a partition number past the last
partition, raise `unsupported` (a build choice: the partitions and ports built).  The SR state port
of a partition (LoadSeed writes a state, SaveSeed reads one) follows the seed column naming it; a
LoadSeed column takes no write port, a SaveSeed write is marked `save` and the partition writes its
state word instead of the column's value (so no path runs from a partition through the crossbar
back into it).  Its outputs are PSUM_WRITE records (rtl/psum.py), one per port and partition.

The function is a P x C selection.  Amaranth's netlist of it grows with partitions x columns (at
128 x 256 it dominated the engine's export), so the exported Verilog is `verilog()` instead: the
same function as one combinational block that loops over the columns (O(C) in the simulators), and
tests/test_rtl_export.py checks the two against each other on random inputs."""
from amaranth.hdl import Const, Module, Mux, Signal
from amaranth.lib import data, wiring
from amaranth.lib.wiring import In, Out

from tensore.model.isa.enums import SeedMode
from tensore.rtl.interfaces import Bus
from tensore.rtl.psum import OFFSET_BITS, PSUM_WRITE, STATES

PART_BITS = 16                  # a column's partition number, before the range check
# the causes of `unsupported`: a partition past the last one built, more writes than its ports
UNSUPPORTED = data.StructLayout({"partition": 1, "ports": 1})


class PsumWriteXbar(wiring.Component):
    """`parts` partitions of `ports` write ports each, `cols` columns; `half`: the columns of a
    write slot (MAVERICK c256: half the array; `pair` exists when it is less than `cols`)."""

    def __init__(self, parts: int, cols: int, ports: int, half: int | None = None):
        self.parts, self.cols, self.ports, self.half = parts, cols, ports, half or cols
        state = range(STATES)
        pair = {"pair": In(cols - self.half)} if self.half < cols else {}
        super().__init__({
            "strobe": In(cols), "part": In(Bus(PART_BITS, cols)),
            "offset": In(Bus(OFFSET_BITS, cols)),
            "value": In(Bus(32, cols)), "seed": In(Bus(2, cols)),
            "bf16": In(cols), "accumulate": In(cols), "raw": In(cols), "sr": In(1), **pair,
            "state": In(Bus(state, cols)), "loaded": In(Bus(32, cols)),
            "state_index": Out(Bus(state, parts)), "state_wr": Out(parts),
            "state_wr_value": Out(Bus(32, parts)),
            "wr": Out(Bus(Bus(PSUM_WRITE, parts), ports)),   # port k of partition p
            "unsupported": Out(UNSUPPORTED),
        })

    @property
    def module_name(self) -> str:
        split = "" if self.half == self.cols else f"_h{self.half}"
        return f"tensore_psum_xbar_p{self.parts}_c{self.cols}_w{self.ports}{split}"

    @property
    def count_bits(self) -> int:
        return (self.cols + 2).bit_length()

    def _pairs(self, c):
        """(column c is the slot-1 write of a pair, column c is the slot-0 write of one)."""
        H, none = self.half, Const(0, 1)
        if H == self.cols:
            return none, none
        return (self.pair[c - H] if c >= H else none), (self.pair[c] if c < self.cols - H else none)

    def elaborate(self, platform):
        m = Module()
        P, LOAD, SAVE = self.parts, SeedMode.LOAD_SEED, SeedMode.SAVE_SEED
        count = [Const(0, self.count_bits)] * P         # writes of each partition so far
        for c in reversed(range(self.cols)):            # the micro-ops oldest first
            second, first = self._pairs(c)
            with m.If(self.strobe[c] & (self.part[c] >= P)):
                m.d.comb += self.unsupported.partition.eq(1)
            for p in range(P):
                named = self.strobe[c] & (self.part[c] == p)
                with m.If(named & (self.seed[c] != 0)):
                    m.d.comb += [self.state_index[p].eq(self.state[c]), self.state_wr[p].eq(self.seed[c] == LOAD),
                                 self.state_wr_value[p].eq(self.loaded[c])]
                takes = named & (self.seed[c] != LOAD)
                rank = count[p] + second
                for k in range(self.ports):
                    with m.If(takes & (rank == k)):
                        wr = self.wr[k][p]
                        m.d.comb += [wr.valid.eq(1), wr.offset.eq(self.offset[c]), wr.value.eq(self.value[c]),
                                     wr.save.eq(self.seed[c] == SAVE), wr.bf16.eq(self.bf16[c]),
                                     wr.accumulate.eq(self.accumulate[c]), wr.raw.eq(self.raw[c]), wr.sr.eq(self.sr)]
                with m.If(takes & (rank >= self.ports)):
                    m.d.comb += self.unsupported.ports.eq(1)
                after = Signal(self.count_bits, name=f"count{p}_c{c}")
                m.d.comb += after.eq(Mux(takes & ~second, count[p] + 1 + first, count[p]))
                count[p] = after
        return m

    def verilog(self) -> str:
        """The function as behavioural Verilog (ports as rtl/blackbox.py names them)."""
        P, C, H, W = self.parts, self.cols, self.half, PSUM_WRITE.size
        names = ["clk", "rst", "strobe", "part", "offset", "value", "seed", "bf16", "accumulate", "raw", "sr",
                 *(["pair"] if H < C else []), "state", "loaded", "state_index", "state_wr", "state_wr_value",
                 "wr", "unsupported"]
        load, save, cb = int(SeedMode.LOAD_SEED), int(SeedMode.SAVE_SEED), self.count_bits
        lines = [f"// PSUM write crossbar, {P} partitions x {C} columns, {self.ports} port(s) (rtl/psum_xbar.py)",
                 "// verilator lint_off UNUSEDSIGNAL",      # clk / rst: every exported block has them
                 f"module {self.module_name}({', '.join(names)});",
                 "  input clk, rst, sr;",
                 f"  input [{C - 1}:0] strobe, bf16, accumulate, raw;",
                 *([f"  input [{C - H - 1}:0] pair;"] if H < C else []),
                 f"  input [{PART_BITS * C - 1}:0] part;", f"  input [{OFFSET_BITS * C - 1}:0] offset;",
                 f"  input [{32 * C - 1}:0] value, loaded;", f"  input [{2 * C - 1}:0] seed;",
                 f"  input [{4 * C - 1}:0] state;",
                 f"  output reg [{4 * P - 1}:0] state_index;", f"  output reg [{P - 1}:0] state_wr;",
                 f"  output reg [{32 * P - 1}:0] state_wr_value;", "  output reg [1:0] unsupported;",
                 f"  output reg [{W * P * self.ports - 1}:0] wr;",
                 f"  reg [{cb - 1}:0] count [0:{P - 1}];", f"  reg [{cb - 1}:0] rank;", "  reg first, second;",
                 "  integer c, p;", "  always @* begin",
                 "    unsupported = 2'b0;", "    state_index = 0; state_wr = 0; state_wr_value = 0; wr = 0;",
                 "    rank = 0; first = 1'b0; second = 1'b0;",
                 f"    for (p = 0; p < {P}; p = p + 1) count[p] = 0;",
                 f"    for (c = {C - 1}; c >= 0; c = c - 1) begin",
                 f"      p = {{{32 - PART_BITS}'b0, part[{PART_BITS}*c +: {PART_BITS}]}};",
                 "      first = 1'b0; second = 1'b0;"]
        if H < C:
            lines += [f"      if (c >= {H}) second = pair[c - {H}];", f"      if (c < {C - H}) first = pair[c];"]

        def field(name, value):
            f = PSUM_WRITE[name]
            return f"            wr[{W}*(rank*{P}+p) + {f.offset} +: {f.width}] = {value};"
        lines += ["      if (strobe[c]) begin",
                  f"        if (p >= {P}) unsupported[0] = 1'b1;",
                  "        else begin",
                  "          if (seed[2*c +: 2] != 2'd0) begin",
                  "            state_index[4*p +: 4] = state[4*c +: 4];",
                  f"            state_wr[p] = seed[2*c +: 2] == 2'd{load};",
                  "            state_wr_value[32*p +: 32] = loaded[32*c +: 32];",
                  "          end",
                  f"          if (seed[2*c +: 2] != 2'd{load}) begin",
                  f"            rank = count[p] + {{{cb - 1}'b0, second}};",
                  f"            if (!second) count[p] = count[p] + {cb}'d1 + {{{cb - 1}'b0, first}};",
                  f"            if (rank >= {cb}'d{self.ports}) unsupported[1] = 1'b1;",
                  "            else begin",
                  field("valid", "1'b1"),
                  field("offset", f"offset[{OFFSET_BITS}*c +: {OFFSET_BITS}]"),
                  field("value", "value[32*c +: 32]"),
                  field("save", f"seed[2*c +: 2] == 2'd{save}"),
                  field("bf16", "bf16[c]"), field("accumulate", "accumulate[c]"), field("raw", "raw[c]"),
                  field("sr", "sr"),
                  "            end",
                  "          end",
                  "        end",
                  "      end",
                  "    end",
                  "  end", "endmodule", "// verilator lint_on UNUSEDSIGNAL", ""]
        return "\n".join(lines)
