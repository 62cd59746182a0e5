"""Figures for `make bench`: golden-model speed of every model.array.matmul path against np.matmul
(same run), and kernel cycle estimates on the full-size engines."""
from __future__ import annotations

import time

import numpy as np

from tensore.model import dtypes as dt
from tensore.bench import best_of

PATHS = {   # name -> matmul keyword arguments (codes are made from the same fp32 operands)
    "bf16": dict(in_dtype="bf16"), "fp16": dict(in_dtype="fp16"), "fp8 e4m3": dict(in_dtype="fp8_e4m3"),
    "fp8 e5m2": dict(in_dtype="fp8_e5m2"), "fp8 double row": dict(in_dtype="fp8_e4m3", perf_mode="double_row"),
    "fp32 low": dict(in_dtype="fp32", fp32_mode="low"), "fp32 high": dict(in_dtype="fp32", fp32_mode="high"),
    "fp32 low_high": dict(in_dtype="fp32", fp32_mode="low_high"),
    "mx fp8 e4m3 quad_row": dict(in_dtype="fp8_e4m3", perf_mode="quad_row"),
    "sparse bf16 2 fmaps": dict(in_dtype="bf16"),
}


def golden_ratios(k=128, m=128, n=512, repeat=3, seed=11) -> dict:
    """{path: {"seconds", "ratio_vs_np_matmul"}} for a k x m x n matmul, plus the baseline.
    Run with OPENBLAS_NUM_THREADS=1 on a shared machine: a multi-threaded np.matmul baseline swings
    by orders of magnitude under load."""
    from tensore.model.array import matmul
    rng = np.random.default_rng(seed)
    w32, a32 = rng.standard_normal((k, m)).astype(np.float32), rng.standard_normal((k, n)).astype(np.float32)
    ref = best_of(lambda: np.matmul(w32.T, a32), 20 * repeat)
    out = {"baseline": {"name": f"np.matmul float32 {k}x{m}x{n}", "seconds": ref}}
    for name, kw in PATHS.items():
        kw = dict(kw)
        gen = "mariana" if "double" in name else "maverick"
        codes = (lambda x: x.view(np.uint32)) if kw["in_dtype"] == "fp32" else \
            (lambda x: dt.from_fp32(x, kw["in_dtype"], gen))
        w, a = codes(w32), codes(a32)
        if name.startswith("mx"):
            kw |= dict(stationary_scales=rng.integers(124, 131, (k // 32, m)),
                       moving_scales=rng.integers(124, 131, (k // 32, n)))
        if name.startswith("sparse"):
            a = np.stack([a, codes(a32[::-1].copy())], axis=1)
            kw["tags"] = rng.integers(0, 2, (k, m))
        t = best_of(lambda: matmul(w, a, gen=gen, **kw), repeat)
        out[name] = {"seconds": t, "ratio_vs_np_matmul": t / ref}
    return out


KERNELS = [("cayman", 512, 256, 256, "bf16"), ("mariana", 512, 256, 256, "bf16"),
           ("mariana", 512, 256, 256, "fp8_e4m3 double_row"), ("mariana", 512, 256, 256, "fp8_e4m3 mx=quad_row"),
           ("mariana", 512, 512, 256, "bf16 sparse"), ("maverick", 512, 256, 512, "bf16"),
           ("maverick", 512, 256, 512, "fp32 fp32_mode=high")]


def kernel_estimates(kernels=KERNELS, seed=0) -> list:
    """Cycle estimates of GEMMs on the full-size golden engines (128 x 128, MAVERICK 128 x 256);
    a kernel is (gen, M, K, N, "dtype [gemm keyword[=value] ...]")."""
    from tensore.kernels import gemm as G
    from tensore.kernels.estimate import estimate
    rows = []
    rng = np.random.default_rng(seed)
    for gen, m, k, n, dtype in kernels:
        words = dtype.split()
        kw = {w.split("=")[0]: (w.split("=")[1] if "=" in w else True) for w in words[1:]}
        prog = G.gemm(rng.standard_normal((m, k)), rng.standard_normal((k, n)), dtype=words[0], gen=gen, **kw)
        t0 = time.perf_counter()
        _, trace, _ = G.run(prog)
        e = estimate(prog, trace)
        rows.append({"name": f"gemm {m}x{k}x{n} {dtype} {gen}", "cycles": e["cycles"],
                     "ideal_cycles": e["ideal_cycles"], "utilisation": e["utilisation"], "bound": e["bound"],
                     "breakdown": e["breakdown"], "golden_seconds": time.perf_counter() - t0})
    return rows


def gemm_speed(n=2048, gen="mariana", seed=0, repeat=2) -> dict:
    """An n x n x n bf16 GEMM end to end through the cycle-level golden engine with an aggregate
    trace (model/trace.py): gemm() from float32 A, B (quantise, tile, lay out SBUF), then run()
    (assemble, engine, C read from the trace); against np.matmul float32 of the same A, B in the
    same process.  Each side is the best of `repeat` runs (np.matmul: 3 before and 3 after), in
    wall time and in CPU time, which a shared machine disturbs less.  Target: 20x."""
    import resource

    from tensore.kernels import gemm as G
    rng = np.random.default_rng(seed)
    a, b = (rng.standard_normal((n, n)).astype(np.float32) for _ in range(2))

    def timed(fn):
        w, c = time.perf_counter(), time.process_time()
        out = fn()
        return time.perf_counter() - w, time.process_time() - c, out

    ref = [timed(lambda: np.matmul(a, b))[:2] for _ in range(3)]
    runs, result = [], None
    for _ in range(repeat):
        result = None                           # one run's trace in memory at a time
        prog_wall, prog_cpu, prog = timed(lambda: G.gemm(a, b, dtype="bf16", gen=gen))
        run_wall, run_cpu, result = timed(lambda: G.run(prog, trace="aggregate"))
        runs.append((prog_wall, prog_cpu, run_wall, run_cpu))
    ref += [timed(lambda: np.matmul(a, b))[:2] for _ in range(3)]
    c, trace, _ = result
    want = np.matmul(a, b)
    err = float(np.abs(c - want).max() / np.abs(want).max())
    if not err < 2.0 ** -6:                     # bf16 inputs: far below; a wrong result is far above
        raise RuntimeError(f"gemm {n}^3 on the golden engine: relative error {err:.3g} against np.matmul")
    wall, cpu = min(r[0] + r[2] for r in runs), min(r[1] + r[3] for r in runs)
    base_wall, base_cpu = min(r[0] for r in ref), min(r[1] for r in ref)
    return {"name": f"golden engine gemm bf16 {n}^3 {gen}", "seconds": wall, "trace": "aggregate",
            "program_seconds": min(r[0] for r in runs), "engine_seconds": min(r[2] for r in runs),
            "baseline": "np.matmul float32", "baseline_seconds": base_wall, "ratio_vs_baseline": wall / base_wall,
            "cpu_seconds": cpu, "baseline_cpu_seconds": base_cpu, "cpu_ratio_vs_baseline": cpu / base_cpu,
            "target_ratio": 20.0, "cycles": trace.cycles, "psum_writes": trace.psum_write_count,
            "max_rel_error": err, "process_peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024}
