"""model/isa/microop.py and the facts defined once beside it (D-T69, D-T70): the micro-op of every
descriptor, its RTL record and enums, the timing formulas on ints and on Amaranth values, the address
splits, the E8M0 decode."""
import random

import ml_dtypes
import numpy as np
import pytest
from amaranth.hdl import Module, Mux, Signal
from amaranth.lib import enum as hw_enum
from amaranth.sim import Simulator
from tensore.cosim.programs import library
from tensore.model import addrmap, timing
from tensore.model import dtypes as dt
from tensore.model.dtypes import Gen
from tensore.model.engine import Engine
from tensore.model.isa import check, decode, opcodes_of
from tensore.model.isa import microop as M
from tensore.model.isa.asm import assemble
from tensore.model.isa.enums import MXPerfMode
from tensore.rtl import isa as rtl_isa

LAYOUT_GENS = [Gen.CAYMAN, Gen.MARIANA, Gen.MAVERICK]


def test_rtl_enums_are_the_model_enums():
    for model_enum, hw in ((M.Kind, rtl_isa.Kind), (M.MmKind, rtl_isa.MmKind), (M.MxOrder, rtl_isa.MxOrder)):
        assert issubclass(hw, hw_enum.Enum) and not issubclass(hw, int)
        assert [(m.name, m.value) for m in hw] == [(m.name, int(m)) for m in model_enum]
        assert hw.as_shape().width == max(model_enum).bit_length()
        assert rtl_isa.hw_member(model_enum(1)) is hw(1)


def test_rtl_record_is_generated_from_the_field_widths():
    layout = rtl_isa.uop_layout()
    assert [name for name, _ in layout] == list(M.UOP_FIELDS)
    for name, spec in M.UOP_FIELDS.items():
        shape = layout[name].shape
        if isinstance(spec, type):
            assert shape is {M.Kind: rtl_isa.Kind, M.MmKind: rtl_isa.MmKind, M.MxOrder: rtl_isa.MxOrder}[spec]
        else:
            assert layout[name].width == spec.width * spec.count, name
    assert M.UOP_FIELDS["src_off"].width == addrmap.SBUF_OFFSET_BITS == 18
    assert M.UOP_FIELDS["dst_off"].width == addrmap.PSUM_OFFSET_BITS == 14
    assert M.UOP_FIELDS["counter"].width == (timing.PERF_COUNTERS - 1).bit_length()


def test_pumps_and_the_mx_block():
    """D-21 / D-T25: QUAD_ROW 4 and OCT_ROW 8 elements per step in three orders; a scale block of
    MX_BLOCK elements is 8 partitions x 4 for QUAD_ROW (the MXTensorV2 p_f_dim 0x23)."""
    from tensore.model.isa.check import MX_BLOCK_P_F_DIM
    assert {m.name: p for m, p in M.PUMP_PACK.items()} == {
        "NONE": 1, "QUAD_ROW": 4, "QUAD_ROW_INTERLEAVE": 4, "QUAD_ROW_TILED": 4,
        "OCT_ROW": 8, "OCT_ROW_INTERLEAVE": 8, "OCT_ROW_TILED": 8}
    assert MX_BLOCK_P_F_DIM == 0x23 and M.MX_BLOCK == 32 and M.MAX_PACK == 8
    eng = Engine("mariana", rows=8, cols=8)
    for mode in MXPerfMode:
        desc = decode(assemble(f"matmul_mx in_dtype=fp8_exp4 rows=8 cols=4 perf_mode={mode.name.lower()} "
                               "src=(data_addr=sbuf(0,0), scale_addr=sbuf(0,0x400), step_elem=1, num_elem=256)"
                               " dst=(start_addr=psum(0,0,0), step_elem=[1,0,0], num_elem=[32,1,1])", "mariana"),
                      "mariana")
        u = M.microop(desc, 8, 8)
        for vectors in (1, 5, 32, 64, 96):             # TILED: whole tiles of MX_TILE, or one short tile
            order = eng._element_order(u, vectors)
            assert sorted(order.ravel()) == list(range(vectors * u.pack)), (mode, vectors)


def _library_descriptors(gen):
    out = []
    for p in library(gen):
        code = assemble(p.text, gen)
        out += [(p, decode(code[i:i + 64], gen)) for i in range(0, len(code), 64)]
    return out


@pytest.mark.parametrize("gen", LAYOUT_GENS, ids=[g.name for g in LAYOUT_GENS])
def test_every_valid_library_descriptor_has_a_micro_op(gen):
    kinds = set()
    for p, d in _library_descriptors(gen):
        if check(d, array_cols=p.cols):
            continue
        u = M.microop(d, p.rows, p.cols)
        kinds.add(u.kind)
        assert u.kind == M.KIND_OF[d.op] and u.pack in (1, 2, 4, 8) and u.passes in (1, 4)
        assert u.barrier == (d.op in M.BARRIER_OPS or bool(M.seed_mode(d)))
        if u.kind in (M.Kind.LOAD, M.Kind.MATMUL):
            assert (u.row0, u.rows, u.col0, u.cols) == Engine(gen, rows=p.rows, cols=p.cols).region(d)
            assert u.src.count >= 1 and u.counter == timing.counter_index(u.rows, u.cols)
    assert {M.KIND_OF[o] for o in opcodes_of(gen)} - {M.Kind.SEED} <= kinds


@pytest.mark.parametrize("gen", LAYOUT_GENS, ids=[g.name for g in LAYOUT_GENS])
def test_derivations_take_any_bytes(gen):
    """The per-field derivations the checker reads never raise, whatever the descriptor holds."""
    rnd = random.Random(7)
    ops = sorted(opcodes_of(gen))
    for i in range(3000):
        b = bytearray(rnd.getrandbits(8) for _ in range(64))
        b[0] = int(ops[i % len(ops)])
        d = decode(bytes(b), gen)
        assert M.pack_of(d) in (1, 2, 4, 8) and M.passes_of(d) in (1, 4)
        M.transposes(d), M.is_mx(d), M.mx_order(d), M.mm_kind(d), M.is_barrier(d), M.region_of(d, 128, 256)


def _eval(expr_of, n_inputs, widths, cases):
    """Evaluate expr_of(*signals) in Amaranth's simulator for each case."""
    sigs = [Signal(w, name=f"x{i}") for i, w in enumerate(widths[:n_inputs])]
    out = Signal(64)
    m = Module()
    m.d.comb += out.eq(expr_of(*sigs))
    got = []

    async def tb(ctx):
        for case in cases:
            for s, v in zip(sigs, case):
                ctx.set(s, v)
            got.append(ctx.get(out))

    sim = Simulator(m)
    sim.add_testbench(tb)
    sim.run()
    return got


@pytest.mark.parametrize("name,args,widths", [
    ("write_cycle", 5, (32, 8, 3, 10, 32)),
    ("load_complete", 3, (32, 8, 4)),
    ("weights_swapped", 4, (32, 3, 8, 9)),
    ("mm_port_free", 3, (32, 32, 3)),
    ("entry_free", 3, (32, 3, 8)),
    ("in_rhythm", 3, (32, 32, 3)),
    ("seed_transpose_issue", 3, (32, 8, 4)),
    ("load_port_free", 2, (32, 8)),
    ("sparse_end", 3, (32, 32, 9)),
])
def test_timing_formulas_on_ints_and_amaranth_values(name, args, widths):
    """D-T70: one expression serves the model (ints) and the sequencer (Amaranth values)."""
    f = getattr(timing, name)
    pos = {"write_cycle": 2, "weights_swapped": 1, "mm_port_free": 2, "in_rhythm": 2, "entry_free": 1}.get(name)   # `passes`
    rnd = random.Random(name)
    cases = []
    for _ in range(200):
        case = [rnd.randrange(1 << min(w, 20)) for w in widths[:args]]
        if name == "in_rhythm":
            case[0] = case[1] + rnd.randrange(64)
        if pos is not None:
            case[pos] = rnd.choice((1, 4))
        cases.append(case)
    got = _eval(f, args, widths, cases)
    want = [int(f(*c)) & (2 ** 64 - 1) for c in cases]
    assert got == want


def test_column_port_next_on_ints_and_amaranth_values():
    """timing.column_port_next in the sequencer (Mux, the stored load's skew 0 / 1 / 4, rows above,
    within and below it) as in the model."""
    rnd = random.Random(5)
    cases = []
    for _ in range(300):
        port, row0, rows = rnd.randrange(1 << 20), rnd.randrange(256), rnd.randrange(1, 256)
        cases.append([port, port + rnd.randrange(1 << 10), rnd.choice((0, 1, 4)), row0, rows,
                      rnd.choice((rnd.randrange(256), min(255, row0 + rnd.randrange(1, 4))))])
    got = _eval(lambda *a: timing.column_port_next(*a, Mux), 6, (32, 32, 3, 8, 8, 8), cases)
    assert got == [timing.column_port_next(*c, lambda k, a, b: a if k else b) for c in cases]
    assert any(g not in (c[0], c[1]) for g, c in zip(got, cases))          # the skew term binds somewhere


def test_address_splits_on_ints_and_amaranth_values():
    rnd = random.Random(3)
    addrs = [addrmap.sbuf_addr(rnd.randrange(128), rnd.randrange(addrmap.SBUF_PARTITION_BYTES)) for _ in range(50)]
    addrs += [addrmap.psum_addr(rnd.randrange(128), rnd.randrange(8), rnd.randrange(0x800)) for _ in range(50)]
    for memory in ("sbuf", "psum"):
        parts = _eval(lambda a, memory=memory: addrmap.split(a, memory)[0], 1, (32,), [[a] for a in addrs])
        offs = _eval(lambda a, memory=memory: addrmap.split(a, memory)[1], 1, (32,), [[a] for a in addrs])
        assert list(zip(parts, offs)) == [addrmap.split(a, memory) for a in addrs]
    for a in addrs:
        loc = addrmap.locate(a)
        assert a == (addrmap.sbuf_addr(loc.partition, loc.offset) if loc.memory == "sbuf" else
                     addrmap.psum_addr(loc.partition, loc.bank, loc.offset % addrmap.PSUM_BANK_BYTES))


def test_e8m0_decode_equals_ml_dtypes():
    codes = np.arange(256, dtype=np.uint8)
    ref = np.log2(codes.view(ml_dtypes.float8_e8m0fnu).astype(np.float64))
    got = dt.e8m0_exponents(codes)
    assert np.array_equal(np.isnan(got), np.isnan(ref)) and np.array_equal(got[:255], ref[:255])
    assert (dt.E8M0_BIAS, dt.E8M0_NAN) == (127, 0xFF)


def test_perf_banks_are_the_register_maps():
    assert timing.PERF_BANKS == ("weight_load", "matmul", "pe_regwrite") and timing.PERF_COUNTERS == 49


def test_pattern_elements_and_their_prefix():
    """Pattern.elements lists a TENSORnD's element offsets dim 0 fastest (checked against nested
    loops); with a limit, the first ones only, without building the rest: a legal LdTags of
    1 x 18,433 x 25,601 elements (make regress, fuzz CAYMAN 45944) reads 2 of them."""
    from itertools import product

    from tensore.model.isa.microop import Pattern
    rng = np.random.default_rng(7)
    for _ in range(300):
        k = int(rng.integers(1, 4))
        steps, nums = tuple(int(x) for x in rng.integers(0, 9, k)), tuple(int(x) for x in rng.integers(0, 5, k))
        want = [sum(i * s for i, s in zip(reversed(idx), steps)) for idx in product(*(range(n) for n in reversed(nums)))]
        p = Pattern(0, steps, nums)
        assert p.elements().tolist() == want
        limit = int(rng.integers(0, 30))
        assert p.elements(limit).tolist() == want[:limit]
    assert Pattern(0, (1, 0, 0), (1, 18433, 25601)).elements(2).tolist() == [0, 0]
