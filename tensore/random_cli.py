"""`tensore random`, `tensore coverage`, `tensore regress`: constrained-random programs on the golden
engine and the RTL, functional coverage, and the sharded regression (docs/regression.md,
D-T73, D-T74)."""
from __future__ import annotations

import sys
from pathlib import Path

from tensore.args import (COLS_TYPE, COUNT_TYPE, GEN_HELP, GENS, ROWS_TYPE, SEED_TYPE, input_file, int_at_least,
                          opt_level, output_dir, output_file, timing_arg)
from tensore.model.dtypes import Gen
from tensore.model.words import plural

EVERY_GEN = "generations (default: every one)"


def _config(args, **over):
    from tensore.cosim.regress import Config
    args.cols = half_cols(args)
    for name in ("rows", "cols", "blocks"):
        if getattr(args, name) < 1:
            raise ValueError(f"--{name} must be >= 1, got {getattr(args, name)}")
    return Config(rows=args.rows, cols=args.cols, blocks=args.blocks, rtl=args.rtl, shrink=args.shrink,
                  opt=args.opt, out=args.output, timing=args.timing, **over)


def _coverage_out(report: str, cov) -> str:
    """Write the database beside the report (REPORT with .xml) and the report; the text report."""
    from tensore.cosim import coverage
    out = Path(report)
    xml = cov.write_xml(out.with_suffix(".xml") if out.suffix != ".xml" else out.with_name(out.stem + ".db.xml"))
    return coverage.write_report(xml, out)


def cmd_random(args) -> int:
    from tensore.cosim import random_programs as R
    from tensore.cosim import regress
    from tensore.cosim.coverage import Coverage
    if args.count < 1:
        raise ValueError(f"--count must be >= 1, got {args.count}")
    cfg = _config(args, gens=[args.gen], programs=args.count, seed=args.seed)
    cov = Coverage([args.gen], cfg.timing) if args.coverage else None
    cases = regress.run_random(args.gen, range(args.seed, args.seed + args.count), cfg, cov,
                               log=lambda m: print(m, file=sys.stderr))
    for c in cases:
        status = "ERROR" if c["error"] else "FAIL" if c["failure"] else "ok"
        rtl = f", RTL {plural(c['rtl_cycles'], 'cycle')}" if "rtl_cycles" in c else ""
        print(f"{c['suite']}.{c['name']}: {status} ({_count(c.get('descriptors'), 'descriptor')}, "
              f"{_count(c.get('cycles'), 'cycle')}{rtl})" + (f": {c['error'] or c['failure']}" if status != "ok" else ""))
        if c.get("reproducer"):
            print(f"  reproducer: {c['reproducer']}.s / .npz")
    if args.save_all:
        for s in range(args.seed, args.seed + args.count):
            p = R.generate(args.gen, s, rows=args.rows, cols=args.cols, blocks=args.blocks)
            R.save(p, Path(args.output) / p.name)
        print(f"programs: {args.output}/random_{Gen.parse(args.gen).name.lower()}_<seed>.s / .npz")
    if cov is not None:
        print(_coverage_out(args.coverage, cov), end="")
        print(f"coverage report: {args.coverage}")
    bad = sum(1 for c in cases if c["failure"] or c["error"])
    print(f"{len(cases) - bad} of {plural(len(cases), 'program')} passed")
    return 1 if bad else 0


def _count(n, word: str) -> str:
    """plural(n, word), or "? words" for a count a case did not record."""
    return f"? {word}s" if n is None else plural(n, word)


def cmd_coverage(args) -> int:
    from tensore.cosim import coverage
    from tensore.cosim import random_programs as R
    if args.merge:
        xml = coverage.merge(args.merge, Path(args.output).with_suffix(".xml"))
        print(coverage.write_report(xml, args.output), end="")
        print(f"coverage report: {args.output}")
        return 0
    if args.random < 0:
        raise ValueError(f"--random must be >= 0, got {args.random}")
    cov = coverage.Coverage(args.gen)
    args.cols = half_cols(args)
    for gen in args.gen:
        progs = [R.generate(gen, s, rows=args.rows, cols=args.cols) for s in range(args.seed, args.seed + args.random)]
        if args.library:
            from tensore.cosim.programs import library
            progs += library(gen, rows=args.rows, cols=args.cols)
        for p in progs:
            cov.add(p, R.run_golden(p)[1])
    print(_coverage_out(args.output, cov), end="")
    print(f"coverage report: {args.output}")
    return 0


def cmd_regress(args) -> int:
    from tensore.cosim import regress
    if args.merge:
        report = regress.merge(regress.read_shards(args.output), args.output)
    else:
        if args.programs < 0 or args.fuzz < 0:
            raise ValueError("-n and --fuzz are counts (>= 0)")
        cfg = _config(args, gens=[Gen.parse(g).name for g in args.gen], programs=args.programs, fuzz=args.fuzz,
                      seed=args.seed, fuzz_engine=args.fuzz_engine)
        log = (lambda m: print(m, file=sys.stderr))
        if args.dask:
            if args.workers < 1:
                raise ValueError(f"--workers must be >= 1, got {args.workers}")
            address = None if args.dask == "local" else args.dask
            results = regress.run_dask(cfg, args.workers, address, workers=args.workers)
        elif args.shard:
            i, n = regress.parse_shard(args.shard)
            path = regress.write_shard(regress.run_shard(cfg, i, n, log, lambda r: regress.write_shard(r, args.output)),
                                       args.output)
            print(f"shard {i}/{n}: {path} (merge with: tensore regress --merge -o {args.output})")
            return 0
        else:
            results = [regress.run_shard(cfg, 0, 1, log)]
        for r in results:
            regress.write_shard(r, args.output)
        report = regress.merge(results, args.output)
    print(regress.format_report(report))
    print(report["coverage_text"], end="")
    print(f"reports: {args.output}/regress.json, junit.xml, coverage.html")
    return 1 if report["totals"]["failed"] or report["totals"]["errors"] else 0


def _program_args(p):
    p.add_argument("--rows", type=ROWS_TYPE, default=8, help="array rows")
    p.add_argument("--cols", type=COLS_TYPE, default=None, help=COLS_HELP)
    p.add_argument("--blocks", type=COUNT_TYPE, default=8, help="random blocks per program (and blocks // 3 extra ones)")
    p.add_argument("--rtl", action="store_true", help="also run each program on the engine RTL (Verilator, compiled "
                   "harness) in lockstep with the golden engine")
    p.add_argument("--shrink", action="store_true", help="shrink a failing program (delta debugging) before "
                   "writing its reproducer")
    p.add_argument("--opt", type=opt_level, default="-O2", metavar="LEVEL", help="C++ optimisation of the RTL "
                   "builds (one per generation): 0-3; 2 runs a regression's programs about 5x faster than 0")
    timing_arg(p)


COLS_HELP = ("array columns (MAVERICK: each half; default: --rows, so --rows R alone is R x R, MAVERICK R x 2R, "
             "as `tensore run` and `cosim`)")


def half_cols(args) -> int:
    """--cols, or --rows without it: the columns (MAVERICK: of each half) random programs get."""
    return args.cols or args.rows


def _full_cols(gen, rows: int, cols: int | None) -> int:
    """The array a random program runs on: rows x cols, MAVERICK rows x 2 cols (--cols is each half,
    cosim/random_programs.generate; without --cols, --rows); for tensore.args.check_array_args."""
    cols = cols or rows
    return 2 * cols if Gen.parse(gen).layout == Gen.MAVERICK else cols


def register(sub) -> None:
    """Add the verification subcommands to tensore's subparsers."""
    p = sub.add_parser("random", help="constrained-random programs on the golden engine (and --rtl the RTL); "
                       "failing ones written as reproducers")
    p.add_argument("--gen", required=True, choices=GENS, type=str.lower, help=GEN_HELP)
    p.add_argument("--seed", type=SEED_TYPE, default=0, help="the first program's seed")
    p.add_argument("--count", type=COUNT_TYPE, default=1, help="programs (seeds seed .. seed + count - 1)")
    _program_args(p)
    p.add_argument("-o", "--output", default="build/random", type=output_dir, help="directory for reproducers (repro/) and programs")
    p.add_argument("--save-all", action="store_true", help="write every program (.s + .npz), not only failing ones")
    p.add_argument("--coverage", metavar="REPORT", type=output_file(parents=True), help="write the functional coverage of these runs: REPORT "
                   "(.html, else text) and its cocotb-coverage database (.xml)")
    p.set_defaults(func=cmd_random, array_cols=_full_cols)
    p = sub.add_parser("coverage", help="functional coverage of random programs (and the library) on the golden "
                       "engine, with its holes")
    p.add_argument("--gen", nargs="+", default=GENS, choices=GENS, type=str.lower, help=EVERY_GEN)
    p.add_argument("--random", type=int_at_least(0), default=20, help="random programs per generation")
    p.add_argument("--seed", type=SEED_TYPE, default=0, help="the first random program's seed")
    p.add_argument("--library", action="store_true", help="also the program library")
    p.add_argument("--rows", type=ROWS_TYPE, default=8, help="array rows")
    p.add_argument("--cols", type=COLS_TYPE, default=None, help=COLS_HELP)
    p.add_argument("--merge", nargs="+", metavar="XML", type=input_file, help="report the merge of these coverage databases instead")
    p.add_argument("-o", "--output", default="build/coverage.html", type=output_file(parents=True), help="the report (.html, else text)")
    p.set_defaults(func=cmd_coverage, array_cols=_full_cols)
    p = sub.add_parser("regress", help="random programs and the descriptor fuzz of every generation, sharded; "
                       "merged JUnit XML / JSON report and coverage")
    p.add_argument("--gen", nargs="+", default=GENS, choices=GENS, type=str.lower, help=EVERY_GEN)
    p.add_argument("-n", "--programs", type=int_at_least(0), default=20, help="random programs per generation")
    p.add_argument("--fuzz", type=int_at_least(0), default=0, help="fuzz descriptors per generation (RTL decoder parity)")
    p.add_argument("--fuzz-engine", type=int_at_least(0), default=None, help="of those, how many also run as programs on the "
                   "engine (default: all)")
    p.add_argument("--seed", type=SEED_TYPE, default=0, help="the first random program's seed")
    _program_args(p)
    p.add_argument("--shard", help="run shard i of n (i/n, 0-based) and write its result; then --merge")
    p.add_argument("--merge", action="store_true", help="merge the shard results in -o into the reports")
    p.add_argument("--dask", metavar="ADDRESS", help="run the shards on a dask.distributed scheduler "
                   "(tcp://host:8786), or 'local' for a LocalCluster")
    p.add_argument("--workers", type=COUNT_TYPE, default=2, help="--dask: shards (and LocalCluster workers)")
    p.add_argument("-o", "--output", default="build/regress", type=output_dir, help="directory of shard results and reports")
    p.set_defaults(func=cmd_regress, array_cols=_full_cols)
