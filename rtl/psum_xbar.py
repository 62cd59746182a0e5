"""The PSUM write crossbar: each column's output to the write port of its partition (D-T42).

Column c presents its write (strobe, partition, byte offset, value and flags) in the column-output
cycle; port k of partition p takes the write of the column of half k (one half on CAYMAN / MARIANA)
that names p.  Where several columns of a half name one partition the last of them is taken, and
`unsupported` rises, as it does for a partition number past the last partition.  The SR state port
of a partition (LoadSeed writes a state, SaveSeed reads one) follows the last column to name it; a
SaveSeed write is marked `save` and the partition writes its state word instead of the column's
value (so no path runs from a partition through the crossbar back into it).  Its outputs are
PSUM_WRITE records (rtl/psum.py), one per port and partition.

The function is a P x C selection.  Amaranth's netlist of it grows with partitions x columns (at
128 x 256 it dominated the engine's export), so the exported Verilog is `verilog()` instead: the
same function as one combinational block that loops over the columns (O(C) in the simulators), and
tests/test_rtl_export.py checks the two against each other on random inputs."""
import itertools

from amaranth.hdl import Const, Module, Signal
from amaranth.lib import data, wiring
from amaranth.lib.wiring import In, Out

from tensore.model.isa.enums import SeedMode
from tensore.rtl.psum import OFFSET_BITS, PSUM_WRITE, STATES

PART_BITS = 16                  # a column's partition number, before the range check


def halves(cols: int, ports: int) -> list:
    """The columns of each write port: port k takes column half k (one half with one port)."""
    half = cols // ports
    return [range(k * half, (k + 1) * half) for k in range(ports)]


class PsumWriteXbar(wiring.Component):
    def __init__(self, parts: int, cols: int, ports: int):
        self.parts, self.cols, self.ports = parts, cols, ports
        state = range(STATES)
        super().__init__({
            "strobe": In(cols), "part": In(data.ArrayLayout(PART_BITS, cols)),
            "offset": In(data.ArrayLayout(OFFSET_BITS, cols)),
            "value": In(data.ArrayLayout(32, cols)), "seed": In(data.ArrayLayout(2, cols)),
            "bf16": In(cols), "accumulate": In(cols), "raw": In(cols), "sr": In(1),
            "state": In(data.ArrayLayout(state, cols)), "loaded": In(data.ArrayLayout(32, cols)),
            "state_index": Out(data.ArrayLayout(state, parts)), "state_wr": Out(parts),
            "state_wr_value": Out(data.ArrayLayout(32, parts)),
            "wr": Out(data.ArrayLayout(data.ArrayLayout(PSUM_WRITE, parts), ports)),   # port k of partition p
            "unsupported": Out(1),
        })

    @property
    def module_name(self) -> str:
        return f"tensore_psum_xbar_p{self.parts}_c{self.cols}_w{self.ports}"

    def elaborate(self, platform):
        m = Module()
        bad = Signal()
        for p, (k, cols_k) in itertools.product(range(self.parts), enumerate(halves(self.cols, self.ports))):
            sel = {c: self.strobe[c] & (self.part[c] == p) for c in cols_k}
            with m.If(sum(sel.values(), Const(0, 9)) > 1):
                m.d.comb += bad.eq(1)
            for c in cols_k:
                with m.If(sel[c]):
                    wr = self.wr[k][p]
                    m.d.comb += [wr.valid.eq(self.seed[c] != SeedMode.LOAD_SEED), wr.offset.eq(self.offset[c]),
                                 wr.value.eq(self.value[c]), wr.save.eq(self.seed[c] == SeedMode.SAVE_SEED),
                                 wr.bf16.eq(self.bf16[c]), wr.accumulate.eq(self.accumulate[c]),
                                 wr.raw.eq(self.raw[c]), wr.sr.eq(self.sr),
                                 self.state_index[p].eq(self.state[c]),
                                 self.state_wr[p].eq(self.seed[c] == SeedMode.LOAD_SEED),
                                 self.state_wr_value[p].eq(self.loaded[c])]
        for c in range(self.cols):
            with m.If(self.strobe[c] & (self.part[c] >= self.parts)):
                m.d.comb += bad.eq(1)
        m.d.comb += self.unsupported.eq(bad)
        return m

    def verilog(self) -> str:
        """The function as behavioural Verilog (ports as rtl/blackbox.py names them)."""
        P, C, W = self.parts, self.cols, PSUM_WRITE.size
        names = ["clk", "rst", "strobe", "part", "offset", "value", "seed", "bf16", "accumulate", "raw", "sr",
                 "state", "loaded", "state_index", "state_wr", "state_wr_value", "wr", "unsupported"]
        load, save = int(SeedMode.LOAD_SEED), int(SeedMode.SAVE_SEED)
        lines = [f"// PSUM write crossbar, {P} partitions x {C} columns, {self.ports} port(s) (rtl/psum_xbar.py)",
                 "// verilator lint_off UNUSEDSIGNAL",      # clk / rst: every exported block has them
                 f"module {self.module_name}({', '.join(names)});",
                 "  input clk, rst, sr;",
                 f"  input [{C - 1}:0] strobe, bf16, accumulate, raw;",
                 f"  input [{PART_BITS * C - 1}:0] part;", f"  input [{OFFSET_BITS * C - 1}:0] offset;",
                 f"  input [{32 * C - 1}:0] value, loaded;", f"  input [{2 * C - 1}:0] seed;",
                 f"  input [{4 * C - 1}:0] state;",
                 f"  output reg [{4 * P - 1}:0] state_index;", f"  output reg [{P - 1}:0] state_wr;",
                 f"  output reg [{32 * P - 1}:0] state_wr_value;", "  output reg unsupported;",
                 f"  output reg [{W * P * self.ports - 1}:0] wr;",
                 f"  reg [{P - 1}:0] seen;", "  integer c, p;", "  always @* begin",
                 "    unsupported = 1'b0;", "    state_index = 0; state_wr = 0; state_wr_value = 0; wr = 0;"]

        def field(k, name, value):
            f = PSUM_WRITE[name]
            return f"        wr[{W}*({k * P}+p) + {f.offset} +: {f.width}] = {value};"
        for k, cols_k in enumerate(halves(C, self.ports)):
            lines += ["    seen = 0;",
                      f"    for (c = {cols_k.start}; c < {cols_k.stop}; c = c + 1) begin",
                      f"      p = part[{PART_BITS}*c +: {PART_BITS}];",
                      f"      if (strobe[c] && p < {P}) begin",
                      "        if (seen[p]) unsupported = 1'b1;",
                      "        seen[p] = 1'b1;",
                      field(k, "valid", f"seed[2*c +: 2] != 2'd{load}"),
                      field(k, "offset", f"offset[{OFFSET_BITS}*c +: {OFFSET_BITS}]"),
                      field(k, "value", "value[32*c +: 32]"),
                      field(k, "save", f"seed[2*c +: 2] == 2'd{save}"),
                      field(k, "bf16", "bf16[c]"), field(k, "accumulate", "accumulate[c]"), field(k, "raw", "raw[c]"),
                      field(k, "sr", "sr"),
                      "        state_index[4*p +: 4] = state[4*c +: 4];",
                      f"        state_wr[p] = seed[2*c +: 2] == 2'd{load};",
                      "        state_wr_value[32*p +: 32] = loaded[32*c +: 32];",
                      "      end",
                      "    end"]
        lines += [f"    for (c = 0; c < {C}; c = c + 1)",
                  f"      if (strobe[c] && part[{PART_BITS}*c +: {PART_BITS}] >= {PART_BITS}'d{P}) unsupported = 1'b1;",
                  "  end", "endmodule", "// verilator lint_on UNUSEDSIGNAL", ""]
        return "\n".join(lines)
