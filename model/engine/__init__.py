"""The golden engine: runs a descriptor program against SBUF and PSUM, cycle-accurately.

The sequencer (seed 000 section 10, SPEC section 8) takes descriptors in order through the
instruction FIFO, decodes and checks each one (SPEC D-23), issues it when its dependencies allow
(docs/timing.md), and executes it: the values come from model.array / model.psum, the cycles from
model.timing; PSUM writes are made in cycle order across micro-ops, as hardware makes them
(PsumOrder._flush).  The result is a Trace (model/trace.py): every architectural event with its
cycle (PSUM writes with partition, address and bits; weight swaps; refusals; completions) plus the
final state.  trace="aggregate" records each matmul's PSUM writes as one WriteBlock of arrays
instead of an Event per write (same values, cycles and order; what a large kernel needs, D-T77).

One concept a module, each importing only those above it:

    records.py      OpRecord (an op's cycles and outcome), Weights (a plane of PE weights)
    issue.py        IssueRules: the FIFO, the scoreboard and the issue rules (D-T38, D-T98 - D-T100)
    operands.py     Operands: SBUF reads (codes, MX scales, values, element order)
    psum_order.py   PsumOrder: pending PSUM actions made in cycle order (D-T40 (6))
    execute.py      Execution: what each opcode does, and when
    seeds.py        Seeds: the SR seed micro-ops (seed 000 section 5)
    core.py         Engine: composes them; host interface, geometry, decode, run()"""
from tensore.model.engine.core import TRACE_MODES, Engine, check_array
from tensore.model.engine.records import OpRecord, Weights

__all__ = ["TRACE_MODES", "Engine", "OpRecord", "Weights", "check_array"]
