"""Edges of the golden engine's host interface and runtime refusals (model/engine/core.py): the
host may set every event flag 0..63 (D-T20), and BAD_MX compares a matmul's pump with the weights
of its own block, never a transposing matmul's (D-T31)."""
import numpy as np
import pytest

from tensore.cosim.programs import _t3
from tensore.model.dtypes import Gen
from tensore.model.engine import Engine
from tensore.model.isa import ErrorCode
from tensore.model.isa.asm import assemble

G = Gen.MARIANA
LO = "flags=(load_order=first_col_first)"


def _load(dtype: str, rows: int = 8, grp: int = 0, wait: str = "") -> str:
    """A first-column-first Ldweights of 8 columns on rows grp * 2 .. + rows (fp32: LOW)."""
    fp32 = "fp32_mode=low " if dtype == "fp32" else ""
    return f"ldweights in_dtype={dtype} {fp32}rows={rows} cols=8 row_grp={grp} {LO} src={_t3('sbuf(0,0x0)', 8)}{wait}\n"


def _mm(dtype: str, rows: int = 8, grp: int = 0, *, n: int = 4, bank: int = 3, pump: int = 1, flags: str = "",
        n_dst: int | None = None, src_part: int = 0) -> str:
    """A matmul of n vectors on rows grp * 2 .. + rows (8 x 8 array) from SBUF partition src_part into
    PSUM bank `bank`: single pump or FP8 double row (pump 2), fp32 LOW."""
    fp32 = "fp32_mode=low " if dtype == "fp32" else ""
    extra = "perf_opt=double_row " if pump == 2 else ""
    return (f"matmul in_dtype={dtype} {fp32}{extra}out_dtype=fp32 rows={rows} cols=8 row_grp={grp} acc=single {flags}"
            f"src={_t3(f'sbuf({src_part},0x200)', pump * n)} dst={_t3(f'psum(0,{bank},0)', n if n_dst is None else n_dst)}\n")


@pytest.mark.parametrize("event", [0, 1, 63])
def test_host_sets_any_event(event):
    """schedule_event takes every event 0..63: a load waiting for it issues the cycle after the host's
    set (cycle 40)."""
    eng = Engine(G, rows=8, cols=8)
    eng.schedule_event(event, 40)
    text = _load("bf16", wait=f" wait={event}")
    trace = eng.run(assemble(text, G))
    assert trace.stalled is None and trace.ops[0].t_issue == 41


@pytest.mark.parametrize("event", [-1, 64])
def test_host_event_outside_0_63_is_refused(event):
    with pytest.raises(ValueError, match="events are 0..63"):
        Engine(G, rows=8, cols=8).schedule_event(event, 40)


def test_bad_mx_reads_the_matmuls_own_block():
    """Weights loaded FP8 double row (2 per PE) on all 8 rows, then bf16 (1 per PE) on rows 0..3:
    single-pump matmuls on rows 0..3 run, on rows 4..7 or all 8 rows are refused with BAD_MX, a
    double-row matmul on rows 4..7 runs, and a transposing matmul (which reads no weights) runs."""
    text = (f"ldweights in_dtype=fp8_e5m2 perf_opt=double_row rows=8 cols=8 {LO} src={_t3('sbuf(0,0x0)', 16)}\n"
            f"ldweights in_dtype=bf16 rows=4 cols=8 row_grp=0 {LO} src={_t3('sbuf(0,0x100)', 8)}\n"
            + _mm("bf16", 4, 0, bank=0)
            + _mm("fp8_e5m2", 4, 2, bank=1, src_part=4)
            + _mm("fp8_e5m2", 8, 0, bank=1)
            + _mm("fp8_e5m2", 4, 2, bank=2, pump=2, src_part=4)
            + f"matmul in_dtype=bf16 out_dtype=fp32 rows=8 cols=8 flags=(xpose_mode=enabled) acc=single "
              f"src={_t3('sbuf(0,0x200)', 4)} dst={_t3('psum(0,3,0)', 8)}\n")
    trace = Engine(G, rows=8, cols=8).run(assemble(text, G))
    assert [o.error for o in trace.ops] == [0, 0, 0, ErrorCode.BAD_MX, ErrorCode.BAD_MX, 0, 0]
    refused = [e.op for e in trace.events if e.kind == "refuse"]
    assert refused == [3, 4]
    assert [str(v) for v in trace.ops[3].violations] == [
        "BAD_MX (0x0e) perf_mode: weights were loaded 2 per PE, the matmul streams 1"]
    assert [str(v) for v in trace.ops[4].violations] == [
        "BAD_MX (0x0e) perf_mode: weights were loaded 1 and 2 per PE, the matmul streams 1"]


@pytest.mark.parametrize("cols", [12, 20])
def test_maverick_columns_fill_both_halves_with_whole_groups(cols):
    """A MAVERICK array's columns split into two halves of whole 4-column groups (D-T90): 12 or 20
    columns (halves of 6 or 10) are refused, 8 and 16 taken; CAYMAN takes 12 (one half)."""
    with pytest.raises(ValueError, match="columns a multiple of 8"):
        Engine(Gen.MAVERICK, rows=8, cols=cols)
    assert Engine(Gen.MAVERICK, rows=8, cols=cols - 4).cols == cols - 4
    assert Engine(Gen.CAYMAN, rows=8, cols=cols).cols == cols


@pytest.mark.parametrize("cycle", [-2, -100])
def test_a_host_set_before_the_run_is_seen_by_the_first_wait(cycle):
    """A host set at any cycle before the run (below -1) is a set before cycle 0: a load waiting for it
    issues at its earliest cycle, as with no wait."""
    eng = Engine(G, rows=8, cols=8)
    eng.schedule_event(5, cycle)
    trace = eng.run(assemble(_load("bf16", wait=" wait=5"), G))
    assert trace.stalled is None
    assert trace.ops[0].t_issue == Engine(G, rows=8, cols=8).run(assemble(_load("bf16"), G)).ops[0].t_issue


def test_a_stalled_run_ends_its_trace_at_the_waiting_descriptor():
    """A wait nothing satisfies stops the run there: the trace holds the descriptors up to and with the
    waiting one (not issued), none after it."""
    load = _load("bf16")
    eng = Engine(G, rows=8, cols=8)
    trace = eng.run(assemble(load + _load("bf16", wait=" wait=9") + load + load, G))
    assert "descriptor 1" in trace.stalled
    assert [o.index for o in trace.ops] == [0, 1]
    assert trace.ops[0].t_issue is not None and trace.ops[1].t_issue is None


def test_a_refusal_names_its_first_violations_field():
    """A descriptor breaking three rules is refused with the lowest code (SPEC D-23); its refuse event
    names that rule's field (perf_opt), not another violation's."""
    text = f"ldweights in_dtype=fp32 perf_opt=double_row rows=8 cols=8 {LO} src={_t3('sbuf(0,0x0)', 8)}\n"
    trace = Engine(G, rows=8, cols=8).run(assemble(text, G))
    assert [v.field for v in trace.ops[0].violations] == ["perf_opt", "fp32_mode", "src_mem_pattern"]
    assert [(e.data["code"], e.data["field"]) for e in trace.of_kind("refuse")] == [(ErrorCode.BAD_DTYPE, "perf_opt")]


def test_a_default_engine_keeps_no_pe_log():
    """The PE log is kept only for an engine built with record_pe=True (one record per micro-op)."""
    text = _load("bf16")
    assert Engine(G, rows=8, cols=8).run(assemble(text, G)).pe_log == []
    assert [r["kind"] for r in Engine(G, rows=8, cols=8, record_pe=True).run(assemble(text, G)).pe_log] == ["lw"]


def test_a_zeroing_precedes_an_older_matmuls_write_of_its_cycle():
    """MARIANA 16 x 8, every SBUF byte 0x38 (fp8_exp3 1.5): a double-row matmul on 2 rows writes
    1.5 * 1.5 * 4 = 9.0 twice into one cell of partitions 0 and 1 (the second accumulating), one
    cycle apart; a later matmul zeroes 8 banks from bank 1 (wrapping to bank 0) in the cycle of
    partition 1's second write.  In one cycle the zeroing comes first (D-T40 (6)): partition 1 keeps
    9.0 (the write after the zero), partition 0's 18.0 (written the cycle before) is zeroed."""
    text = ("matmul in_dtype=fp8_exp3 rows=1 cols=1 set=0 src=(start_addr=sbuf(0,0), step_elem=[0,0,0], "
            "num_elem=[1,1,1]) dst=(start_addr=psum(0,0,0), step_elem=[0,0,0], num_elem=[1,1,1])\n"
            f"ldweights in_dtype=fp8_exp3 perf_opt=double_row rows=2 cols=6 {LO} src={_t3('sbuf(0,0x1000)', 12)}\n"
            "matmul in_dtype=fp8_exp3 perf_opt=double_row rows=2 cols=2 src=(start_addr=sbuf(0,0), "
            "step_elem=[0,0,0], num_elem=[4,1,1]) dst=(start_addr=psum(0,0,0), step_elem=[0,0,0], num_elem=[2,1,1])\n"
            "matmul in_dtype=fp8_exp3 perf_opt=double_row rows=1 cols=2 acc=single zero=banks_8 "
            "src=(start_addr=sbuf(0,0), step_elem=[0,0,0], num_elem=[24,1,1]) "
            "dst=(start_addr=psum(0,1,0), step_elem=[0,0,0], num_elem=[12,1,1])\n")
    eng = Engine(G, rows=16, cols=8, sbuf=np.full((128, 0x2000), 0x38, np.uint8))
    trace = eng.run(assemble(text, G))
    zero = trace.of_kind("psum_zero")[0]
    last = max((e for e in trace.of_kind("psum_write") if e.op == 2), key=lambda e: e.cycle)
    assert (zero.cycle, last.cycle, last.data["partition"], last.data["offset"]) == (zero.cycle, zero.cycle, 1, 0)
    assert eng.psum.cells(4)[:2, 0].view(np.float32).tolist() == [0.0, 9.0]


def test_a_seed_save_after_a_zeroing_matmul_is_the_same_at_every_sbuf_latency():
    """An MX matmul that zeroes its PSUM cell (multi_start), then a SaveSeed of the RNG seeds into
    that cell's bank: the SaveSeed is a barrier (D-T30), so its seeds overwrite the zeroed cells
    whatever the SBUF latency (2, 4, 6, 8: only the cycles move)."""
    text = ("matmul_mx in_dtype=fp8_exp5 rows=1 cols=1 perf_mode=quad_row_interleave acc=multi_start "
            "src=(data_addr=sbuf(0,0), scale_addr=sbuf(0,0), step_elem=0, num_elem=12) "
            "dst=(start_addr=psum(0,0,0), step_elem=[0,0,0], num_elem=[3,1,1])\n"
            "pe_manage_seed mode=save_seed rows=16 cols=128 identity_dtype=bf16 "
            "identity_mem_pattern=(start_addr=sbuf(0,0), step_elem=[0], num_elem=[16]) "
            "dst_seed_mem_pattern=(start_addr=psum(0,0,0), step_elem=[1,512], num_elem=[2,8])\n")
    cells = []
    for latency in (2, 4, 6, 8):
        eng = Engine(G, rows=8, cols=8, sbuf_latency=latency)
        eng.run(assemble(text, G))
        cells.append(eng.psum.cells(4)[:8, :2].copy())
    assert cells[0].all()
    assert all(np.array_equal(c, cells[0]) for c in cells[1:])


_MIX = "DTYPE_MIX (0x06) in_dtype: moving {} with stationary {}: FP32 (tf32) operands cannot mix with low precision"
_MX = ("matmul_mx in_dtype=fp8_exp5 rows=8 cols=8 perf_mode=quad_row_interleave acc=single "
       "src=(data_addr=sbuf(0,0), scale_addr=sbuf(0,0x400), step_elem=0, num_elem=4) "
       "dst=(start_addr=psum(0,0,0), step_elem=[1,0,0], num_elem=[1,1,1])\n")


@pytest.mark.parametrize("text,want", [
    (_load("fp32") + _mm("fp32"), []),
    (_load("bf16") + _mm("fp32"), [_MIX.format("FP32", "BFLOAT16")]),
    (_load("fp32") + _mm("bf16"), [_MIX.format("BFLOAT16", "FP32")]),
    (_load("fp32", 4, 0) + _load("bf16", 4, 2) + _mm("fp32"), [_MIX.format("FP32", "BFLOAT16")]),
    (_load("fp32", 4, 0) + _load("bf16", 4, 2) + _mm("bf16"), [_MIX.format("BFLOAT16", "FP32")]),
    (_load("fp8_e5m2", 4, 0) + _load("bf16", 4, 2) + _mm("fp32"), [_MIX.format("FP32", "BFLOAT16")]),
    (_load("bf16") + _mm("fp32", flags="flags=(xpose_mode=enabled) ", n_dst=8), []),
    (_load("fp32") + _MX, ["BAD_MX (0x0e) perf_mode: weights were loaded 1 per PE, the matmul streams 4"]),
    (_load("bf16", 4, 0) + _mm("fp32", 8, 1), ["BAD_ACTIVE_RANGE (0x09) num_active_rows: rows 2..9 do not fit this "
                                               "8-row array"]),
], ids=["fp32_on_fp32", "fp32_on_bf16", "bf16_on_fp32", "fp32_on_mixed", "bf16_on_mixed", "fp32_on_fp8_bf16",
        "transpose", "mx_on_fp32", "past_the_rows"])
def test_the_fp32_no_mix_rule_reads_the_matmuls_own_weights(text, want):
    """FP32 (tf32) moving data and FP32 weights go together only (the no-mix rule, D-T31): the weights
    of the matmul's own block decide (a block mixing FP32 with others mixes; its first low-precision
    dtype by code is named); a transposing matmul reads no weights, an MX matmul has its own rule
    (BAD_MX), and a block past the array is refused for that alone."""
    trace = Engine(G, rows=8, cols=8).run(assemble(text, G))
    assert all(o.error == 0 for o in trace.ops[:-1])
    assert [str(v) for v in trace.ops[-1].violations] == want


def test_bad_mx_reads_only_the_pes_a_load_wrote():
    """bf16 weights (1 per PE) on rows 0..3 of an 8 x 8 array, nothing loaded on rows 4..7: a bf16
    matmul on all 8 rows runs (PEs no load wrote hold no pump mode, D-T31); so does an fp8 one after
    fp8 weights on rows 4..7, one per PE too; and an FP8 double-row matmul on all 8 rows after
    double-row weights (2 per PE) on rows 0..3 alone."""
    trace = Engine(G, rows=8, cols=8).run(assemble(_load("bf16", 4, 0) + _mm("bf16") + _load("fp8_e5m2", 4, 2)
                                                   + _mm("fp8_e5m2"), G))
    assert [o.error for o in trace.ops] == [0, 0, 0, 0] and all(o.t_issue is not None for o in trace.ops)
    double = f"ldweights in_dtype=fp8_e5m2 perf_opt=double_row rows=4 cols=8 row_grp=0 {LO} src={_t3('sbuf(0,0x0)', 16)}\n"
    trace = Engine(G, rows=8, cols=8).run(assemble(double + _mm("fp8_e5m2", 8, 0, bank=1, pump=2), G))
    assert [o.error for o in trace.ops] == [0, 0]


def test_a_matmul_swaps_only_the_pending_weights_of_its_block():
    """bf16 weights loaded on rows 0..3: the first matmul on rows 0..3 swaps them in (one swap event,
    D-14) when its first vector reaches the block's first PE, at t + L; a second on the same rows
    finds nothing pending, nor does one on rows 4..7 (no load wrote them): no swap event more."""
    eng = Engine(G, rows=8, cols=8)
    trace = eng.run(assemble(_load("bf16", 4, 0) + _mm("bf16", 4, 0) + _mm("bf16", 4, 0) + _mm("bf16", 4, 2), G))
    assert [o.error for o in trace.ops] == [0, 0, 0, 0]
    assert [(e.op, e.cycle, e.data["rows"], e.data["cols"]) for e in trace.of_kind("swap")] == [
        (1, trace.ops[1].t_issue + eng.sbuf_latency, (0, 4), (0, 8))]


def test_bf16_operands_at_odd_byte_addresses():
    """SBUF addresses need no alignment: weights at byte 0x101 (row k: k + 1 in every column) and moving
    data at 0x203 (x[k, v]) read as written; every column sums sum_k (k + 1) x[k, v], exact in FP32."""
    import ml_dtypes
    eng = Engine(G, rows=8, cols=8)
    x = (np.arange(32).reshape(8, 4) % 7 + 1).astype(np.float32)
    for k in range(8):
        eng.sbuf.write(k, 0x101, np.full(8, k + 1, np.float32).astype(ml_dtypes.bfloat16).view(np.uint16))
        eng.sbuf.write(k, 0x203, x[k].astype(ml_dtypes.bfloat16).view(np.uint16))
    text = (f"ldweights in_dtype=bf16 rows=8 cols=8 src={_t3('sbuf(0,0x101)', 8)}\n"
            f"matmul in_dtype=bf16 out_dtype=fp32 rows=8 cols=8 acc=single src={_t3('sbuf(0,0x203)', 4)} "
            f"dst={_t3('psum(0,0,0)', 4)}\n")
    assert [o.error for o in eng.run(assemble(text, G)).ops] == [0, 0]
    want = (np.arange(1, 9, dtype=np.float64) @ x.astype(np.float64)).astype(np.float32)
    assert np.array_equal(eng.psum.cells(4)[:8, :4].view(np.float32), np.tile(want, (8, 1)))


def test_four_bit_codes_in_a_partitions_last_byte():
    """4-bit codes read a nibble per element, low nibble first: the last byte of a partition (0xA5)
    gives codes 5 and 10, and the byte before it (0x3C) 12 and 3."""
    from tensore.model import addrmap
    from tensore.model.isa.microop import Pattern
    eng = Engine(G, rows=8, cols=8)
    last = eng.sbuf.data.shape[1] - 1
    eng.sbuf.write(1, last - 1, np.array([0x3C, 0xA5], np.uint8))
    pat = Pattern(addrmap.sbuf_addr(1, last - 1), (1,), (4,))
    codes, first = eng._read_codes(pat, 1, 4, 4)
    assert first == 1 and codes.tolist() == [[12, 3, 5, 10]]


@pytest.mark.parametrize("start,end", [(0x3f8, 0x407), (0x3f1, 0x400)])
def test_a_read_past_a_smaller_model_sbuf_is_one_clear_error(start, end):
    """An engine given a 1 KiB-per-partition SBUF image: a matmul reading 8 bf16 elements from `start`
    (inside the generation's partition, so no BAD_ADDRESS), 9 bytes or 1 byte past the image, stops
    with the image's bounds, not numpy's."""
    from tensore.model.sbuf import Sbuf
    eng = Engine(G, rows=8, cols=8, sbuf=Sbuf(np.zeros((128, 0x400), np.uint8)))
    text = (f"ldweights in_dtype=bf16 rows=8 cols=8 src={_t3('sbuf(0,0x0)', 8)}\n"
            f"matmul in_dtype=bf16 out_dtype=fp32 rows=8 cols=8 acc=single src={_t3(f'sbuf(0,{start:#x})', 8)} "
            f"dst={_t3('psum(0,0,0)', 8)}\n")
    with pytest.raises(ValueError, match=rf"SBUF bytes {start:#x}\.\.{end:#x} outside the model's 0x400 bytes per partition"):
        eng.run(assemble(text, G))


def test_a_read_past_a_smaller_model_sbufs_partitions_is_one_clear_error():
    """An SBUF image of 7 partitions: an 8-row load reads partitions 0..7 and stops with the image's
    partitions, not a short read."""
    from tensore.model.sbuf import Sbuf
    eng = Engine(G, rows=8, cols=8, sbuf=Sbuf(np.zeros((7, 0x400), np.uint8)))
    with pytest.raises(ValueError, match=r"SBUF partition out of range 0\.\.6"):
        eng.run(assemble(f"ldweights in_dtype=bf16 rows=8 cols=8 src={_t3('sbuf(0,0x0)', 8)}\n", G))


def test_mx_data_without_scales_reads_exponent_0():
    """A MAVERICK MX matmul whose MXTensorV2 names no scale dtype (0: none, D-21) computes as with
    every E8M0 scale byte 127 (2^0): the same PSUM, bit for bit."""
    import re

    from tensore.cosim import programs as P
    p = P.transposed_load_packed("maverick", 8, 4)
    lw, mm = [line for line in p.text.splitlines() if line.startswith(("ldweights", "matmul"))][:2]
    scales = int(re.search(r"src=mxtensor_v2\(.*?scale_addr=sbuf\(0,(0x[0-9a-f]+)\)", mm).group(1), 16)
    unscaled = re.sub(r"(src=mxtensor_v2\(.*?)scale_dtype=sfp8_e8\)", r"\1scale_dtype=invalid)", mm, count=1)
    cells = []
    for text, ones in ((mm, True), (unscaled, False)):
        sbuf = p.sbuf_model()
        if ones:
            sbuf.data[:, scales:scales + 8] = 127
        eng = Engine(p.gen, rows=p.rows, cols=p.cols, sbuf=sbuf)
        assert [o.error for o in eng.run(assemble(f"{lw}\n{text}\n", p.gen)).ops] == [0, 0]
        cells.append(eng.psum.cells(4)[:8, :8].copy())
    assert "scale_dtype=invalid" in unscaled and cells[0].any()
    assert np.array_equal(cells[0], cells[1])
