"""The engine RTL (rtl/top.py) in Amaranth's simulator in lockstep with the golden engine, cycle by
cycle (cosim/lockstep.py): PSUM writes of every partition, error status every cycle, counters and
status registers at the end."""
import pytest
from amaranth.hdl import Shape

from tensore.cosim import lockstep
from tensore.cosim import programs as P
from tensore.cosim.lockstep import Lockstep
from tensore.rtl.top import Engine

# The program library at a small size (CAYMAN 4 x 4, MARIANA 8 x 4, MAVERICK 8 x 4), each generation's
# in two groups on one elaborated engine each (cosim.lockstep.run_many) with the most elements per PE
# its programs need (MX: 8; MAVERICK's group 0: the programs of its own paths), in `make cosim`.
# `make test` runs the whole library of every generation on the exported Verilog in Verilator
# (tests/test_cosim_hdl.py, 8 x 8), and the Amaranth simulator on the corners' quick group and the
# mismatch report below.
SIZES = {"cayman": (4, 4), "mariana": (8, 4), "maverick": (8, 4)}
MAVERICK_OWN = ("tiles", "c256", "c256_sr", "seed_replay", "mx_int4_quad_row", "sparse_mixed", "transpose_pattern")


def _group(gen, part):
    rows, cols = SIZES[gen]
    progs = P.library(gen, rows=rows, cols=cols, n=4)
    if gen != "maverick":
        return progs[part::2]
    own = [p for p in progs if p.name in MAVERICK_OWN]
    return own if part == 0 else [p for p in progs if p.name not in MAVERICK_OWN]


GROUPS = [pytest.param(g, h, marks=[pytest.mark.slow, pytest.mark.cosim], id=f"{g}-{h}") for g in SIZES for h in (0, 1)]


@pytest.mark.parametrize("gen,part", GROUPS)
def test_library_lockstep(gen, part):
    progs = _group(gen, part)
    stats = {}
    results = lockstep.run_many(progs, psum_partitions=8, stats=stats)
    print(f"{gen} group {part}: {len(progs)} programs, {stats['cycles']} cycles, {stats['checks']} checks, "
          f"{stats['cycles'] / stats['seconds']:.1f} cycles/s (engine with {stats['pack']} elements per PE)")
    failed = [(p, bad) for p, bad in zip(progs, results) if bad is not None]
    if failed:                            # re-run the first alone, for its waveform
        prog = failed[0][0]
        bad = lockstep.check(prog, pack=stats["pack"], psum_partitions=8)
        pytest.fail(f"{[p.name for p, _ in failed]} mismatch; {prog.name}: {bad}")


@pytest.mark.slow
def test_lockstep_sbuf_latency_3():
    """The testbench's SBUF answers one cycle later (L = 3): model and RTL shift their schedule alike."""
    bad = lockstep.check(P.single("mariana", "bf16", rows=4, cols=4, n=4), pack=1, sbuf_latency=3)
    assert bad is None, str(bad)


def test_mismatch_report(tmp_path):
    """A corrupted golden write is reported with its cycle, partition, both values and a VCD."""
    def tamper(trace):
        e = next(e for e in trace.events if e.kind == "psum_write")
        e.data["bits"] ^= 1 << 3
    prog = P.single("mariana", "bf16", rows=4, cols=4, n=4)
    bad = lockstep.check(prog, pack=1, vcd_dir=str(tmp_path), tamper=tamper)
    assert bad is not None and "PSUM partition" in bad.where
    text = str(bad)
    assert "expected" in text and "got" in text and "waveform" in text
    assert (tmp_path / "single_bfloat16_mariana.vcd").stat().st_size > 1000


# The corners the RTL once refused as `unsupported` (D-T40): transposes of more elements than
# rows, packed and 4-bit transposes and loads, packed transposing loads, MAVERICK MXTensorV2 data of
# several rows (aligned to the element order or not), LUT-mode MatmulSparse, MatmulSparse of FP32
# values (an engine built with `sparse32`), a MAVERICK seed_mode Ldweights; each group on one engine
# (its size in the id).  `make test` runs the MARIANA quick group, the corners the library on Verilator
# (tests/test_cosim_hdl.py, 8 x 8) does not reach: transposes of more columns than rows; `make cosim`
# the others (FP32 MatmulSparse on a sparse32 engine: about 1 cycle/s in Amaranth's simulator).
MX_ROWS = [("fp8_e4m3", "quad_row", 8, (8, 4), 3), ("fp8_e5m2", "quad_row_interleave", 12, (4, 6), 2),
           ("int4", "quad_row_tiled", 64, (4, 32), 1), ("fp4_e2m1", "quad_row", 8, (8, 8), 5)]
CORNERS = {
    "mariana-4x8-quick": lambda: [P.transpose_wide("mariana", 4, 8), P.transpose_packed("mariana", 4, 8)],
    "maverick-8x8-quick": lambda: [P.seed_mode_load("maverick", 8, 4),
                                   P.mx_rows("maverick", *MX_ROWS[2][:2], 8, 4, n=64, n0=(4, 32), gap=1)],
    "mariana-8x16": lambda: [P.transpose_wide("mariana", 8, 16), P.transpose_packed("mariana", 8, 16),
                             P.transposed_load_fp4("mariana", 8, 16), P.seed_replay("mariana", 8, 16),
                             P.lut_sparse("mariana", 8, 16), P.transposed_load_packed("mariana", 8, 16)],
    "cayman-4x16": lambda: [P.transpose_wide("cayman", 4, 16), P.transpose_packed("cayman", 4, 16)],
    "maverick-4x16": lambda: [P.transpose_wide("maverick", 4, 8), P.transpose_packed("maverick", 4, 8)],
    "maverick-8x8": lambda: [P.mx_rows("maverick", d, perf, 8, 4, n=n, n0=n0, gap=g) for d, perf, n, n0, g in MX_ROWS]
    + [P.lut_sparse("maverick", 8, 4), P.mx_rows_unaligned("maverick", "quad", 8, 4)],
    "mariana-4x8-sparse32": lambda: [P.sparse_fp32("mariana", 4, 8, n=3, fmaps=4),
                                     P.lut_sparse_fp32("mariana", 4, 8, n=3)],
    "mariana-4x8-sparse32-modes": lambda: [P.sparse_fp32("mariana", 4, 8, n=4, fmaps=2, fp32_mode="low"),
                                           P.sparse_fp32("mariana", 4, 8, n=4, fp32_mode="high")],
    "maverick-4x8-sparse32": lambda: [P.sparse_fp32("maverick", 4, 4, n=4), P.lut_sparse_fp32("maverick", 4, 4, n=4)],
    "maverick-8x8-oct": lambda: [P.mx_rows("maverick", "fp8_e4m3", "oct_row_tiled", 8, 4, n=16, n0=(4, 16)),
                                 P.mx_rows("maverick", "fp4_e2m1", "oct_row_interleave", 8, 4, n=8, n0=(4, 8), gap=1),
                                 P.mx_rows_unaligned("maverick", "oct", 8, 4), P.transposed_load_packed("maverick", 8, 4)],
}


QUICK = ("mariana-4x8-quick",)


@pytest.mark.parametrize("group", [pytest.param(g, marks=[pytest.mark.slow] + ([] if g in QUICK else
                                                                            [pytest.mark.cosim]), id=g)
                                   for g in CORNERS])
def test_corners_lockstep(group):
    progs = CORNERS[group]()
    assert all(p.expect_fp32 or p.expect_bf16 for p in progs)
    results = lockstep.run_many(progs, psum_partitions=16)
    failed = [(p.name, str(bad)) for p, bad in zip(progs, results) if bad is not None]
    assert not failed, failed


def _slot_widths(layout) -> list:
    return [Shape.cast(f.shape).width for _, f in layout["code"].shape]


@pytest.mark.parametrize("sparse32", [False, True])
def test_sparse32_is_a_build_choice(sparse32):
    """The default engine's moving value keeps 16-bit code slots 1-3 (D-T34) and its module names;
    `sparse32` widens exactly those slots (D-T40 (3)) and names its blocks apart (the array's, the row
    ports' and the load unit's, which refuses a 32-bit MatmulSparse without it)."""
    eng = Engine("mariana", 4, 8, pack=8, sparse32=sparse32)
    row_in = eng._array().signature.members["row_in"].shape.elem_shape
    assert _slot_widths(row_in) == [32] + [32 if sparse32 else 16] * 3 + [8] * 4
    assert _slot_widths(eng._rows().signature.members["row_in"].shape.elem_shape) == _slot_widths(row_in)
    names = [b.module_name for b in eng.blocks()]
    assert ["s32" in n.split("_") for n in names] == [sparse32 and any(k in n for k in ("array", "rowport", "load_unit"))
                                                   for n in names]


@pytest.mark.slow
def test_sparse32_programs_unsupported_by_default():
    """Without `sparse32` the engine raises `unsupported` for a MatmulSparse of FP32 data and of
    FP32 LUT entries (a build that cannot run the program)."""
    progs = [P.sparse_fp32("mariana", 4, 4, n=2), P.lut_sparse_fp32("mariana", 4, 4, n=2)]
    results = lockstep.run_many(progs, psum_partitions=4, sparse32=False)
    assert all(bad is not None and bad.where.startswith("unsupported") for bad in results), [str(b) for b in results]


def test_cosim_fits_sparse32_to_the_program():
    """A program that runs a MatmulSparse of FP32 values (data, or LUT entries) needs the `sparse32`
    build (the golden run says so); cosim builds it, and refuses it switched off with one line."""
    from tensore.cosim import hdl
    wide = [Lockstep(P.sparse_fp32("mariana", 4, 4, n=2)), Lockstep(P.lut_sparse_fp32("mariana", 4, 4, n=2))]
    narrow = [Lockstep(P.sparse("mariana", 4, 4, n=2)), Lockstep(P.lut_sparse("mariana", 4, 4, n=2))]
    assert [lk.need_sparse32 for lk in wide + narrow] == [True, True, False, False]
    assert hdl.fit_sparse32(narrow) is False and hdl.fit_sparse32(narrow + wide[:1]) is True
    assert hdl.fit_sparse32(narrow, True) is True
    with pytest.raises(ValueError, match="MatmulSparse of 32-bit values; the engine is built without"):
        hdl.fit_sparse32(wide, False)
    assert hdl.Config.of(wide[0].program, sparse32=True).label.endswith("_s32")


@pytest.mark.slow
@pytest.mark.cosim
@pytest.mark.parametrize("group", list(CORNERS))
def test_corners_on_verilator(group):
    """Each corner group on the exported engine in Verilator (the compiled harness), built as
    `tensore cosim` fits it to the programs (pack, write ports, sparse32)."""
    from tensore.cosim import hdl
    progs = CORNERS[group]()
    results = hdl.run_many(progs, psum_partitions=16, opt="-O0")
    failed = [(p.name, str(r.mismatch)) for p, r in zip(progs, results) if r.mismatch is not None]
    assert not failed, failed


def test_an_engine_amaranth_cannot_convert_is_one_clear_error():
    """An engine with more top input bits than Amaranth's netlist indexes (65,536: a full-size
    MAVERICK at 8 elements per PE, whose stationary answer alone is 65,536 bits) is refused in one
    line naming the remedy before converting; the full-size engines at 4 elements per PE convert
    under both profiles, the column-serial answers riding the stationary answer (D-T102)."""
    big = Engine("maverick", 128, 256, pack=8)
    big._MustUse__silence = True
    with pytest.raises(ValueError, match=r"MAVERICK 128 x 256 .* 8 elements per PE .* input bits, more than the "
                                         r"65,536 .*--pack"):
        big.check_convertible()
    for gen, cols, pack in (("maverick", 256, 4), ("mariana", 128, 8)):
        for timing in ("public", "contract"):
            eng = Engine(gen, 128, cols, pack=pack, timing=timing)
            eng._MustUse__silence = True
            eng.check_convertible()
            assert eng.cl_rows == (0 if timing == "contract" else 128)
