"""Edges of the golden engine's host interface and runtime refusals (model/engine/core.py): the
host may set every event flag 0..63 (D-T20), and BAD_MX compares a matmul's pump with the weights
of its own block, never a transposing matmul's (D-T31)."""
import pytest

from tensore.model.dtypes import Gen
from tensore.model.engine import Engine
from tensore.model.isa import ErrorCode
from tensore.model.isa.asm import assemble

G = Gen.MARIANA
LO = "flags=(load_order=first_col_first)"


def _t3(addr: str, n: int) -> str:
    return f"(start_addr={addr}, step_elem=[1,0,0], num_elem=[{n},1,1])"


def _matmul(dtype: str, rows: int, grp: int, n: int, bank: int, pump: int = 1) -> str:
    """A matmul of n vectors on rows grp * 2 .. + rows (8 x 8 array), single pump or FP8 double row."""
    extra = "perf_opt=double_row " if pump == 2 else ""
    return (f"matmul in_dtype={dtype} {extra}out_dtype=fp32 rows={rows} cols=8 row_grp={grp} acc=single "
            f"src={_t3(f'sbuf({2 * grp},0x200)', pump * n)} dst={_t3(f'psum(0,{bank},0)', n)}\n")


@pytest.mark.parametrize("event", [0, 1, 63])
def test_host_sets_any_event(event):
    """schedule_event takes every event 0..63: a load waiting for it issues the cycle after the host's
    set (cycle 40)."""
    eng = Engine(G, rows=8, cols=8)
    eng.schedule_event(event, 40)
    text = f"ldweights in_dtype=bf16 rows=8 cols=8 {LO} src={_t3('sbuf(0,0x0)', 8)} wait={event}\n"
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
            + _matmul("bf16", 4, 0, 4, 0)
            + _matmul("fp8_e5m2", 4, 2, 4, 1)
            + _matmul("fp8_e5m2", 8, 0, 4, 1)
            + _matmul("fp8_e5m2", 4, 2, 4, 2, pump=2)
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
