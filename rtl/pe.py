"""One processing element of the weight-stationary array (SPEC D-14, D-15; docs/timing.md).

Registers: shadow and active weights (pack codes, dtype, MX scale) with a pending flag, the sparse
tag, the moving-value register (passed right) and the partial-sum register (passed down).  Every PE
is the same module: its column index is an input, so the exported Verilog instantiates one PE
definition many times."""
from amaranth.hdl import Const, Module, Mux, Signal, signed
from amaranth.lib import data, wiring
from amaranth.lib.wiring import In, Out

from tensore.model.dtypes import Gen
from tensore.model.isa.enums import FP32Mode
from tensore.rtl.fp.pe_mac import PART_FULL, PART_HI, PART_LO, PeMac, dtypes_suffix

COL_BITS = 9
SPARSE_FMAPS = 4                # MatmulSparse sends up to 4 fmaps: the moving value has >= 4 code slots


def act_layout(pack: int, sparse32: bool = False) -> data.StructLayout:
    """What travels with a moving value along a row (`sparse32`: code slots 1-3 of 32 bits)."""
    return data.StructLayout({
        "valid": 1,                     # a value of a matmul for this row
        "swap": 1,                      # the matmul's first vector: pending shadow weights go active
        "first": 1,                     # this row starts the column chain (psum_in = +0)
        "col_lo": COL_BITS, "col_hi": COL_BITS,   # the matmul's column block [lo, hi)
        "dtype": 8,
        "fp32_mode": 2,
        "multi": 1, "scaled": 1,        # multi-term step (double row / MX); MX scales apply
        "sa": signed(10), "sa_nan": 1,  # the moving block's E8M0 exponent (value - 127)
        "fmaps": 3,                     # MatmulSparse: fmaps sent in the code slots (0: not sparse)
        "xpose": 1,                     # transpose (D-13): the one live PE puts code slot 0 on the psum chain
        "lanes": 2,                     # log2 of the step's products (double row 1, MX 2 / 3)
        "code": code_layout(max(pack, SPARSE_FMAPS), sparse32),
    })


def code_layout(pack: int, sparse32: bool = False) -> data.StructLayout:
    """`pack` code slots of `slot_width` bits (D-T34, D-T40 (3))."""
    return data.StructLayout({f"s{j}": slot_width(j, sparse32) for j in range(pack)})


def slot_width(j: int, sparse32: bool = False) -> int:
    """Slot 0 holds any code (up to 32 bits); slots 1-3 MatmulSparse fmaps: 16 bits (bf16 / fp16),
    32 in a `sparse32` build (FP32 data or FP32 LUT entries); slots 4-7 only <= 8-bit elements (FP8
    double row, MX)."""
    if j == 0 or (sparse32 and j < SPARSE_FMAPS):
        return 32
    return 16 if j < SPARSE_FMAPS else 8


def slot(codes, j):
    return getattr(codes, f"s{j}")


def weight_layout(pack: int) -> data.StructLayout:
    return data.StructLayout({"code": code_layout(pack), "dtype": 8, "scale": signed(10), "scale_nan": 1})


def build_suffix(dtypes, sparse32: bool) -> str:
    """The module-name suffix of a build's PE side: its dtypes (D-T62), `_s32` for 32-bit fmaps."""
    return dtypes_suffix(dtypes) + ("_s32" if sparse32 else "")


# (moving part, stationary part) of the four LOW_HIGH sub-steps (D-12, D-T24)
LOW_HIGH_PARTS = ((PART_HI, PART_HI), (PART_HI, PART_LO), (PART_LO, PART_HI), (PART_LO, PART_LO))


class PE(wiring.Component):
    repeated = True            # instantiated many times: a Verilator hierarchical block (rtl/export.py)

    def __init__(self, gen, pack: int = 1, *, dtypes=None, sparse32: bool = False):
        """`dtypes`: a specialised PE that multiplies only those operand dtypes (D-T62); `sparse32`:
        MatmulSparse fmaps of 32 bits (D-T40 (3))."""
        self.gen, self.pack, self.dtypes, self.sparse32 = gen, pack, dtypes, sparse32
        act = act_layout(pack, sparse32)
        super().__init__({
            "col_index": In(COL_BITS),
            "act_in": In(act), "act_out": Out(act),
            "psum_in": In(32), "psum_valid_in": In(1), "psum_out": Out(32), "psum_valid_out": Out(1),
            "advance": In(1), "phase": In(2),
            "wl_valid": In(1), "wl": In(weight_layout(pack)),
            "tag_valid": In(1), "tag_in": In(4),
            "w_code": Out(32),
        })

    @property
    def module_name(self) -> str:
        return f"tensore_pe_{Gen.parse(self.gen).name.lower()}_p{self.pack}{build_suffix(self.dtypes, self.sparse32)}"

    def elaborate(self, platform):
        m = Module()
        pack = self.pack
        m.submodules.mac = mac = PeMac(self.gen, pack, dtypes=self.dtypes)
        wl = weight_layout(pack)
        shadow = Signal(wl)
        active = Signal(wl)
        pending = Signal()
        tag = Signal(4)
        act = Signal(act_layout(pack, self.sparse32))
        psum, pvalid = Signal(32), Signal()
        acc = Signal(32)                                      # the 4-pass sub-step accumulator
        ai = self.act_in

        in_cols = (self.col_index >= ai.col_lo) & (self.col_index < ai.col_hi)
        live = ai.valid & in_cols
        swap_now = live & ai.swap & pending
        w = data.View(wl, Mux(swap_now, shadow.as_value(), active.as_value()))
        with m.If(swap_now):
            m.d.sync += [active.eq(shadow), pending.eq(0)]
        with m.If(self.wl_valid):
            m.d.sync += [shadow.eq(self.wl), pending.eq(1)]
        with m.If(self.tag_valid):
            m.d.sync += tag.eq(self.tag_in)

        sparse = ai.fmaps != 0
        sel = tag[:2]
        compute = live & (~sparse | (sel < ai.fmaps))
        chain = Mux(ai.first, Const(0, 32), self.psum_in)
        four = (ai.fp32_mode == FP32Mode.HIGH) | (ai.fp32_mode == FP32Mode.LOW_HIGH)
        low_high = ai.fp32_mode == FP32Mode.LOW_HIGH

        # operands
        m.d.comb += [mac.a_dtype.eq(ai.dtype), mac.w_dtype.eq(w.dtype)]
        fmap = Signal(32)                                     # MatmulSparse: the fmap the tag selects
        with m.Switch(sel):
            for j in range(SPARSE_FMAPS):
                with m.Case(j):
                    m.d.comb += fmap.eq(slot(ai.code, j))
        for j in range(pack):
            code = getattr(mac, f"a{j}")
            m.d.comb += [code.eq(Mux(sparse, fmap, ai.code.s0) if j == 0 else slot(ai.code, j)),
                         getattr(mac, f"w{j}").eq(slot(w.code, j))]
        if pack > 1:
            m.d.comb += [mac.multi.eq(ai.multi), mac.scaled.eq(ai.scaled), mac.sa.eq(ai.sa),
                         mac.sa_nan.eq(ai.sa_nan), mac.sw.eq(w.scale), mac.sw_nan.eq(w.scale_nan)]
        if pack > 2:
            m.d.comb += mac.lanes.eq(ai.lanes)
        with m.Switch(ai.fp32_mode):
            with m.Case(FP32Mode.LOW):
                m.d.comb += [mac.a_part.eq(PART_HI), mac.w_part.eq(PART_HI)]
            with m.Case(FP32Mode.LOW_HIGH):
                with m.Switch(self.phase):
                    for p, (pa, pw) in enumerate(LOW_HIGH_PARTS):
                        with m.Case(p):
                            m.d.comb += [mac.a_part.eq(pa), mac.w_part.eq(pw)]
            with m.Default():
                m.d.comb += [mac.a_part.eq(PART_FULL), mac.w_part.eq(PART_FULL)]
        m.d.comb += mac.psum.eq(Mux(four & (self.phase != 0), acc, chain))

        # the MAC's result only where it is used: a simulator then evaluates the MAC only for
        # computing PEs (rtl/loopform.py computes a mux input only when it is selected)
        result = Signal(32)
        m.d.comb += result.eq(Mux(compute, mac.result, 0))
        # 4-pass sub-steps: LOW_HIGH fuses in every phase, HIGH once in phase 0
        with m.If(four & compute & (low_high | (self.phase == 0))):
            m.d.sync += acc.eq(result)
        step = Mux(four & ~low_high, acc, result)
        with m.If(self.advance):
            m.d.sync += act.eq(ai)
            with m.If(live):
                m.d.sync += [psum.eq(Mux(ai.xpose, ai.code.s0, Mux(compute, step, chain))), pvalid.eq(1)]
            with m.Else():
                m.d.sync += [psum.eq(self.psum_in), pvalid.eq(self.psum_valid_in)]
        m.d.comb += [self.act_out.eq(act), self.psum_out.eq(psum), self.psum_valid_out.eq(pvalid),
                     self.w_code.eq(active.code.s0)]
        return m
