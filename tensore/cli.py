"""The `tensore` command line."""
from __future__ import annotations

import argparse
import dataclasses
import signal
import sys
from pathlib import Path

import numpy as np

from tensore.model import dtypes as dt


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version
    try:
        return version("tensore")
    except PackageNotFoundError:
        return "unknown (not installed)"


def dtype_table(gen) -> str:
    """A table of a generation's dtype codes: format, roles, gates and sample conversions."""
    gen = dt.Gen.parse(gen)
    samples = np.array([1.0, -0.1, 3.14159, 1e-6, 70000.0], np.float32)
    head = f"{'code':>4}  {'name':<10} {'format':<8} {'roles':<28} {'valid':<5}  " + \
        "  ".join(f"{s:>9.6g}" for s in samples)
    lines = [f"NEURON_ISA_TPB_DTYPE on {gen.name} ({dt.enum_count(gen)} codes); "
             f"samples narrowed from fp32 (RNE) and widened back", head, "-" * len(head)]
    for d in sorted(dt.dtypes_of(gen)):
        roles = "|".join(r.name.lower() for r in dt.Role if r in dt.roles_of(d) and r.name)
        try:
            fmt = dt.format_of(d, gen)
            back = dt.to_fp32(dt.from_fp32(samples, d, gen), d, gen)
            vals = "  ".join(f"{v:>9.6g}" for v in back.tolist())
            name = fmt.name
        except ValueError:
            name, vals = (f"cptc{dt.cptc_bits(d)}" if dt.is_cptc(d) else "-"), "(no numeric value)"
        valid = "yes" if dt.is_valid_dtype(d, gen) else "no"
        lines.append(f"0x{int(d):02X}  {d.name:<10} {name:<8} {roles:<28} {valid:<5}  {vals}")
    return "\n".join(lines)


def cmd_dtypes(args) -> int:
    print(dtype_table(args.gen))
    return 0


def cmd_demo(args) -> int:
    """The main job: library programs through the engine RTL in Verilator, each checked every cycle
    against the golden engine and its PSUM against the library's independent expectation."""
    from tensore.cosim import programs
    gen = dt.Gen.parse(args.gen)
    print(dtype_table(gen))
    cols = args.cols or args.rows
    progs = [programs.accumulate_group(gen, rows=args.rows, cols=cols, n=args.n)]
    if gen >= dt.Gen.MARIANA:
        progs.append(programs.bf16_drain(gen, rows=args.rows, cols=cols, n=args.n, sr=True))
    failures = 0
    for prog in progs:
        print(f"\n== {prog.name} ({gen.name}, {prog.rows}x{prog.cols} array) ==")
        print(prog.text.strip())
        suffix = ".vcd" if args.sim != "icarus" else ".fst"
        waves = None if args.no_waves else Path(args.waves_dir) / f"{prog.name}_{gen.name.lower()}{suffix}"
        failures += _cosim(prog, args.sim, waves, psum_partitions=max(16, cols), opt=args.opt, harness=args.harness)
    print(f"\n{'all checks passed' if not failures else f'{failures} program(s) FAILED'}")
    return 1 if failures else 0


def _cosim(prog, sim: str, waves, *, psum_partitions: int, sbuf_latency: int = 2, opt: str = "-O1",
           harness: str | None = None, dtypes=None) -> int:
    """Run one program on `sim` in lockstep with the golden engine; print the summary; 1 on failure."""
    import time
    t0 = time.perf_counter()
    if sim == "amaranth":
        from tensore.cosim import lockstep
        stats: dict = {}
        bad = lockstep.check(prog, psum_partitions=psum_partitions, sbuf_latency=sbuf_latency, stats=stats,
                             vcd_dir=str(Path(waves).parent) if waves else "build/lockstep")
        lk, cycles, checks, seconds = stats["lockstep"], stats["cycles"], stats["checks"], stats["seconds"]
        wave_file = bad.vcd if bad else None
    else:
        from tensore.cosim import hdl
        res = hdl.run(prog, sim=sim, waves=bool(waves), waves_to=waves, psum_partitions=psum_partitions,
                      sbuf_latency=sbuf_latency, opt=opt, harness=harness, dtypes=dtypes,
                      log=lambda m: print(f"  {m}", flush=True))
        bad, lk, cycles, checks, seconds, wave_file = res.mismatch, res.lockstep, res.cycles, res.checks, \
            res.seconds, res.waves
    trace = lk.trace
    print(run_summary(lk.eng, trace))
    # one PSUM write = one column's sum over the matmul's rows (x2 for an FP8 double-row PE)
    macs = sum(lk.eng.region(o.desc)[1] * o.psum_writes for o in trace.ops
               if o.name.startswith("matmul") and o.t_issue is not None)
    pes = prog.rows * prog.cols
    expect_bad = _check_expectations(prog, lk.eng)
    print(f"  RTL on {sim}: {len(lk.descs)} micro-ops, {cycles} cycles, {checks} checks "
          f"(every PSUM write of every partition, the error status each cycle, {len(lk.regs)} registers at the end)")
    if seconds:
        print(f"  simulation {seconds:.2f} s: {cycles / seconds:,.0f} cycles/s, {pes * cycles / seconds:,.0f} PE-cycles/s "
              f"(total with export/build/golden {time.perf_counter() - t0:.1f} s)")
    print(f"  PE utilisation {macs / max(1, pes * trace.cycles):.1%} ({macs:,} MACs in {trace.cycles} cycles x {pes} PEs)")
    print(f"  lockstep vs golden engine: {'OK' if bad is None else bad}")
    if prog.expect_fp32 or prog.expect_bf16:
        print(f"  golden PSUM vs independent expectation: {'OK' if not expect_bad else f'{expect_bad} MISMATCHES'}")
    if wave_file:
        print(f"  waveform: {wave_file}")
    return int(bad is not None or expect_bad > 0)


FULL_SIZE = {"maverick": (128, 256), "mariana": (128, 128)}
GENS = [g.name.lower() for g in dt.Gen]


def full_size_programs(gen, n: int, n_small: int) -> list:
    """#7's full-size set: a K=128 x N=128 x M=n bf16 accumulate group (three matmuls, MULTI_START
    zeroing two banks) and a BF16 drain with stochastic rounding, plus an MX program (FP8 E4M3 quad
    row, E8M0 block scales) and, where the generation has it (not MAVERICK), FP8 double row.
    MAVERICK's MX pattern (MXTensorV2) holds at most 255 elements per dimension and the RTL runs
    one-dimension MX patterns (D-T40): 4 x 60 elements, so its MX program is 128 x 60 x 60."""
    from tensore.cosim import programs
    gen = dt.Gen.parse(gen)
    kw = {"rows": 128, "cols": 128}
    mx_cols = 60 if gen.layout == dt.Gen.MAVERICK else 128
    mx = programs.mx(gen, "fp8_e4m3", "quad_row", rows=128, cols=mx_cols, n=min(n_small, mx_cols))
    progs = [programs.accumulate_group(gen, n=n, **kw), programs.bf16_drain(gen, n=n, sr=True, **kw),
             dataclasses.replace(mx, cols=FULL_SIZE[gen.name.lower()][1])]      # on the full array
    if gen.layout != dt.Gen.MAVERICK:
        progs.append(programs.double_row(gen, n=n_small, **kw))
    return progs


def cmd_cosim_full(args) -> int:
    """Full-size engines (MAVERICK 128 x 256, MARIANA 128 x 128; 128 PSUM partitions, 4 elements per PE)
    exported, built in Verilator and run against the golden engine, every cycle checked; writes a JSON
    summary.  Exports and builds are cached, so a second run only simulates."""
    import json
    import time
    from tensore.cosim import hdl
    from tensore.cosim.lockstep import Lockstep
    report, failures = [], 0
    for gen in args.gen:
        rows, cols = FULL_SIZE[gen]
        progs = full_size_programs(gen, args.n, args.n_small)
        print(f"== {gen.upper()} {rows} x {cols}: {', '.join(p.name for p in progs)} ==", flush=True)
        t0 = time.perf_counter()
        lks = [Lockstep(p, pack=4, psum_partitions=128) for p in progs]
        golden = time.perf_counter() - t0
        from tensore.rtl.fp.pe_mac import parse_dtypes
        cfg = hdl.Config(dt.Gen.parse(gen).name, rows, cols, 4, psum_partitions=128,
                         dtypes=parse_dtypes(gen, args.dtypes))
        if cfg.dtypes is not None:              # a specialised build runs the programs it carries
            keep = [not (hdl.needed_dtypes(lk) - set(cfg.dtypes)) for lk in lks]
            for p, k in zip(progs, keep):
                if not k:
                    print(f"  {p.name}: skipped (needs a dtype outside --dtypes)", flush=True)
            progs, lks = [p for p, k in zip(progs, keep) if k], [lk for lk, k in zip(lks, keep) if k]
        say = lambda m: print(f"  {m}", flush=True)       # noqa: E731
        exported = hdl.export_cached(cfg, log=say)
        if args.harness == "compiled":
            from tensore.cosim import harness
            built = harness.build(exported, opt=args.opt, log=say)
        else:
            built = hdl.build_cached(exported, "verilator", opt=args.opt, log=say)
        print(f"  golden runs {golden:.1f} s; export {sum(exported['seconds'].values()):.1f} s; "
              f"Verilator build {built['seconds']:.0f} s, peak {built['peak_child_mb']:,} MB", flush=True)
        print(f"  simulating {len(lks)} programs on the {args.harness} harness ...", flush=True)
        results = harness.simulate_many(lks, built, log=say) if args.harness == "compiled" else \
            hdl.simulate_many(lks, built)
        entry = {"gen": gen, "rows": rows, "cols": cols, "export_s": exported["seconds"], "build_s": built["seconds"],
                 "build_peak_mb": built["peak_child_mb"], "programs": []}
        for prog, res in zip(progs, results):
            lk = res.lockstep
            expect_bad = _check_expectations(prog, lk.eng)
            ok = res.mismatch is None and expect_bad == 0 and res.checks > res.cycles
            failures += not ok
            rate = res.cycles / res.seconds if res.seconds else 0.0
            print(f"  {prog.name}: {len(lk.descs)} micro-ops, {res.cycles} cycles, {res.checks:,} checks, "
                  f"{res.seconds:.0f} s ({rate:.2f} cycles/s, {rate * rows * cols:,.0f} PE-cycles/s): "
                  f"{'OK' if ok else 'FAILED'}"
                  f"{'' if res.mismatch is None else f' -- {res.mismatch}'}"
                  f"{'' if not expect_bad else f' -- {expect_bad} PSUM values differ from the expectation'}",
                  flush=True)
            entry["programs"].append({"name": prog.name, "cycles": res.cycles, "checks": res.checks,
                                      "seconds": round(res.seconds, 1), "cycles_per_s": round(rate, 3),
                                      "pe_cycles_per_s": round(rate * rows * cols), "ok": ok})
        report.append(entry)
        Path(args.output).parent.mkdir(parents=True, exist_ok=True)
        Path(args.output).write_text(json.dumps(report, indent=1) + "\n")
    print(f"\n{'all full-size programs passed' if not failures else f'{failures} program(s) FAILED'}; "
          f"summary in {args.output}")
    return 1 if failures else 0


def cmd_verilog(args) -> int:
    """Export the engine RTL as Verilog (rtl/export.py)."""
    from tensore.rtl.export import export_engine
    from tensore.rtl.fp.pe_mac import parse_dtypes
    res = export_engine(args.gen, args.rows, args.cols, pack=args.pack, sbuf_latency=args.sbuf_latency,
                        psum_partitions=args.psum_partitions, out_dir=args.output,
                        dtypes=parse_dtypes(args.gen, args.dtypes))
    for f in res["files"]:
        print(f"wrote {f} ({f.stat().st_size:,} bytes)")
    out = Path(args.output)
    print(f"wrote {res['filelist']}, {res['vlt']}, {out / 'engine.json'}; the simulator form (the array in loop "
          f"form, D-T60): {out / 'files_sim.f'}, {out / 'verilator_sim.vlt'}")
    print(f"{res['gen']} {res['rows']}x{res['cols']} engine, {res['psum_partitions']} PSUM partitions: "
          f"exported in {res['seconds']:.1f} s ({', '.join(f'{k} {v} s' for k, v in res['times'].items())})")
    return 0


def cmd_cosim(args) -> int:
    """Run a program on the engine RTL in lockstep with the golden engine."""
    from tensore.cosim.programs import Program
    from tensore.model import addrmap
    src = Path(args.program)
    gen = dt.Gen.parse(args.gen)
    cols = args.cols or (2 * args.rows if gen.layout == dt.Gen.MAVERICK else args.rows)
    sbuf = np.zeros((addrmap.PARTITIONS, 0x4000), np.uint8)
    if args.sbuf:
        sbuf = np.load(args.sbuf)["sbuf"].astype(np.uint8)
    prog = Program(src.stem, gen, args.rows, cols, src.read_text(), sbuf)
    from tensore.rtl.fp.pe_mac import parse_dtypes
    return _cosim(prog, args.sim, args.waves, psum_partitions=args.psum_partitions, sbuf_latency=args.sbuf_latency,
                  harness=args.harness, dtypes=parse_dtypes(gen, args.dtypes))


def _check_expectations(prog, engine) -> int:
    from tensore.model import addrmap
    bad = 0
    for (part, bank), (off, bits) in prog.expect_fp32.items():
        start = (bank * addrmap.PSUM_BANK_BYTES + off) // 4
        bad += int((engine.psum.cells(4)[part, start:start + bits.size] != bits).sum())
    for (part, bank), (off, codes) in prog.expect_bf16.items():
        start = (bank * addrmap.PSUM_BANK_BYTES + off) // 2
        bad += int((engine.psum.cells(2)[part, start:start + codes.size] != codes).sum())
    return bad


def cmd_asm(args) -> int:
    """Assemble; every descriptor the ISA checks refuse is reported with its source line and reasons
    (an error with --strict)."""
    from tensore.model.isa import check
    from tensore.model.isa.asm import assemble, descriptor_lines
    src = Path(args.source)
    text = src.read_text()
    data = assemble(text, args.gen, source=str(src))
    if args.output == "-":
        sys.stdout.buffer.write(data)
        sys.stdout.flush()
    else:
        out = Path(args.output or src.with_suffix(".bin"))
        out.write_bytes(data)
        print(f"{src}: {len(data) // 64} descriptors -> {out}")
    lines = descriptor_lines(text)
    refused = 0
    for i in range(0, len(data), 64):
        violations = check(data[i:i + 64], args.gen)
        refused += bool(violations)
        for v in violations:
            print(f"{src}:{lines[i // 64]}: {'error' if args.strict else 'warning'}: descriptor {i // 64} is "
                  f"refused: {v}", file=sys.stderr)
    return 1 if refused and args.strict else 0


def cmd_disasm(args) -> int:
    from tensore.model.isa.asm import disassemble
    data = Path(args.binary).read_bytes()
    text = disassemble(data, args.gen)
    sys.stdout.write(text)
    return 1 if "# ^ descriptor" in text else 0


def run_summary(engine, trace) -> str:
    """The summary `tensore run` prints: ops, cycles, errors, status registers and non-zero counters."""
    lines = [trace.summary()]
    regs = engine.regs
    lines.append(f"  status: err={regs.get('err_status', 'err')} err_code={regs.get('err_status', 'err_code'):#04x} "
                 f"err_opcode={regs.get('err_status', 'err_opcode'):#04x} err_count={regs.get('err_count', 'count')} "
                 f"done_count={regs.get('done_count', 'count')} matmul_done={regs.get('matmul_done_count', 'count')}")
    for bank in ("weight_load", "matmul", "pe_regwrite"):
        counts = {i: regs.counter64(bank, i) for i in range(49)}
        nz = [f"{2 << (i // 7)}x{2 << (i % 7)}:{v}" for i, v in counts.items() if v]
        if nz:
            lines.append(f"  perf {bank} (rows x cols bucket: count): {', '.join(nz)}")
    return "\n".join(lines)


def cmd_run(args) -> int:

    from tensore.model.engine import Engine
    from tensore.model.isa.asm import assemble
    from tensore.model.sbuf import Sbuf
    src = Path(args.program)
    data = src.read_bytes() if src.suffix == ".bin" else assemble(src.read_text(), args.gen, source=str(src))
    sbuf = Sbuf.from_npz(args.sbuf) if args.sbuf else Sbuf()
    engine = Engine(args.gen, rows=args.rows, cols=args.cols, sbuf=sbuf, sbuf_latency=args.sbuf_latency)
    engine.write_reg("perf_cntr_cfg", 1)
    trace = engine.run(data)
    print(run_summary(engine, trace))
    if args.output:
        out = Path(args.output if args.output.endswith(".npz") else args.output + ".npz")
        np.savez_compressed(out, psum=engine.psum.mem, sr_state=engine.psum.sr_state,
                            psum_writes=np.array([(e.cycle, e.data["partition"], e.data["offset"], e.data["bits"])
                                                  for e in trace.of_kind("psum_write")], np.int64).reshape(-1, 4))
        print(f"wrote {out} (psum [128, 16384] bytes, sr_state, psum_writes [cycle, partition, offset, bits])")
    refused = [o for o in trace.ops if o.error]
    if refused and not args.allow_refused:
        o = refused[0]
        why = f": {o.violations[0]}" if o.violations else ""
        print(f"error: {len(refused)} micro-op(s) refused; the first is #{o.index} {o.name} ({o.error.name}{why}); "
              "--allow-refused accepts programs that test refusals", file=sys.stderr)
        return 1
    return 1 if trace.stalled else 0


def cmd_regs(args) -> int:
    from tensore.regs import ROOT, generate
    for p in generate():
        print(f"wrote {p.relative_to(ROOT)}")
    return 0


def main(argv=None) -> int:
    if argv is None:                                        # the command: `tensore ... | head` ends quietly
        signal.signal(signal.SIGPIPE, signal.SIG_DFL)
    parser = argparse.ArgumentParser(prog="tensore", description=__doc__)
    parser.add_argument("--version", action="version", version=f"tensore {_version()}")
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("dtypes", help="print the dtype table of a generation")
    p.add_argument("--gen", default="maverick", choices=GENS, type=str.lower)
    p.set_defaults(func=cmd_dtypes)
    p = sub.add_parser("demo", help="the main job (see README): library programs through the RTL in Verilator")
    p.add_argument("--gen", default="mariana", choices=GENS, type=str.lower)
    p.add_argument("--rows", type=int, default=8)
    p.add_argument("--cols", type=int, default=None)
    p.add_argument("-n", type=int, default=64, help="moving vectors per matmul")
    p.add_argument("--sim", default="verilator", choices=["verilator", "icarus", "amaranth"])
    p.add_argument("--waves-dir", default="build/demo")
    p.add_argument("--no-waves", action="store_true", help="no waveform (a build without tracing)")
    p.add_argument("--harness", default=None, choices=["compiled", "cocotb"],
                   help="Verilator testbench: the compiled C++ harness (default) or cocotb (Icarus: cocotb)")
    p.add_argument("--opt", default="-O0", help="C++ optimisation of the Verilator build (-O0 builds about twice "
                   "as fast as -O1; the demo's programs are short)")
    p.set_defaults(func=cmd_demo)
    p = sub.add_parser("verilog", help="export the engine as Verilog (one PE, row and PSUM module, files.f, .vlt)")
    p.add_argument("--gen", default="mariana", choices=GENS, type=str.lower)
    p.add_argument("--rows", type=int, default=16)
    p.add_argument("--cols", type=int, default=None)
    p.add_argument("--pack", type=int, default=None)
    p.add_argument("--sbuf-latency", type=int, default=2)
    p.add_argument("--psum-partitions", type=int, default=16)
    p.add_argument("-o", "--output", default="build/verilog/engine")
    p.add_argument("--dtypes", nargs="+", default=None, metavar="DTYPE",
                   help="a specialised build: PEs that multiply only these dtypes (e.g. bf16 fp8_e4m3)")
    p.set_defaults(func=cmd_verilog)
    p = sub.add_parser("cosim", help="run a program (.s) on the engine RTL in lockstep with the golden engine")
    p.add_argument("program")
    p.add_argument("--gen", required=True, choices=GENS, type=str.lower)
    p.add_argument("--rows", type=int, default=8)
    p.add_argument("--cols", type=int, default=None, help="array columns (default rows; 2 x rows on MAVERICK)")
    p.add_argument("--sim", default="verilator", choices=["verilator", "icarus", "amaranth"])
    p.add_argument("--waves", default=None, help="waveform file to write (VCD on Verilator and Amaranth, FST on Icarus)")
    p.add_argument("--sbuf", help="npz with an array 'sbuf' ([partitions, bytes] uint8)")
    p.add_argument("--psum-partitions", type=int, default=16)
    p.add_argument("--sbuf-latency", type=int, default=2)
    p.add_argument("--harness", default=None, choices=["compiled", "cocotb"],
                   help="Verilator testbench: the compiled C++ harness (default) or cocotb (Icarus: cocotb)")
    p.add_argument("--dtypes", nargs="+", default=None, metavar="DTYPE",
                   help="a specialised build: PEs that multiply only these dtypes (e.g. bf16 fp8_e4m3)")
    p.set_defaults(func=cmd_cosim)
    p = sub.add_parser("cosim-full", help="full-size engines in Verilator against the golden engine (make cosim-full)")
    p.add_argument("--gen", nargs="+", default=list(FULL_SIZE), choices=list(FULL_SIZE))
    p.add_argument("-n", type=int, default=512, help="moving vectors per bf16 matmul")
    p.add_argument("--n-small", type=int, default=128, help="moving vectors of the MX and double-row matmuls")
    p.add_argument("--opt", default="-O1", help="C++ optimisation of the Verilator build")
    p.add_argument("--harness", default="compiled", choices=["compiled", "cocotb"], help="Verilator testbench")
    p.add_argument("--dtypes", nargs="+", default=None, metavar="DTYPE",
                   help="a specialised build: PEs that multiply only these dtypes (e.g. bf16 fp8_e4m3)")
    p.add_argument("-o", "--output", default="build/cosim_full.json")
    p.set_defaults(func=cmd_cosim_full)
    p = sub.add_parser("asm", help="assemble a micro-op program (docs/isa.md) to 64-byte descriptors")
    p.add_argument("source")
    p.add_argument("-o", "--output", help="the descriptors (default: the source with .bin; - for stdout)")
    p.add_argument("--gen", required=True, choices=GENS, type=str.lower)
    p.add_argument("--strict", action="store_true", help="exit 1 if the ISA checks refuse any descriptor")
    p.set_defaults(func=cmd_asm)
    p = sub.add_parser("disasm", help="disassemble descriptors; lists every violation (exit 1 if any)")
    p.add_argument("binary")
    p.add_argument("--gen", required=True, choices=GENS, type=str.lower)
    p.set_defaults(func=cmd_disasm)
    p = sub.add_parser("run", help="run a program (.s or .bin) in the golden engine and print a summary")
    p.add_argument("program")
    p.add_argument("--gen", required=True, choices=GENS, type=str.lower)
    p.add_argument("--sbuf", help="npz with an array 'sbuf' ([partitions, bytes] uint8)")
    p.add_argument("-o", "--output", help="npz to write PSUM, SR states and the PSUM write trace to")
    p.add_argument("--rows", type=int, default=128)
    p.add_argument("--cols", type=int, default=None)
    p.add_argument("--sbuf-latency", type=int, default=2)
    p.add_argument("--allow-refused", action="store_true",
                   help="exit 0 although micro-ops were refused (programs that test refusals)")
    p.set_defaults(func=cmd_run)
    p = sub.add_parser("regs", help="regenerate the register artefacts from rtl/regs/arr_seq.rdl")
    p.set_defaults(func=cmd_regs)
    from tensore.kernel_cli import register as register_kernels
    register_kernels(sub)
    args = parser.parse_args(argv)
    try:
        return args.func(args)
    except (ValueError, TypeError, OSError) as exc:
        print(f"tensore: error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
