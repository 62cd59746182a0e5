"""The engine top level: the wiring of its units (docs/timing.md, D-T68).

Data flows one way: descriptor -> sequencer (rtl/seq.py, with the decoder rtl/decoder.py) -> load unit
(rtl/load_unit.py: the stationary port) and launch unit (rtl/launch.py: the matmul rhythm) -> row
ports (rtl/rows.py: the moving port) -> array (rtl/array.py) -> write-back (rtl/writeback.py: the
crossbar and the PSUM partitions) -> PSUM.

Ports (all synchronous to one clock; the Verilog names join a member's path with "_", rtl/blackbox.py):
  desc   descriptor stream: valid / ready / data (512 bits, byte k = bits 8k..8k+7)
  bus    register bus: addr / wdata / we / rdata (docs/regs/arr_seq.md); event_set: host event flags
  st     stationary SBUF gather (rtl/load_unit.py STATIONARY_REQUEST): req.* -> resp.data (element e
         in bits 32e..32e+31) `sbuf_latency - 1` cycles after the request (the request register is
         the first cycle of the model's latency L, D-T38)
  sc     MX scales: req.* -> resp.data (byte m: the block scale of column m), with the same latency
  mv     moving SBUF, one request per array row (rtl/rowport.py MV_REQUEST), field-major: req.valid[r],
         req.part[r], ... -> resp.data[r] (element j in bits 32j..32j+31), with the same latency
  cl     under `column_loads` (the `public` profile): the column-serial weight load's requests, one
         per row (rtl/column_load.py COLUMN_REQUEST), field-major as mv's; row k's answer arrives on
         the stationary input path, st.resp.data words MV_ELEMS k .. MV_ELEMS k + MV_ELEMS - 1, with
         the same latency (D-T102)
  host   PSUM host port: part / word -> data one cycle later, lanes[p] partition p's word; we writes
         wdata there
  mon    the PSUM write of partition p this cycle: mon.valid[p], mon.offset[p], mon.bits[p],
         mon.bf16[p] (a 16-bit write of the half at offset);
         mon2 (, mon3, ...: `psum_ports`) its second (third, ...) write of the cycle, D-T40 (6)
  status now, done (nothing queued or in flight), error (err_status.err), unsupported
The micro-ops this RTL runs (D-T40): Ldweights (also transposing, TAG_WEIGHT, LUT, MX), LdTags,
ConvLutLoad, Matmul (plain, FP8 double row, fp32 LOW/HIGH/LOW_HIGH, MX, MAVERICK tiles and c256, LUT,
transposing), MatmulSparse, PeRegWrite, PeManageSeed and MAVERICK's seed_mode matmuls.  A valid
micro-op it does not run raises `unsupported`; each cause is raised in the unit it concerns and
collected here in one record (`UNSUPPORTED`)."""
from amaranth.hdl import Module, Signal
from amaranth.lib import data, wiring
from amaranth.lib.wiring import In, Out, connect, flipped

from tensore.model.addrmap import PARTITIONS
from tensore.model.dtypes import Gen
from tensore.model.isa.layouts import NUM_EVENTS
from tensore.model.timing import DEFAULT_PROFILE
from tensore.rtl import launch as launch_unit, load_unit, writeback
from tensore.rtl.array import Array
from tensore.rtl.blackbox import black_box, ports, prototype
from tensore.rtl.column_load import COLUMN_REQUEST, ColumnLoad, column_rows
from tensore.rtl.config import PSUM_PORTS, Config
from tensore.rtl.interfaces import arrays, record
from tensore.rtl.launch import Launch
from tensore.rtl.links import DESCRIPTOR_STREAM, REGISTER_BUS, T
from tensore.rtl.load_unit import LoadUnit, scale_port, stationary_port
from tensore.rtl.psum import PSUM_MONITOR
from tensore.rtl.psum_bank import host_port, monitor_names
from tensore.rtl.rowport import MV_ELEMS, MV_REQUEST  # noqa: F401  (MV_ELEMS: the moving answer's words, for the testbenches)
from tensore.rtl.rows import Rows, moving_port
from tensore.rtl.seq import Sequencer
from tensore.rtl.writeback import WriteBack

# every cause of `unsupported`: the decoder's (a micro-op the RTL does not run, held by the
# sequencer) and those of the load, launch and write-back units
UNSUPPORTED = data.StructLayout({"uop": 1, "load": load_unit.UNSUPPORTED, "launch": launch_unit.UNSUPPORTED,
                                 "write": writeback.UNSUPPORTED})


TOP_INPUT_BITS = 1 << 16        # Amaranth's netlist: a cell's output bits (the top's inputs) are indexed in 16 bits


class Engine(wiring.Component):
    def __init__(self, gen, rows: int = 128, cols: int | None = None, *, pack: int | None = None,
                 sbuf_latency: int = 2, psum_partitions: int = PARTITIONS, black_box: bool = False,
                 dtypes=None, psum_ports: int = PSUM_PORTS, sparse32: bool = False,
                 timing=DEFAULT_PROFILE):
        """The build of rtl/config.py's Config (its fields as arguments; `Engine.of(config)`):
        `psum_ports`: the writes a PSUM partition takes in one cycle (D-T40 (6)).  `dtypes`: a
        specialised engine whose PEs multiply only those dtypes (D-T62); a weight load or
        non-transposing matmul of another dtype raises `unsupported`.  `sparse32`: the moving value's
        code slots 1-3 are 32 bits, so a MatmulSparse of FP32 values (data or LUT entries) runs;
        without it such a micro-op raises `unsupported` (D-T40 (3)).  `timing`: the sequencer's
        profile of issue rules (model/timing.py PROFILES, D-T98).  `black_box`: the array, row
        ports, sequencer, load, launch and write-back units, PSUM partitions and crossbar are
        instances of their exported modules (`blocks()`)."""
        self.cfg = cfg = Config(Gen.parse(gen).name, rows, cols or 0, pack or 0, sbuf_latency, psum_partitions,
                                dtypes, psum_ports, sparse32, timing)
        self.gen, self.maverick, self.rows, self.cols, self.L = cfg.generation, cfg.maverick, cfg.rows, cfg.cols, \
            cfg.sbuf_latency
        self.pack, self.parts, self.psum_ports, self.dtypes = cfg.pack, cfg.psum_partitions, cfg.psum_ports, cfg.dtypes
        self.sparse32, self.timing, self.black_box = cfg.sparse32, cfg.profile, black_box
        # the column-serial port's rows (column_loads): their answers ride the stationary input
        # path (rtl/column_load.py, D-T102)
        self.cl_rows = column_rows(rows, self.timing)
        column = {"cl": Out(wiring.Signature({"req": Out(record(arrays(COLUMN_REQUEST, rows)))}))} \
            if self.cl_rows else {}
        monitor = record(arrays(PSUM_MONITOR, psum_partitions))
        super().__init__({
            "desc": In(DESCRIPTOR_STREAM), "bus": In(REGISTER_BUS), "event_set": In(NUM_EVENTS),
            "st": Out(stationary_port(cols, self.pack, self.cl_rows)), "sc": Out(scale_port(cols)),
            "mv": Out(moving_port(rows)), **column,
            "host": Out(host_port(psum_partitions)), "mon": Out(monitor),
            **{name: Out(monitor) for name in monitor_names(psum_ports)[1:]},
            "now": Out(T), "done": Out(1), "error": Out(1), "unsupported": Out(1),
        })

    def check_convertible(self):
        """One clear line where Amaranth cannot convert the engine to Verilog (rtl/export.py calls it
        before converting): its top module's input bits are one netlist cell's outputs, at most
        TOP_INPUT_BITS (the SBUF answers dominate: 32 x max(C x PK, 256, 4 R) stationary, 128 R
        moving)."""
        width = sum(len(v) for v, flow in ports(self).values() if flow == In)
        if width > TOP_INPUT_BITS:
            raise ValueError(f"a {self.gen.name} {self.rows} x {self.cols} engine with {self.pack} elements per PE "
                             f"under the {self.timing} timing profile has {width:,} input bits, more than the "
                             f"{TOP_INPUT_BITS:,} Amaranth converts in one module: build it with fewer elements "
                             "per PE (--pack)")

    @classmethod
    def of(cls, cfg: Config, *, black_box: bool = False) -> "Engine":
        return cls(cfg.gen, cfg.rows, cfg.cols, pack=cfg.pack, sbuf_latency=cfg.sbuf_latency,
                   psum_partitions=cfg.psum_partitions, black_box=black_box, dtypes=cfg.dtypes,
                   psum_ports=cfg.psum_ports, sparse32=cfg.sparse32, timing=cfg.timing)

    def _array(self):
        return Array(self.cfg)

    def _rows(self):
        return Rows(self.cfg, black_box=self.black_box)

    def _write(self):
        return WriteBack(self.cfg, black_box=self.black_box)

    def _load(self):
        return LoadUnit(self.cfg, black_box=self.black_box)

    def _seq(self):
        return Sequencer(self.cfg, black_box=self.black_box)

    def _launch(self, index: int = 0):
        return Launch(self.cfg, index)

    def blocks(self) -> list:
        """The separately exported blocks of the engine (rtl/export.py)."""
        return [prototype(self._array()), *prototype(self._rows()).blocks(), prototype(self._rows()),
                *prototype(self._write()).blocks(), prototype(self._write()),
                *prototype(self._load()).blocks(), prototype(self._load()),
                prototype(self._launch()), *prototype(self._seq()).blocks(), prototype(self._seq())]

    def elaborate(self, platform):
        m = Module()
        m.submodules.seq = seq = black_box(self._seq(), self.black_box)
        m.submodules.load_unit = load = black_box(self._load(), self.black_box)
        m.submodules.launch_unit = launch = black_box(self._launch(), self.black_box)
        m.submodules.row_ports = rows = black_box(self._rows(), self.black_box)
        m.submodules.array = arr = black_box(self._array(), self.black_box)
        m.submodules.write_back = write = black_box(self._write(), self.black_box)
        # host -> sequencer -> load / launch units (rtl/links.py)
        connect(m, host_desc=flipped(self.desc), seq=seq.desc)
        connect(m, host_bus=flipped(self.bus), seq=seq.bus)
        # row tiles side by side (D-T100): a launch unit per tile, feeding the request chain at its first row
        launches = [launch] + [self._tile_launch(m, i) for i in range(1, self.cfg.rows // self.cfg.tile)]
        connect(m, seq=seq.issue, load=load.issue, **{f"launch{i}": x.issue for i, x in enumerate(launches)})
        connect(m, load=load.reg, seq=seq.reg)
        m.d.comb += [seq.event_set.eq(self.event_set), self.now.eq(seq.now), *(x.now.eq(seq.now) for x in launches)]
        # SBUF -> load unit -> array (weights, tags); LUT entries -> row ports
        connect(m, flipped(self.st.req), load.st.req)
        m.d.comb += load.st.resp.data.eq(self.st.resp.data.as_value()[:len(load.st.resp.data.as_value())])
        connect(m, flipped(self.sc), load.sc)
        connect(m, load=load.wl, array=arr.wl)
        connect(m, load=load.tag, array=arr.tag)
        connect(m, rows=rows.lut, load=load.lut)
        # launch unit -> row ports <- SBUF; row ports -> array (moving values, transposes' tops)
        connect(m, launch=launch.feed, rows=rows.feed)
        for i, x in enumerate(launches[1:], 1):
            connect(m, launch=x.feed, rows=getattr(rows, f"feed{i}"))
        connect(m, flipped(self.mv), rows.mv)
        m.d.comb += [arr.row_in.eq(rows.row_in), arr.top_psum.eq(rows.top_psum), arr.top_valid.eq(rows.top_valid)]
        if self.cl_rows:
            self._column_loads(m, seq, arr)
        # the rhythm, a broadcast from the launch unit: advance (row ports, array, write-back), the
        # fp32 pass (array), the column-output cycle (write-back)
        m.d.comb += [rows.advance.eq(launch.advance), arr.advance.eq(launch.advance), arr.phase.eq(launch.phase),
                     write.advance.eq(launch.advance), write.first_cycle.eq(launch.first_cycle)]
        # array, row ports' write records -> write-back -> PSUM
        m.d.comb += [write.down.eq(rows.down), write.out_psum.eq(arr.out_psum),
                     write.seed_lanes.eq(load.seed_lanes), write.sr.eq(seq.round_sr)]
        for k in range(len(launches) - 1):      # the taps below the tiles above the last
            m.d.comb += [getattr(write, f"down{k}").eq(getattr(rows, f"down{k}")),
                         getattr(write, f"tap{k}_psum").eq(getattr(arr, f"tap{k}_psum"))]
        connect(m, flipped(self.host), write.host)
        for name in monitor_names(self.psum_ports):
            connect(m, flipped(getattr(self, name)), getattr(write, name))

        causes = Signal(UNSUPPORTED)
        launched = launch.unsupported.as_value()
        for x in launches[1:]:
            launched = launched | x.unsupported.as_value()
        m.d.comb += [causes.uop.eq(seq.unsupported), causes.load.eq(load.unsupported),
                     causes.launch.eq(launched), causes.write.eq(write.unsupported)]
        held = Signal()
        with m.If(causes.as_value() != 0):
            m.d.sync += held.eq(1)
        m.d.comb += [self.unsupported.eq(held | causes.uop), self.done.eq(~seq.busy), self.error.eq(seq.error)]
        return m

    def _tile_launch(self, m, i: int):
        """The launch unit of row tile i (D-T100)."""
        m.submodules[f"launch_unit{i}"] = x = self._launch(i)
        return x

    def _column_loads(self, m, seq, arr):
        """The column-serial port (rtl/column_load.py): its requests on `cl`, their answers at the
        head of the stationary answer, its writes into the array."""
        m.submodules.column_load = col = ColumnLoad(self.cfg)
        connect(m, seq=seq.issue, column_load=col.issue)
        connect(m, column_load=col.cw, array=arr.cw)
        connect(m, flipped(self.cl.req), col.req)
        m.d.comb += col.resp.eq(self.st.resp.data.as_value()[:len(col.resp.as_value())])
