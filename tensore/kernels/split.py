"""A large GEMM on the RTL as independent programs run side by side (D-T94).

C = A @ B splits into `parts` programs that share nothing: along N in whole column tiles of the
array when C has at least `parts` of them (each part loads only its own weight tiles), else along M
(A's rows, the moving vectors: each part loads all of B).  Each starts from a clear PSUM, so the
parts run on separate engines at once.  Each part runs in lockstep with its own golden run, every cycle checked;
the parts' C (read from the RTL's own writes) are placed into one C and judged as one.  With RNE
every element is the same as the single program's: a C element depends only on its row of A, its
column of B and the K order, which the split leaves alone; stochastic
rounding (D-08) draws from PSUM-location state, so a split SR run is its own valid run.

    parts = split_gemm(A, B, 2, gen="mariana", ...)      # [Part(rows, cols, KernelProgram)]
    results = run_parts(parts, jobs=2)                   # one engine build, two harness processes
    C = merge(parts, results, (M, N))

The engine is built once (the build cache is shared); the parts run as tasks of a pool of `jobs`
worker processes, each part's golden run, harness process and checks in one worker (the next part
goes to the first worker free), or as tasks on a dask.distributed cluster (`dask`: a scheduler
address, "local" for a LocalCluster; workers that share the build cache directory reuse the build,
others build once each)."""
from __future__ import annotations

import time
import multiprocessing
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class Part:
    """One independent program: C[rows[0]:rows[1], cols[0]:cols[1]] = A[rows] @ B[:, cols]."""
    rows: tuple
    cols: tuple
    prog: object

    @property
    def where(self) -> str:
        return f"rows {self.rows[0]}-{self.rows[1]}, columns {self.cols[0]}-{self.cols[1]}"


def split_rows(m: int, parts: int) -> list:
    """`parts` (at most m) contiguous row ranges (m0, m1) of nearly equal size covering 0..m."""
    parts = max(1, min(parts, m))
    edges = [round(i * m / parts) for i in range(parts + 1)]
    return [(edges[i], edges[i + 1]) for i in range(parts)]


def split_gemm(A, B, parts: int, *, axis: str = "auto", **kw) -> list:
    """[Part]: `tensore.kernels.gemm.gemm` of each block of C.  `axis` "n": whole column tiles of
    the array (its full width), "m": rows; "auto": "n" when C has at least `parts` column tiles."""
    from tensore.kernels.gemm import geometry, gemm
    A, B = np.asarray(A), np.asarray(B)
    (m, n), name = (A.shape[0], B.shape[1]), kw.pop("name", "gemm")
    width = geometry(kw.get("gen", "maverick"), kw.get("rows"), kw.get("cols")).cols
    tiles = -(-n // width)
    if axis == "auto":
        axis = "n" if tiles >= parts else "m"
    if axis == "n":
        blocks = [((0, m), (t0 * width, min(n, t1 * width))) for t0, t1 in split_rows(tiles, parts)]
    else:
        blocks = [((m0, m1), (0, n)) for m0, m1 in split_rows(m, parts)]
    return [Part(r, c, gemm(A[r[0]:r[1]], B[:, c[0]:c[1]], name=f"{name}_r{r[0]}-{r[1]}_c{c[0]}-{c[1]}", **kw))
            for r, c in blocks]


def fit_config(programs: list, psum_partitions: int = 16, dtypes=None):
    """The one engine configuration every part fits (cosim/hdl.py's fits), each part's golden run
    made and dropped in turn; `dtypes`: a specialised build (D-T62)."""
    from tensore.cosim import hdl
    from tensore.cosim.lockstep import Lockstep
    pack, ports, sparse32 = 1, 1, False
    for p in programs:
        lk = Lockstep(p, psum_partitions=psum_partitions)
        # a specialised build without 8-bit dtypes has one element per PE (rtl/fp/pe_mac.py)
        pack = max(pack, hdl.needed_pack(lk)[0] if dtypes else hdl.fit_pack([lk]))
        ports, sparse32 = max(ports, lk.psum_ports), sparse32 or hdl.fit_sparse32([lk])
        p.__dict__.pop("_golden", None)
    return hdl.Config.of(programs[0], pack=pack, psum_partitions=psum_partitions, psum_ports=ports,
                         sparse32=sparse32, dtypes=dtypes)


def run_one(prog, cfg: dict, opt: str) -> dict:
    """One part in lockstep on the compiled harness (built when the cache lacks it): mismatch (text
    or None), cycles, checks, seconds, and C read from the RTL's writes and from the golden run.
    Picklable both ways (a pool or dask task)."""
    from tensore.cosim import harness, hdl
    from tensore.cosim.lockstep import Lockstep
    from tensore.outputs import harness_write_rows
    config = hdl.Config(**cfg)
    lk = Lockstep(prog, psum_partitions=config.psum_partitions, psum_ports=config.psum_ports)
    lk.pack = config.pack
    hdl.check_dtypes([lk], config)
    built = harness.build(hdl.export_cached(config, log=lambda m: None), opt=opt, log=lambda m: None)
    res = harness.simulate_many([lk], built, mismatch_waves=False)[0]
    rows = harness_write_rows(lk.rtl_writes)
    return {"name": prog.name, "mismatch": None if res.mismatch is None else str(res.mismatch),
            "cycles": res.cycles, "checks": res.checks, "seconds": res.seconds,
            "c_rtl": prog.read(lk.trace, rtl_writes=rows), "c_golden": prog.read(lk.trace)}


def run_parts(parts: list, *, jobs: int = 2, opt: str = "-O1", psum_partitions: int = 16, dask: str | None = None,
              config=None, log=print, done=None) -> tuple:
    """Run the parts of split_gemm on Verilator: (results in the parts' order, wall seconds, config).
    The build happens once here first (`config`: the engine, else fit_config); then the parts run
    on a pool of `jobs` processes, or on a dask.distributed cluster when `dask` names one;
    `done(result)` is called as each part finishes."""
    from dataclasses import asdict

    from tensore.cosim import harness, hdl
    programs = [p.prog for p in parts]
    config = config or fit_config(programs, psum_partitions)
    cfg = asdict(config)
    harness.build(hdl.export_cached(config, log=log), opt=opt, log=log)        # once, before the workers
    t0 = time.perf_counter()
    if dask:
        results = _on_dask(programs, cfg, opt, dask, jobs, done)
    else:
        with ProcessPoolExecutor(min(jobs, len(programs)), mp_context=multiprocessing.get_context("spawn")) as pool:
            futures = [pool.submit(run_one, p, cfg, opt) for p in programs]
            results = []
            for f in futures:
                results.append(f.result())
                if done:
                    done(results[-1])
    return results, time.perf_counter() - t0, config


def _on_dask(programs: list, cfg: dict, opt: str, address: str, workers: int, done=None) -> list:
    try:
        from distributed import Client, LocalCluster
    except ImportError as exc:
        raise ValueError("--dask needs dask.distributed: pip install 'tensore[regress]'") from exc
    cluster = LocalCluster(n_workers=workers, threads_per_worker=1, processes=True, dashboard_address=None) \
        if address == "local" else None
    try:
        with Client(cluster or address) as client:
            futures = [client.submit(run_one, p, cfg, opt, pure=False) for p in programs]
            results = []
            for f in futures:
                results.append(f.result())
                if done:
                    done(results[-1])
            return results
    finally:
        if cluster is not None:
            cluster.close()


def merge(parts: list, results: list, shape: tuple, key: str = "c_rtl") -> np.ndarray:
    """The parts' C placed into C [M, N] float32 (`key` "c_golden": the golden runs')."""
    out = np.full(shape, np.nan, np.float32)
    for p, r in zip(parts, results):
        out[p.rows[0]:p.rows[1], p.cols[0]:p.cols[1]] = r[key]
    return out
