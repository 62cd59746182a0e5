"""The micro-op decoder: a 64-byte descriptor in; its error code and the micro-op the sequencer runs out.

Combinational.  Fields are read through the `amaranth.lib.data` layouts of rtl/isa.py (the StructDefs
model/isa encodes with).  The ISA rules are model/isa/rules.py's, evaluated from that one
definition (D-T101, `_Values` is its Amaranth backend): the rows of its table, the structural rules
it makes from those definitions (reserved bytes and bits, enum and dtype membership) and those of
each pattern walk, walked in model/isa/check.py's order; the array-size rules are
model.engine.Engine.fits.  Every rule
that fires sets its code's bit and the smallest code wins (SPEC D-23); an array-size code counts
only when no ISA rule fired, as in the model.  Dtype sets are 256-entry tables computed by
model.dtypes and model.isa.check, so model and RTL share one definition of each.  The micro-op
record (rtl/isa.uop_layout) holds model.isa.microop's derivations (pack, passes, kind, order, ...).

Two rules need the loaded weights (D-T31): `wt_mix` and `wt_pump` say that some PE of the record's
block holds weights of the other fp32 class than its dtype / of another pack (rtl/weight_state.py);
the decoder refuses a matmul with DTYPE_MIX (an ISA rule, model.isa.check with the stationary
dtype) or BAD_MX (an engine rule, model.engine.Engine._runtime_rules) when they apply."""
from __future__ import annotations

from amaranth.hdl import Cat, Const, Module, Mux, Signal, Value, signed
from amaranth.lib import data, wiring
from amaranth.lib.wiring import In, Out

from tensore.model import dtypes as dt
from tensore.model.addrmap import split
from tensore.model.dtypes import Dtype
from tensore.model.isa import microop
from tensore.model.isa.enums import ErrorCode, FP32Mode, Opcode, ScalarMode, SeedMode
from tensore.model.isa.layouts import layout_of, opcodes_of
from tensore.model.isa.layouts import MARKER_INDIRECT16B, MARKER_MXTENSOR_V2
from tensore.model.isa.microop import (BARRIER_OPS, KIND_OF, MX_OPS, cols_in, counter_in, group_in, lcf_in, mx_in,
                                       order_in, pack_in, passes_in, region_in, tagw_in, vectors_in, xpose_in)
from tensore.model.isa.rules import (OPCODE, Ops, array_fits, c256, dtype_codes, esize_in, matmul_seeds,
                                     matmul_transposes, mx_source, mx_steps_ok, select, walk_of, walk_pattern)
from tensore.model.isa.struct import Bits, Sub, Union
from tensore.rtl.config import Config
from tensore.rtl.isa import MmKind, hw_member, struct_layout, uop_layout
from tensore.rtl.wires import any_of

E = ErrorCode
NCODES = max(ErrorCode) + 1


def dtype_table(pred) -> Const:
    """A 256-bit constant: bit d is pred(d) for byte value d."""
    return Const(sum(1 << d for d in range(256) if pred(d)), 256)


def _in(values, x):
    out = Const(0, 1)
    for v in values:
        out = out | (x == int(v))
    return out



def _lowest(bits: Signal):
    """Index of the lowest set bit (0 when none)."""
    out = Const(0, 8)
    for i in reversed(range(len(bits))):
        out = Mux(bits[i], i, out)
    return out


class _Rules:
    def __init__(self):
        self.bits = [Const(0, 1) for _ in range(NCODES)]

    def bad(self, code, cond):
        self.bits[int(code)] = self.bits[int(code)] | cond


class _Values(Ops):
    """model/isa/rules.py's backend in hardware: the fields of one opcode's layout as Amaranth values."""

    true, false = Const(1, 1), Const(0, 1)
    stationary_dtype = None      # the weights' dtype is the weight state's (wt_mix, D-T31), not a field

    def __init__(self, o):
        self.o, self.gen, self.maverick, self.op = o, o.gen, o.maverick, o.op
        self.array_cols = o.dec.cols

    def in_(self, x, values):
        """Against many byte values: a bit of a 256-bit constant (dtype_table), the same answer."""
        codes = {int(c) for c in values}
        if len(codes) > 8 and len(Value.cast(x)) == 8:
            return dtype_table(lambda d: d in codes).bit_select(x, 1)
        return super().in_(x, codes)

    def dtype_in(self, x, which):
        """An element size's dtype set (rules.esize_in) as a bit of a 256-bit constant whatever its
        size: the patterns' windows multiply by the size, and one structure keeps them one circuit."""
        if which in ("bytes2", "bytes4"):
            codes = set(dtype_codes(self.gen, which))
            return dtype_table(lambda d: d in codes).bit_select(x, 1)
        return super().dtype_in(x, which)

    def pick(self, cond, a, b):
        return Mux(cond, a, b)

    def not_(self, x):
        return ~Value.cast(x).bool()

    def __getitem__(self, path):
        value = self.o.f
        for name in path.split("."):
            value = getattr(value, name)
        return value

    def elems(self, path) -> list:
        """The elements of the array field at `path`."""
        view = self[path]
        return [view[i] for i in range(view.shape().length)]

    def has(self, path) -> bool:
        """The layout has the field (a Bits part, a Sub's field) at `path`."""
        fields, kind = self.o.sd.fields, None
        for name in path.split("."):
            if isinstance(kind, Bits):
                if name not in [p[0] for p in kind.parts]:
                    return False
                fields, kind = (), True          # a part is a leaf
                continue
            if kind is not None and not isinstance(kind, Sub):
                return False
            fields = kind.struct.fields if isinstance(kind, Sub) else fields
            kind = next((fd.kind for fd in fields if fd.name == name), None)
            if kind is None:
                return False
        return True

    @property
    def layout(self):
        return self.o.sd

    active_cols = property(cols_in)      # model/isa/microop.py's derivations, on these values (D-T101)
    is_mx = property(mx_in)
    xpose = property(xpose_in)
    pack = property(pack_in)

    def count(self, name):
        return self.o.counts[name]

    def kind_is(self, name, kind):
        if isinstance(self.o.kind_of(name), Union):
            return self.o.member(self[name])[kind]
        return Const(int(kind == "tensor3d"), 1)


class _OpcodeByte(_Values):
    """The Amaranth backend of rules.OPCODE: the descriptor's opcode byte on the build's generation."""

    def __init__(self, opcode, gen):
        self.opcode, self.gen = opcode, gen


class _Op:
    """The rules of one opcode over one layout: model/isa/check.py's _Checker, with `when`
    predicates standing for its control flow."""

    def __init__(self, dec, opcode, when):
        self.dec, self.m, self.gen, self.maverick = dec, dec._m, dec.gen, dec.maverick
        self.op = opcode
        self.sd = layout_of(opcode, self.gen)
        self.f = data.View(struct_layout(self.sd), dec.desc)
        self.names = {fd.name for fd in self.sd.fields}
        self.when = when
        self.r, self.fit = _Rules(), _Rules()
        self.counts, self.esizes = {}, {}       # per walked pattern: its count, its element bytes
        self.v = _Values(self)

    def has(self, name):
        return name in self.names

    def bad(self, code, cond):
        self.r.bad(code, self.when & cond)

    def rules(self, *families, cond=None, walk=None):
        """The rules of `families` in the table of model/isa/rules.py, or those of a pattern `walk`,
        each predicate ORed into its code's bit (under `when`, and `cond` when given)."""
        v = _Values(self)
        for rule in select(families, self.op, v) if walk is None else walk:
            fires = Value.cast(rule.fires(v))
            self.bad(rule.code, fires if cond is None else cond & fires)

    def table(self, pred, code):
        return dtype_table(pred).bit_select(code, 1)

    def sig(self, value, shape, name):
        s = Signal(shape, name=f"{self.op.name.lower()}_{name}")
        self.m.d.comb += s.eq(value)
        return s

    # -- patterns -------------------------------------------------------------------------------
    def member(self, view):
        """model.isa.layouts._select_pattern as predicates."""
        addr = view.as_value()[:32]
        mx = Const(int(self.maverick), 1) & ((addr & MARKER_MXTENSOR_V2) != 0)
        ind = ~mx & ((addr & MARKER_INDIRECT16B) != 0)
        return {"mxtensor_v2": mx, "indirect16b": ind, "tensor3d": ~mx & ~ind}

    def pattern(self, name):
        """_Checker.pattern: the rules of the walk rules.walk_of says, where it says; returns its count."""
        v = _Values(self)
        memory, esize, rows, when = walk_of(v, name)
        if not isinstance(esize, int):
            esize = self.sig(esize, 3, f"{name}_esize")
        self.esizes[name] = esize
        walk, n = walk_pattern(v, name, memory, esize, rows, Value.cast(when))
        self.rules(walk=walk)
        self.counts[name] = self.sig(n, 64, f"{name}_count")       # the table's v.count(name)
        return self.counts[name]

    def kind_of(self, name):
        return next(fd.kind for fd in self.sd.fields if fd.name == name)

    def flag(self, name, default=0):
        if self.has("flags") and name in [p[0] for p in self.kind_of("flags").parts]:
            return getattr(self.f.flags, name)
        return Const(default, 1)

    # -- rules -------------------------------------------------------------------------------------
    def array_op(self):
        self.rules("rows_cols", "compute_dtype", "fp32_mode", "perf", "out_dtype", "accumulate")   # the last two: Matmul
        self.rules("seed_mode", "array_op")

    def psum_write(self, *families):
        """check.py's psum_write: the destination pattern, the rules of `families`."""
        self.pattern("dst_mem_pattern")
        self.rules(*families)
        self.c256 = self.sig(c256(_Values(self)), 1, "c256")


class Decoder(wiring.Component):
    """Decoder for the build's generation on its rows x cols array (rtl/config.py)."""

    def __init__(self, cfg: Config):
        self.gen, self.maverick, self.rows, self.cols = cfg.generation, cfg.maverick, cfg.rows, cfg.cols
        super().__init__({"desc": In(512), "error": Out(8), "check_error": Out(8), "uop": Out(uop_layout()),
                          "wt_mix": In(1), "wt_pump": In(1)})

    def elaborate(self, platform):
        m = Module()
        self._m = m
        op = self.desc[:8]
        head, byte = _Rules(), _OpcodeByte(op, self.gen)
        for rule in OPCODE:                 # before any layout (rules.OPCODE)
            head.bad(rule.code, rule.fires(byte))
        checks, fits = [head], []
        u = self.uop
        m.d.comb += u.op.eq(op)
        for opcode in sorted(opcodes_of(self.gen)):
            o = _Op(self, opcode, op == int(opcode))
            o.rules("structure", "events")
            ev = o.f.events
            getattr(self, "_" + opcode.name.lower())(o)
            with m.If(o.when):
                m.d.comb += [u.wait_event.eq(ev.wait_event), u.set_event.eq(ev.set_event)]
                self._uop(o, u)
            checks.append(o.r)
            fits.append(o.fit)
        chk, fit = Signal(NCODES), Signal(NCODES)
        m.d.comb += [chk.eq(Cat(*[any_of([r.bits[i] for r in checks]) for i in range(NCODES)])),
                     fit.eq(Cat(*[any_of([r.bits[i] for r in fits]) for i in range(NCODES)]))]
        m.d.comb += [self.check_error.eq(_lowest(chk)),
                     self.error.eq(Mux(chk != 0, _lowest(chk), _lowest(fit)))]
        return m

    # -- per opcode (model/isa/check.py) -----------------------------------------------------------
    def _ldweights(self, o):
        o.array_op()
        o.pattern("src_mem_pattern")
        o.rules("ldweights")
        self._fits(o)

    def _matmul(self, o):
        v = _Values(o)
        o.array_op()
        n = o.pattern("src_mem_pattern")
        o.psum_write("seed_patterns", "transpose_destination", "matmul", "destination")
        o.n, o.xp, o.seed = n, Value.cast(matmul_transposes(v)), Value.cast(matmul_seeds(v))
        self._fits(o)
        self._weight_rules(o)

    def _matmul_sparse(self, o):
        f = o.f
        o.rules("rows_cols", "compute_dtype", "fp32_mode", "out_dtype", "accumulate", "matmul_sparse")
        o.pattern("src_mem_pattern")
        o.psum_write("destination")
        o.fm = f.src_mem_pattern.num_elem[3]
        self._fits(o)
        self._weight_rules(o)

    def _ldtags(self, o):
        o.rules("rows_cols", "ldtags")
        o.pattern("src_mem_pattern")
        self._fits(o)

    def _pe_manage_seed(self, o):
        o.rules("pe_manage_seed")
        o.pattern("identity_mem_pattern")
        o.pattern("src_seed_mem_pattern")

    def _mx_op(self, o):
        v = _Values(o)
        o.rules("rows_cols", "mx_dtype", "mx_op")
        o.rules(walk=mx_source(v))
        if o.op == Opcode.MATMUL_MX:
            when = o.when
            o.when = when & Value.cast(mx_steps_ok(v))
            o.rules("out_dtype", "accumulate")
            o.when = when
            o.psum_write("destination")
        self._fits(o)
        self._weight_rules(o)

    _ldweights_mx = _matmul_mx = _mx_op

    def _pe_reg_write(self, o):
        o.rules("pe_reg_write")
        o.pattern("src_mem_pattern")

    def _conv_lut_load(self, o):
        o.rules("conv_lut_load")
        o.pattern("src_mem_pattern")

    # -- array-size rules (model.engine.Engine.fits) ------------------------------------------------
    def _region(self, o):
        row0, rows, col0, cols = region_in(o.v, self.rows, self.cols)
        return o.sig(row0, 16, "row0"), rows, o.sig(col0, 16, "col0"), o.sig(cols, 16, "cols")

    def _fits(self, o):
        for rule in array_fits(o.v, self.rows, self.cols):
            o.fit.bad(rule.code, o.when & Value.cast(rule.fires(o.v)))
        row0, rows, col0, cols = self._region(o)
        o.in_range = o.sig((row0 + rows <= self.rows) & (col0 + cols <= self.cols), 1, "in_range")

    def _weight_rules(self, o):
        """D-T31 on the answers of rtl/weight_state.py for the record's block: DTYPE_MIX (model.isa.check
        given Engine._stationary_dtype) and BAD_MX (Engine._runtime_rules), for matmuls that neither
        transpose nor move seeds."""
        plain = ~o.v.xpose & (o.flag("seed_mode") == SeedMode.NONE)
        if o.op in (Opcode.MATMUL, Opcode.MATMUL_SPARSE):
            in_enum = o.table(lambda x: dt.is_in_enum(x, self.gen), o.f.in_dtype)
            o.bad(E.DTYPE_MIX, plain & in_enum & o.in_range & self.wt_mix)
        if o.op in (Opcode.MATMUL, Opcode.MATMUL_MX):
            o.fit.bad(E.BAD_MX, o.when & plain & self.wt_pump)

    # -- the micro-op (model.isa.microop) -------------------------------------------------------------
    def _uop(self, o, u):
        """The record the sequencer runs (UOP_FIELDS), for the opcodes it executes."""
        kind = KIND_OF[o.op]
        self._m.d.comb += [u.kind.eq(hw_member(kind)), u.barrier.eq(o.op in BARRIER_OPS),
                           u.counter.eq(counter_in(o.v, self.rows, self.cols)), u.vectors.eq(vectors_in(o.v))]
        if o.op == Opcode.PE_REG_WRITE:
            self._uop_regwrite(o, u)
        elif o.op == Opcode.PE_MANAGE_SEED:
            self._uop_seed(o, u)
        elif o.op == Opcode.CONV_LUT_LOAD:
            self._uop_lut(o, u)
        else:
            self._uop_array(o, u)
            if kind == microop.Kind.MATMUL:
                self._uop_matmul(o, u)

    def _src(self, u, pat, dims, nums=None, esize=None):
        """u.src_* from a TENSORnD `pat` (its first `dims` dims; the others 1 element)."""
        part, off = split(pat.start_addr, "sbuf")
        out = [u.src_part.eq(part), u.src_off.eq(off)]
        for i in range(3):
            n = (nums[i] if nums is not None else pat.num_elem[i]) if i < dims else 1
            out += [u.src_num[i].eq(n)] + ([u.src_step[i].eq(pat.step_elem[i])] if i < dims else [])
        return out + ([u.esize.eq(esize)] if esize is not None else [])

    def _uop_regwrite(self, o, u):
        f = o.f
        self._m.d.comb += [u.supported.eq(1), u.reg.eq(f.reg), u.value.eq(f.value),
                           *self._src(u, f.src_mem_pattern, 1, nums=[1], esize=o.esizes["src_mem_pattern"])]

    def _uop_seed(self, o, u):
        """PeManageSeed: an identity Ldweights of SEED_STATES rows, then a SEED_STATES-vector seed transpose."""
        f = o.f
        ident, src, dst = f.identity_mem_pattern, f.src_seed_mem_pattern, f.dst_seed_mem_pattern
        _, rows, _, cols = region_in(o.v, self.rows, self.cols)
        id_part, id_off = split(ident.start_addr, "sbuf")
        dst_part, dst_off = split(dst.start_addr, "psum")
        self._m.d.comb += [
            u.supported.eq(1), u.seed.eq(f.mode), u.xpose.eq(1), u.mmkind.eq(MmKind.XPOSE),
            u.rows.eq(rows), u.cols.eq(cols), u.pack.eq(1),
            u.passes.eq(1), u.dtype.eq(f.identity_dtype),
            u.id_part.eq(id_part), u.id_off.eq(id_off), u.id_step.eq(ident.step_elem[0]),
            u.id_esize.eq(o.esizes["identity_mem_pattern"]),
            *self._src(u, src, 2, esize=o.esizes["src_seed_mem_pattern"]),
            u.dst_part.eq(dst_part), u.dst_off.eq(dst_off), u.dst_num[2].eq(1)]
        for i in range(2):
            self._m.d.comb += [u.dst_step[i].eq(dst.step_elem[i]), u.dst_num[i].eq(dst.num_elem[i])]

    def _uop_lut(self, o, u):
        """ConvLutLoad: num_entries codes of one partition into the table."""
        f = o.f
        self._m.d.comb += [u.supported.eq(1), u.dtype.eq(f.in_dtype), u.cols.eq(f.num_entries), u.pack.eq(1),
                           *self._src(u, f.src_mem_pattern, 1, nums=[f.num_entries], esize=esize_in(o.v, f.in_dtype))]

    def _uop_array(self, o, u):
        """What loads and matmuls share: block, dtype, pack, passes, order, source (microop.microop)."""
        m, f, op = self._m, o.f, o.op
        row0, rows, col0, cols = self._region(o)
        v = o.v
        xpose = v.xpose
        seed = o.flag("seed_mode") != SeedMode.NONE
        lut = o.flag("scalar_mode") == ScalarMode.LUT
        tagw = tagw_in(v)
        tags = op == Opcode.LDTAGS
        mode = f.fp32_mode if o.has("fp32_mode") else Const(FP32Mode.NONE, 2)
        m.d.comb += [
            u.supported.eq(~seed | Const(int(self.maverick and op in (Opcode.MATMUL, Opcode.LDWEIGHTS)), 1)),
            u.lut.eq(lut), u.xpose.eq(xpose), u.barrier.eq(seed),      # any seed_mode op is a barrier
            u.seed.eq(o.flag("seed_mode")),                     # (loads: no other effect, D-T40 (2))
            u.nib.eq(xpose & o.table(lambda x: _four_bit(x, self.gen), f.in_dtype)),   # transposed nibbles
            u.row0.eq(row0), u.rows.eq(rows), u.col0.eq(col0), u.cols.eq(cols),
            u.dtype.eq(f.in_dtype), u.fp32_mode.eq(mode), u.pack.eq(v.pack),
            u.passes.eq(passes_in(v)), u.lcf.eq(lcf_in(v) | tags),
            u.esize.eq(o.esizes.get("src_mem_pattern", 1)),         # the walked source's (an MX one: _mx_uop)
            u.tags.eq(tags), u.tagw.eq(tagw),
        ]
        if tags:
            m.d.comb += u.force_tags.eq(f.force_tag_bits)
        if op not in MX_OPS:
            src = f.src_mem_pattern.tensor3d if isinstance(o.kind_of("src_mem_pattern"), Union) else f.src_mem_pattern
            m.d.comb += self._src(u, src, 3)
        if op in MX_OPS or self.maverick and isinstance(o.kind_of("src_mem_pattern"), Union):
            self._mx_uop(o, u, v.is_mx)

    def _uop_matmul(self, o, u):
        """A matmul's destination, PSUM group, vectors; transposes and MAVERICK seed micro-ops."""
        m, f = self._m, o.f
        sparse = o.op == Opcode.MATMUL_SPARSE
        if sparse:
            m.d.comb += [u.mmkind.eq(MmKind.SPARSE), u.fmaps.eq(o.fm), u.fstride.eq(f.src_mem_pattern.step_elem[3])]
        dst = f.dst_mem_pattern.tensor3d if isinstance(o.kind_of("dst_mem_pattern"), Union) else f.dst_mem_pattern
        accumulate, begin = group_in(o.v)
        dst_part, dst_off = split(dst.start_addr, "psum")
        m.d.comb += [
            u.out_bf16.eq(f.out_dtype == Dtype.BFLOAT16), u.accumulate.eq(accumulate),
            u.zero.eq(begin & Const(int(o.has("psum_zero_region")), 1)), u.c256.eq(o.c256),
            u.dst_part.eq(dst_part), u.dst_off.eq(dst_off),
        ]
        if o.has("psum_zero_region"):
            m.d.comb += u.zero_log2.eq(f.psum_zero_region)
        if o.op == Opcode.MATMUL and self.maverick:   # a seed micro-op: one vector, column c <->
            with m.If(o.seed):      # (partition c mod half, state 2 * dst bank + c / half), the c256 column split
                m.d.comb += [u.seed.eq(o.flag("seed_mode")), u.xpose.eq(1), u.mmkind.eq(MmKind.XPOSE),
                             u.c256.eq(1), u.accumulate.eq(0), u.out_bf16.eq(0), u.zero.eq(0)]
        if o.op == Opcode.MATMUL:       # a transpose: vector v = partition v, column c = element c (4-bit
            with m.If(o.xp):            # codes as nibbles); it moves one element per PE step whatever the pump
                m.d.comb += [u.xpose.eq(1), u.mmkind.eq(MmKind.XPOSE), u.col0.eq(0), u.cols.eq(o.n),
                             u.accumulate.eq(0), u.c256.eq(0)]
        for i in range(3):
            m.d.comb += [u.dst_step[i].eq(dst.step_elem[i]), u.dst_num[i].eq(dst.num_elem[i])]

    def _mx_uop(self, o, u, is_mx):
        """An MX load or matmul: its data pattern (MARIANA MXMEM_PATTERN1D: 1-D; MAVERICK MXTENSOR_V2:
        2-D, [1, step_elem_data_1] x num_elem; the SBUF ports map element indices to addresses,
        rtl/mx.py), its block scales, its order."""
        m, f = self._m, o.f
        if o.op in MX_OPS:
            p = f.src_mem_pattern
            daddr, sc_valid = p.data_addr, Const(1, 1)
            steps, nums = [p.step_elem, Const(0, signed(16))], [p.num_elem, Const(1, 16)]
        else:
            p = f.src_mem_pattern.mxtensor_v2
            daddr = p.data_addr & ~MARKER_MXTENSOR_V2
            steps, nums = [Const(1, signed(16)), p.step_elem_data_1], [p.num_elem[0], p.num_elem[1]]
            sc_valid = p.scale_dtype == Dtype.SFP8_E8         # no scales: every exponent 0 (microop.Pattern)
        nib = _in([d for d in Dtype if dt.is_valid_mx_dtype(d, self.gen) and dt.format_of(d, self.gen).width == 4],
                  f.in_dtype)
        d_part, d_off = split(daddr, "sbuf")
        s_part, s_off = split(p.scale_addr, "sbuf")
        with m.If(is_mx):
            m.d.comb += [u.mx.eq(1), u.nib.eq(nib), u.esize.eq(1), u.sc_valid.eq(sc_valid), u.mxmode.eq(order_in(o.v)),
                         u.src_part.eq(d_part), u.src_off.eq(d_off), u.src_num[2].eq(1),
                         u.sc_part.eq(s_part), u.sc_off.eq(s_off)]
            m.d.comb += [u.src_step[d].eq(steps[d]) for d in range(2)] + [u.src_num[d].eq(nums[d]) for d in range(2)]


def _four_bit(code, gen) -> bool:
    """A dtype of 4-bit codes (FP4_EXP2, INT4): patterns count nibbles."""
    return dt.is_in_enum(code, gen) and code != Dtype.INVALID and not dt.is_cptc(code) and \
        dt.format_of(code, gen).width == 4

