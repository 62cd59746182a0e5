"""The engine top level: sequencer, weight-load and matmul units, the array, PSUM (docs/timing.md).

Ports (all synchronous to one clock):
  descriptor stream   desc_valid / desc_ready / desc_data (512 bits, byte k = bits 8k..8k+7)
  register bus        bus_addr / bus_wdata / bus_we / bus_rdata (docs/regs/arr_seq.md)
  stationary SBUF     st_req_valid, st_req_part, st_req_off, st_req_esize, st_req_step[3], st_req_num[3],
                      st_req_count, st_req_xpose, st_req_nib: a gather of `count` elements of one
                      partition along a TENSOR3D pattern (nib: 4-bit elements, steps in nibbles from
                      nibble address 2 * off), or (xpose) one element at st_req_off of each of `count`
                      partitions from st_req_part on (a transposing Ldweights); st_resp_data (element
                      e in bits 32e..32e+31) comes `sbuf_latency - 1` cycles after the request (the
                      request register is the first cycle of the model's latency L, D-T38)
  MX scales           sc_req_valid, sc_req_part, sc_req_off, sc_req_count -> sc_resp_data (byte m: the
                      block scale of column m), with the same latency
  moving SBUF         per array row r: mv_req_valid[r], mv_req_part[r], mv_req_off0..off3[r], mv_req_esize;
                      mv_resp_data[r] (element j in bits 32j..32j+31) with the same latency: elements 0-1
                      for FP8 double row, one per fmap (2-4) for MatmulSparse; with mv_req_mx[r]:
                      mv_req_count codes from element address mv_req_addr (bytes, or nibbles with
                      mv_req_nib), mv_req_stride apart, in bytes 0-7, and the scale byte at
                      (mv_req_spart, mv_req_soff) in byte 8
  PSUM host port      host_part / host_word -> host_data one cycle later; host_we writes host_wdata
                      there (a word the engine does not write in the same cycle)
  monitors            mon_valid[p], mon_offset[p], mon_bits[p]: the PSUM write of partition p this cycle;
                      MAVERICK also mon2_*: the second write port's
  status              done (nothing queued or in flight), error (err_status.err), unsupported
The micro-ops this RTL runs (D-T40): Ldweights (also transposing, TAG_WEIGHT, LUT, MX), LdTags,
ConvLutLoad, Matmul (plain, FP8 double row, fp32 LOW/HIGH/LOW_HIGH, MX, MAVERICK tiles and c256, LUT,
transposing), MatmulSparse, PeRegWrite, PeManageSeed and MAVERICK's seed_mode matmuls.
A transpose sends element c of partition v down row c, where the PE of column c puts it on the psum
chain (D-13): it reaches PSUM partition c as the write of vector v, so it needs elements <= rows. A
valid micro-op outside that set, a transpose of more elements than rows, two columns of one half (the
whole array on CAYMAN / MARIANA) writing one partition in one cycle, or both halves' writes hitting one
PSUM word in one cycle, raises `unsupported`. MAVERICK partitions have two write ports: a c256 matmul's
halves meet in a partition whenever it has more vectors than half the columns."""
from amaranth.hdl import Array as HArray
from amaranth.hdl import Cat, Const, Module, Mux, Shape, Signal, signed
from amaranth.lib import data, wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out

from tensore.model.addrmap import PARTITIONS, PSUM_BANK_BYTES
from tensore.model.dtypes import Dtype, Gen
from tensore.model.isa.layouts import LUT_ENTRIES, NUM_EVENTS
from tensore.rtl.array import Array, ArrayBlackBox
from tensore.rtl.decoder import Kind, _or, uop_layout
from tensore.rtl.pe import code_layout
from tensore.rtl.psum import WORDS, PsumPartition, PsumPartitionBlackBox
from tensore.rtl.psum_xbar import FIELDS as XBAR_FIELDS, PsumWriteXbar, PsumWriteXbarBlackBox
from tensore.rtl.rowport import MV_ELEMS, REC_LAYOUT, WREC_LAYOUT, RowPort, RowPortBlackBox, pattern_step
from tensore.rtl.seq import T, Sequencer

def _wire(m, value, name, shape=None):
    """`value` through a named comb signal: an expression used in many statements is then built once
    (Amaranth's lowering copies a shared expression into every statement that reads it)."""
    sig = Signal(shape if shape is not None else value.shape(), name=name)
    m.d.comb += sig.eq(value)
    return sig


class _Iter:
    """A TENSOR3D element iterator in registers: the element's offset is base + o0 + o1 + o2."""

    def __init__(self, m, name):
        self.m = m
        self.i = [Signal(16, name=f"{name}_i{d}") for d in range(3)]
        self.o = [Signal(signed(34), name=f"{name}_o{d}") for d in range(3)]
        self.base = Signal(18, name=f"{name}_base")


class Engine(wiring.Component):
    def __init__(self, gen, rows: int = 128, cols: int | None = None, *, pack: int | None = None,
                 sbuf_latency: int = 2, psum_partitions: int = PARTITIONS, black_box: bool = False,
                 dtypes=None):
        """`dtypes`: a specialised engine whose PEs multiply only those dtypes (D-T62); a weight load
        or non-transposing matmul of another dtype raises `unsupported`."""
        self.gen = Gen.parse(gen)
        self.maverick = self.gen.layout == Gen.MAVERICK
        cols = cols or (256 if self.maverick else 128)
        if sbuf_latency < 2:
            raise ValueError("the RTL engine needs sbuf_latency >= 2 (one request register + the memory)")
        self.rows, self.cols, self.L = rows, cols, sbuf_latency
        self.pack = pack or (1 if self.maverick else 2)
        if self.pack not in (1, 2, 4, 8):
            raise ValueError("the engine RTL streams 1, 2 (FP8 double row), 4 or 8 (MX) elements per PE")
        self.parts = psum_partitions
        self.psum_ports = 2 if self.maverick else 1        # c256: both column halves write one partition
        self.black_box, self.dtypes = black_box, dtypes
        mon2 = {"mon2_valid": Out(psum_partitions), "mon2_offset": Out(data.ArrayLayout(14, psum_partitions)),
                "mon2_bits": Out(data.ArrayLayout(32, psum_partitions))} if self.psum_ports == 2 else {}
        super().__init__({
            "desc_valid": In(1), "desc_ready": Out(1), "desc_data": In(512),
            "bus_addr": In(12), "bus_wdata": In(32), "bus_we": In(1), "bus_rdata": Out(32),
            "event_set": In(NUM_EVENTS),
            "st_req_valid": Out(1), "st_req_part": Out(7), "st_req_off": Out(18), "st_req_esize": Out(3),
            "st_req_step": Out(data.ArrayLayout(signed(16), 3)), "st_req_num": Out(data.ArrayLayout(16, 3)),
            "st_req_count": Out(16), "st_req_xpose": Out(1), "st_req_nib": Out(1),
            "sc_req_valid": Out(1), "sc_req_part": Out(7), "sc_req_off": Out(18), "sc_req_count": Out(16),
            "sc_resp_data": In(data.ArrayLayout(8, cols)),
            "st_resp_data": In(data.ArrayLayout(32, max(cols * self.pack, LUT_ENTRIES))),
            "mv_req_valid": Out(rows), "mv_req_part": Out(data.ArrayLayout(7, rows)),
            **{f"mv_req_off{j}": Out(data.ArrayLayout(18, rows)) for j in range(MV_ELEMS)},
            "mv_req_esize": Out(data.ArrayLayout(3, rows)),
            "mv_req_mx": Out(rows), "mv_req_addr": Out(data.ArrayLayout(19, rows)),
            "mv_req_stride": Out(data.ArrayLayout(signed(20), rows)), "mv_req_count": Out(data.ArrayLayout(4, rows)),
            "mv_req_nib": Out(rows), "mv_req_spart": Out(data.ArrayLayout(7, rows)),
            "mv_req_soff": Out(data.ArrayLayout(18, rows)),
            "mv_resp_data": In(data.ArrayLayout(32 * MV_ELEMS, rows)),
            "host_part": In(range(psum_partitions)), "host_word": In(range(WORDS)), "host_data": Out(32),
            "host_we": In(1), "host_wdata": In(32),
            "mon_valid": Out(psum_partitions), "mon_offset": Out(data.ArrayLayout(14, psum_partitions)),
            "mon_bits": Out(data.ArrayLayout(32, psum_partitions)),
            "now": Out(T), "done": Out(1), "error": Out(1), "unsupported": Out(1),
        } | mon2)

    def elaborate(self, platform):
        m = Module()
        R, C, L, PK = self.rows, self.cols, self.L, self.pack
        Lm = L - 1
        m.submodules.seq = seq = Sequencer(self.gen, R, C, L)
        m.submodules.array = arr = ArrayBlackBox(self.gen, R, C, PK, dtypes=self.dtypes) if self.black_box \
            else Array(self.gen, R, C, PK, dtypes=self.dtypes)
        for name in ("desc_valid", "desc_data", "bus_addr", "bus_wdata", "bus_we", "event_set"):
            m.d.comb += getattr(seq, name).eq(getattr(self, name))
        m.d.comb += [self.desc_ready.eq(seq.desc_ready), self.bus_rdata.eq(seq.bus_rdata), self.now.eq(seq.now)]
        u, issue, now = seq.uop, seq.issue, seq.now
        unsupported = Signal()

        # -- weight loads: row k requested in t + k (+1 register), written at t + k + L -------------------
        ld_active, ld_k = Signal(), Signal(8)
        ld = Signal(uop_layout())
        ld_go = _wire(m, issue & ((u.kind == Kind.LOAD) | (u.kind == Kind.SEED)) & u.supported, "ld_go")
        rw_go = _wire(m, issue & (u.kind == Kind.REGWRITE) & ~seq.bypass, "rw_go")  # PeRegWrite: same port
        lut_go = _wire(m, issue & (u.kind == Kind.LUT), "lut_go")   # and ConvLutLoad: all entries in one gather
        # and a MAVERICK seed micro-op: its 2 x half INT32 seeds (LoadSeed) in one gather
        mseed_go = _wire(m, issue & (u.kind == Kind.MATMUL) & (u.seed != 0) & Const(int(self.maverick), 1),
                         "mseed_go")
        cur = _wire(m, Mux(ld_go | rw_go | lut_go | mseed_go, u.as_value(), ld.as_value()), "ld_cur", uop_layout())
        k = _wire(m, Mux(ld_active, ld_k, 0), "ld_row")
        ld_req = _wire(m, ld_go | ld_active, "ld_req")
        ident = _wire(m, cur.kind == Kind.SEED, "ld_ident")   # every row gathers the 16 identity codes, keeps code k
        ldx = _wire(m, cur.xpose & ~ident & ld_req, "ld_xpose")
        # a transposing load reads element k of every column's partition for row k: the element's offset
        lx_i, lx_o = [Signal(16, name=f"lx_i{d}") for d in range(3)], [Signal(18, name=f"lx_o{d}") for d in range(3)]
        x_i, x_o = [Mux(ld_go, 0, x) for x in lx_i], [Mux(ld_go, 0, x) for x in lx_o]
        nx_i, nx_o = pattern_step(x_i, x_o, [cur.src_num[d] for d in range(3)], [cur.src_step[d] for d in range(3)],
                                   cur.esize)
        with m.If(ld_req):
            m.d.sync += [lx_i[d].eq(nx_i[d]) for d in range(3)] + [lx_o[d].eq(nx_o[d]) for d in range(3)]
        with m.If(ld_go):
            m.d.sync += [ld_active.eq(u.rows > 1), ld_k.eq(1), ld.eq(u)]
        with m.Elif(ld_active):
            m.d.sync += ld_k.eq(ld_k + 1)
            with m.If(ld_k + 1 >= ld.rows):
                m.d.sync += ld_active.eq(0)
        st_valid = Signal()
        m.d.sync += [st_valid.eq(ld_req | rw_go | lut_go | mseed_go),
                     self.st_req_part.eq(Mux(ident, cur.id_part, cur.src_part + Mux(ldx, 0, k))),
                     self.st_req_off.eq(Mux(ident, cur.id_off, cur.src_off + Mux(ldx, x_o[0] + x_o[1] + x_o[2], 0))),
                     self.st_req_xpose.eq(ldx),
                     self.st_req_esize.eq(Mux(rw_go, 4, Mux(ident, cur.id_esize, cur.esize))),
                     self.st_req_count.eq(Mux(rw_go, 1, Mux(ident, 16, Mux(cur.tags, (cur.cols + 3) >> 2,
                                                                            cur.cols * cur.pack))))]
        # MX: the pattern that returns lane m's element j at position m * pack + j (D-T25), and the
        # row's block scales (one byte per column in the block's first partition)
        s, ncol, pk = cur.src_step[0], cur.cols, cur.pack
        t = Mux(ncol < 32, ncol, 32)
        mx_steps = [Mux(cur.mxmode == 0, s, Mux(cur.mxmode == 1, ncol * s, t * s)),
                    Mux(cur.mxmode == 1, s, Mux(cur.mxmode == 2, s, 0)), Mux(cur.mxmode == 2, t * pk * s, 0)]
        mx_nums = [Mux(cur.mxmode == 0, ncol * pk, pk), Mux(cur.mxmode == 1, ncol, Mux(cur.mxmode == 2, t, 1)),
                   Mux(cur.mxmode == 2, (ncol + t - 1) // t, 1)]
        for d in range(3):
            m.d.sync += [self.st_req_step[d].eq(Mux(ident, cur.id_step if d == 0 else 0,
                                                    Mux(cur.mx, mx_steps[d], cur.src_step[d]))),
                         self.st_req_num[d].eq(Mux(ident, 16 if d == 0 else 1,
                                                   Mux(cur.mx, mx_nums[d], cur.src_num[d])))]
        m.d.sync += [self.st_req_nib.eq(cur.mx & cur.nib),
                     self.sc_req_valid.eq(ld_req & cur.mx & cur.sc_valid),
                     self.sc_req_part.eq(cur.sc_part + (k & Mux(pk == 8, ~3, ~7))),
                     self.sc_req_off.eq(cur.sc_off), self.sc_req_count.eq(ncol)]
        m.d.comb += self.st_req_valid.eq(st_valid)
        # what the response is for, Lm cycles later
        wl_meta = data.StructLayout({"valid": 1, "reg": 1, "reg_index": 8, "row": 8, "col0": 9, "cols": 9,
                                     "lcf": 1, "pack": 4, "dtype": 8, "tags": 1, "tagw": 1, "force": 4,
                                     "lut": 1, "lut_load": 1, "ident": 1, "seed_data": 1, "mx": 1, "sc_valid": 1})
        pipe = [Signal(wl_meta, name=f"wl_meta{i}") for i in range(Lm + 1)]
        m.d.sync += [pipe[0].valid.eq(ld_req), pipe[0].reg.eq(rw_go), pipe[0].reg_index.eq(u.reg),
                     pipe[0].row.eq(cur.row0 + k), pipe[0].col0.eq(cur.col0), pipe[0].cols.eq(cur.cols),
                     pipe[0].lcf.eq(cur.lcf), pipe[0].pack.eq(cur.pack), pipe[0].dtype.eq(cur.dtype),
                     pipe[0].tags.eq(cur.tags), pipe[0].tagw.eq(cur.tagw), pipe[0].force.eq(cur.force_tags),
                     pipe[0].lut.eq(cur.lut), pipe[0].lut_load.eq(lut_go), pipe[0].ident.eq(ident),
                     pipe[0].seed_data.eq(mseed_go), pipe[0].mx.eq(cur.mx), pipe[0].sc_valid.eq(cur.sc_valid)]
        for i in range(1, Lm + 1):
            m.d.sync += pipe[i].eq(pipe[i - 1])
        meta = pipe[Lm]
        m.d.comb += [seq.reg_apply.eq(meta.reg), seq.reg_value.eq(self.st_resp_data[0]),
                     seq.reg_index.eq(meta.reg_index)]
        # a MAVERICK seed micro-op's seeds, held for its column writes (it is a barrier: one at a time)
        seed_lanes = [Signal(32, name=f"seed_lane{c}") for c in range(C)]
        with m.If(meta.seed_data):
            m.d.sync += [seed_lanes[c].eq(self.st_resp_data[c]) for c in range(C)]
        # the ConvLutLoad table (D-T15): entries 0..n-1 written when the gather returns, read by every
        # weight lane and every row; a memory (one read port each, not a 256-way mux each), with a
        # valid bit per entry so that a reset clears it
        m.submodules.lut = lut_mem = Memory(shape=32, depth=LUT_ENTRIES, init=[])
        lut_valid = Signal(LUT_ENTRIES)
        lut_dtype = Signal(8, init=Dtype.BFLOAT16)
        lut_fill = _wire(m, ((Const(1, LUT_ENTRIES + 1) << meta.cols) - 1)[:LUT_ENTRIES], "lut_fill")
        with m.If(meta.lut_load):
            m.d.sync += [lut_dtype.eq(meta.dtype), lut_valid.eq(lut_valid | lut_fill)]
        for i in range(LUT_ENTRIES):
            wp = lut_mem.write_port()
            m.d.comb += [wp.addr.eq(i), wp.data.eq(self.st_resp_data[i]), wp.en.eq(meta.lut_load & lut_fill[i])]

        def lut(index):
            rp = lut_mem.read_port(domain="comb")
            m.d.comb += rp.addr.eq(index)
            return Mux(lut_valid.bit_select(index, 1), rp.data, 0)
        # route element m (pattern order) to its physical column (D-14 load order)
        code_w = code_layout(PK).size + 11                    # the codes, then the MX scale (10 bits + NaN)
        lanes = []
        tag_lanes = []
        ident_code = HArray(self.st_resp_data[i] for i in range(16))[meta.row[:4]]
        for mcol in range(C):
            word = self.st_resp_data[mcol]
            plain = Mux(meta.tagw, word[:16], Mux(meta.lut, lut(word[:8]), word))
            codes = {"s0": _by_pack(meta.pack, PK, lambda p: self.st_resp_data[p * mcol],
                                    Mux(meta.ident, Mux(meta.row[:4] == mcol % 16, ident_code, 0), plain))}
            # LdTags: four 4-bit tags per u16 word, the LSB nibble the larger logical column; TAG_WEIGHT: bits 16-19
            nib = self.st_resp_data[mcol // 4].bit_select(4 * (3 - mcol % 4), 4)
            tag_lanes.append(_wire(m, Mux(meta.tags, nib | meta.force, word[16:20]), f"tag_lane{mcol}"))
            for j in range(1, PK):                  # slot j: element j of the lane (double row, MX)
                codes[f"s{j}"] = _by_pack(meta.pack, PK, lambda p: self.st_resp_data[p * mcol + j] if j < p else 0, 0)
            raw = self.sc_resp_data[mcol]
            exp = Signal(signed(10), name=f"wl_scale{mcol}")
            m.d.comb += exp.eq(raw - 127)
            scale = Mux(meta.mx & meta.sc_valid, Cat(exp, raw == 0xFF), 0)   # E8M0: value - 127, 0xFF NaN
            lanes.append(_wire(m, Cat(*[codes[f"s{j}"][:Shape.cast(code_layout(PK)[f's{j}'].shape).width]
                                        for j in range(PK)], scale), f"wl_lane{mcol}"))
        flat = Cat(*lanes)
        rev = Cat(*reversed(lanes))
        shift_r = Signal(range(C + 1))
        m.d.comb += shift_r.eq(C - meta.col0 - meta.cols)
        placed = Signal(C * code_w)
        m.d.comb += placed.eq(Mux(meta.lcf, _lane_shift(m, "wl_rev", rev, shift_r, code_w, C, right=True),
                                  _lane_shift(m, "wl_fwd", flat, meta.col0, code_w, C)))
        tags_placed = Signal(C * 4)
        m.d.comb += tags_placed.eq(Mux(meta.lcf, _lane_shift(m, "tag_rev", Cat(*reversed(tag_lanes)), shift_r, 4, C,
                                                               right=True),
                                       _lane_shift(m, "tag_fwd", Cat(*tag_lanes), meta.col0, 4, C)))
        mask = Signal(C)
        m.d.comb += mask.eq((((Const(1, C + 1) << meta.cols) - 1) << meta.col0)[:C])
        m.d.comb += [arr.wl_valid.eq(meta.valid & ~meta.tags), arr.wl_row.eq(meta.row), arr.wl_cols.eq(mask),
                     arr.tag_valid.eq(meta.valid & (meta.tags | meta.tagw)), arr.tag_row.eq(meta.row),
                     arr.tag_cols.eq(mask)]
        for c in range(C):
            lane = placed[c * code_w:(c + 1) * code_w]
            m.d.comb += [arr.wl_data[c].code.eq(lane[:code_w - 11]), arr.wl_data[c].scale.eq(lane[code_w - 11:-1]),
                         arr.wl_data[c].scale_nan.eq(lane[-1]),
                         arr.wl_data[c].dtype.eq(Mux(meta.lut, lut_dtype, meta.dtype)),
                         arr.tag_data[c].eq(tags_placed[4 * c:4 * (c + 1)])]

        # -- matmuls: vector v launched in t + P*v; row r requests P*r later --------------------------------
        mm_active, mm_v, mm = Signal(), Signal(32), Signal(uop_layout())
        src, dst = _Iter(m, "src"), _Iter(m, "dst")
        seed_pending, seed_at, seed_u = Signal(), Signal(T), Signal(uop_layout())
        with m.If(issue & (u.kind == Kind.SEED)):
            m.d.sync += [seed_pending.eq(1), seed_at.eq(seq.seed_mm_at), seed_u.eq(u)]
        seed_launch = _wire(m, seed_pending & (now == seed_at), "seed_launch")
        with m.If(seed_launch):
            m.d.sync += seed_pending.eq(0)
        mm_go = _wire(m, (issue & (u.kind == Kind.MATMUL) & u.supported) | seed_launch, "mm_go")
        mu = _wire(m, Mux(seed_launch, seed_u.as_value(), u.as_value()), "mm_start", uop_layout())  # what mm_go starts
        t_ref = Signal(T)                                   # the issue cycle of the current matmul rhythm
        P_cur = Signal(3, init=1)
        with m.If(mm_go):
            m.d.sync += [t_ref.eq(now), P_cur.eq(mu.passes)]
        tref = _wire(m, Mux(mm_go, now, t_ref), "tref")
        P = _wire(m, Mux(mm_go, mu.passes, P_cur), "passes")
        ph_req = (now[:2] - tref[:2])[:2]          # phases are mod 4: low bits only
        req_shift = _wire(m, (P == 1) | (ph_req == 0), "req_shift")   # the request chain moves at the end of this cycle
        launch = Signal()
        mmv = _wire(m, Mux(mm_go, mu.as_value(), mm.as_value()), "mm_cur", uop_layout())
        v = _wire(m, Mux(mm_go, 0, mm_v), "mm_vector")
        m.d.comb += launch.eq(mm_go | (mm_active & req_shift))
        with m.If(mm_go):
            m.d.sync += [mm.eq(mu), mm_active.eq(mu.vectors > 1), mm_v.eq(1)]
        with m.Elif(launch):
            m.d.sync += mm_v.eq(mm_v + 1)
            with m.If(mm_v + 1 >= mm.vectors):
                m.d.sync += mm_active.eq(0)
        # source iterator: pack elements per vector
        s_i = [_wire(m, Mux(mm_go, 0, x), f"src_i{d}") for d, x in enumerate(src.i)]
        s_o = [_wire(m, Mux(mm_go, 0, x), f"src_o{d}") for d, x in enumerate(src.o)]
        s_base = _wire(m, Mux(mm_go, mu.src_off, src.base), "src_base")
        off0 = _wire(m, (s_base + s_o[0] + s_o[1] + s_o[2])[:18], "src_off0")
        i1, o1 = pattern_step(s_i, s_o, [mmv.src_num[d] for d in range(3)], [mmv.src_step[d] for d in range(3)],
                               mmv.esize)
        off1 = (s_base + o1[0] + o1[1] + o1[2])[:18]
        i2, o2 = pattern_step(i1, o1, [mmv.src_num[d] for d in range(3)], [mmv.src_step[d] for d in range(3)],
                               mmv.esize)
        two = mmv.pack == 2
        with m.If(launch):
            m.d.sync += [src.base.eq(s_base)] + [src.i[d].eq(Mux(two, i2[d], i1[d])) for d in range(3)] + \
                [src.o[d].eq(Mux(two, o2[d], o1[d])) for d in range(3)]
        # destination iterator: one element per vector
        dsize = _wire(m, Mux(mmv.out_bf16, 2, 4), "dst_esize")
        d_i = [_wire(m, Mux(mm_go, 0, x), f"dst_i{d}") for d, x in enumerate(dst.i)]
        d_o = [_wire(m, Mux(mm_go, 0, x), f"dst_o{d}") for d, x in enumerate(dst.o)]
        d_base = _wire(m, Mux(mm_go, mu.dst_off, dst.base), "dst_base")
        dst_off = _wire(m, (d_base + d_o[0] + d_o[1] + d_o[2])[:14], "dst_off")
        dn_i, dn_o = pattern_step(d_i, d_o, [mmv.dst_num[d] for d in range(3)], [mmv.dst_step[d] for d in range(3)],
                                   dsize)
        with m.If(launch):
            m.d.sync += [dst.base.eq(d_base)] + [dst.i[d].eq(dn_i[d]) for d in range(3)] + \
                [dst.o[d].eq(dn_o[d]) for d in range(3)]
        # MX: vector v's pack elements start at element e0(v), `stride` apart (D-T25 order); e0 advances
        # by pack (normal), 1 (interleave) or 1 within a tile of t = min(32, vectors) vectors (tiled)
        mx_e0, mx_vt = Signal(24), Signal(6)
        e0, vt = _wire(m, Mux(mm_go, 0, mx_e0), "mx_e0_cur"), _wire(m, Mux(mm_go, 0, mx_vt), "mx_vt_cur")
        t_mx = _wire(m, Mux(mmv.vectors < 32, mmv.vectors, 32), "mx_tile")
        wrap = _wire(m, (mmv.mxmode == 2) & (vt + 1 == t_mx), "mx_wrap")
        with m.If(launch):
            m.d.sync += [mx_e0.eq(e0 + Mux(mmv.mxmode == 0, mmv.pack, Mux(wrap, t_mx * mmv.pack - t_mx + 1, 1))),
                         mx_vt.eq(Mux(wrap, 0, vt + 1))]
        units = Mux(mmv.nib, Cat(Const(0, 1), mmv.src_off), mmv.src_off)      # byte or nibble addresses
        mx_addr = (units + e0 * mmv.src_step[0])[:19]
        mx_stride = Mux(mmv.mxmode == 0, 1, Mux(mmv.mxmode == 1, mmv.vectors[:16], t_mx)) * mmv.src_step[0]

        launch_rec = Signal(REC_LAYOUT)
        xp = mmv.xpose
        m.d.comb += [
            launch_rec.valid.eq(launch), launch_rec.swap.eq((v == 0) & ~xp), launch_rec.row0.eq(Mux(xp, 0, mmv.row0)),
            launch_rec.rows.eq(Mux(xp, mmv.cols, mmv.rows)), launch_rec.col0.eq(mmv.col0), launch_rec.cols.eq(mmv.cols),
            launch_rec.dtype.eq(mmv.dtype), launch_rec.fp32_mode.eq(mmv.fp32_mode), launch_rec.multi.eq(mmv.pack > 1),
            launch_rec.mx.eq(mmv.mx), launch_rec.pack.eq(mmv.pack), launch_rec.maddr.eq(mx_addr),
            launch_rec.mstride.eq(mx_stride), launch_rec.nib.eq(mmv.nib), launch_rec.scv.eq(mmv.sc_valid),
            launch_rec.spart.eq(mmv.sc_part), launch_rec.soff.eq(mmv.sc_off + v),
            launch_rec.part.eq(mmv.src_part + Mux(xp, v, 0)), launch_rec.off0.eq(off0), launch_rec.off1.eq(off1),
            launch_rec.esize.eq(mmv.esize), launch_rec.dst_part.eq(mmv.dst_part), launch_rec.dst_off.eq(dst_off),
            launch_rec.dst_slot1.eq(Mux(mmv.seed != 0, d_base + dn_o[0] + dn_o[1] + dn_o[2],     # element 1
                                        dst_off + mmv.dst_step[2] * dsize)),
            launch_rec.out_bf16.eq(mmv.out_bf16),
            launch_rec.accumulate.eq(mmv.accumulate), launch_rec.zero.eq(mmv.zero & (v == 0)),
            launch_rec.zero_log2.eq(mmv.zero_log2), launch_rec.c256.eq(mmv.c256), launch_rec.fresh.eq(1),
            launch_rec.fmaps.eq(mmv.fmaps), launch_rec.fstride.eq(mmv.fstride * mmv.esize), launch_rec.lut.eq(mmv.lut),
            launch_rec.xpose.eq(xp), launch_rec.seed.eq(mmv.seed), launch_rec.vidx.eq(v),
        ]
        # request chain, moving requests, the array side and the write records, one RowPort per row
        ports = [(RowPortBlackBox if self.black_box else RowPort)(self.gen, PK, L) for _ in range(R)]
        for r, rp in enumerate(ports):
            m.submodules[f"rowport{r}"] = rp
            m.d.comb += [rp.index.eq(r), rp.req_shift.eq(req_shift), rp.advance.eq(arr.advance),
                         rp.mv_resp.eq(self.mv_resp_data[r])]
            if r:
                above = ports[r - 1]
                m.d.comb += [rp.req_in.eq(above.req_out), rp.xit_in.eq(above.xit_out), rp.down_in.eq(above.down_out)]
            else:           # row 0: the launch record, a transpose's element 0
                m.d.comb += [rp.req_in.eq(launch_rec), rp.xit_in.base.eq(s_base), rp.xit_in.esize.eq(mmv.esize)]
                m.d.comb += [rp.xit_in.num[d].eq(mmv.src_num[d]) for d in range(3)]
                m.d.comb += [rp.xit_in.step[d].eq(mmv.src_step[d]) for d in range(3)]
            for name in ("valid", "part", *(f"off{j}" for j in range(MV_ELEMS)), "esize", "mx", "addr", "stride",
                         "count", "nib", "spart", "soff"):
                m.d.comb += getattr(self, f"mv_req_{name}")[r].eq(getattr(rp, f"mv_req_{name}"))
            a = arr.row_in[r]
            m.d.comb += [a.eq(rp.row_in),
                         a.code.s0.eq(Mux(rp.lut_code, lut(rp.row_in.code.s0[:8]), rp.row_in.code.s0)),
                         a.dtype.eq(Mux(rp.lut_dtype_sel, lut_dtype, rp.row_in.dtype))]
        # array rhythm: t_data = t_ref + L
        ph = _wire(m, (now[:2] - tref[:2] - L)[:2], "phase")
        m.d.comb += [arr.advance.eq((P == 1) | (ph == P - 1)), arr.phase.eq(Mux(P == 1, 0, ph))]

        # -- the write side: a vector's record leaves the bottom row and runs along the columns ----------
        along = [ports[R - 1].down_out] + [Signal(WREC_LAYOUT, name=f"col{c}") for c in range(1, C)]
        with m.If(arr.advance):
            for c in range(1, C):
                m.d.sync += along[c].eq(along[c - 1])
        first_cycle = _wire(m, (P == 1) | (ph == 0), "first_cycle")
        half = C // 2 if self.maverick else C
        m.submodules.psum = psum_parts = _PsumBank(self.parts, self.psum_ports, self.black_box)
        m.submodules.xbar = xbar = (PsumWriteXbarBlackBox if self.black_box else PsumWriteXbar)(
            self.parts, C, self.psum_ports)
        strobe, firsts = [], []
        for c in range(C):
            rec = along[c]
            i = c - rec.col0
            upper = _wire(m, rec.c256 & (i >= half), f"upper{c}")
            s = _wire(m, rec.valid & (c >= rec.col0) & (c < rec.col0 + rec.cols) & first_cycle, f"strobe{c}")
            strobe.append(s)
            firsts.append(s & (c == rec.col0))
            # seeds: LOAD writes a state, SAVE writes one to PSUM; the state is vector v (PeManageSeed)
            # or 2 x dst bank + column half (MAVERICK), the LoadSeed value the transpose's or the held seed
            if self.maverick:
                state, loaded = Cat(upper, rec.dst_off[11:14]), seed_lanes[c]
            else:
                state, loaded = rec.vidx[:4], arr.out_psum[c]
            m.d.comb += [xbar.strobe[c].eq(s), xbar.part[c].eq(Mux(upper, rec.dst_part + i - half, rec.dst_part + i)),
                         xbar.offset[c].eq(Mux(upper, rec.dst_slot1, rec.dst_off)), xbar.value[c].eq(arr.out_psum[c]),
                         xbar.seed[c].eq(rec.seed), xbar.bf16[c].eq(rec.out_bf16),
                         xbar.accumulate[c].eq(rec.accumulate), xbar.raw[c].eq(rec.xpose),
                         xbar.state[c].eq(state), xbar.loaded[c].eq(loaded)]
        m.d.comb += xbar.sr.eq(seq.round_sr)
        with m.If(xbar.unsupported):
            m.d.comb += unsupported.eq(1)
        # zeroing: in the group's first write cycle (column col0's output + 1), its partitions
        z = Signal(data.StructLayout({"valid": 1, "lo": 8, "hi": 9, "bank": 3, "log2": 2}))
        zc = _or([f & along[c].zero for c, f in enumerate(firsts)])
        zrec = data.View(WREC_LAYOUT, _mux_first([(f, along[c].as_value()) for c, f in enumerate(firsts)],
                                                 WREC_LAYOUT.size))
        m.d.sync += [z.valid.eq(zc), z.lo.eq(zrec.dst_part),
                     z.hi.eq(zrec.dst_part + Mux(zrec.cols > half, half, zrec.cols)),
                     z.bank.eq(zrec.dst_off // PSUM_BANK_BYTES), z.log2.eq(zrec.zero_log2)]
        for p, pp in enumerate(psum_parts.parts):
            for k in range(self.psum_ports):
                w = "wr" if k == 0 else f"wr{k + 1}"
                m.d.comb += [getattr(pp, f"{w}_{f}").eq(getattr(xbar, f"wr{k}_{f}")[p]) for f in XBAR_FIELDS
                             if f != "value"]
                m.d.comb += getattr(pp, f"{w}_value").eq(Mux(getattr(xbar, f"wr{k}_save")[p], pp.state_data,
                                                             getattr(xbar, f"wr{k}_value")[p]))   # SaveSeed
            m.d.comb += [pp.state_index.eq(xbar.state_index[p]),
                         pp.state_wr.eq(xbar.state_wr[p]), pp.state_wr_value.eq(xbar.state_wr_value[p])]
            m.d.comb += [pp.zero_valid.eq(z.valid & (p >= z.lo) & (p < z.hi)), pp.zero_bank.eq(z.bank),
                         pp.zero_log2.eq(z.log2), pp.host_addr.eq(self.host_word),
                         pp.host_we.eq(self.host_we & (self.host_part == p)), pp.host_wdata.eq(self.host_wdata),
                         self.mon_valid[p].eq(pp.mon_valid), self.mon_offset[p].eq(pp.mon_offset),
                         self.mon_bits[p].eq(pp.mon_bits)]
            if self.psum_ports == 2:
                m.d.comb += [self.mon2_valid[p].eq(pp.mon2_valid), self.mon2_offset[p].eq(pp.mon2_offset),
                             self.mon2_bits[p].eq(pp.mon2_bits)]
                with m.If(pp.conflict):
                    m.d.comb += unsupported.eq(1)
        hp = Signal(range(self.parts))
        m.d.sync += hp.eq(self.host_part)
        m.d.comb += self.host_data.eq(HArray(pp.host_data for pp in psum_parts.parts)[hp])

        with m.If((ld_go & (u.pack > PK)) | (mm_go & (mu.pack > PK))):     # more elements per PE than built for
            m.d.comb += unsupported.eq(1)
        if self.dtypes is not None:                                        # a dtype the PEs do not carry
            def missing(d):
                return ~_or([d == int(x) for x in self.dtypes])
            with m.If((ld_go & (u.kind == Kind.LOAD) & missing(u.dtype)) | (mm_go & ~mu.xpose & missing(mu.dtype))):
                m.d.comb += unsupported.eq(1)
        mav_seed = (mu.seed != 0) & Const(int(self.maverick), 1)
        with m.If(mm_go & mu.xpose & ~mav_seed & (mu.cols > R)):   # row c carries element c of each partition
            m.d.comb += unsupported.eq(1)
        sticky = Signal()
        with m.If(unsupported):
            m.d.sync += sticky.eq(1)
        m.d.comb += [self.unsupported.eq(sticky | seq.unsupported), self.done.eq(~seq.busy),
                     self.error.eq(seq.error)]
        return m


class _PsumBank(wiring.Component):
    """The PSUM partitions (one RMW path each, rtl/psum.py), or instances of the exported one."""

    def __init__(self, parts: int, ports: int, black_box: bool):
        super().__init__({})
        self.parts = [(PsumPartitionBlackBox if black_box else PsumPartition)(p, ports) for p in range(parts)]

    def elaborate(self, platform):
        m = Module()
        for p, pp in enumerate(self.parts):
            m.submodules[f"p{p}"] = pp
        return m


def _lane_shift(m, name, value, amount, lane_w, lanes, *, right=False):
    """`value` (lanes x lane_w bits) shifted by `amount` whole lanes, as log2(lanes) stages of
    constant shifts: one variable shift by amount * lane_w bits would be a (lanes * lane_w)^2 netlist.
    Each stage is a signal: a stage reads the one before twice, and Amaranth copies an expression
    into every reader (so expressions would make the netlist lanes times larger, D-T42)."""
    width = lanes * lane_w
    x = _wire(m, value[:width], f"{name}_in")
    for b in range(len(amount)):
        k = (1 << b) * lane_w
        if k >= width:
            return Mux(amount[b:] != 0, 0, x)
        x = _wire(m, Mux(amount[b], x[k:] if right else Cat(Const(0, k), x[:width - k]), x), f"{name}_s{b}", width)
    return x


def _by_pack(pack, PK, at, default):
    """`at(p)` for the micro-op's elements per PE p in 2, 4, 8 (up to the engine's PK), else `default`."""
    out = default
    for p in (2, 4, 8):
        if p <= PK:
            out = Mux(pack == p, at(p), out)
    return out


def _mux_first(pairs, width):
    out = Const(0, width)
    for cond, value in reversed(pairs):
        out = Mux(cond, value, out)
    return out

