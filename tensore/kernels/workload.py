"""The workload benchmark (`make bench-workload`, D-T94): the weight GEMMs of one transformer block
with TinyLlama-1.1B shapes on the full-size MARIANA RTL, checked every cycle.

Hidden 2048, FFN 5632, grouped-query attention with 4 KV heads of 64, 128 tokens: the QKV, O, gate,
up and down projections, C [tokens, out] = X [tokens, in] @ W [in, out] in bf16 with fp32 PSUM,
2,688 weight tiles of 128 x 128.  Operands come from a seeded generator (X ~ N(0, 1), W ~
N(0, 1/in)).  Each GEMM splits into programs of `chunk` column tiles (tensore/kernels/split.py),
which run on a pool of worker processes, each in lockstep with its golden run; each GEMM's C,
merged from the RTL's writes, must equal its single program's golden C bit for bit and hold the
kernel contract against float64 np.matmul of the quantised inputs (kernels/numerics.py).

    python -m tensore.kernels.workload -o build/bench_workload.json [--jobs 2] [--scale 1] [--timing public]

`--scale S` divides every size by S (tokens, hidden, FFN, heads' width) and the engine by S too: a
quick run of the same path (tests use S = 16 on an 8 x 8 engine)."""
from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

import numpy as np

from tensore.model.timing import DEFAULT_PROFILE, PROFILES

HIDDEN, FFN, KV_HEADS, HEAD_DIM, TOKENS = 2048, 5632, 4, 64, 128
SEED = 20261204


def shapes(scale: int = 1) -> list:
    """(name, tokens, in, out) of the block's weight GEMMs, every size divided by `scale`."""
    h, f, kv, t = HIDDEN // scale, FFN // scale, KV_HEADS * HEAD_DIM // scale, TOKENS // scale
    return [("q_proj", t, h, h), ("k_proj", t, h, kv), ("v_proj", t, h, kv), ("o_proj", t, h, h),
            ("gate_proj", t, h, f), ("up_proj", t, h, f), ("down_proj", t, f, h)]


def operands(name: str, tokens: int, k: int, n: int) -> tuple:
    """Seeded X [tokens, k] and W [k, n] of one GEMM (float64; the kernel quantises them to bf16)."""
    rng = np.random.default_rng([SEED, sum(map(ord, name))])
    return rng.standard_normal((tokens, k)), rng.standard_normal((k, n)) / np.sqrt(k)


def golden_cycles(scale: int = 1, timing=DEFAULT_PROFILE) -> dict:
    """{GEMM: (the golden engine's cycles, the public cost model's)} of each GEMM as one program on the
    engine of `scale`, under the timing profile `timing`: the workload's clock without the RTL."""
    from tensore.kernels import gemm as G
    from tensore.kernels.public_cost import compare
    out = {}
    for name, t, k, n in shapes(scale):
        prog = G.gemm(*operands(name, t, k, n), name=name, gen="mariana", rows=128 // scale, cols=128 // scale,
                      dtype="bf16", out_dtype="fp32")
        prog.timing = timing
        trace = G.run(prog, trace="aggregate")[1]
        out[name] = (trace.cycles, compare(trace, timing)["public"])
    return out


def run(*, scale: int = 1, jobs: int = 2, chunk: int = 4, opt: str = "-O1", dtypes=("bf16",), dask=None,
        timing=DEFAULT_PROFILE, log=print) -> dict:
    """Every GEMM of the block on the RTL under the timing profile `timing` (model/timing.py): the
    report (per GEMM and totals) as a dict."""
    from tensore.kernels import gemm as G
    from tensore.kernels.numerics import report
    from tensore.kernels.split import fit_config, merge, run_parts, split_gemm
    rows = cols = 128 // scale
    kw = dict(gen="mariana", rows=rows, cols=cols, dtype="bf16", out_dtype="fp32")
    t_start = time.perf_counter()
    gemms, parts = [], []
    for name, t, k, n in shapes(scale):
        X, W = operands(name, t, k, n)
        whole = G.gemm(X, W, name=name, **kw)
        ps = split_gemm(X, W, max(1, -(-n // (chunk * cols))), axis="n", name=name, **kw)
        for prog in [whole] + [p.prog for p in ps]:
            prog.timing = timing
        gemms.append((name, t, k, n, whole, ps))
        parts.extend(ps)
    tiles = sum(-(-k // rows) * -(-n // cols) for _, _, k, n, _, _ in gemms)
    log(f"{len(gemms)} GEMMs, {tiles:,} weight tiles of {rows} x {cols}, {len(parts)} programs on MARIANA "
        f"{rows} x {cols}{' (' + ', '.join(dtypes) + '-only PEs)' if dtypes else ''}, timing {timing}, {jobs} workers")
    from tensore.rtl.fp.pe_mac import parse_dtypes
    config = fit_config([parts[0].prog], max(16, cols), parse_dtypes("mariana", dtypes))   # a kernel writes a PSUM partition per column
    t_build = time.perf_counter()
    state = {"done": 0, "cycles": 0}

    def done(r):
        state["done"] += 1
        state["cycles"] += r["cycles"]
        rate = state["cycles"] / max(1e-9, time.perf_counter() - t_sim[0])
        log(f"  {state['done']}/{len(parts)} {r['name']}: {r['cycles']:,} cycles, {r['seconds']:.1f} s, "
            f"{'OK' if r['mismatch'] is None else 'MISMATCH ' + r['mismatch']}; {rate:,.0f} cycles/s so far")

    t_sim = [time.perf_counter()]
    from tensore.cosim import harness, hdl
    harness.build(hdl.export_cached(config, log=log), opt=opt, log=log)
    build_s = time.perf_counter() - t_build
    t_sim[0] = time.perf_counter()
    results, wall, _ = run_parts(parts, jobs=jobs, opt=opt, config=config, dask=dask, log=log, done=done)
    by_name = {r["name"]: r for r in results}
    out, ok = [], True
    for name, t, k, n, whole, ps in gemms:
        res = [by_name[p.prog.name] for p in ps]
        rtl_c = merge(ps, res, (t, n))
        golden_c = G.run(whole, trace="aggregate")[0]
        rep = report(whole, rtl_c)
        same = bool(np.array_equal(rtl_c.view(np.uint32), golden_c.view(np.uint32)))
        lock = all(r["mismatch"] is None for r in res)
        good = same and lock and rep["bit_exact"]
        ok &= good
        out.append({"name": name, "m": t, "k": k, "n": n, "programs": len(ps),
                    "weight_tiles": -(-k // rows) * -(-n // cols), "cycles": sum(r["cycles"] for r in res),
                    "simulation_seconds": round(sum(r["seconds"] for r in res), 2), "lockstep_ok": lock,
                    "bit_exact_to_single_program": same, "bit_exact_to_contract": bool(rep["bit_exact"]),
                    "normwise_rel_vs_float64": float(rep["normwise_rel"]), "ok": good})
    cycles = sum(g["cycles"] for g in out)
    total = time.perf_counter() - t_start
    return {"name": "workload_tinyllama_block", "scale": scale, "engine": config.label, "timing": str(timing), "jobs": jobs,
            "opt": opt, "weight_tiles": tiles, "programs": len(parts), "gemms": out, "cycles": cycles,
            "build_seconds": round(build_s, 1), "run_seconds": round(wall, 1), "total_seconds": round(total, 1),
            "cycles_per_s": round(cycles / wall, 1), "pe_cycles_per_s": round(cycles * rows * cols / wall),
            "ok": bool(ok)}


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="tensore-bench-workload", description=__doc__.split("\n\n")[0])
    p.add_argument("-o", "--output", default="build/bench_workload.json", help="the JSON report")
    p.add_argument("--jobs", type=int, default=min(2, os.cpu_count() or 1), help="worker processes (default: "
                   "the cores, at most 2)")
    p.add_argument("--scale", type=int, default=1, choices=[1, 2, 4, 8, 16], help="divide every size and the "
                   "engine by this (1: the full block on 128 x 128)")
    p.add_argument("--chunk", type=int, default=4, help="column tiles per program (default 4)")
    p.add_argument("--opt", default="-O1", choices=["-O0", "-O1", "-O2", "-O3"], help="C++ optimisation")
    p.add_argument("--universal", action="store_true", help="the universal PE (every dtype) instead of a "
                   "bf16-only build")
    p.add_argument("--dask", metavar="ADDRESS", help="run the programs on a dask.distributed scheduler")
    p.add_argument("--timing", default=DEFAULT_PROFILE, choices=list(PROFILES), type=str.lower,
                   help=f"the engine's timing profile (docs/timing.md, 'Timing profiles'; default {DEFAULT_PROFILE})")
    args = p.parse_args(argv)
    rep = run(scale=args.scale, jobs=args.jobs, chunk=args.chunk, opt=args.opt,
              dtypes=None if args.universal else ("bf16",), dask=args.dask, timing=args.timing,
              log=lambda m: print(m, flush=True))
    out = Path(args.output)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(rep, indent=2))
    for g in rep["gemms"]:
        print(f"{g['name']:<10} {g['m']}x{g['k']}x{g['n']}: {g['weight_tiles']:>4} tiles, {g['cycles']:>9,} cycles, "
              f"{'OK' if g['ok'] else 'FAILED'} (normwise rel (Frobenius) {g['normwise_rel_vs_float64']:.1e})")
    print(f"total: {rep['cycles']:,} cycles in {rep['run_seconds']} s on {rep['jobs']} workers "
          f"({rep['cycles_per_s']:,.0f} cycles/s, {rep['pe_cycles_per_s']:.3g} PE-cycles/s); build "
          f"{rep['build_seconds']} s; end to end {rep['total_seconds']} s: {'OK' if rep['ok'] else 'FAILED'}")
    print(f"wrote {out}")
    return 0 if rep["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
