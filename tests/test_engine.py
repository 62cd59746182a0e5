"""The golden engine: every library program on every generation, PSUM bit-exact against
expectations computed without the engine; trace consistency; sequencer and register behaviour."""
import numpy as np
import pytest

from tensore.cosim import programs
from tensore.model import addrmap, timing
from tensore.model.dtypes import Gen
from tensore.model.engine import Engine
from tensore.model.isa import ErrorCode
from tensore.model.isa.asm import assemble

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



def test_perf_buckets_put_wide_blocks_in_the_128_bucket():
    """D-22 / D-T30: counts 1..2, 3..4, ..., 65..128 are buckets 0..6 and columns beyond 128 (MAVERICK's
    256) count in the 128 bucket, so a 128 x 256 matmul is counter 6*7 + 6 = 48 of 49."""
    assert [timing.bucket(n) for n in (1, 2, 3, 4, 5, 64, 65, 128, 129, 200, 256)] == [0, 0, 1, 1, 2, 5, 6, 6, 6, 6, 6]
    assert timing.counter_index(128, 256) == 48 and timing.counter_index(256, 129) == 48


def test_four_pass_matmul_times_are_four_cycles_per_step():
    """docs/timing.md: PSUM write of (column c, vector v) = t_data + P*(v + R + c) + 1, P = 1 or 4."""
    assert timing.ArrayTiming(t_data=100, rows=128, passes=1, row0=0).write_cycle(3, 5) == 100 + 136 + 1
    assert timing.ArrayTiming(t_data=100, rows=128, passes=4, row0=0).write_cycle(3, 5) == 100 + 544 + 1
    assert timing.ArrayTiming(t_data=7, rows=8, passes=4, row0=0).output_cycle(0, 0) == 7 + 32
    assert timing.mm_port_free(10, 16, 4) == 10 + 64

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
    assert issues[0] == fast.ops[0].t_issue                 # the delay follows an issue: none before the first


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


def _seed_setup(gen):
    """An SR bf16 program (PSUM_ROUND register, Ldweights, one matmul into bank 6)."""
    p = programs.bf16_drain(gen, sr=True)
    lines = p.text.strip().splitlines()
    return p, lines[0], lines[1], lines[2].replace("psum(0,5,0x10)", "psum(0,6,0x10)")


def _bank_bf16(eng, bank, n=12, parts=8):
    cells = eng.psum.cells(2)
    start = (bank * addrmap.PSUM_BANK_BYTES + 0x10) // 2
    return cells[:parts, start:start + n].copy()


def test_pe_manage_seed_save_perturb_load_replay():
    """MARIANA: save the reset seeds, run an SR matmul, reload the seeds, replay: same bits."""
    from tensore.model.psum import sr_reset_states
    p, regw, lw, mm = _seed_setup("mariana")
    eng = Engine("mariana", rows=8, cols=8, sbuf=p.sbuf_model())
    save = ("pe_manage_seed mode=save_seed rows=16 cols=128 identity_dtype=bf16 "
            "identity_mem_pattern=(start_addr=sbuf(0,0x3000), step_elem=[1], num_elem=[16]) "
            "dst_seed_mem_pattern=(start_addr=psum(0,0,0), step_elem=[1,512], num_elem=[2,8])")
    eng.run(assemble(save, "mariana"))
    saved = eng.psum.cells(4)[:8, [b * 512 + j for b in range(8) for j in range(2)]]      # [8 partitions, 16]
    assert np.array_equal(saved, sr_reset_states().reshape(128, 16)[:8])
    eng.run(assemble("\n".join([regw, lw, mm]), "mariana"))
    first = _bank_bf16(eng, 6)
    assert not np.array_equal(eng.psum.sr_state, sr_reset_states())          # the matmul used the states
    for s in range(16):                                                        # host: transpose into SBUF
        eng.sbuf.write(s, 0x3800, np.resize(saved[:, s], 128).astype(np.uint32))
    load = ("pe_manage_seed mode=load_seed rows=16 cols=128 identity_dtype=bf16 "
            "identity_mem_pattern=(start_addr=sbuf(0,0x3000), step_elem=[1], num_elem=[16]) "
            "src_seed_mem_pattern=(start_addr=sbuf(0,0x3800), step_elem=[1,0], num_elem=[128,1])")
    trace = eng.run(assemble(load, "mariana"))
    assert np.array_equal(eng.psum.sr_state, sr_reset_states())
    assert len(trace.of_kind("state_write")) == 16 * 8
    eng.psum.cells(2)[:8, :] = 0                                               # forget the first result
    eng.run(assemble("\n".join([lw, mm]), "mariana"))                          # weights again (identity replaced them)
    assert np.array_equal(_bank_bf16(eng, 6), first)


def test_a_seed_micro_op_leaves_its_identity_in_the_weights():
    """MARIANA 8 x 8: a SaveSeed loads its identity (bf16 1.0 codes from SBUF, row k's on the columns of
    state k, D-T30) into the weights; a bf16 matmul after it, with no load, copies its moving data
    (the sum of column c is row c's value: partition c holds x[c])."""
    import ml_dtypes
    eng = Engine("mariana", rows=8, cols=8)
    eng.sbuf.write(0, 0x3000, np.full(16, 0x3F80, np.uint16))
    x = (np.arange(32).reshape(8, 4) + 1).astype(np.float32)                  # [rows, vectors]
    for p in range(8):
        eng.sbuf.write(p, 0x200, x[p].astype(ml_dtypes.bfloat16).view(np.uint16))
    text = ("pe_manage_seed mode=save_seed rows=16 cols=128 identity_dtype=bf16 "
            "identity_mem_pattern=(start_addr=sbuf(0,0x3000), step_elem=[1], num_elem=[16]) "
            "dst_seed_mem_pattern=(start_addr=psum(0,0,0), step_elem=[1,512], num_elem=[2,8])\n"
            "matmul in_dtype=bf16 out_dtype=fp32 rows=8 cols=8 acc=single "
            "src=(start_addr=sbuf(0,0x200), step_elem=[1,0,0], num_elem=[4,1,1]) "
            "dst=(start_addr=psum(0,3,0), step_elem=[1,0,0], num_elem=[4,1,1])\n")
    trace = eng.run(assemble(text, "mariana"))
    assert [o.error for o in trace.ops] == [0, 0]
    assert np.array_equal(eng.psum.cells(4)[:8, 3 * 512:3 * 512 + 4].view(np.float32), x)


LDTAGS = ("ldtags in_dtype=uint16 force_tag_bits=0 rows=8 cols=8 "
          "src=(start_addr=sbuf(0,0x400), step_elem=[1,0,0], num_elem=[2,1,1])\n")    # 8 columns' tags


@pytest.mark.parametrize("fp32_mode", ["low", "low_high"])
def test_an_ldtags_leaves_no_column_skew(fp32_mode):
    """A row-serial Ldweights (fp32), an LdTags, then a dense fp32 matmul: the LdTags is row-serial (no
    column-serial skew, D-T99), so the matmul issues at the same cycle with 1 pass (low) or 3
    (low_high): the LdTags's cycle + 2."""
    t3 = "step_elem=[1,0,0], num_elem=[{}, 1, 1]"
    text = (f"ldweights in_dtype=fp32 fp32_mode={fp32_mode} rows=8 cols=8 flags=(load_order=first_col_first) "
            f"src=(start_addr=sbuf(0,0x0), {t3.format(8)})\n"
            + LDTAGS +
            f"matmul in_dtype=fp32 fp32_mode={fp32_mode} out_dtype=fp32 rows=8 cols=8 acc=single "
            f"src=(start_addr=sbuf(0,0x200), {t3.format(4)}) dst=(start_addr=psum(0,3,0), {t3.format(4)})\n")
    _, tags, mm = Engine("mariana", rows=8, cols=8).run(assemble(text, "mariana")).ops
    assert mm.error == 0 and mm.t_issue == tags.t_issue + 2


@pytest.mark.parametrize("rows", [8, 4])
def test_a_transpose_writes_on_the_full_arrays_wavefront(rows):
    """A transposing matmul on an 8 x 8 array writes element k of partition n at t + L + (8 + n + k) + 1,
    the wavefront of a plain matmul's column n, vector k through all 8 rows (D-15, D-T32), whatever
    rows the transpose has."""
    eng = Engine("mariana", rows=8, cols=8)
    text = (f"matmul in_dtype=bf16 out_dtype=fp32 rows={rows} cols=8 acc=single flags=(xpose_mode=enabled) "
            "src=(start_addr=sbuf(0,0x200), step_elem=[1,0,0], num_elem=[4,1,1]) "
            f"dst=(start_addr=psum(0,3,0), step_elem=[1,0,0], num_elem=[{rows},1,1])\n")
    trace = eng.run(assemble(text, "mariana"))
    t, base = trace.ops[0].t_issue, 3 * addrmap.PSUM_BANK_BYTES
    writes = [(e.cycle, e.data["partition"], (e.data["offset"] - base) // 4) for e in trace.of_kind("psum_write")]
    assert len(writes) == rows * 4
    assert all(cycle == t + eng.sbuf_latency + 8 + n + k + 1 for cycle, n, k in writes)
    assert t == 2                       # the run's first micro-op (decoded in cycle 1) waits for no load


def test_a_runs_first_ldtags_waits_for_nothing():
    """An LdTags opening a run issues in cycle 2, the cycle after its decode: no sparse matmul, load
    or LdTags came before it (each rule's "none yet" lies before the run)."""
    op = Engine("mariana", rows=8, cols=8).run(assemble(LDTAGS * 2, "mariana")).ops[0]
    assert (op.t_decode, op.t_issue, op.error) == (1, 2, 0)


@pytest.mark.parametrize("fmaps", [2, 3])
def test_sparse_tags_beyond_the_fmaps_sent_contribute_nothing(fmaps):
    """MatmulSparse with tags 0..3 and fewer fmaps sent: a PE whose tag names no fmap sent adds nothing
    to its column (D-T26); the PSUM equals cosim/oracle.py's sparse chain."""
    p = programs.sparse("mariana", rows=8, cols=8, n=4, fmaps=fmaps, seed=3, tags_below=4)
    eng = Engine(p.gen, rows=p.rows, cols=p.cols, sbuf=p.sbuf_model())
    trace = eng.run(assemble(p.text, p.gen))
    assert_expectations(p, eng, trace)


def test_maverick_seed_micro_ops():
    """MAVERICK: seed_mode SAVE / LOAD matmuls move one bank's 2 x half states."""
    from tensore.model.psum import sr_reset_states
    p, regw, lw, mm = _seed_setup("maverick")
    eng = Engine("maverick", rows=8, cols=16, sbuf=p.sbuf_model())
    seed_op = ("matmul in_dtype=fp32 fp32_mode=high out_dtype=fp32 rows=1 cols=0 "
               "tile_size=(row_size_log2=r64, col_size_log2=c256) flags=(xpose_mode=enabled, seed_mode={mode}) "
               "src=(start_addr=sbuf(0,0x3800), step_elem=[1,0,0], num_elem=[16,1,1]) "
               "dst=(start_addr=psum(0,6,0x100), step_elem=[1,0,1], num_elem=[1,1,2])")
    trace = eng.run(assemble(seed_op.format(mode="save_seed"), "maverick"))
    assert not [o for o in trace.ops if o.error], trace.summary()
    saved = eng.psum.cells(4)[:8, (6 * 2048 + 0x100) // 4:(6 * 2048 + 0x100) // 4 + 2].copy()   # [8, 2]
    assert np.array_equal(saved, sr_reset_states()[:8, 6, :])
    eng.run(assemble("\n".join([regw, lw, mm]), "maverick"))
    first = _bank_bf16(eng, 6)
    eng.sbuf.write(0, 0x3800, np.concatenate([saved[:, 0], saved[:, 1]]).astype(np.uint32))
    trace = eng.run(assemble(seed_op.format(mode="load_seed"), "maverick"))
    assert not [o for o in trace.ops if o.error], trace.summary()
    assert np.array_equal(eng.psum.sr_state[:8, 6], sr_reset_states()[:8, 6])
    eng.psum.cells(2)[:8, :] = 0
    eng.run(assemble("\n".join([lw, mm]), "maverick"))
    assert np.array_equal(_bank_bf16(eng, 6), first)


def test_pe_state_follows_the_skewed_wavefront():
    p = programs.single("cayman", "bf16", rows=8, cols=8, n=16)
    eng = Engine("cayman", rows=8, cols=8, sbuf=p.sbuf_model(), record_pe=True)
    trace = eng.run(assemble(p.text, "cayman"))
    rec = [r for r in trace.pe_log if r["kind"] == "mm"][0]
    t0 = rec["timing"].t_data
    # vector 0 is in PE (r, c) during cycle t0 + r + c, so its register shows it one cycle later
    st = trace.pe_state(t0 + 1)
    assert st["valid"][0, 0] and not st["valid"][1, 0] and not st["valid"][0, 1]
    st = trace.pe_state(t0 + 5)
    assert st["valid"].sum() == sum(1 for r in range(8) for c in range(8) if r + c <= 4)
    # the bottom register of column c holds the final sum of (c, v) in the output cycle
    for c, v in ((0, 0), (3, 7), (7, 15)):
        cyc = rec["timing"].output_cycle(c, v)
        assert trace.pe_state(cyc)["psum"][7, c] == rec["steps"][-1][c, v].view(np.uint32)
    write = [e for e in trace.of_kind("psum_write") if e.data["partition"] == 3 and e.data["offset"] == 7 * 4]
    assert write[0].cycle == rec["timing"].output_cycle(3, 7) + 1
    # weights: a PE shows the loaded weight from the cycle after the first vector reaches it
    assert trace.pe_state(t0)["weight"][0, 0] == 0
    assert trace.pe_state(t0 + 1)["weight"][0, 0] == rec["w_code"][0, 0] != 0
    assert trace.pe_state(t0 + 1)["weight"][7, 7] == 0 and trace.pe_state(t0 + 15)["weight"][7, 7] != 0
    # stepping one clock at a time gives every event exactly once, in its cycle
    seen = [e for cycle, events in trace.steps() for e in events if e.cycle == cycle]
    assert len(seen) == len(trace.events)


def test_barriers_order_around_them():
    p = programs.bf16_drain("mariana", sr=True)
    eng, trace = run_program(p)
    reg, lw = trace.ops[0], trace.ops[1]
    assert reg.name == "pe_reg_write" and lw.t_issue > reg.t_complete
    assert_expectations(p, eng, trace)


def test_executed_descriptors_carry_their_micro_op():
    """OpRecord.uop is the micro-op the engine ran (model.isa.microop, D-T69); refused ones have none."""
    from tensore.model.isa.microop import Kind, MmKind
    for p in programs.library("mariana"):
        eng, trace = run_program(p)
        for o in trace.ops:
            assert (o.uop is None) == (o.error != ErrorCode.NONE)
            if o.uop is not None:
                assert o.uop == eng.microop(o.desc) and o.uop.kind in Kind and o.uop.mmkind in MmKind


def _reg_write_engine(words, **regs):
    """A MARIANA 8 x 8 engine with the SBUF words `words` at partition 0, offset 0x100, 0x104, ..."""
    sbuf = np.zeros((addrmap.PARTITIONS, 0x200), np.uint8)
    sbuf[0, 0x100:0x100 + 4 * len(words)] = np.array(words, "<u4").view(np.uint8)
    eng = Engine("mariana", rows=8, cols=8, sbuf=sbuf)
    eng.write_reg("perf_cntr_cfg", 1)
    for reg, value in regs.items():
        eng.write_reg(reg, value)
    return eng


def _reg_write(offset, reg="psum_round", value=0):
    return f"pe_reg_write reg={reg} value={value} src=(start_addr=sbuf(0,{offset:#x}), step_elem=[1], num_elem=[1])\n"


def test_pe_reg_write_value_is_checked_when_fetched():
    """A PeRegWrite whose SBUF word PSUM_ROUND does not take issues, completes and counts; the
    register keeps its mode and BAD_REGISTER is reported in the fetch cycle t + L (D-T38 (6)), so a
    descriptor refused at decode in between is the first error."""
    from tensore.model.isa.enums import PsumRound
    eng = _reg_write_engine([7, 1])
    trace = eng.run(assemble(_reg_write(0x100) + _reg_write(0x100, reg=7) + _reg_write(0x104, value=1), "mariana"))
    bad, refused, _ = trace.ops
    assert bad.error == ErrorCode.NONE and bad.uop is not None and bad.fault == ErrorCode.BAD_REGISTER
    assert bad.t_complete == bad.t_issue + eng.sbuf_latency and refused.t_decode < bad.t_complete
    assert [(e.cycle, e.data["code"]) for e in trace.of_kind("error")] == [(bad.t_complete, ErrorCode.BAD_REGISTER)]
    assert [e.op for e in trace.of_kind("reg")] == [2] and eng.psum.round_mode == PsumRound.SR
    status = eng.read_reg("err_status")
    assert status & 1 and (status >> 8) & 0xFF == ErrorCode.BAD_ENUM and (status >> 16) & 0xFF == 0x03
    assert eng.read_reg("err_count") == 2 and eng.read_reg("done_count") == 2
    assert eng.regs.counter64("pe_regwrite", 0) == 2
    assert "reported BAD_REGISTER" in trace.summary()
    # the bad word alone: the register keeps RNE, the error is the first
    eng = _reg_write_engine([7])
    trace = eng.run(assemble(_reg_write(0x100), "mariana"))
    assert eng.psum.round_mode == PsumRound.RNE and (eng.read_reg("err_status") >> 8) & 0xFF == ErrorCode.BAD_REGISTER
    assert (eng.read_reg("err_status") >> 16) & 0xFF == assemble(_reg_write(0x100), "mariana")[0]     # its opcode


def test_a_refusal_and_an_error_of_one_cycle_capture_the_refusal():
    """With a one-cycle SBUF latency a PeRegWrite's bad word is reported (BAD_REGISTER) in the cycle the
    next descriptor is refused at decode (BAD_ENUM): err_status captures the refusal, the error is
    counted after it (SPEC section 9: a refusal before an error reported in the same cycle)."""
    sbuf = np.zeros((addrmap.PARTITIONS, 0x200), np.uint8)
    sbuf[0, 0x100:0x104] = np.array([7], "<u4").view(np.uint8)
    eng = Engine("mariana", rows=8, cols=8, sbuf=sbuf, sbuf_latency=1)
    program = assemble(_reg_write(0x100) + _reg_write(0x100, reg=7), "mariana")
    trace = eng.run(program)
    bad, refused = trace.ops
    assert bad.fault == ErrorCode.BAD_REGISTER and refused.error == ErrorCode.BAD_ENUM
    assert refused.t_decode == bad.t_complete
    status = eng.read_reg("err_status")
    assert status & 1 and (status >> 8) & 0xFF == ErrorCode.BAD_ENUM and (status >> 16) & 0xFF == program[64]
    assert eng.read_reg("err_count") == 2


@pytest.mark.parametrize("words,mode", [([1, 0xFF], "SR"), ([0x0100_0001], None), ([0, 0xFFFF_FFFF], "RNE")])
def test_pe_reg_write_fetches_one_32_bit_word(words, mode):
    """The SBUF value of a PeRegWrite is the little-endian 32-bit word at its address, no byte more or
    less (seed 000 section 10): 1 followed by 0xFF sets SR, 0x01000001 is no PSUM_ROUND mode
    (BAD_REGISTER, the mode stays RNE), 0 followed by ones sets RNE."""
    from tensore.model.isa.enums import PsumRound
    eng = _reg_write_engine(words)
    if mode == "RNE":
        eng.psum.round_mode = PsumRound.SR
    trace = eng.run(assemble(_reg_write(0x100), "mariana"))
    want = PsumRound[mode] if mode else PsumRound.RNE
    assert eng.psum.round_mode == want
    assert trace.ops[0].fault == (ErrorCode.NONE if mode else ErrorCode.BAD_REGISTER)


def test_pe_reg_write_bypass_takes_the_immediate():
    """With queue_cfg.bypass_peregwrite_instr the immediate is the value, applied at issue without a
    fetch (seed 000 section 10); `check` refuses a bad immediate at decode, whatever the SBUF holds."""
    from tensore.model.isa.enums import PsumRound
    bypass = 1 << 4
    eng = _reg_write_engine([7], queue_cfg=bypass)
    trace = eng.run(assemble(_reg_write(0x100, value=1), "mariana"))
    op = trace.ops[0]
    assert op.fault == ErrorCode.NONE and op.t_complete == op.t_issue and eng.psum.round_mode == PsumRound.SR
    assert eng.read_reg("err_status") == 0 and not trace.of_kind("error")
    eng = _reg_write_engine([1], queue_cfg=bypass)
    trace = eng.run(assemble(_reg_write(0x100, value=2), "mariana"))
    assert trace.ops[0].error == ErrorCode.BAD_REGISTER and trace.ops[0].uop is None
    assert eng.read_reg("done_count") == 0 and eng.regs.counter64("pe_regwrite", 0) == 0


@pytest.mark.parametrize("trace_mode", ["detailed", "aggregate"])
def test_psum_is_its_writes_in_cycle_order(trace_mode):
    """Random programs (micro-ops whose write windows overlap, zeroing a bank an older matmul still
    writes): the final PSUM is the trace's zeroing and writes applied in cycle order (Trace.replay_psum),
    as hardware makes them (D-T40 (6))."""
    from tensore.cosim import random_programs as R
    checked = 0
    for gen in (Gen.CAYMAN, Gen.MARIANA, Gen.MAVERICK):
        for seed in (2, 4, 6, 10, 12):
            p = R.generate(gen, seed, extras=3)
            eng, trace = run_program(p, trace=trace_mode)
            assert np.array_equal(trace.replay_psum().mem, eng.psum.mem), (gen.name, seed)
            checked += sum(o.psum_writes for o in trace.ops)
    assert checked > 1000


def _maverick_seeds(partition: int):
    """A MAVERICK 8 x 16 engine with 16 seed words at SBUF 0x3800, and the seed micro-op's text ({mode}
    to fill) from there into PSUM bank 6 + 0x100 of `partition` on, its two elements 20 bytes apart."""
    eng = Engine("maverick", rows=8, cols=16)
    seeds = (0x1234_0000 + 0x0101 * np.arange(16)).astype(np.uint32)
    eng.sbuf.write(0, 0x3800, seeds)
    op = ("matmul in_dtype=fp32 fp32_mode=high out_dtype=fp32 rows=1 cols=0 "
          "tile_size=(row_size_log2=r64, col_size_log2=c256) flags=(xpose_mode=enabled, seed_mode={mode}) "
          "src=(start_addr=sbuf(0,0x3800), step_elem=[1,0,0], num_elem=[16,1,1]) "
          f"dst=(start_addr=psum({partition},6,0x100), step_elem=[1,0,5], num_elem=[1,1,2])")
    return eng, seeds, op


def test_maverick_seed_save_writes_each_state_once_where_its_pattern_says():
    """A MAVERICK LoadSeed then SaveSeed (seed 000 section 5.1): column c's state is slot c // half of
    partition c % half; SaveSeed writes slot j to the destination's j-th element (step_elem [1, 0, 5]:
    20 bytes apart, 4-byte states), one PSUM write per state, on the load's write schedule."""
    eng, seeds, op = _maverick_seeds(partition=0)
    load = eng.run(assemble(op.format(mode="load_seed"), "maverick"))
    save = eng.run(assemble(op.format(mode="save_seed"), "maverick"))
    assert not [o for o in load.ops + save.ops if o.error], save.summary()
    base = (6 * addrmap.PSUM_BANK_BYTES + 0x100) // 4
    cells = eng.psum.cells(4)[:8]
    assert np.array_equal(cells[:, base], seeds[:8]) and np.array_equal(cells[:, base + 5], seeds[8:])
    assert not cells[:, base + 1:base + 5].any()                      # nothing between the two elements
    writes = save.of_kind("psum_write")
    assert save.ops[0].psum_writes == len(writes) == 16
    assert sorted((e.data["partition"], e.data["offset"]) for e in writes) == sorted(
        (c % 8, 6 * addrmap.PSUM_BANK_BYTES + 0x100 + 20 * (c // 8)) for c in range(16))
    states = load.of_kind("state_write")
    assert [e.cycle - load.ops[0].t_issue for e in states] == [e.cycle - save.ops[0].t_issue for e in writes]


@pytest.mark.parametrize("col_grp,want", [(0, ErrorCode.DTYPE_MIX), (1, ErrorCode.BAD_ACTIVE_RANGE)])
def test_stationary_dtype_is_the_blocks_loaded_weights(col_grp, want):
    """The fp32 / tf32 no-mix rule reads the dtype of the weights under the matmul's block (D-T31): bf16
    moving over fp32 weights is refused as DTYPE_MIX; a block past the array (columns 16..79 of 64) is
    refused for its size, with no weights to compare."""
    from tests.fixtures import valid
    t3 = dict(start_addr=addrmap.sbuf_addr(0), step_elem=[1, 0, 0], num_elem=[64, 1, 1])
    lw = valid("ldweights", "mariana", in_dtype="fp32", fp32_mode="high", num_active_rows=64, num_active_cols=64,
               src_mem_pattern=t3)
    mm = valid("matmul", "mariana", num_active_rows=64, num_active_cols=64, col_grp=col_grp)
    trace = Engine("mariana", rows=64, cols=64).run(lw + mm)
    assert [o.error for o in trace.ops] == [ErrorCode.NONE, want]


def _tiny_bf16_run(w, a):
    """A 4 x 4 MARIANA engine after a bf16 matmul of the column vector `a` over weights `w` into bank 0."""
    import ml_dtypes
    b = programs._Builder("tiny", "mariana", 4, 4, 0)
    bf16 = lambda x: np.asarray(x, np.float32).astype(ml_dtypes.bfloat16).view(np.uint16)   # noqa: E731
    ow, oa = b.put(0, bf16(w), 2), b.put(0, bf16(a), 2)
    b.line(f"ldweights in_dtype=bf16 rows=4 cols=4 flags=(load_order=first_col_first) src={programs._t3(f'sbuf(0,{ow:#x})', 4)}")
    b.line(f"matmul in_dtype=bf16 out_dtype=fp32 rows=4 cols=4 acc=single src={programs._t3(f'sbuf(0,{oa:#x})', 1)} "
           f"dst={programs._t3('psum(0,0,0)', 1)}")
    p = b.done()
    eng = Engine("mariana", rows=4, cols=4, sbuf=p.sbuf_model())
    eng.run(assemble(p.text, "mariana"))
    return eng


def test_tiny_bf16_products_are_exact_until_each_add_rounds():
    """Products are exact and each add down the column rounds to fp32 (D-10), also below fp32's normal
    range: 2^-149 (row 0) plus 1.25 x 2^-148 (row 1) is 3.5 units of 2^-149, a tie that rounds to even,
    4 units, as Fractions say (rounding the second product first, 2.5 -> 2 units, would give 3)."""
    from fractions import Fraction
    w = np.zeros((4, 4), np.float32)
    w[0, 0], w[1, 0] = 2.0 ** -75, 1.25 * 2.0 ** -74
    a = np.array([[2.0 ** -74], [2.0 ** -74], [0], [0]], np.float32)
    eng = _tiny_bf16_run(w, a)
    unit, acc = Fraction(1, 2 ** 149), Fraction(0)
    for r in range(4):                                  # subnormal range: one grid, ties to even (round)
        acc = round((acc + Fraction(float(w[r, 0])) * Fraction(float(a[r, 0]))) / unit) * unit
    assert acc / unit == 4
    assert int(eng.psum.cells(4)[0, 0]) == acc / unit


def test_the_float32_fast_path_gets_exact_products_only(monkeypatch):
    """fastpaths.rank1_chain adds float32 products (BLAS sger, fused or not, D-T53): it is exact only
    where every product of its operands is an fp32 value.  A matmul of fp32 values (48-bit products)
    never reaches it; one of fp16 or bf16 values does, with products checked against float64's exact ones,
    but not one of bf16 values whose products fall between fp32's subnormals."""
    from tensore.model import fastpaths
    real, calls = fastpaths.rank1_chain, []

    def checked(w, a, partials):
        prod = w.astype(np.float64)[:, :, None] * a.astype(np.float64)[:, None, :]
        assert np.array_equal(prod, prod.astype(np.float32)), "a product float32 rounds"
        calls.append(w.shape)
        return real(w, a, partials)
    monkeypatch.setattr(fastpaths, "rank1_chain", checked)
    for dtype, mode in (("fp32", "high"), ("fp32", "low_high"), ("fp16", None), ("bf16", None)):
        p = programs.single("mariana", dtype, fp32_mode=mode)
        trace = Engine("mariana", rows=8, cols=8, sbuf=p.sbuf_model()).run(assemble(p.text, "mariana"))
        assert not [o for o in trace.ops if o.error], trace.summary()
        assert bool(calls) == (dtype != "fp32"), (dtype, mode, calls)
        calls.clear()
    w, a = np.zeros((4, 4), np.float32), np.zeros((4, 1), np.float32)
    w[0, 0], a[0, 0] = 1.5 * 2.0 ** -75, 1.5 * 2.0 ** -74                # 2.25 units of 2^-149: rounds in fp32
    assert int(_tiny_bf16_run(w, a).psum.cells(4)[0, 0]) == 2 and not calls


def test_maverick_seed_states_move_on_the_transpose_wavefront():
    """A MAVERICK LoadSeed then SaveSeed into PSUM partition 2 (8 x 16 array, half 8, L = 2): column c
    (state slot c // 8 of partition 2 + c % 8) is written in cycle t + L + 8 + c + 1, a transpose's
    wavefront through the 8 rows; each completes with its last column and the next, a barrier behind
    it, issues the cycle after.  The SaveSeed writes slot j's state to the destination's j-th element."""
    eng, seeds, op = _maverick_seeds(partition=2)
    trace = eng.run(assemble(op.format(mode="load_seed") + "\n" + op.format(mode="save_seed"), "maverick"))
    load, save = trace.ops
    assert load.error == save.error == 0
    t, L = load.t_issue, eng.sbuf_latency
    assert [(e.cycle, e.data["partition"], e.data["state"], e.data["value"]) for e in trace.of_kind("state_write")] \
        == [(t + L + 8 + c + 1, 2 + c % 8, 2 * 6 + c // 8, int(seeds[c])) for c in range(16)]
    assert np.array_equal(eng.psum.sr_state[2:10, 6], seeds.reshape(2, 8).T)
    assert load.t_complete == t + L + 8 + 15 + 1 and save.t_issue == load.t_complete + 1
    s, base = save.t_issue, 6 * addrmap.PSUM_BANK_BYTES + 0x100
    assert [(e.cycle, e.data["partition"], e.data["offset"], e.data["bits"]) for e in trace.of_kind("psum_write")] \
        == [(s + L + 8 + c + 1, 2 + c % 8, base + 20 * (c // 8), int(seeds[c])) for c in range(16)]
    assert save.psum_writes == 16 and save.t_complete == s + L + 8 + 15 + 1


def test_pe_manage_seed_states_move_after_the_identity_load():
    """MARIANA PeManageSeed LoadSeed (8 x 8 array, L = 2): the identity load (on the array's 8 rows)
    completes in cycle t + 8 - 1 + L, the seed transpose issues the cycle after (t_mm) and writes
    state s of partition p in cycle t_mm + L + 8 + p + s + 1 from SBUF partition s; it completes
    with the last and a barrier behind it issues the cycle after.  A SaveSeed then writes each of the
    128 states once (its PSUM write count)."""
    eng = Engine("mariana", rows=8, cols=8)
    eng.sbuf.write(0, 0x3000, np.full(16, 0x3F80, np.uint16))
    seeds = (0x5000_0000 + 0x100 * np.arange(16)[:, None] + np.arange(8)[None, :]).astype(np.uint32)   # [s, p]
    for s in range(16):
        eng.sbuf.write(s, 0x3800, seeds[s])
    load = ("pe_manage_seed mode=load_seed rows=16 cols=128 identity_dtype=bf16 "
            "identity_mem_pattern=(start_addr=sbuf(0,0x3000), step_elem=[1], num_elem=[16]) "
            "src_seed_mem_pattern=(start_addr=sbuf(0,0x3800), step_elem=[1,0], num_elem=[128,1])")
    trace = eng.run(assemble(load + "\n" + load, "mariana"))
    first, second = trace.ops
    assert first.error == second.error == 0
    t, L = first.t_issue, eng.sbuf_latency
    t_mm = t + 8 - 1 + L + 1
    got = [(e.cycle, e.data["partition"], e.data["state"], e.data["value"]) for e in trace.of_kind("state_write")
           if e.op == 0]
    assert sorted(got) == sorted((t_mm + L + 8 + p + s + 1, p, s, int(seeds[s, p])) for s in range(16) for p in range(8))
    assert first.t_complete == t_mm + L + 8 + 7 + 15 + 1 and second.t_issue == first.t_complete + 1
    assert np.array_equal(eng.psum.sr_state[:8].reshape(8, 16), seeds.T)
    save = ("pe_manage_seed mode=save_seed rows=16 cols=128 identity_dtype=bf16 "
            "identity_mem_pattern=(start_addr=sbuf(0,0x3000), step_elem=[1], num_elem=[16]) "
            "dst_seed_mem_pattern=(start_addr=psum(0,0,0), step_elem=[1,512], num_elem=[2,8])")
    saved = eng.run(assemble(save, "mariana"))
    assert saved.ops[0].psum_writes == len(saved.of_kind("psum_write")) == 16 * 8
