"""The regression (D-T74): random programs and the descriptor fuzz of every generation, in
deterministic shards, with a merged JUnit XML / JSON report and functional coverage.

    split(cfg, n)                 the n shards' work, balanced by estimated cost, builds included
    tasks(cfg, i, n)              shard i of n: split(cfg, n)[i]
    run_shard(cfg, i, n)          those tasks run: a shard result (JSON-ready dict)
    merge(results, out_dir)       regress.json, junit.xml, coverage.xml / .txt / .html
    run_dask(cfg, n, address)     the shards as dask.distributed tasks (address None: a LocalCluster)

A task is a batch of random-program seeds or a range of the fuzz stream of one generation; shard i
of n depends only on the configuration, i and n, so it is the same work on any machine (a CI
matrix, a SLURM array job: `tensore regress --shard $i/$n`, then `tensore regress --merge`).
Per random program: the golden run (no stall, refusals consistent with `model.isa.check`), the
watchdog bound (cosim/watchdog.py), the issue-rule monitor (cosim/coverage.py `stalls`: no
unexplained issue cycle), its coverage facts and, with `rtl`, the Verilator lockstep (compiled
harness); a failing program is shrunk (`shrink`) and saved as a reproducer under out_dir/repro.
Per fuzz range: RTL decoder parity with the golden checks at full size (the refusal codes it reaches
are coverage facts), and the descriptors as programs on the golden engine (watchdog, coverage; with
`rtl`, the lockstep on the small array)."""
from __future__ import annotations

import bisect
import itertools
import json
import os
import threading
import time
import traceback
from dataclasses import asdict, dataclass, field
from pathlib import Path
from xml.etree import ElementTree

from tensore.model.dtypes import Gen
from tensore.model.timing import DEFAULT_PROFILE

RANDOM_BATCH = 200                  # random programs per RTL harness process
FUZZ_BATCH = 10_000


@dataclass
class Config:
    gens: list = field(default_factory=lambda: [g.name for g in Gen])
    programs: int = 20                     # random programs per generation
    fuzz: int = 0                          # fuzz descriptors per generation
    seed: int = 0                          # first random-program seed
    rows: int = 8
    cols: int = 8
    blocks: int = 8
    rtl: bool = False
    shrink: bool = False
    fuzz_engine: int | None = None         # fuzz descriptors per generation also run as programs (None: all)
    opt: str | None = None                 # C++ optimisation of the RTL builds (None: toolchain.cxx_opt's)
    out: str = "build/regress"
    timing: str = DEFAULT_PROFILE          # the engine's profile of issue rules (D-T98)

    @classmethod
    def from_json(cls, d: dict) -> Config:
        return cls(**{k: v for k, v in d.items() if k in cls.__dataclass_fields__})


def parse_shard(text: str) -> tuple:
    """'i/n' -> (i, n) with 0 <= i < n."""
    try:
        i, n = (int(x) for x in text.split("/"))
    except ValueError:
        raise ValueError(f"--shard takes i/n (e.g. 0/4), got {text!r}") from None
    if not (n >= 1 and 0 <= i < n):
        raise ValueError(f"--shard {text}: need 0 <= i < n")
    return i, n


# Estimated seconds on one core (measured on 2 cores, 2026-12): only their ratios steer the split.
RANDOM_SECONDS = 0.1                # a random program: golden run, checks, coverage, its RTL share
FUZZ_SECONDS = 0.003                # a fuzz descriptor: decoder parity, its share of a program
RTL_BUILD_SECONDS = 90.0            # a generation's RTL harness build (8 x 8, -O2)
DECODER_BUILD_SECONDS = 30.0        # a generation's full-size decoder build (fuzz parity)


def _units(cfg: Config, gen: str) -> list:
    """One generation's work in order: [(kind, item, seconds)], a random seed each, then the fuzz
    ranges of FUZZ_BATCH descriptors (fixed by the configuration alone, so the fuzz programs and
    the merged report are the same for any n)."""
    out = [("random", cfg.seed + k, RANDOM_SECONDS) for k in range(cfg.programs)]
    out += [("fuzz", (a, min(a + FUZZ_BATCH, cfg.fuzz)), (min(a + FUZZ_BATCH, cfg.fuzz) - a) * FUZZ_SECONDS)
            for a in range(0, cfg.fuzz, FUZZ_BATCH)]
    return out


def build_seconds(cfg: Config) -> float:
    """The estimated builds a shard pays for each generation it runs: the RTL harness (with `rtl`)
    and the fuzz decoder (with fuzz)."""
    return (RTL_BUILD_SECONDS if cfg.rtl else 0.0) + (DECODER_BUILD_SECONDS if cfg.fuzz else 0.0)


def _fill(cums: list, n: int, build: float, limit: float) -> list | None:
    """Generations in order into at most n shards of at most `limit` estimated seconds (McNaughton's
    wrap-around with a build per generation and shard): a shard takes a generation's remaining
    units while they fit, else the longest prefix that fits and is worth its build (at least
    `build` seconds of work), and the next shard goes on.  [[(generation, first, stop)]] of unit
    indices, or None if n shards do not suffice."""
    shards, load = [[]], 0.0
    for gen, cum in cums:
        pos, end = 0, len(cum) - 1
        while pos < end:
            k = bisect.bisect_right(cum, cum[pos] + limit - load - build + 1e-9) - 1
            if k == end or (k > pos and cum[k] - cum[pos] >= build):
                shards[-1].append((gen, pos, k))
                load, pos = load + build + cum[k] - cum[pos], k
            if pos < end:
                if len(shards) == n:
                    return None
                shards.append([])
                load = 0.0
    return shards + [[] for _ in range(n - len(shards))]


def split(cfg: Config, n: int = 1) -> list:
    """The n shards' tasks (D-T84): each [(kind, generation, items)], random seeds in batches of
    RANDOM_BATCH (one RTL process each) and fuzz ranges (start, stop).  A generation is one engine
    (one RTL build, one decoder build), so a shard runs whole generations where it can and a
    generation is cut across shards only where that shortens the longest shard (`_fill`, with the
    smallest limit that n shards meet, found by bisection on the estimated seconds).  The split
    depends only on the configuration and n; two shards that share a generation on one machine
    share its builds through the locked build cache (cosim/hdl.py `locked`)."""
    gens = [Gen.parse(g).name for g in cfg.gens]
    units = {g: _units(cfg, g) for g in gens}
    cums = [(g, [0.0, *itertools.accumulate(c for _, _, c in units[g])]) for g in gens if units[g]]
    build = build_seconds(cfg)
    total = sum(cum[-1] + build for _, cum in cums)
    lo, hi = total / n, total
    for _ in range(60):
        if hi - lo <= 1e-6 * hi:
            break
        mid = (lo + hi) / 2
        lo, hi = (lo, mid) if _fill(cums, n, build, mid) is not None else (mid, hi)
    shards = _fill(cums, n, build, hi) if cums else [[] for _ in range(n)]
    out = []
    for pieces in shards:
        work = []
        for gen, first, stop in pieces:
            part = units[gen][first:stop]
            seeds = [item for kind, item, _ in part if kind == "random"]
            work += [("random", gen, seeds[a:a + RANDOM_BATCH]) for a in range(0, len(seeds), RANDOM_BATCH)]
            work += [("fuzz", gen, item) for kind, item, _ in part if kind == "fuzz"]
        out.append(work)
    return out


def tasks(cfg: Config, i: int = 0, n: int = 1) -> list:
    """Shard i of n (`split`): [(kind, generation, items)]."""
    return split(cfg, n)[i]


# --- one case ------------------------------------------------------------------------------------

def _case(suite: str, name: str, seconds: float, failure: str | None = None, error: str | None = None, **info) -> dict:
    return {"suite": suite, "name": name, "seconds": round(seconds, 3), "failure": failure, "error": error, **info}


def golden_checks(program, trace) -> list:
    """What a golden run must satisfy: no stall, refusals at least as strict as `check` (D-23) on the
    program's array, the watchdog bound, every issue cycle explained by docs/timing.md's rules."""
    from tensore.cosim import coverage, watchdog
    from tensore.model.isa import DESCRIPTOR_BYTES, ErrorCode, check, error_code
    out = []
    if trace.stalled:
        return [f"the golden run stalls: {trace.stalled}"]
    code = program.golden()[2]
    for o in trace.ops:
        want = error_code(check(code[o.index * DESCRIPTOR_BYTES:(o.index + 1) * DESCRIPTOR_BYTES], program.gen,
                                array_cols=program.cols))
        if want != ErrorCode.NONE and not (o.error != ErrorCode.NONE and o.error <= want):
            out.append(f"descriptor {o.index}: check refuses it with {want.name}, the engine with {o.error.name}")
    hang = watchdog.check_trace(trace, watchdog.program_bound(program, code=code))
    if hang is not None:
        out.append(f"golden engine: {hang}")
    odd = [o.index for o, rules in coverage.stalls(trace, program.regs, timing=program.timing) if "unexplained" in rules]
    if odd:
        out.append(f"issue cycles no rule of docs/timing.md explains: descriptors {odd[:10]}")
    return out


RTL_PARTITIONS = 16          # PSUM partitions of the regression's RTL builds


def _writes_past(trace, parts: int = RTL_PARTITIONS) -> list:
    """The golden run's PSUM writes to partitions >= `parts` (the RTL build's)."""
    return [e for e in trace.events if e.kind == "psum_write" and e.data["partition"] >= parts]


def _partitions_past(trace, parts: int = RTL_PARTITIONS) -> list:
    """The PSUM partitions >= `parts` that a golden run writes."""
    return sorted({e.data["partition"] for e in _writes_past(trace, parts)})


def build_pack(gen) -> int:
    """Elements per PE of the regression's RTL builds: MX oct rows from MARIANA on, else FP8 double
    row (one build per generation serves its random and fuzz programs)."""
    return 8 if Gen.parse(gen) >= Gen.MARIANA else 2


def _rtl_results(programs, opt: str | None = None, *, log=lambda *a: None) -> list:
    """Verilator lockstep (compiled harness) of programs of one generation and array."""
    from tensore.cosim import hdl
    return hdl.run_many(programs, sim="verilator", harness="compiled", pack=build_pack(programs[0].gen),
                        psum_partitions=RTL_PARTITIONS, opt=opt, log=log)


def rtl_fails(program, pack: int, where: str | None = None, opt: str | None = None) -> bool:
    """True when the program's Verilator lockstep fails (with a first mismatch of the same kind)."""
    from tensore.cosim import hdl
    try:
        res = hdl.run(program, sim="verilator", harness="compiled", pack=pack, psum_partitions=RTL_PARTITIONS, opt=opt)
    except ValueError:
        return False
    bad = res.mismatch
    return bad is not None and (where is None or _where_kind(bad.where) == where)


def _where_kind(where: str) -> str:
    return where.split(" partition")[0].split(" (")[0]


def golden_fails(program) -> bool:
    from tensore.cosim import random_programs as R
    return bool(golden_checks(program, R.run_golden(program)[1]))


SHRINK_TRIES = 150


def _reproduce(program, fails, cfg: Config, kind: str, shrunk: set) -> str:
    """Save a program for which `fails` holds; with cfg.shrink, the first of each kind of failure
    (`kind`: generation and first-mismatch kind; `shrunk` holds those done) is shrunk first, the
    others of that kind are saved whole.  Returns the reproducer's stem."""
    from tensore.cosim import random_programs as R
    small = program
    if cfg.shrink and kind not in shrunk:
        shrunk.add(kind)
        try:
            small = R.shrink(program, fails, max_tries=SHRINK_TRIES)
        except ValueError:
            small = program
    stem = Path(cfg.out) / "repro" / program.name
    R.save(small if small.expect_fp32 else R.finish(small), stem)
    return str(stem)


def run_random(gen, seeds, cfg: Config, cov=None, log=lambda *a: None, shrunk: set | None = None) -> list:
    """Random programs `seeds` of `gen`: golden checks, coverage facts, optionally the RTL."""
    from tensore.cosim import random_programs as R
    suite = f"random.{Gen.parse(gen).name}"
    shrunk = set() if shrunk is None else shrunk
    cases, progs = [], []
    for s in seeds:
        t0 = time.perf_counter()
        try:
            p = R.generate(gen, s, rows=cfg.rows, cols=cfg.cols, blocks=cfg.blocks)
            p.timing = cfg.timing
            _, trace = R.run_golden(p)
            problems = golden_checks(p, trace)
            if cov is not None:
                cov.add(p, trace)
        except Exception as exc:         # noqa: BLE001  (a crash of one program is that case's error)
            cases.append(_case(suite, f"seed_{s}", time.perf_counter() - t0, error=_short(exc)))
            continue
        past = _partitions_past(trace) if cfg.rtl else []
        cases.append(_case(suite, f"seed_{s}", time.perf_counter() - t0, "; ".join(problems) or None,
                           descriptors=len(trace.ops), cycles=trace.cycles,
                           error=f"writes PSUM partitions {past[:4]}, past the RTL build's {RTL_PARTITIONS}" if past else None))
        if problems:
            cases[-1]["reproducer"] = _reproduce(p, golden_fails, cfg, f"{suite} golden", shrunk)
        if not past:                     # (the generator keeps to partition 0; such a program must not fail its batch)
            progs.append((p, cases[-1]))
    if cfg.rtl and progs:
        _rtl_cases([p for p, _ in progs], [c for _, c in progs], cfg, log, shrunk)
    return cases


def _rtl_cases(programs, cases, cfg: Config, log, shrunk: set):
    t0 = time.perf_counter()
    try:
        results = _rtl_results(programs, cfg.opt, log=log)
    except Exception as exc:             # noqa: BLE001  (a build failure fails every case of the batch)
        for c in cases:
            c["error"] = f"RTL: {_short(exc)}"
        return
    share = (time.perf_counter() - t0) / len(programs)
    for p, c, r in zip(programs, cases, results):
        c["seconds"] = round(c["seconds"] + share, 3)
        c["rtl_cycles"] = r.cycles
        if r.mismatch is not None:
            kind, pack = _where_kind(r.mismatch.where), r.lockstep.pack
            p.pack = p.pack or pack      # (the reproducer replays on the build it failed on)
            try:
                stem = _reproduce(p, lambda q, pack=pack, kind=kind: rtl_fails(q, pack, kind, cfg.opt), cfg,
                                  f"{c['suite']} RTL {kind}", shrunk)
            except Exception as exc:     # noqa: BLE001  (the failure stands; its reproducer's trouble is an error)
                stem, c["error"] = None, f"reproducer: {_short(exc)}"
            c["failure"] = "; ".join(x for x in (c["failure"], f"RTL lockstep: {r.mismatch}") if x)
            c["reproducer"] = stem


def _fit_partitions(program, parts: int = RTL_PARTITIONS):
    """The program without the descriptors whose golden run writes PSUM partitions >= `parts` (the
    RTL build's); None if nothing is left."""
    from tensore.cosim import random_programs as R
    for _ in range(8):
        _, trace = R.run_golden(program)
        wide = {e.op for e in _writes_past(trace, parts)}
        if trace.stalled is None and not wide:
            return program
        lines = program.text.strip().splitlines()
        drop = wide | ({len(trace.ops) - 1} if trace.stalled else set())
        program.text = "".join(line + "\n" for i, line in enumerate(lines) if i not in drop)
        if not program.text:
            return None
    return None


def run_fuzz(gen, start: int, stop: int, cfg: Config, cov=None, log=lambda *a: None, shrunk: set | None = None) -> list:
    """Fuzz descriptors start..stop - 1 of `gen`: decoder parity, then programs with the watchdog."""
    from tensore.cosim import fuzz
    from tensore.cosim import random_programs as R
    g = Gen.parse(gen)
    suite = f"fuzz.{g.name}"
    shrunk = set() if shrunk is None else shrunk
    t0 = time.perf_counter()
    descs = fuzz.mutants(g, start, stop)
    try:
        parity = fuzz.decoder_parity(g, descs)
        failure = None if not parity["mismatch_count"] else \
            f"{parity['mismatch_count']} of {parity['count']} descriptors: RTL decoder code differs, first {parity['mismatches'][0]}"
        cases = [_case(suite, f"decoder_{start}_{stop}", time.perf_counter() - t0, failure, codes=parity["codes"])]
        if cov is not None:                  # the refusal codes the range reaches count as one run's
            cov.add_facts({(g.name, "error", (code,)) for code in parity["codes"] if code != "none"})
    except Exception as exc:             # noqa: BLE001
        cases = [_case(suite, f"decoder_{start}_{stop}", time.perf_counter() - t0, error=_short(exc))]
    limit = len(descs) if cfg.fuzz_engine is None else max(0, min(len(descs), cfg.fuzz_engine - start))
    cols = 2 * cfg.cols if g.layout == Gen.MAVERICK else cfg.cols
    programs, pcases = [], []
    for p in fuzz.engine_programs(g, descs[:limit], rows=cfg.rows, cols=cols, name=f"fuzz_{start}"):
        p.timing = cfg.timing
        t1 = time.perf_counter()
        try:
            p = _fit_partitions(p) if cfg.rtl else p
            if p is None:
                continue
            _, trace = R.run_golden(p)
            problems = golden_checks(p, trace)
            if cov is not None:
                cov.add(p, trace)
        except Exception as exc:         # noqa: BLE001
            cases.append(_case(suite, p.name, time.perf_counter() - t1, error=_short(exc)))
            continue
        cases.append(_case(suite, p.name, time.perf_counter() - t1, "; ".join(problems) or None,
                           descriptors=len(trace.ops), cycles=trace.cycles))
        if problems:
            cases[-1]["reproducer"] = _reproduce(p, golden_fails, cfg, f"{suite} golden", shrunk)
        programs.append(p)
        pcases.append(cases[-1])
    if cfg.rtl and programs:
        _rtl_cases(programs, pcases, cfg, log, shrunk)
    return cases


def _short(exc: Exception) -> str:
    tb = traceback.extract_tb(exc.__traceback__)
    where = f" ({Path(tb[-1].filename).name}:{tb[-1].lineno})" if tb else ""
    return f"{type(exc).__name__}: {exc}"[:500] + where


# --- shards ---------------------------------------------------------------------------------------

def run_shard(cfg: Config | dict, i: int, n: int, log=lambda *a: None, checkpoint=None) -> dict:
    """Shard i of n of the configuration: {"config", "shard", "cases", "coverage", "seconds",
    "complete"}.  `checkpoint(result)` gets the result so far after every task (a shard stopped by
    its batch system keeps what it ran); a task that raises is one error case and the shard goes on."""
    from tensore.cosim.coverage import Coverage
    cfg = Config.from_json(cfg) if isinstance(cfg, dict) else cfg
    cov = Coverage(cfg.gens, cfg.timing)
    t0 = time.perf_counter()
    cases, shrunk = [], set()

    def result(complete: bool) -> dict:
        return {"config": asdict(cfg), "shard": [i, n], "cases": cases, "seconds": round(time.perf_counter() - t0, 1),
                "complete": complete,
                "coverage": {"runs": cov.runs, "hits": [[*k[:2], list(k[2]), v] for k, v in sorted(cov.hits.items())]}}
    for kind, gen, items in tasks(cfg, i, n):
        t1 = time.perf_counter()
        log(f"shard {i}/{n}: {gen} random programs, seeds {items[0]}..{items[-1]} ({len(items)})" if kind == "random"
            else f"shard {i}/{n}: {gen} fuzz descriptors {items[0]}..{items[1] - 1}")
        try:
            cases += run_random(gen, items, cfg, cov, log, shrunk) if kind == "random" else \
                run_fuzz(gen, *items, cfg, cov, log, shrunk)
        except Exception as exc:         # noqa: BLE001  (a task's crash is its error case)
            cases.append(_case(f"{kind}.{gen}", f"task_{items[0]}", time.perf_counter() - t1, error=_short(exc)))
        if checkpoint is not None:
            checkpoint(result(False))
    return result(True)


def write_shard(result: dict, out_dir) -> Path:
    i, n = result["shard"]
    path = Path(out_dir) / f"shard-{i}-of-{n}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    part = path.with_name(f".{path.name}.{os.getpid()}.{threading.get_ident()}")
    part.write_text(json.dumps(result, indent=1))
    os.replace(part, path)                   # whole or not at all: a run stopped mid-write keeps the last one
    return path


def read_shards(out_dir) -> list:
    paths = sorted(Path(out_dir).glob("shard-*-of-*.json"))
    if not paths:
        raise ValueError(f"no shard results (shard-*-of-*.json) in {out_dir}")
    results = [json.loads(p.read_text()) for p in paths]
    counts = {r["shard"][1] for r in results}
    if len(counts) != 1:
        raise ValueError(f"{out_dir} holds shards of different splits ({sorted(counts)}); clear it first")
    return results


# --- the merged report ---------------------------------------------------------------------------

def junit(cases: list) -> ElementTree.ElementTree:
    """JUnit XML: one testsuite per suite (random.<GEN>, fuzz.<GEN>), one testcase per case."""
    root = ElementTree.Element("testsuites", name="tensore regress")
    suites: dict = {}
    for c in cases:
        suites.setdefault(c["suite"], []).append(c)
    for name, cs in sorted(suites.items()):
        s = ElementTree.SubElement(root, "testsuite", name=name, tests=str(len(cs)),
                                   failures=str(sum(1 for c in cs if c["failure"])),
                                   errors=str(sum(1 for c in cs if c["error"])),
                                   time=f"{sum(c['seconds'] for c in cs):.3f}")
        for c in cs:
            tc = ElementTree.SubElement(s, "testcase", classname=f"regress.{name}", name=c["name"], time=f"{c['seconds']:.3f}")
            if c["error"]:
                ElementTree.SubElement(tc, "error", message=c["error"][:200]).text = c["error"]
            elif c["failure"]:
                ElementTree.SubElement(tc, "failure", message=c["failure"][:200]).text = \
                    c["failure"] + (f"\nreproducer: {c['reproducer']}" if c.get("reproducer") else "")
    for key in ("tests", "failures", "errors"):
        root.set(key, str(sum(int(s.get(key)) for s in root)))
    ElementTree.indent(root)
    return ElementTree.ElementTree(root)


def summary(cases: list) -> dict:
    out: dict = {}
    for c in cases:
        s = out.setdefault(c["suite"], {"cases": 0, "passed": 0, "failed": 0, "errors": 0, "seconds": 0.0})
        s["cases"] += 1
        s["failed" if c["failure"] and not c["error"] else "errors" if c["error"] else "passed"] += 1
        s["seconds"] = round(s["seconds"] + c["seconds"], 3)
    return dict(sorted(out.items()))


def merge(results: list, out_dir) -> dict:
    """Merge shard results: regress.json (summary, cases, failures), junit.xml and the coverage
    database (coverage.xml) with its reports (coverage.txt, coverage.html); returns the JSON."""
    from tensore.cosim import coverage
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    cfg = Config.from_json(results[0]["config"])
    cases = [c for r in sorted(results, key=lambda r: r["shard"]) for c in r["cases"]]
    cov = coverage.Coverage(cfg.gens, cfg.timing)
    for r in results:
        cov.runs += r["coverage"]["runs"]
        for g, group, key, n in r["coverage"]["hits"]:
            cov.hits[(g, group, tuple(key))] += n
    xml = cov.write_xml(out / "coverage.xml")
    text = coverage.write_report(xml, out / "coverage.txt")
    coverage.write_report(xml, out / "coverage.html")
    junit(cases).write(out / "junit.xml", encoding="unicode", xml_declaration=True)
    groups = coverage.read(xml)
    report = {"config": asdict(cfg), "shards": len(results), "summary": summary(cases),
              "incomplete": [r["shard"] for r in sorted(results, key=lambda r: r["shard"]) if not r.get("complete", True)],
              "totals": {k: sum(s[k] for s in summary(cases).values()) for k in ("cases", "passed", "failed", "errors")},
              "shard_seconds": [r["seconds"] for r in sorted(results, key=lambda r: r["shard"])],
              "coverage": {"runs": cov.runs, "bins": sum(g["size"] for g in groups.values()),
                           "covered": sum(g["covered"] for g in groups.values()), "holes": coverage.holes(xml)},
              "failures": [c for c in cases if c["failure"] or c["error"]]}
    (out / "regress.json").write_text(json.dumps(report, indent=1))
    report["coverage_text"] = text
    return report


def format_report(report: dict) -> str:
    t = report["totals"]
    lines = [f"regress: {t['cases']} cases in {report['shards']} shard(s): {t['passed']} passed, {t['failed']} failed, "
             f"{t['errors']} errors"]
    if report.get("incomplete"):
        lines.append(f"  incomplete shards (stopped before their last task): {report['incomplete']}")
    for suite, s in report["summary"].items():
        lines.append(f"  {suite:<22} {s['cases']:>6} cases {s['passed']:>6} passed {s['failed']:>4} failed "
                     f"{s['errors']:>4} errors {s['seconds']:>9.1f} s")
    c = report["coverage"]
    lines.append(f"coverage: {c['covered']} of {c['bins']} bins over {c['runs']} golden runs")
    for f in report["failures"][:20]:
        lines.append(f"  FAIL {f['suite']}.{f['name']}: {f['error'] or f['failure']}"[:400])
    return "\n".join(lines)


# --- dask.distributed ------------------------------------------------------------------------------

def run_dask(cfg: Config, n: int, address: str | None = None, *, workers: int = 2, run=None) -> list:
    """The n shards as tasks on a dask.distributed cluster: the scheduler at `address`
    (tcp://host:8786; its workers need tensore installed) or a LocalCluster of `workers` processes.
    `run(cfg_dict, i, n)` runs a shard (default run_shard; cosim/mutate.py passes its own)."""
    try:
        from distributed import Client, LocalCluster
    except ImportError as exc:
        raise ValueError("the dask path needs dask.distributed: pip install 'tensore[regress]'") from exc
    cluster = None
    if address is None:
        cluster = LocalCluster(n_workers=workers, threads_per_worker=1, processes=True, dashboard_address=None)
        address = cluster
    try:
        with Client(address) as client:
            futures = [client.submit(run or run_shard, asdict(cfg), i, n, pure=False) for i in range(n)]
            return client.gather(futures)
    finally:
        if cluster is not None:
            cluster.close()
