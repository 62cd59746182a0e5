"""Issue rules of the golden engine (model/engine/issue.py) at their edges, against docs/timing.md and
D-T38 written here with plain integers: a 4-pass matmul keeps the array's rhythm while the previous
matmul is in flight, up to and including its completion cycle; a host event set before the run."""

from tensore.cosim.programs import _t3
from tensore.model.dtypes import Gen
from tensore.model.engine import Engine
from tensore.model.isa.asm import assemble

G = Gen.MARIANA
R = C = 8
L = 2
P = 4                                   # fp32 HIGH: 4 cycles per moving vector
N = 3
LOAD = ("ldweights in_dtype=fp32 fp32_mode=high rows=8 cols=8 flags=(load_order=first_col_first) "
        "src=(start_addr=sbuf(0,0x000), step_elem=[1,0,0], num_elem=[8,1,1])\n")


def _matmul(bank: int, wait: str = "") -> str:
    return ("matmul in_dtype=fp32 fp32_mode=high out_dtype=fp32 rows=8 cols=8 acc=single "
            f"src=(start_addr=sbuf(0,0x200), step_elem=[1,0,0], num_elem=[{N},1,1]) "
            f"dst=(start_addr=psum(0,{bank},0), step_elem=[1,0,0], num_elem=[{N},1,1]){wait}\n")


def test_four_pass_matmul_keeps_the_rhythm_through_the_last_write():
    """A second 4-pass matmul held by a host event until cycle s + 1 issues at the first cycle from
    there that is a multiple of 4 after the first matmul's issue, or after the first matmul's
    completion (its last PSUM write: t_data + P * (N - 1 + R + C - 1) + 1), whichever comes first;
    s runs over the cycles around that completion."""
    first = Engine(G, rows=R, cols=C).run(assemble(LOAD + _matmul(0), G)).ops[1]
    done = first.t_issue + L + P * (N - 1 + R + C - 1) + 1
    assert (done - first.t_issue) % P != 0              # the completion cycle itself is out of rhythm
    for s in range(done - 6, done + 3):
        eng = Engine(G, rows=R, cols=C)
        eng.schedule_event(7, s)
        trace = eng.run(assemble(LOAD + _matmul(0) + _matmul(1, " wait=7"), G))
        a, b = trace.ops[1], trace.ops[2]
        assert a.t_issue == first.t_issue and a.t_complete == done
        want = next(c for c in range(s + 1, s + 10) if (c - a.t_issue) % P == 0 or c > done)
        assert b.t_issue == want, s


def test_host_event_set_long_before_the_run_is_seen():
    """A host set at cycle -100 (before the run) satisfies a load's wait: it issues at its earliest
    cycle, 2, as with no wait."""
    eng = Engine(G, rows=R, cols=C)
    eng.schedule_event(7, -100)
    trace = eng.run(assemble(LOAD.strip() + " wait=7\n", G))
    assert trace.stalled is None and trace.ops[0].t_issue == 2


def _bf16_load(rows: int, cols: int, extra: str = "") -> str:
    """A row-serial (default last-column-first order) bf16 Ldweights of the whole block."""
    return f"ldweights in_dtype=bf16 rows={rows} cols={cols} src={_t3('sbuf(0,0x0)', cols)}{extra}\n"


def _bf16_matmul(rows: int, cols: int, n: int, offset: int = 0, flags: str = "") -> str:
    return (f"matmul in_dtype=bf16 out_dtype=fp32 rows={rows} cols={cols} {flags}acc=single "
            f"src={_t3('sbuf(0,0x200)', n)} dst={_t3(f'psum(0,0,{offset})', n)}\n")


def test_the_seventeenth_micro_op_waits_for_the_first_to_complete():
    """D-T38: at most 16 micro-ops in flight.  17 one-vector bf16 matmuls on a 64 x 64 array (weights
    loaded by an earlier run, `contract` profile) issue 2 cycles apart while fewer than 16 are in
    flight; the 17th issues the cycle after the first completes, 16 in flight then, never 17."""
    eng = Engine(G, rows=64, cols=64, timing="contract")
    eng.run(assemble(_bf16_load(64, 64), G))
    ops = eng.run(assemble("".join(_bf16_matmul(64, 64, 1, i) for i in range(17)), G)).ops
    assert [o.t_issue for o in ops[:16]] == list(range(2, 34, 2))
    assert ops[0].t_complete > ops[15].t_issue + 2                   # the limit binds
    assert ops[16].t_issue == min(o.t_complete for o in ops[:16]) + 1


def test_the_inter_instruction_delay_spaces_issues_by_one_plus_its_count():
    """arr_cluster_cfg.en_inter_instr_dly: each issue at least 1 + inter_instr_dly_cnt cycles after the
    one before (2-row loads, whose port frees 2 cycles after issue): 6 apart with a count of 5,
    2 (the decode's rhythm) with 0."""
    for count, gap in ((5, 6), (0, 2)):
        eng = Engine(G, rows=R, cols=C)
        eng.regs.set("arr_cluster_cfg", "en_inter_instr_dly", 1)
        eng.regs.set("arr_cluster_cfg", "inter_instr_dly_cnt", count)
        ops = eng.run(assemble(_bf16_load(2, C) * 3, G)).ops
        assert [o.t_issue for o in ops] == [2, 2 + gap, 2 + 2 * gap], count


def test_a_wait_consumes_the_set_it_saw():
    """Two loads wait for event 7: a set at 40 releases the first (41) only; the second needs the set
    at 100 (101), and with no second set the run stalls on it."""
    text = assemble(_bf16_load(R, C, " wait=7") * 2, G)
    for sets, issues in (((40, 100), [41, 101]), ((40,), [41, None])):
        eng = Engine(G, rows=R, cols=C)
        for s in sets:
            eng.schedule_event(7, s)
        trace = eng.run(text)
        assert [o.t_issue for o in trace.ops] == issues
        assert (trace.stalled is None) == (len(sets) == 2)


def test_a_change_of_matmul_kind_waits_for_the_last_completion():
    """docs/timing.md: a matmul of another kind (a transpose after a matmul, a matmul after it) issues
    the cycle after the previous matmul's completion (under both profiles)."""
    xpose = ("matmul in_dtype=bf16 out_dtype=fp32 rows=8 cols=8 flags=(xpose_mode=enabled) acc=single "
             f"src={_t3('sbuf(0,0x200)', 4)} dst={_t3('psum(0,3,0)', 8)}\n")
    text = assemble(_bf16_load(R, C) + _bf16_matmul(R, C, 3) + xpose + _bf16_matmul(R, C, 3), G)
    for profile in ("contract", "public"):
        ops = Engine(G, rows=R, cols=C, timing=profile).run(text).ops
        assert [o.error for o in ops] == [0] * 4
        assert ops[2].t_issue == ops[1].t_complete + 1 and ops[3].t_issue == ops[2].t_complete + 1, profile


def test_a_load_follows_the_row_wavefront_an_ldtags_every_swap():
    """Under `public` (D-T98) a row-serial Ldweights after a matmul issues at the row wavefront,
    t_data + P (row0 + K + C - 1) - K - L; an LdTags after a MatmulSparse waits for the sparse
    matmul's last vector to leave (issue + N + C), beyond every PE's swap (t_data + P (R + C) - L)."""
    ops = Engine(G, rows=R, cols=C).run(assemble(_bf16_load(R, C) + _bf16_matmul(R, C, 3) + _bf16_load(R, C), G)).ops
    t_data = ops[1].t_issue + L
    assert ops[2].t_issue == t_data + (0 + R + C - 1) - R - L
    n = 20
    tags = f"ldtags in_dtype=uint16 force_tag_bits=0 rows={R} cols={C} src={_t3('sbuf(0,0x300)', 2)}\n"
    sparse = (f"matmul_sparse in_dtype=fp16 out_dtype=fp32 rows={R} cols={C} acc=single "
              f"src=(start_addr=sbuf(0,0x400), step_elem=[1,0,0,{n}], num_elem=[{n},1,1,2]) "
              f"dst={_t3('psum(0,1,0)', n)}\n")
    load = f"ldweights in_dtype=fp16 rows={R} cols={C} src={_t3('sbuf(0,0x0)', C)}\n"
    ops = Engine(G, rows=R, cols=C).run(assemble(tags + load + sparse + tags, G)).ops
    assert [o.error for o in ops] == [0] * 4
    assert ops[3].t_issue == ops[2].t_issue + n + C > ops[2].t_issue + L + (R + C) - L


def test_a_runs_first_column_serial_load_runs_a_row_a_cycle():
    """D-T99: a column-serial load (plain, first-column-first, under `public`) with no matmul before it
    moves its groups a row each cycle (skew 1): a 4-pass matmul after it, of other passes, waits for
    its last request, issue + (R + G - 2) + 1 with G = C / LOAD_COLS column groups."""
    from tensore.model import timing
    ops = Engine(G, rows=R, cols=C).run(assemble(LOAD + _matmul(0), G)).ops
    groups = -(-C // timing.LOAD_COLS)
    assert [o.error for o in ops] == [0, 0]
    assert ops[1].t_issue == ops[0].t_issue + (R + groups - 2) + 1
