"""The golden engine: every library program on every generation, PSUM bit-exact against
expectations computed without the engine; trace consistency; sequencer and register behaviour."""
import numpy as np
import pytest

from cosim import programs
from model import addrmap
from model.dtypes import Gen
from model.engine import Engine
from model.isa import ErrorCode
from model.isa.asm import assemble

CASES = [(g, p.name, i) for g in Gen for i, p in enumerate(programs.library(g))]


def run_program(p, **kw):
    eng = Engine(p.gen, rows=p.rows, cols=p.cols, sbuf=p.sbuf_model(), **kw)
    for reg, value in p.regs.items():
        eng.write_reg(reg, value)
    trace = eng.run(assemble(p.text, p.gen))
    return eng, trace


def assert_expectations(p, eng, trace):
    refused = {o.index: o.error for o in trace.ops if o.error != ErrorCode.NONE}
    assert refused == p.refused, trace.summary()
    for (part, bank), (off, bits) in p.expect_fp32.items():
        cells = eng.psum.cells(4)[part]
        start = (bank * addrmap.PSUM_BANK_BYTES + off) // 4
        got = cells[start:start + bits.size]
        assert np.array_equal(got, bits), (p.name, part, bank, [hex(x) for x in got[:4]], [hex(x) for x in bits[:4]])
    for (part, bank), (off, codes) in p.expect_bf16.items():
        cells = eng.psum.cells(2)[part]
        start = (bank * addrmap.PSUM_BANK_BYTES + off) // 2
        got = cells[start:start + codes.size]
        assert np.array_equal(got, codes), (p.name, part, bank, [hex(x) for x in got[:4]], [hex(x) for x in codes[:4]])


@pytest.mark.parametrize("gen,name,index", CASES, ids=[f"{g.name}-{n}" for g, n, _ in CASES])
def test_library_program(gen, name, index):
    p = programs.library(gen)[index]
    eng, trace = run_program(p)
    assert trace.stalled is None
    assert_expectations(p, eng, trace)
    # the cycle-level events alone rebuild the same PSUM: replay the writes on an empty PSUM
    assert np.array_equal(trace.replay_psum().mem, eng.psum.mem), name
    # events come in cycle order and every executed op has issue <= complete
    cycles = [e.cycle for e in trace.events]
    assert cycles == sorted(cycles)
    for o in trace.ops:
        if o.error == ErrorCode.NONE:
            assert o.t_decode < o.t_issue <= o.t_complete


def test_error_status_and_counters():
    p = programs.invalid_mixed("maverick")
    eng = Engine("maverick", rows=8, cols=16, sbuf=p.sbuf_model())
    eng.write_reg("perf_cntr_cfg", 1)
    trace = eng.run(assemble(p.text, "maverick"))
    status = eng.read_reg("err_status")
    assert status & 1 and (status >> 8) & 0xFF == ErrorCode.BAD_OPCODE and (status >> 16) & 0xFF == 0x05
    assert eng.read_reg("err_count") == 2
    assert eng.read_reg("done_count") == 2
    eng.write_reg("err_status", 1)                       # write 1 to clear
    assert eng.read_reg("err_status") & 1 == 0
    # one Ldweights and one Matmul of 8 x 8 were counted in bucket (8 rows, 8 cols) = 2*7 + 2
    assert eng.regs.counter64("weight_load", 16) == 1 and eng.regs.counter64("matmul", 16) == 1
    eng.write_reg("perf_cntr_cfg", 0b10)                 # cntr_rst pulse
    assert eng.regs.counter64("matmul", 16) == 0
    refusals = trace.of_kind("refuse")
    assert [e.data["code"] for e in refusals] == [ErrorCode.BAD_OPCODE, ErrorCode.BAD_ACTIVE_RANGE]


def test_dependency_check_and_delay_only_change_timing():
    p = programs.accumulate_group("mariana")
    _, fast = run_program(p)
    p.regs = {"queue_cfg": 1 << 8}                        # disable_dependency_check: serialise
    eng, slow = run_program(p)
    assert_expectations(p, eng, slow)
    assert slow.cycles > fast.cycles
    for a, b in zip(slow.ops[1:], slow.ops):
        assert a.t_issue > b.t_complete
    p.regs = {"arr_cluster_cfg": (1 << 12) | (20 << 16) | (1 << 8) | 12}    # 20 idle cycles between issues
    eng, delayed = run_program(p)
    assert_expectations(p, eng, delayed)
    issues = [o.t_issue for o in delayed.ops]
    assert all(b - a >= 21 for a, b in zip(issues, issues[1:]))


def test_events_wait_and_set():
    p = programs.single("mariana")
    lines = p.text.strip().splitlines()
    text = lines[0] + " set=5\n" + lines[1] + " wait=5\n"
    eng = Engine("mariana", rows=8, cols=8, sbuf=p.sbuf_model())
    trace = eng.run(assemble(text, "mariana"))
    assert trace.ops[1].t_issue > trace.ops[0].t_complete
    # waiting for an event nobody sets stops the model with a clear reason instead of hanging
    eng = Engine("mariana", rows=8, cols=8, sbuf=p.sbuf_model())
    trace = eng.run(assemble(lines[0] + " wait=9\n" + lines[1], "mariana"))
    assert trace.stalled and "event 9" in trace.stalled
    eng = Engine("mariana", rows=8, cols=8, sbuf=p.sbuf_model())
    eng.schedule_event(9, 40)
    trace = eng.run(assemble(lines[0] + " wait=9\n" + lines[1], "mariana"))
    assert trace.stalled is None and trace.ops[0].t_issue == 41


def test_array_size_is_checked():
    p = programs.single("cayman", rows=8, cols=8)
    eng = Engine("cayman", rows=4, cols=8, sbuf=p.sbuf_model())
    trace = eng.run(assemble(p.text, "cayman"))
    assert [o.error for o in trace.ops] == [ErrorCode.BAD_ACTIVE_RANGE] * 2
    with pytest.raises(ValueError, match="multiple of 4"):
        Engine("cayman", rows=6, cols=8)
