"""`tensore mutate`: mutation testing of the golden model and the RTL (cosim/mutate.py, D-T96),
sharded as the regression is (cosim/regress.py's shards and dask path)."""
from __future__ import annotations

import sys
from pathlib import Path

from tensore.args import COUNT_TYPE, SEED_TYPE, int_at_least, output_dir


def _config(args):
    from tensore.cosim import mutate as M
    names = [t for u in args.units for t in u.replace(",", " ").split()] if args.units else ["model"]
    tests = args.tests.split() if args.tests is not None else list(M.DEFAULT_TESTS)
    cfg = M.Config(targets=M.expand_units(M.ROOT, names), tests=tests, sample=args.sample, seed=args.seed,
                   timeout=args.timeout, jobs=args.jobs, marks=args.marks, equivalent=args.equivalent,
                   lines=not args.whole_sets, confirm=args.confirm,
                   ids=[i for i in args.mutant.replace(",", " ").split() if i] if args.mutant else None)
    for unit in cfg.targets:                         # an unknown or empty test set: exit 2 before any run
        M.test_sets(M.ROOT, cfg.tests, unit)
    M.read_equivalent(Path(cfg.root) / cfg.equivalent)
    if cfg.ids:
        M.selection(cfg)                              # an unknown mutant id: exit 2
    return cfg


def check_map(marks: str) -> int:
    """The unit -> tests map and its findings (cosim/mutate.py check_map, with a collection under
    the run's marks); 1 if there are findings."""
    from tensore.cosim import mutate as M
    for unit in [*M.DEFAULT_TARGETS, *M.engine_units(M.ROOT), *M.rtl_units(M.ROOT)]:
        print(f"{unit:<28} {' '.join(M.UNIT_TESTS.get(unit) or ['(none)'])}")
        if M.WRITER_TESTS.get(unit):
            print(f"{'  its Verilog writer':<28} {' '.join(M.WRITER_TESTS[unit])}")
    findings = M.check_map(M.ROOT, collect=True, marks=marks)
    for f in findings:
        print(f"FINDING {f}")
    print(f"{len(findings)} finding(s)")
    return 1 if findings else 0


def _list(cfg) -> int:
    """--list: the selected mutants, and a finding line for each target unit no test covers."""
    from tensore.cosim import mutate as M
    mutants = M.selection(cfg)
    equivalent = M.read_equivalent(Path(cfg.root) / cfg.equivalent)
    for m in mutants:
        print(f"{m.id}  {m.desc.split(' ', 1)[1]}" + ("  [writer]" if m.writer else "")
              + ("  [equivalent: listed]" if m.id in equivalent else ""))
    total = len(M.enumerate_mutants(cfg.root, cfg.targets))
    print(f"{len(mutants)} of {total} mutants" + (f" (--sample {cfg.sample} --seed {cfg.seed})" if cfg.sample else ""))
    for unit in cfg.targets:
        if not M.covered(unit):
            print(f"FINDING {unit}: no covering test in UNIT_TESTS")
    return 0


def cmd_mutate(args) -> int:
    from tensore.cosim import mutate as M
    from tensore.cosim import regress
    if args.check_map:
        return check_map(args.marks)
    cfg = _config(args)
    name = args.name or M.report_name(cfg.targets)
    shard_dir = Path(args.output) / name
    if args.list:
        return _list(cfg)
    log = (lambda m: print(m, file=sys.stderr, flush=True))
    if args.merge:
        results = regress.read_shards(shard_dir)
    elif args.dask:
        if args.resume:
            raise ValueError("--resume continues a run on this machine (--shard or none), not --dask")
        address = None if args.dask == "local" else args.dask
        results = regress.run_dask(cfg, args.workers, address, workers=args.workers, run=M.run_shard)
        _clear(shard_dir)
        for r in results:
            regress.write_shard(r, shard_dir)
    else:
        i, n = regress.parse_shard(args.shard) if args.shard else (0, 1)
        path = shard_dir / f"shard-{i}-of-{n}.json"
        previous = _saved(path) if args.resume else None
        if not args.shard:                           # a whole run's one shard file, written as it goes
            _clear(shard_dir, keep=path if previous else None)
        result = M.run_shard(cfg, i, n, log, lambda r: regress.write_shard(r, shard_dir), previous)
        regress.write_shard(result, shard_dir)
        if args.shard:
            print(f"shard {i}/{n}: {path} (merge with: tensore mutate --merge {_same(args)})")
            return 0
        results = [result]
    report = M.merge(results, args.output, name)
    print(M.format_report(report))
    print(f"reports: {Path(args.output) / name}.json, {Path(args.output) / name}.html")
    score = report["summary"]["score"]
    return 1 if args.fail_under is not None and score is not None and score < args.fail_under else 0


def _saved(path: Path) -> dict | None:
    """The shard result an earlier run saved at `path` (None: there is none)."""
    import json
    if not path.is_file():
        return None
    try:
        return json.loads(path.read_text())
    except json.JSONDecodeError:
        raise ValueError(f"--resume: {path} is not a shard result (unreadable JSON); remove it") from None


def _clear(shard_dir: Path, keep: Path | None = None) -> None:
    """Remove the shard results of earlier runs from `shard_dir` (all but `keep`)."""
    for old in shard_dir.glob("shard-*-of-*.json"):
        if old != keep:
            old.unlink()


def _same(args) -> str:
    """The options that name the report, for the --merge hint."""
    out = [f"--units {' '.join(args.units)}"] if args.units else []
    out += [f"--name {args.name}"] if args.name else []
    return " ".join(out + [f"-o {args.output}"])


def _shard_text(text: str) -> str:
    """An argparse type: i/n with 0 <= i < n (regress.parse_shard's rule)."""
    import argparse

    from tensore.cosim.regress import parse_shard
    try:
        parse_shard(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc).removeprefix("--shard ")) from None
    return text


def register(sub) -> None:
    """Add `tensore mutate` to tensore's subparsers."""
    from tensore.cosim import mutate as M
    p = sub.add_parser("mutate", help="mutation testing: single mutations of the golden model's and the RTL's "
                       "source, each run against its unit's tests; killed / survived / timeout / stillborn / "
                       "equivalent per unit, JSON and HTML report")
    p.add_argument("--units", "--target", nargs="+", metavar="UNIT", help="files of model/ or rtl/ to mutate "
                   f"(comma- or space-separated), or groups: {', '.join(M.GROUPS)} (engine: model/engine/'s "
                   "files; rtl: the rtl files the unit map covers); default model: " + ",".join(M.DEFAULT_TARGETS))
    p.add_argument("--tests", metavar="TESTS", help="the test set: test files or node ids, space-separated, or named "
                   f"sets ({M.UNIT_SET}: the mutant's unit's tests, {', '.join(M.TEST_SETS)}); default "
                   f"'{' '.join(M.DEFAULT_TESTS)}' (fast: {len(M.FAST_TESTS)} files of make test)")
    p.add_argument("--check-map", action="store_true", help="only print the unit -> tests map and its findings "
                   "(units no test covers); exit 1 if any")
    p.add_argument("--marks", default=M.MARKS, help="pytest -m expression the test set runs with")
    p.add_argument("--sample", type=COUNT_TYPE, default=None, help="run this many mutants, drawn with --seed "
                   "(default: all)")
    p.add_argument("--seed", type=SEED_TYPE, default=0, help="the sample's seed")
    p.add_argument("--mutant", metavar="IDS", help="only these mutants (ids as --list prints them, comma-separated)")
    p.add_argument("--list", action="store_true", help="only list the mutants (id and change)")
    p.add_argument("--timeout", type=int_at_least(1, "seconds"), default=None,
                   help="seconds per mutant run (default 4 x the unmutated run + 30)")
    p.add_argument("--whole-sets", action="store_true", help="run each mutant's whole test set in UNIT_TESTS' "
                   "order (default: only the tests of its set that run its line in the unmutated run, fastest "
                   "first; a mutant of a line none runs survives without a run; D-T106)")
    p.add_argument("--confirm", action="store_true", help="a mutant its line's tests leave alive runs its whole "
                   "set too (a cached value can carry a line's effect to a test that does not run it)")
    p.add_argument("--jobs", type=COUNT_TYPE, default=1, help="mutants run side by side (processes) per shard")
    p.add_argument("--equivalent", default=M.EQUIVALENT_FILE, metavar="FILE",
                   help="mutants known to be equivalent: `ID  reason` per line")
    p.add_argument("--shard", type=_shard_text, help="run shard i of n (i/n, 0-based) and write its result; then --merge")
    p.add_argument("--resume", action="store_true", help="continue a stopped run (the same options, the whole "
                   "run or a --shard): keep the results its shard file holds and run the other mutants")
    p.add_argument("--merge", action="store_true", help="merge the shard results in -o/NAME into the report")
    p.add_argument("--dask", metavar="ADDRESS", help="run the shards on a dask.distributed scheduler "
                   "(tcp://host:8786), or 'local' for a LocalCluster")
    p.add_argument("--workers", type=COUNT_TYPE, default=2, help="--dask: shards (and LocalCluster workers)")
    p.add_argument("--fail-under", type=int_at_least(0, "a percentage", hi=100), default=None, metavar="PCT",
                   help="exit 1 if the score is below PCT")
    p.add_argument("--name", help="the report's name (default: the group's for a group's units, else the units' stems)")
    p.add_argument("-o", "--output", default="build/mutate", type=output_dir, help="directory of the reports (NAME.json, NAME.html) "
                   "and shard results (NAME/)")
    p.set_defaults(func=cmd_mutate)
