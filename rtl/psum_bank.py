"""The engine's PSUM partitions as one block (D-T40 (6), D-T79): the crossbar's writes (port k of
partition p) and seed-state ports in, the groups' zeroings (one per column group: groups of several
column groups may start in one cycle), the host port (a word of one partition,
and of every partition: `lanes`) and the write monitors `mon`, `mon2`, ... out.

Its Amaranth form instantiates PsumPartition (rtl/psum.py) once per partition; the export writes the
same wiring as a Verilog `generate` loop over the partition module (`verilog()`), which costs the
export a line per field instead of a netlist node per bit (`tests/test_rtl_export.py` checks the two
against each other cycle by cycle)."""
from amaranth.hdl import Array as HArray
from amaranth.hdl import Module, Mux, Shape, Signal
from amaranth.lib import data, wiring
from amaranth.lib.wiring import In, Out

from tensore.model.addrmap import PARTITION_BITS, PSUM_BANK_BITS, PSUM_BANKS
from tensore.rtl.blackbox import black_box, ports, prototype
from tensore.rtl.interfaces import Bus, arrays, record
from tensore.rtl.psum import PSUM_MONITOR, PSUM_WRITE, STATES, WORDS, PsumPartition, bank_hits
from tensore.rtl.wires import any_of

# a group's zeroing: partitions [lo, hi), its first bank, log2 of its bank count
ZERO_LAYOUT = data.StructLayout({"valid": 1, "lo": 8, "hi": 9, "bank": PSUM_BANK_BITS, "log2": 2})


def monitor_names(ports: int) -> tuple:
    """The PSUM write monitors of an engine whose partitions have `ports` write ports: `mon` shows
    each partition's first write of the cycle, `mon2` its second, ..."""
    return ("mon",) + tuple(f"mon{k + 1}" for k in range(1, ports))


def host_port(parts: int) -> wiring.Signature:
    """The host's PSUM port: word `word` of partition `part` -> `data` one cycle later, and of every
    partition -> `lanes` (a testbench reads the whole PSUM back a word address per cycle); `we`
    writes `wdata` there (a word the engine does not write in the same cycle)."""
    return wiring.Signature({"part": In(range(parts)), "word": In(range(WORDS)), "data": Out(32),
                             "lanes": Out(Bus(32, parts)), "we": In(1), "wdata": In(32)})


class PsumBank(wiring.Component):
    """`parts` partitions of `ports` write ports, `zeros` zeroings a cycle.  `black_box`: the
    partitions are instances of their exported module (which takes its index as an input)."""

    def __init__(self, parts: int, ports: int, black_box: bool = False, zeros: int = 1):
        self.parts, self.ports, self.black_box, self.zeros = parts, ports, black_box, zeros
        self.module_name = f"tensore_psum_bank_p{parts}_w{ports}_z{zeros}"
        monitors = {name: Out(record(arrays(PSUM_MONITOR, parts))) for name in monitor_names(ports)}
        super().__init__({
            "wr": In(Bus(Bus(PSUM_WRITE, parts), ports)),
            "state_index": In(Bus(range(STATES), parts)), "state_wr": In(parts),
            "state_wr_value": In(Bus(32, parts)), "zero": In(Bus(ZERO_LAYOUT, zeros)),
            "host": Out(host_port(parts)), **monitors,
        })

    def _partition(self, p=None):
        return PsumPartition(p, self.ports)

    def blocks(self) -> list:
        return [prototype(self._partition())]

    def elaborate(self, platform):
        m = Module()
        mons = [getattr(self, name) for name in monitor_names(self.ports)]
        host, parts = self.host, []
        masks = [bank_hits(m, z.bank, z.log2, f"zmask{g}") for g, z in enumerate(self.zero)]
        for p in range(self.parts):
            pp = black_box(self._partition(), True) if self.black_box else self._partition(p)
            m.submodules[f"psum{p}"] = pp
            parts.append(pp)
            if self.black_box:
                m.d.comb += pp.index.eq(p)
            m.d.comb += [pp.wr[k].eq(self.wr[k][p]) for k in range(self.ports)]
            m.d.comb += [pp.state_index.eq(self.state_index[p]), pp.state_wr.eq(self.state_wr[p]),
                         pp.state_wr_value.eq(self.state_wr_value[p]),
                         pp.zero_hits.eq(any_of([Mux(z.valid & (p >= z.lo) & (p < z.hi), mask, 0)
                                              for z, mask in zip(self.zero, masks)])), pp.host_addr.eq(host.word),
                         pp.host_we.eq(host.we & (host.part == p)), pp.host_wdata.eq(host.wdata),
                         host.lanes[p].eq(pp.host_data)]
            for k, mon in enumerate(mons):
                m.d.comb += [getattr(mon, f)[p].eq(pp.mon[k][f]) for f, _ in PSUM_MONITOR]
        hp = Signal(range(self.parts))
        m.d.sync += hp.eq(host.part)
        m.d.comb += host.data.eq(HArray(pp.host_data for pp in parts)[hp])
        return m

    def verilog(self) -> str:
        """The block as Verilog: a generate loop over the partition module (ports as rtl/blackbox.py
        names them)."""
        P, K, W = self.parts, self.ports, PSUM_WRITE.size
        part = self.blocks()[0]
        mine = {n: Shape.cast(v.shape()).width for n, (v, _) in ports(self).items()}
        flows = {n: f for n, (_, f) in ports(self).items()}
        decl = [f"  {'input' if flows[n] == In else 'output'} {f'[{w - 1}:0] ' if w > 1 else ''}{n};"
                for n, w in mine.items()]
        zw = ZERO_LAYOUT.size

        def z(g, f):                     # the bits of field f of zeroing g in `zero`
            return f"zero[{g * zw + ZERO_LAYOUT[f].offset} +: {Shape.cast(ZERO_LAYOUT[f].shape).width}]"
        masks = [line for g in range(self.zeros) for line in (
            f"  wire [{PSUM_BANKS - 1}:0] zmask{g};",
            *(f"  wire [{PSUM_BANK_BITS - 1}:0] zdist{g}_{b} = {PSUM_BANK_BITS}'d{b} - {z(g, 'bank')};"
              for b in range(PSUM_BANKS)),
            *(f"  assign zmask{g}[{b}] = zdist{g}_{b} < (4'd1 << {z(g, 'log2')});" for b in range(PSUM_BANKS)))]
        hits = " | ".join(f"(zero[{g * zw + ZERO_LAYOUT['valid'].offset}] && p >= {z(g, 'lo')} && p < {z(g, 'hi')} "
                          f"? zmask{g} : {PSUM_BANKS}'d0)" for g in range(self.zeros))
        sb = Shape.cast(range(STATES)).width
        lines = [f"// {P} PSUM partitions of {K} write ports (rtl/psum_bank.py PsumBank).",
                 f"module {self.module_name}(clk, rst, {', '.join(mine)});", "  input clk;", "  input rst;", *decl,
                 f"  reg [{max(1, (P - 1).bit_length()) - 1}:0] hp;",
                 "  always @(posedge clk) if (rst) hp <= 0; else hp <= host_part;",
                 f"  wire [31:0] hdata [0:{P - 1}];", "  assign host_data = hdata[hp];", *masks,
                 "  genvar p;", f"  generate for (p = 0; p < {P}; p = p + 1) begin : part",
                 f"    localparam [{PARTITION_BITS - 1}:0] INDEX = p;",
                 f"    wire [{K * W - 1}:0] pwr;", f"    wire [{K * PSUM_MONITOR.size - 1}:0] pmon;",
                 "    wire [31:0] sdata;                // the SR state SaveSeed reads (used inside)",
                 *(f"    assign pwr[{k * W} +: {W}] = wr[({k * P} + p) * {W} +: {W}];" for k in range(K)),
                 f"    wire [{PSUM_BANKS - 1}:0] zh = {hits};",
                 f"    {part.module_name} u(.clk(clk), .rst(rst), .index(INDEX), .wr(pwr), .mon(pmon), .zero_hits(zh),",
                 "      .host_addr(host_word), .host_data(hdata[p]),",
                 "      .host_we(host_we && host_part == p), .host_wdata(host_wdata),",
                 f"      .state_index(state_index[p * {sb} +: {sb}]), .state_data(sdata), .state_wr(state_wr[p]),",
                 "      .state_wr_value(state_wr_value[p * 32 +: 32]));",
                 "    assign host_lanes[p * 32 +: 32] = hdata[p];"]
        for k, name in enumerate(monitor_names(K)):
            for f, fld in PSUM_MONITOR:
                w = Shape.cast(fld.shape).width
                lines.append(f"    assign {name}_{f}[p * {w} +: {w}] = pmon[{k * PSUM_MONITOR.size + fld.offset} +: {w}];")
        lines += ["  end endgenerate", "endmodule", ""]
        return "\n".join(lines)
