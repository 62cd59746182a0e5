"""make cosim-full's GEMM kernel program (tensore/cli.py kernel_gemm): the cosim-full program list at
small engine sizes, the kernel's own result check in the summary (C read back from the golden run
against the exact contract and float64 np.matmul of the quantised inputs), and the list on small
Verilator builds in lockstep through the summary cosim-full prints."""
import json

import numpy as np
import pytest

from tensore.cli import full_size_programs, kernel_check, kernel_gemm, program_result
from tensore.cosim.hdl import HdlResult
from tensore.cosim.lockstep import Lockstep
from tensore.model.trace import WriteBlock

SMALL = {"mariana": (8, 8), "maverick": (8, 16)}


def _golden_result(prog):
    """What cosim-full reports for `prog` when the RTL matched every cycle (the RTL runs below)."""
    lk = Lockstep(prog, pack=4, psum_partitions=16)
    return HdlResult(None, lk.end, lk.end + lk.expected_writes(), 1.0, "verilator", lockstep=lk)


@pytest.mark.parametrize("gen", SMALL)
def test_program_list_at_small_size(gen):
    """The full-size list at 8 x 8 / 8 x 16, the kernel GEMM last: three K tiles per accumulate group
    (MULTI_START / MID / END), a full and a partial N tile in banks of their own, every Ldweights
    after the first issued while a matmul streams (shadow weights); every program's golden PSUM
    meets its expectation and the GEMM's summary carries its result check."""
    rows, cols = SMALL[gen]
    progs = full_size_programs(gen, 8, 8, rows=rows, cols=cols, gemm_m=16)
    assert [p.name for p in progs][-1] == "kernel_gemm" and all((p.rows, p.cols) == (rows, cols) for p in progs)
    gemm = progs[-1]
    assert gemm.out_shape == (16, cols + cols // 2) and gemm.a_codes.shape[1] == 3 * rows
    assert [len(t.ops) for t in gemm.tiles] == [3, 3]
    banks = [b for t in gemm.tiles for b in range(t.bank, t.bank + t.banks)]
    assert len(set(banks)) == len(banks) == (3 if gen == "maverick" else 2)
    for p in progs:
        assert p.expect_fp32 or p.expect_bf16, p.name
        ok, line, entry = program_result(p, _golden_result(p), rows * cols)       # with the expectations
        assert ok, line
    trace = _golden_result(gemm).lockstep.trace
    mm = [o for o in trace.ops if o.name.startswith("matmul")]
    loads = [o for o in trace.ops if o.name.startswith("ldweights")]
    assert all(any(m.t_issue <= w.t_issue < m.t_complete for m in mm) for w in loads[1:])
    assert "bit-exact to the contract" in line and "16 x 24 x" in line
    res = json.loads(json.dumps(entry))["result"]
    assert res["ok"] and res["bit_exact"] and res["contract_mismatches"] == 0 and res["normwise_rel"] < 1e-6


def test_a_wrong_result_fails_the_check():
    """One bit of one final PSUM write changed in the golden trace: the read-back result differs
    from the contract and cosim-full reports the program FAILED."""
    prog = kernel_gemm("mariana", 4, 4, m=8)
    res = _golden_result(prog)
    assert kernel_check(prog, res.lockstep.trace)["ok"]
    last = prog.tiles[0].last_op
    block = next(x for x in res.lockstep.trace.log if isinstance(x, WriteBlock) and x.op == last)
    block.bits[0, 0] ^= 1 << 20                 # a kernel's golden trace holds its writes as blocks (D-T77)
    check = kernel_check(prog, res.lockstep.trace)
    assert not check["ok"] and check["contract_mismatches"] == 1 and not check["bit_exact"]
    ok, line, entry = program_result(prog, res, 16)
    assert not ok and not entry["ok"] and "FAILED" in line and "1 value differs from the contract" in line


def test_other_programs_have_no_kernel_check():
    from tensore.cosim import programs
    p = programs.accumulate_group("mariana", n=4)
    assert kernel_check(p, None) is None
    assert "result" not in program_result(p, _golden_result(p), 64)[2]


# the builds tests/test_cosim_hdl.py makes for the library (8 x 8 engines, 8 elements per PE)
BUILDS = {"mariana": (8, 8), "maverick": (8, 8)}


# minutes on 2 cores: make cosim (make test keeps one Verilator library run per generation)
@pytest.mark.slow
@pytest.mark.cosim
@pytest.mark.parametrize("gen", [pytest.param(g, marks=pytest.mark.xdist_group(g)) for g in BUILDS])
def test_program_list_on_verilator(gen):
    """The cosim-full list (kernel GEMM included) on a small Verilator build in lockstep, through the
    summary cosim-full prints."""
    from tensore.cosim import hdl
    rows, cols = BUILDS[gen]
    progs = full_size_programs(gen, 16, 8, rows=rows, cols=cols, gemm_m=24)
    results = hdl.run_many(progs, pack=8)
    for p, r in zip(progs, results):
        ok, line, entry = program_result(p, r, rows * cols)
        assert ok, line
    assert entry["result"]["bit_exact"] and np.isfinite(entry["result"]["max_abs"])
