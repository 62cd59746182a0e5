"""Issue rules of the golden engine (model/engine/issue.py) at their edges, against docs/timing.md and
D-T38 written here with plain integers: a 4-pass matmul keeps the array's rhythm while the previous
matmul is in flight, up to and including its completion cycle; a host event set before the run."""

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
