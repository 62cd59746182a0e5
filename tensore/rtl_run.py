"""A program on the engine RTL in lockstep with the golden engine (`tensore cosim`, `demo`, and the
kernels' --rtl), and the summaries and exit rules of a run it shares with `tensore run`."""
from __future__ import annotations

import sys
import time
from pathlib import Path

from tensore.model.timing import PERF_BANKS, PERF_COUNTERS
from tensore.model.words import plural


SUMMARY_OPS = 16       # a longer program lists its executed micro-ops only when asked (-v)


def run_summary(engine, trace, verbose: bool = True) -> str:
    """The summary `tensore run` prints: ops, cycles, errors, status registers and non-zero counters;
    not `verbose` and more than SUMMARY_OPS micro-ops: no line per executed micro-op (refused and
    faulting ones keep theirs)."""
    per_op = verbose or len(trace.ops) <= SUMMARY_OPS
    lines = [trace.summary(per_op=per_op)]
    if not per_op:
        lines.append(f"  ({plural(sum(o.t_issue is not None for o in trace.ops), 'micro-op')} executed: -v lists each)")
    regs = engine.regs
    lines.append(f"  status: err={regs.get('err_status', 'err')} err_code={regs.get('err_status', 'err_code'):#04x} "
                 f"err_opcode={regs.get('err_status', 'err_opcode'):#04x} err_count={regs.get('err_count', 'count')} "
                 f"done_count={regs.get('done_count', 'count')} matmul_done={regs.get('matmul_done_count', 'count')}")
    for bank in PERF_BANKS:
        counts = {i: regs.counter64(bank, i) for i in range(PERF_COUNTERS)}
        nz = [f"{2 << (i // 7)}x{2 << (i % 7)}:{v}" for i, v in counts.items() if v]
        if nz:
            lines.append(f"  perf {bank} (rows x cols bucket: count): {', '.join(nz)}")
    return "\n".join(lines)


def refusal_error(trace, allow: bool) -> bool:
    """True when a micro-op of the golden run was refused, or reported an error when executed, and
    `allow` (--allow-refused) is False, after printing the one-line error; the rule of `run` and
    `cosim` alike (a program that tests refusals says so)."""
    if allow:
        return False
    refused = [o for o in trace.ops if o.error]
    if refused:
        o = refused[0]
        why = f": {o.violations[0].detail}" if o.violations else ""
        print(f"error: {plural(len(refused), 'micro-op')} refused; the first is #{o.index} {o.name} ({o.error.name} "
              f"({o.error.value:#04x}){why}); "
              "--allow-refused accepts programs that test refusals", file=sys.stderr)
        return True
    faulted = [o for o in trace.ops if o.fault]
    if faulted:
        o = faulted[0]
        print(f"error: {plural(len(faulted), 'micro-op')} reported an error when executed; the first is #{o.index} {o.name} "
              f"({o.fault.name}); --allow-refused accepts programs that test errors", file=sys.stderr)
        return True
    return False


def check_expectations(prog, engine) -> int:
    """How many PSUM values of `engine` differ from the program's independent expectation
    (expect_fp32, expect_bf16)."""
    from tensore.model import addrmap
    bad = 0
    for (part, bank), (off, bits) in prog.expect_fp32.items():
        start = (bank * addrmap.PSUM_BANK_BYTES + off) // 4
        bad += int((engine.psum.cells(4)[part, start:start + bits.size] != bits).sum())
    for (part, bank), (off, codes) in prog.expect_bf16.items():
        start = (bank * addrmap.PSUM_BANK_BYTES + off) // 2
        bad += int((engine.psum.cells(2)[part, start:start + codes.size] != codes).sum())
    return bad


def _amaranth(prog, waves, *, pack, psum_partitions: int, sbuf_latency: int, waves_depth: int):
    """Amaranth's simulator: (mismatch, stats, waveform).  A waveform asked for is written whether or
    not the run passes (lockstep.run_waves); without one, a mismatch is re-run with a VCD up to it."""
    from tensore.cosim import lockstep
    from tensore.cosim.hdl import fit_pack
    kw = dict(psum_partitions=psum_partitions, sbuf_latency=sbuf_latency)
    kw["pack"] = fit_pack([lockstep.Lockstep(prog, pack=pack, **kw)], pack)
    stats: dict = {}
    if waves:
        bad = lockstep.run_waves(prog, waves, depth=waves_depth, stats=stats, **kw)
        return bad, stats, str(Path(waves).resolve())
    bad = lockstep.check(prog, stats=stats, vcd_dir="build/lockstep", **kw)
    return bad, stats, bad.vcd if bad else None


def run_rtl(prog, sim: str, waves, *, psum_partitions: int, sbuf_latency: int = 2, opt: str | None = "-O1",
            harness: str | None = None, dtypes=None, waves_depth: int = 0, pack: int | None = None,
            allow_refused: bool = False, verbose: bool = True, result: dict | None = None) -> int:
    """Run one program on `sim` in lockstep with the golden engine; print the summary; 1 on failure.
    A program whose golden run refuses a micro-op, or has one report an error when executed, fails
    before the RTL runs unless `allow_refused` (the rule of `tensore run`, refusal_error).
    The engine has `pack` elements per PE, or as many as the program needs (cosim/hdl.fit_pack);
    `opt` None: $TENSORE_OPT, else -O1 (cosim/toolchain.cxx_opt).  `verbose` False: no line per
    executed micro-op for a long program (run_summary).  `result` (a dict) receives the lockstep,
    the mismatch and `rtl_writes` (outputs.py rows: the compiled harness's record, else, when
    every cycle matched, the golden writes the RTL was checked to make; None otherwise, D-T89)."""
    from tensore.cosim.wave_request import Trace
    if waves:
        Trace.of(waves, waves_depth)                 # a bad name or depth: refused before anything runs
    if not allow_refused:                            # the golden run, shared with the lockstep's (Program.golden)
        eng, golden_trace, code = prog.golden(sbuf_latency)
        if any(o.error or o.fault for o in golden_trace.ops):
            print(run_summary(eng, golden_trace, verbose))
            print(f"  RTL on {sim}: not run (--allow-refused runs it and checks its refusals and errors against "
                  "the golden engine's)")
            return int(refusal_error(golden_trace, allow_refused))
    t0 = time.perf_counter()
    if sim == "amaranth":
        bad, stats, wave_file = _amaranth(prog, waves, pack=pack, psum_partitions=psum_partitions,
                                          sbuf_latency=sbuf_latency, waves_depth=waves_depth)
        run = bad, stats["lockstep"], stats["cycles"], stats["checks"], stats["seconds"], wave_file
    else:
        from tensore.cosim import hdl
        res = hdl.run(prog, sim=sim, waves_to=waves, waves_depth=waves_depth, psum_partitions=psum_partitions,
                      sbuf_latency=sbuf_latency, opt=opt, harness=harness, dtypes=dtypes, pack=pack,
                      log=lambda m: print(f"  {m}", flush=True))
        run = res.mismatch, res.lockstep, res.cycles, res.checks, res.seconds, res.waves
    if result is not None:
        from tensore.outputs import harness_write_rows, psum_write_rows
        bad, lk = run[:2]
        rec = getattr(lk, "rtl_writes", None)
        result.update(lockstep=lk, mismatch=bad, rtl_writes=harness_write_rows(rec) if rec is not None else
                      psum_write_rows(lk.trace) if bad is None else None)
    return _report(prog, sim, *run, t0=t0, verbose=verbose)


def _report(prog, sim: str, bad, lk, cycles: int, checks: int, seconds: float, wave_file, *, t0: float,
            verbose: bool) -> int:
    """Print run_rtl's summary of a lockstep run (`bad`: its mismatch, None when every cycle matched);
    1 on a mismatch or a PSUM value off the program's expectation."""
    trace = lk.trace
    print(run_summary(lk.eng, trace, verbose))
    # one PSUM write = one column's sum over the matmul's rows (x2 for an FP8 double-row PE)
    macs = sum(lk.eng.region(o.desc)[1] * o.psum_writes for o in trace.ops
               if o.name.startswith("matmul") and o.t_issue is not None)
    pes = prog.rows * prog.cols
    expect_bad = check_expectations(prog, lk.eng)
    print(f"  RTL on {sim}: {plural(len(lk.descs), 'micro-op')}, {plural(cycles, 'cycle')}, {plural(checks, 'check')} "
          f"(every PSUM write of every partition, the error status each cycle; at the end the idle engine, "
          f"{plural(len(lk.regs), 'register')} and {plural(len(lk.final_words), 'PSUM word')} of every partition read back)")
    print(f"  engine: {plural(lk.pack, 'element')} per PE, {plural(lk.psum_ports, 'PSUM write port')} per partition"
          + (", 32-bit sparse fmaps" if lk.need_sparse32 else ""))
    if seconds:
        print(f"  simulation loop {seconds:.2f} s: {cycles / seconds:,.0f} cycles/s, {pes * cycles / seconds:,.0f} PE-cycles/s "
              f"(total with export/build/golden {time.perf_counter() - t0:.1f} s)")
    print(f"  PE utilisation {macs / max(1, pes * trace.cycles):.1%} ({macs:,} MACs in {trace.cycles} cycles x {pes} PEs)")
    print(f"  lockstep vs golden engine: {'OK' if bad is None else bad}")
    refused, faulted = sum(bool(o.error) for o in trace.ops), sum(bool(o.fault) for o in trace.ops)
    if refused or faulted:
        print(f"  micro-ops refused: {refused} of {len(trace.ops)}; reported an error when executed: {faulted}")
    if prog.expect_fp32 or prog.expect_bf16:
        print(f"  golden PSUM vs independent expectation: {'OK' if not expect_bad else f'{expect_bad} MISMATCHES'}")
    if wave_file:
        from tensore.cosim import savefile
        print(f"  waveform: {wave_file} (GTKWave: gtkwave {savefile.write(wave_file)})")
    return int(bad is not None or expect_bad > 0)
