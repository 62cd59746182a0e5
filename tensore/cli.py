"""The `tensore` command line."""
from __future__ import annotations

import argparse
import dataclasses
import os
import signal
import sys
from pathlib import Path

# One BLAS thread unless told otherwise, before numpy and scipy load OpenBLAS (as tensore/bench.py,
# D-T77): the golden model's chains are many small BLAS calls, which threads slow down on shared
# cores (a 2048^3 `tensore gemm` took 156 s instead of 15 s on 2 loaded cores).
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import numpy as np  # noqa: E402

from tensore import kernel_cli, mutate_cli, random_cli, rtl_run, verify_cli  # noqa: E402
from tensore.args import (AUTO_OPT_PES, COLS_TYPE, COUNT_TYPE, GEN_HELP, GENS, NPZ_FILE, OPT_HELP,  # noqa: E402
                          PROG_HELP, PSUM_PARTITIONS_TYPE, ROWS_TYPE, RTL_SBUF_LATENCY, WAVES_DEPTH_HELP, WAVES_FILE,
                          InputFile, OutputFile, array_cols, check_array_args, cosim_opt, file_error, input_file,
                          int_at_least, opt_level, opt_or_auto, output_dir, output_file, timing_arg, waves_depth)
from tensore.cosim.toolchain import OPT_ENV  # noqa: E402
from tensore.model import dtypes as dt  # noqa: E402
from tensore.model.isa.microop import ARRAY_ROWS, full_cols  # noqa: E402
from tensore.model.words import plural  # noqa: E402
from tensore.rtl_run import SUMMARY_OPS, check_expectations, refusal_error, run_summary  # noqa: E402


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
        waves = None if args.no_waves else Path(args.waves_dir) / f"{prog.name}_{gen.name.lower()}.{args.waves_format}"
        failures += rtl_run.run_rtl(prog, args.sim, waves, psum_partitions=max(16, cols), opt=args.opt,
                                    harness=args.harness, waves_depth=args.waves_depth)
    print(f"\n{'all checks passed' if not failures else plural(failures, 'program') + ' FAILED'}")
    return 1 if failures else 0


FULL_SIZE = {g: (ARRAY_ROWS, full_cols(g)) for g in ("maverick", "mariana")}   # the cosim-full engines


def full_size_programs(gen, n: int, n_small: int, rows: int | None = None, cols: int | None = None,
                       gemm_m: int = 256) -> list:
    """#7's full-size set: a K=128 x N=128 x M=n bf16 accumulate group (three matmuls, MULTI_START
    zeroing two banks) and a BF16 drain with stochastic rounding, plus an MX program (FP8 E4M3 quad
    row, E8M0 block scales), where the generation has it (not MAVERICK) FP8 double row, and the GEMM
    kernel's program (kernel_gemm, M = gemm_m).  MAVERICK's MX program is K x 256 x 512 on both column
    halves (c256) in the tiled order, over MXTensorV2 patterns of 16 elements a row (at most 255 per
    dimension), which split the order's tiles (D-T40: rows that are neither a tile nor a slot of
    one), and MAVERICK adds a c256 BF16 drain with stochastic rounding over both halves
    (D-T40).  rows x cols: the engine (default the generation's full size); smaller engines run
    the same set (tests)."""
    from tensore.cosim import programs
    gen = dt.Gen.parse(gen)
    rows, cols = rows or ARRAY_ROWS, cols or full_cols(gen)
    maverick = gen.layout == dt.Gen.MAVERICK
    kw = {"rows": rows, "cols": cols // 2 if maverick else cols}      # the library works in one c128 half
    progs = [programs.accumulate_group(gen, n=n, **kw), programs.bf16_drain(gen, n=n, sr=True, **kw)]
    if maverick:
        progs += [programs.mx_rows(gen, "fp8_e4m3", "quad_row_tiled", rows, cols, n=n, n0=(16, 16), gap=2, c256=True),
                  programs.c256_sr(rows, cols, n=cols // 2 + 2)]
    else:
        mx = programs.mx(gen, "fp8_e4m3", "quad_row", rows=rows, cols=cols, n=n_small)
        progs += [dataclasses.replace(mx, cols=cols), programs.double_row(gen, n=n_small, **kw)]
    progs.append(kernel_gemm(gen, rows, cols, gemm_m))
    return progs


def kernel_gemm(gen, rows: int, cols: int, m: int = 256, seed: int = 5):
    """The GEMM kernel's program (tensore/kernels/gemm.py, D-T50) for a rows x cols engine: bf16
    M x 3R x 1.5C with fp32 PSUM.  Three K tiles accumulate (MULTI_START / MID / END; MAVERICK
    overwrite / accumulate), each Ldweights loads the shadow weights while the previous matmul
    streams, and a full-width and a half-width N tile (MAVERICK: a c256 and a c128 tile) take their
    own PSUM banks.  Its PSUM expectation is the kernel's exact contract (kernels/numerics.py)."""
    from tensore.kernels import gemm as G
    from tensore.kernels import numerics
    rng = np.random.default_rng(seed)
    k, n = 3 * rows, cols + cols // 2
    prog = G.gemm(rng.standard_normal((m, k)), rng.standard_normal((k, n)), dtype="bf16", gen=gen,
                  rows=rows, cols=cols, name="kernel_gemm")
    prog.expect_fp32 = kernel_psum(prog, numerics.contract(prog))
    return prog


def kernel_psum(prog, C: np.ndarray) -> dict:
    """{(partition, bank): (0, float32 bits)}: where a kernel GEMM's result C [M, N] sits in PSUM at
    the end (KernelProgram.read's layout); every tile in a bank of its own."""
    banks = [b for t in prog.tiles for b in range(t.bank, t.bank + t.banks)]
    if len(banks) != len(set(banks)) or prog.out_dtype != dt.Dtype.FP32:
        raise ValueError("a PSUM expectation needs fp32 cells and every tile in banks of its own")
    out = {}
    for t in prog.tiles:
        for s in range(t.banks):                        # MAVERICK c256: the upper half in the next bank
            block = C[t.m0:t.m0 + t.m, t.n0 + s * prog.half:t.n0 + min(t.n, (s + 1) * prog.half)]
            for part in range(block.shape[1]):
                out[(part, t.bank + s)] = (0, np.ascontiguousarray(block[:, part]).view(np.uint32))
    return out


KERNEL_TOL = 2.0 ** -10     # normwise relative error ||C - R||_F / ||R||_F against float64 R of the quantised inputs


def kernel_check(prog, trace) -> dict | None:
    """A kernel program's own result check, as the kernel tests make it: C read back from the golden
    trace, bit for bit against the exact contract and near float64 np.matmul of the quantised
    inputs (kernels/numerics.py).  None for other programs."""
    from tensore.kernels.gemm import KernelProgram
    from tensore.kernels.numerics import report
    if not isinstance(prog, KernelProgram):
        return None
    rep = report(prog, prog.read(trace))
    keep = ("max_abs", "max_rel", "normwise_rel", "ulp_max", "contract_mismatches", "bit_exact")
    out = {k: rep[k] for k in keep}
    out["ok"] = bool(rep["bit_exact"] and rep["normwise_rel"] <= KERNEL_TOL)
    return out


def program_result(prog, res, pes: int) -> tuple:
    """One cosim-full program's verdict: (ok, the printed line, the JSON entry).  `res`: an
    hdl.HdlResult (mismatch, cycles, checks, seconds, lockstep)."""
    lk = res.lockstep
    expect_bad = check_expectations(prog, lk.eng)
    kernel = kernel_check(prog, lk.trace)
    ok = res.mismatch is None and expect_bad == 0 and res.checks > res.cycles and (kernel is None or kernel["ok"])
    rate = res.cycles / res.seconds if res.seconds else 0.0
    line = (f"{prog.name}: {plural(len(lk.descs), 'micro-op')}, {plural(res.cycles, 'cycle')}, "
            f"{plural(res.checks, 'check', fmt=',')}, "
            f"{res.seconds:.0f} s ({rate:.2f} cycles/s, {rate * pes:,.0f} PE-cycles/s): {'OK' if ok else 'FAILED'}"
            f"{'' if res.mismatch is None else f' -- {res.mismatch}'}"
            f"{'' if not expect_bad else f' -- {expect_bad} PSUM values differ from the expectation'}")
    if kernel is not None:
        m, k, n = prog.out_shape[0], prog.a_codes.shape[1], prog.out_shape[1]
        line += (f"; {m} x {k} x {n} GEMM result (golden run) vs np.matmul of the quantised inputs: max abs "
                 f"{kernel['max_abs']:.3g}, normwise rel (Frobenius) {kernel['normwise_rel']:.3g}, "
                 + ("bit-exact to the contract" if kernel["bit_exact"]
                    else f"{plural(kernel['contract_mismatches'], 'value')} {'differs' if kernel['contract_mismatches'] == 1 else 'differ'} from the contract"))
    entry = {"name": prog.name, "cycles": res.cycles, "checks": res.checks, "seconds": round(res.seconds, 1),
             "cycles_per_s": round(rate, 3), "pe_cycles_per_s": round(rate * pes), "ok": ok}
    if kernel is not None:
        entry["result"] = {"shape_mkn": [m, k, n], **kernel}
    return ok, line, entry


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
        progs = full_size_programs(gen, args.n, args.n_small, gemm_m=args.gemm_m)
        for p in progs:
            p.timing = args.timing
        print(f"== {gen.upper()} {rows} x {cols}, timing {args.timing}: {', '.join(p.name for p in progs)} ==",
              flush=True)
        t0 = time.perf_counter()
        lks = [Lockstep(p, pack=4, psum_partitions=128) for p in progs]
        golden = time.perf_counter() - t0
        from tensore.rtl.fp.pe_mac import parse_dtypes
        cfg = hdl.Config(dt.Gen.parse(gen).name, rows, cols, 4, psum_partitions=128,
                         dtypes=parse_dtypes(gen, args.dtypes), timing=args.timing)
        if cfg.dtypes is not None:              # a specialised build runs the programs it carries
            keep = [not (hdl.needed_dtypes(lk) - set(cfg.dtypes)) for lk in lks]
            for p, k in zip(progs, keep):
                if not k:
                    print(f"  {p.name}: skipped (needs a dtype outside --dtypes)", flush=True)
            progs, lks = [p for p, k in zip(progs, keep) if k], [lk for lk, k in zip(lks, keep) if k]
        if lks:                                 # 4 elements per PE, more if a program needs them
            cfg = dataclasses.replace(cfg, pack=hdl.fit_pack(lks), psum_ports=hdl.fit_ports(lks))
        say = lambda m: print(f"  {m}", flush=True)       # noqa: E731
        exported = hdl.export_cached(cfg, log=say)
        if args.harness == "compiled":
            from tensore.cosim import harness
            built = harness.build(exported, opt=args.opt, log=say)
        else:
            built = hdl.build_cached(exported, "verilator", opt=args.opt, log=say)
        print(f"  golden runs {golden:.1f} s; export {exported['wall_seconds']:.1f} s; "
              f"Verilator build {built['seconds']:.0f} s, peak {built['peak_child_mb']:,} MB", flush=True)
        print(f"  simulating {plural(len(lks), 'program')} on the {args.harness} harness ...", flush=True)
        results = harness.simulate_many(lks, built, log=say) if args.harness == "compiled" else \
            hdl.simulate_many(lks, built)
        entry = {"gen": gen, "rows": rows, "cols": cols, "timing": args.timing, "export_s": exported["wall_seconds"],
                 "export_files_s": exported["seconds"], "build_s": built["seconds"],
                 "build_peak_mb": built["peak_child_mb"], "programs": []}
        for prog, res in zip(progs, results):
            ok, line, result = program_result(prog, res, rows * cols)
            failures += not ok
            print(f"  {line}", flush=True)
            entry["programs"].append(result)
        report.append(entry)
        Path(args.output).parent.mkdir(parents=True, exist_ok=True)
        Path(args.output).write_text(json.dumps(report, indent=1) + "\n")
    print(f"\n{'all full-size programs passed' if not failures else plural(failures, 'program') + ' FAILED'}; "
          f"summary in {args.output}")
    return 1 if failures else 0


def cmd_verilog(args) -> int:
    """Export the engine RTL as Verilog (rtl/export.py)."""
    from tensore.cosim.progress import Progress
    from tensore.rtl.export import export_engine
    from tensore.rtl.fp.pe_mac import parse_dtypes
    from tensore.rtl.config import PSUM_PORTS, Config
    cfg = Config(args.gen, args.rows, array_cols(args.gen, args.rows, args.cols), args.pack or 0, args.sbuf_latency,
                 args.psum_partitions, parse_dtypes(args.gen, args.dtypes), args.psum_ports or PSUM_PORTS,
                 args.sparse32, args.timing)   # a build the RTL cannot make is refused before any work
    with Progress("export", print, stage="Amaranth -> Verilog (Yosys), loop form"):
        res = export_engine(cfg.gen, cfg.rows, cfg.cols, pack=cfg.pack, sbuf_latency=cfg.sbuf_latency,
                            psum_partitions=cfg.psum_partitions, out_dir=args.output, dtypes=cfg.dtypes,
                            psum_ports=cfg.psum_ports, sparse32=cfg.sparse32, timing=cfg.timing)
    for f in res["files"]:
        print(f"wrote {f} ({f.stat().st_size:,} bytes)")
    out = Path(args.output)
    print(f"wrote {res['filelist']}, {res['vlt']}, {out / 'engine.json'}; the simulator form (the array in loop "
          f"form, D-T60): {out / 'files_sim.f'}, {out / 'verilator_sim.vlt'}")
    print(f"{res['gen']} {res['rows']}x{res['cols']} engine, {res['psum_partitions']} PSUM partitions, "
          f"timing {res['timing']}: "
          f"exported in {res['wall_seconds']:.1f} s ({', '.join(f'{k} {v} s' for k, v in res['times'].items())})")
    return 0


def cmd_cosim(args) -> int:
    """Run a program on the engine RTL in lockstep with the golden engine."""
    from tensore.cosim.programs import Program
    from tensore.inputs import load_sbuf, read_program
    from tensore.model import addrmap
    gen = dt.Gen.parse(args.gen)
    cols = array_cols(gen, args.rows, args.cols)
    src = read_program(args.program, gen)
    sbuf = load_sbuf(args.sbuf) if args.sbuf else np.zeros((addrmap.PARTITIONS, 0x4000), np.uint8)
    prog = Program(src.name, gen, args.rows, cols, src.source_text(gen), sbuf, timing=args.timing)
    from tensore.rtl.fp.pe_mac import parse_dtypes
    result: dict = {}
    rc = rtl_run.run_rtl(prog, args.sim, args.waves, psum_partitions=args.psum_partitions,
                         sbuf_latency=args.sbuf_latency, harness=args.harness, dtypes=parse_dtypes(gen, args.dtypes),
                         opt=cosim_opt(args.opt, args.rows, cols), pack=args.pack, waves_depth=args.waves_depth,
                         allow_refused=args.allow_refused, verbose=args.verbose, result=result)
    if args.output:                     # the golden run is the lockstep's (Program.golden, shared)
        from tensore.outputs import RUN_ARRAYS, save_results
        eng, trace, _ = prog.golden(args.sbuf_latency)
        rtl = result.get("rtl_writes")
        print(f"wrote {save_results(args.output, eng, trace, rtl_writes=rtl)} ({RUN_ARRAYS}"
              f"{', rtl_psum_writes' if rtl is not None else ''})")
    return rc


def cmd_asm(args) -> int:
    """Assemble; every descriptor the ISA checks refuse is reported with its source line and reasons
    (an error with --strict)."""
    from tensore.inputs import InputError, read_program
    from tensore.model.isa import check
    from tensore.model.isa.asm import descriptor_lines
    src = read_program(args.source, args.gen)
    if src.binary:
        raise InputError(f"{src.path}: binary descriptors, not assembly text (tensore disasm prints them as text)")
    data = src.data
    out = args.output or ("-" if src.path == "-" else str(Path(src.path).with_suffix(".bin")))
    if out == "-":
        sys.stdout.buffer.write(data)
        sys.stdout.flush()
    else:
        if src.path != "-" and Path(out).resolve() == Path(src.path).resolve():
            raise InputError(f"{src.path}: the output would overwrite the source; name it with -o")
        Path(out).write_bytes(data)
        print(f"{src.path}: {plural(len(data) // 64, 'descriptor')} -> {out}")
    lines = descriptor_lines(src.text)
    refused = 0
    for i in range(0, len(data), 64):
        violations = check(data[i:i + 64], args.gen)
        refused += bool(violations)
        for v in violations:
            print(f"{src.path}:{lines[i // 64]}: {'error' if args.strict else 'warning'}: descriptor {i // 64} is "
                  f"refused: {v}", file=sys.stderr)
    return 1 if refused and args.strict else 0


def cmd_disasm(args) -> int:
    """Disassemble a program (binary descriptors, or assembly text: assembled first); exit 1 if any
    descriptor breaks an ISA rule."""
    from tensore.inputs import read_program
    from tensore.model.isa.asm import disassemble
    text = disassemble(read_program(args.binary, args.gen).data, args.gen)
    sys.stdout.write(text)
    return 1 if "# ^ descriptor" in text else 0


def cmd_run(args) -> int:
    """Run a program in the golden engine: print the summary, optionally write PSUM and the trace."""
    engine, trace = _golden_run(args)
    print(run_summary(engine, trace))
    if args.output:
        from tensore.outputs import RUN_ARRAYS, save_results
        print(f"wrote {save_results(args.output, engine, trace)} ({RUN_ARRAYS})")
    if refusal_error(trace, args.allow_refused):
        return 1
    return 1 if trace.stalled else 0


def _golden_run(args) -> tuple:
    """(engine, trace) of `run` / `cost`'s program on the golden engine, perf counters on."""
    from tensore.inputs import load_sbuf, read_program
    from tensore.model.engine import Engine
    gen = dt.Gen.parse(args.gen)
    data = read_program(args.program, gen).data
    engine = Engine(gen, rows=args.rows, cols=array_cols(gen, args.rows, args.cols),
                    sbuf=load_sbuf(args.sbuf) if args.sbuf else None, sbuf_latency=args.sbuf_latency,
                    timing=args.timing)
    engine.write_reg("perf_cntr_cfg", 1)
    return engine, engine.run(data)


def cmd_cost(args) -> int:
    """Run a program in the golden engine and set each matmul's cycles beside the public cost model
    (tensore/kernels/public_cost.py, D-T93)."""
    from tensore.kernels.public_cost import compare, format_compare
    _, trace = _golden_run(args)
    print(f"timing profile: {args.timing} (docs/timing.md, 'Timing profiles')")
    print(trace.summary(per_op=False))
    print(format_compare(compare(trace, args.timing), limit=None if args.all else 16))
    if refusal_error(trace, args.allow_refused):
        return 1
    return 1 if trace.stalled else 0


def cmd_regs(args) -> int:
    """Generate the register artefacts under -o (default build/regs), or with --in-tree over the
    source checkout's committed ones; print each path as written."""
    from tensore.regs import generate, in_tree_root
    for p in generate(in_tree_root() if args.in_tree else args.output):
        print(f"wrote {p}")
    return 0


class DefaultsHelpFormatter(argparse.HelpFormatter):
    """--help text: an option's default appended as "(default: X)" unless its help already names
    its default, or it has none (None, or False of a flag)."""

    def _get_help_string(self, action):
        text = action.help or ""
        if help_needs_default(action) and "default" not in text:
            text += " (default: %(default)s)"
        return text


def help_needs_default(action) -> bool:
    """True when an option's --help is to say its default: an optional value that is not None,
    False (a flag) or argparse.SUPPRESS."""
    return (bool(action.option_strings) or action.nargs in ("?", "*")) and \
        action.default is not None and action.default is not False and action.default is not argparse.SUPPRESS


class Parser(argparse.ArgumentParser):
    """tensore's argument parsers: subcommands are Parsers too, with DefaultsHelpFormatter unless they
    ask for another formatter."""

    def __init__(self, *args, formatter_class=DefaultsHelpFormatter, **kw):
        super().__init__(*args, formatter_class=formatter_class, **kw)

    def error(self, message):
        """A usage error: one line on stderr and exit 2 (SPEC section 9); --help shows the usage."""
        self.exit(2, f"{self.prog}: error: {message} (--help: usage)\n")


def _golden_run_args(p, sbuf_help: str) -> None:
    """The program and engine options of `run` and `cost` (a golden run)."""
    p.add_argument("program", type=input_file, help=PROG_HELP)
    p.add_argument("--gen", required=True, choices=GENS, type=str.lower, help=GEN_HELP)
    p.add_argument("--sbuf", metavar="FILE", type=input_file, help=sbuf_help + "; default all zeros")
    p.add_argument("--rows", type=ROWS_TYPE, default=128, metavar="N",
                   help="PE rows: a multiple of 4 up to 128 (default 128)")
    p.add_argument("--cols", type=COLS_TYPE, default=None, metavar="N",
                   help="PE columns: a multiple of 4 (MAVERICK: 8) up to 128 (MAVERICK: 256); default rows "
                   "(MAVERICK: 2 x rows)")
    p.add_argument("--sbuf-latency", type=int_at_least(1, "an SBUF read takes at least a cycle"), default=2, metavar="CYCLES",
                   help="cycles from an SBUF read request to its data (>= 1; the RTL builds >= 2; default 2)")
    p.add_argument("--allow-refused", action="store_true",
                   help="exit 0 although micro-ops were refused (programs that test refusals)")
    timing_arg(p)


def build_parser() -> argparse.ArgumentParser:
    """The `tensore` argument parser, every subcommand registered (also those of tensore/kernel_cli.py,
    verify_cli.py, random_cli.py and mutate_cli.py)."""
    parser = Parser(prog="tensore", description=__doc__)
    parser.add_argument("--version", action="version", version=f"tensore {_version()}")
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("dtypes", help="print the dtype table of a generation")
    p.add_argument("--gen", default="maverick", choices=GENS, type=str.lower, help=GEN_HELP + " (default maverick)")
    p.set_defaults(func=cmd_dtypes)
    p = sub.add_parser("demo", help="the main job (see README): library programs through the RTL in Verilator")
    p.add_argument("--gen", default="mariana", choices=GENS, type=str.lower, help=GEN_HELP + " (default mariana)")
    p.add_argument("--rows", type=ROWS_TYPE, default=8, help="array rows (default 8)")
    p.add_argument("--cols", type=COLS_TYPE, default=None, help="array columns (default: --rows)")
    p.add_argument("-n", type=COUNT_TYPE, default=64, help="moving vectors per matmul")
    p.add_argument("--sim", default="verilator", choices=["verilator", "icarus", "amaranth"],
                   help="simulator: verilator (default), icarus or amaranth (Amaranth's own, slow; no build)")
    p.add_argument("--waves-dir", default="build/demo", help="where each program's waveform goes (default build/demo)")
    p.add_argument("--waves-format", default="fst", choices=["fst", "vcd"],
                   help="waveform format: fst (default; compact, GTKWave / Surfer read it) or vcd")
    p.add_argument("--waves-depth", type=waves_depth, default=0, metavar="N", help=WAVES_DEPTH_HELP)
    p.add_argument("--no-waves", action="store_true", help="no waveform (a build without tracing)")
    p.add_argument("--harness", default=None, choices=["compiled", "cocotb"],
                   help="Verilator testbench: the compiled C++ harness (default) or cocotb (Icarus: cocotb)")
    p.add_argument("--opt", type=opt_level, default="-O0", metavar="LEVEL",
                   help=OPT_HELP + "; default 0: the demo's programs are short")
    p.set_defaults(func=cmd_demo, array_cols=lambda gen, rows, cols: cols or rows)
    p = sub.add_parser("verilog", help="export the engine as Verilog (one PE, row and PSUM module, files.f, .vlt)")
    p.add_argument("--gen", default="mariana", choices=GENS, type=str.lower, help=GEN_HELP + " (default mariana)")
    p.add_argument("--rows", type=ROWS_TYPE, default=16, help="array rows (default 16)")
    p.add_argument("--cols", type=COLS_TYPE, default=None,
                   help="array columns (default: --rows; 2 x --rows on MAVERICK)")
    p.add_argument("--pack", type=int, default=None, choices=[1, 2, 4, 8],
                   help="elements per PE (default: 1 on MAVERICK, 2 elsewhere; 4 / 8 for MX quad / oct row)")
    p.add_argument("--sbuf-latency", type=RTL_SBUF_LATENCY, default=2, help="SBUF read latency in cycles (default 2)")
    p.add_argument("--psum-partitions", type=PSUM_PARTITIONS_TYPE, default=16, help="PSUM partitions (default 16)")
    p.add_argument("-o", "--output", default="build/verilog/engine", type=output_dir,
                   help="output directory (default build/verilog/engine)")
    p.add_argument("--dtypes", nargs="+", default=None, metavar="DTYPE",
                   help="a specialised build: PEs that multiply only these dtypes (e.g. bf16 fp8_e4m3)")
    p.add_argument("--psum-ports", type=int, default=None, choices=range(1, 9), metavar="N",
                   help="PSUM writes a partition takes in one cycle, 1-8 (default: the engine's, 2; `tensore cosim` "
                   "fits it to the program)")
    p.add_argument("--sparse32", action="store_true",
                   help="32-bit MatmulSparse fmaps (FP32 sparse values; `tensore cosim` builds them when needed)")
    timing_arg(p)
    p.set_defaults(func=cmd_verilog)
    p = sub.add_parser("cosim", help="run a program (.s) on the engine RTL in lockstep with the golden engine",
                       description="Run a program on the engine RTL in lockstep with the golden engine, every cycle "
                       "checked. Exit 1 on a mismatch, or if a micro-op is refused or reports an error when executed "
                       "(unless --allow-refused), as `tensore run`; 2 on bad input.")
    p.add_argument("program", type=input_file, help=PROG_HELP)
    p.add_argument("--gen", required=True, choices=GENS, type=str.lower, help=GEN_HELP)
    p.add_argument("--rows", type=ROWS_TYPE, default=8, help="PE rows of the engine")
    p.add_argument("--cols", type=COLS_TYPE, default=None, help="array columns (default rows; 2 x rows on MAVERICK)")
    p.add_argument("--sim", default="verilator", choices=["verilator", "icarus", "amaranth"],
                   help="simulator: verilator (default), icarus or amaranth (Amaranth's own, slow; no build)")
    p.add_argument("--waves", default=None, metavar="FILE", type=WAVES_FILE,
                   help="waveform file to write whether or not the run passes; its suffix picks the format: .fst "
                   "(compact, recommended) or .vcd, on every simulator; a GTKWave save file of the key signals goes "
                   "beside it (FILE.gtkw)")
    p.add_argument("--waves-depth", type=waves_depth, default=0, metavar="N", help=WAVES_DEPTH_HELP)
    p.add_argument("--opt", type=opt_or_auto, default="auto", metavar="LEVEL",
                   help=OPT_HELP + f"; default auto: ${OPT_ENV} when set, else 1 for engines of "
                   f"{AUTO_OPT_PES:,} PEs or more (64 x 64; they run about 12x faster) and 0 below (the build "
                   "outweighs the run)")
    p.add_argument("--pack", type=int, default=None, choices=[1, 2, 4, 8],
                   help="elements per PE the engine is built with (default: what the program needs, at least "
                   "the generation's default; a smaller --pack is refused before building)")
    p.add_argument("--sbuf", type=input_file, help="npz with an array 'sbuf' ([partitions, bytes] uint8)")
    p.add_argument("--psum-partitions", type=PSUM_PARTITIONS_TYPE, default=16,
                   help="PSUM partitions of the engine (default 16)")
    p.add_argument("--sbuf-latency", type=RTL_SBUF_LATENCY, default=2, help="SBUF read latency in cycles (default 2)")
    p.add_argument("--harness", default=None, choices=["compiled", "cocotb"],
                   help="Verilator testbench: the compiled C++ harness (default) or cocotb (Icarus: cocotb)")
    p.add_argument("--dtypes", nargs="+", default=None, metavar="DTYPE",
                   help="a specialised build: PEs that multiply only these dtypes (e.g. bf16 fp8_e4m3)")
    p.add_argument("--allow-refused", action="store_true",
                   help="exit 0 although micro-ops were refused or reported errors (programs that test them)")
    from tensore.outputs import LAYOUT_HELP
    p.add_argument("-o", "--output", metavar="NPZ", type=NPZ_FILE,
                   help=LAYOUT_HELP + " (docs/kernels.md; default: not written)")
    p.add_argument("-v", "--verbose", action="store_true",
                   help=f"a line per executed micro-op also for programs of more than {SUMMARY_OPS}")
    timing_arg(p)
    p.set_defaults(func=cmd_cosim)
    p = sub.add_parser("cosim-full", help="full-size engines in Verilator against the golden engine (make cosim-full)")
    p.add_argument("--gen", nargs="+", default=list(FULL_SIZE), choices=list(FULL_SIZE),
                   help="generations to run (default both: MAVERICK 128 x 256, MARIANA 128 x 128)")
    p.add_argument("-n", type=COUNT_TYPE, default=512, help="moving vectors per bf16 matmul")
    p.add_argument("--n-small", type=COUNT_TYPE, default=128, help="moving vectors of the MX and double-row matmuls")
    p.add_argument("--gemm-m", type=int_at_least(1), default=256, metavar="M",
                   help="rows of A in the kernel GEMM (bf16 M x 384 x 1.5 x columns; default 256; an M whose "
                   "tiles would share a PSUM bank, above 1024 on MAVERICK, is refused)")
    p.add_argument("--opt", type=opt_level, default="-O1", metavar="LEVEL", help=OPT_HELP + "; default 1")
    p.add_argument("--harness", default="compiled", choices=["compiled", "cocotb"], help="Verilator testbench")
    p.add_argument("--dtypes", nargs="+", default=None, metavar="DTYPE",
                   help="a specialised build: PEs that multiply only these dtypes (e.g. bf16 fp8_e4m3)")
    p.add_argument("-o", "--output", default="build/cosim_full.json", type=output_file((".json",), "a JSON summary", parents=True),
                   help="JSON summary (default build/cosim_full.json)")
    timing_arg(p)
    p.set_defaults(func=cmd_cosim_full)
    sbuf_help = ("SBUF image: a .npz holding an array 'sbuf' (or FILE.npz:NAME), or a .npy; uint8 [partitions, bytes], "
                 "or elements of an engine format (float32, ml_dtypes bfloat16, ...) taken as their bytes (D-T65)")
    p = sub.add_parser("asm", help="assemble a micro-op program (docs/isa.md) to 64-byte descriptors")
    p.add_argument("source", type=input_file, help="assembly text (docs/isa.md); - for stdin")
    p.add_argument("-o", "--output", type=output_file(), help="the descriptors (default: the source with .bin, stdout for stdin; - for stdout)")
    p.add_argument("--gen", required=True, choices=GENS, type=str.lower, help=GEN_HELP)
    p.add_argument("--strict", action="store_true", help="exit 1 if the ISA checks refuse any descriptor")
    p.set_defaults(func=cmd_asm)
    p = sub.add_parser("disasm", help="disassemble descriptors; lists every violation (exit 1 if any)")
    p.add_argument("binary", metavar="program", type=input_file, help=PROG_HELP)
    p.add_argument("--gen", required=True, choices=GENS, type=str.lower, help=GEN_HELP)
    p.set_defaults(func=cmd_disasm)
    p = sub.add_parser("run", help="run a program (text or binary) in the golden engine and print a summary",
                       description="Run a program in the golden engine. The array is --rows x --cols PEs; without "
                       "--cols it has as many columns as rows (2 x rows on MAVERICK), the same rule as `tensore cosim`, "
                       "so the defaults are the full 128 x 128 (MAVERICK 128 x 256) array. Exit 1 if a micro-op is "
                       "refused (unless --allow-refused) or the program waits for an event nothing sets; 2 on bad input.")
    _golden_run_args(p, sbuf_help)
    p.add_argument("-o", "--output", type=NPZ_FILE, help="npz to write PSUM, SR states and the PSUM write trace to (.npz added when missing)")
    p.set_defaults(func=cmd_run)
    p = sub.add_parser("cost", help="run a program in the golden engine and set each matmul's cycles beside the "
                       "public Tensor Engine cost model (nki.isa.nc_matmul)",
                       description="Run a program in the golden engine, as `tensore run` does, and print for each "
                       "executed matmul the engine's cycles to the next matmul's issue beside the public estimate "
                       "max(min(64, N_stationary), N_moving) (fp32 x4; transposes max(P, min(64, F)); tiles in "
                       "parallel), and both totals. Exit codes as `tensore run`.")
    _golden_run_args(p, sbuf_help)
    p.add_argument("--all", action="store_true", help="a line for every matmul (default: the first 16)")
    p.set_defaults(func=cmd_cost)
    from tensore.regs import OUTPUT_DIR
    p = sub.add_parser("regs", help="generate the register artefacts from rtl/regs/arr_seq.rdl")
    where = p.add_mutually_exclusive_group()
    where.add_argument("-o", "--output", default=str(OUTPUT_DIR), metavar="DIR", type=output_dir,
                       help="directory to write them under (rtl/regs/arr_seq.h, docs/regs/arr_seq.md, "
                       "model/arr_seq_regs.py)")
    where.add_argument("--in-tree", action="store_true",
                       help="rewrite the committed artefacts of this source checkout (developers, after editing "
                       "the RDL)")
    p.set_defaults(func=cmd_regs)
    for module in (kernel_cli, verify_cli, random_cli, mutate_cli):
        module.register(sub)
    return parser


def main(argv=None) -> int:
    if argv is None:                                        # the command: `tensore ... | head` ends quietly
        signal.signal(signal.SIGPIPE, signal.SIG_DFL)
    parser = build_parser()
    args = parser.parse_args(argv)
    bad = check_array_args(args) or file_error(args, InputFile) or file_error(args, OutputFile)
    if bad:
        print(f"tensore {args.command}: error: {bad}", file=sys.stderr)
        return 2
    try:
        return args.func(args)
    except (ValueError, TypeError, OSError) as exc:
        print(f"tensore: error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
