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

The engine is built once (the build cache is shared); `jobs` groups of parts run as that many
harness processes (threads wait on them), or as tasks on a dask.distributed cluster (`dask`: a
scheduler address, "local" for a LocalCluster; workers that share the build cache directory reuse
the build, others build once each)."""
from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor
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


def _config(programs: list, psum_partitions: int):
    """The one engine configuration every part fits (cosim/hdl.py's fits over all the parts)."""
    from tensore.cosim import hdl
    from tensore.cosim.lockstep import Lockstep, fit_ports
    lks = [Lockstep(p, psum_partitions=psum_partitions) for p in programs]
    pack = hdl.fit_pack(lks)
    for lk in lks:
        lk.pack = pack
    return hdl.Config.of(programs[0], pack=pack, psum_partitions=psum_partitions, psum_ports=fit_ports(lks),
                         sparse32=hdl.fit_sparse32(lks)), lks


def run_group(programs: list, cfg: dict, opt: str) -> list:
    """Run parts one after another in one compiled-harness process (building the engine when the
    cache lacks it); a result dict per part: mismatch (text or None), cycles, checks, seconds, the
    C read from the RTL's writes and from the golden run.  Picklable both ways (a dask task)."""
    from tensore.cosim import harness, hdl
    from tensore.cosim.lockstep import Lockstep
    from tensore.outputs import harness_write_rows
    config = hdl.Config(**cfg)
    lks = []
    for p in programs:
        lk = Lockstep(p, psum_partitions=config.psum_partitions, psum_ports=config.psum_ports)
        lk.pack = config.pack
        lks.append(lk)
    built = harness.build(hdl.export_cached(config, log=lambda m: None), opt=opt, log=lambda m: None)
    out = []
    for p, lk, res in zip(programs, lks, harness.simulate_many(lks, built, mismatch_waves=False)):
        rows = harness_write_rows(lk.rtl_writes)
        out.append({"name": p.name, "mismatch": None if res.mismatch is None else str(res.mismatch),
                    "cycles": res.cycles, "checks": res.checks, "seconds": res.seconds,
                    "c_rtl": p.read(lk.trace, rtl_writes=rows), "c_golden": p.read(lk.trace)})
    return out


def run_parts(parts: list, *, jobs: int = 2, opt: str = "-O1", psum_partitions: int = 16, dask: str | None = None,
              log=print) -> tuple:
    """Run the parts of split_gemm on Verilator: (results in the parts' order, wall seconds, cfg).
    The build happens once here first; then `jobs` groups run at once (threads over harness
    processes), or on a dask.distributed cluster when `dask` names one."""
    from dataclasses import asdict

    from tensore.cosim import harness, hdl
    programs = [p.prog for p in parts]
    config, _ = _config(programs, psum_partitions)
    cfg = asdict(config)
    harness.build(hdl.export_cached(config, log=log), opt=opt, log=log)        # once, before the workers
    groups = [programs[i::jobs] for i in range(min(jobs, len(programs)))]
    t0 = time.perf_counter()
    if dask:
        grouped = _on_dask(groups, cfg, opt, dask, jobs)
    else:
        with ThreadPoolExecutor(len(groups)) as pool:
            grouped = list(pool.map(lambda g: run_group(g, cfg, opt), groups))
    wall = time.perf_counter() - t0
    by_name = {r["name"]: r for g in grouped for r in g}
    return [by_name[p.name] for p in programs], wall, config


def _on_dask(groups: list, cfg: dict, opt: str, address: str, workers: int) -> list:
    try:
        from distributed import Client, LocalCluster
    except ImportError as exc:
        raise ValueError("--dask needs dask.distributed: pip install 'tensore[regress]'") from exc
    cluster = LocalCluster(n_workers=workers, threads_per_worker=1, processes=True, dashboard_address=None) \
        if address == "local" else None
    try:
        with Client(cluster or address) as client:
            return client.gather([client.submit(run_group, g, cfg, opt, pure=False) for g in groups])
    finally:
        if cluster is not None:
            cluster.close()


def merge(parts: list, results: list, shape: tuple, key: str = "c_rtl") -> np.ndarray:
    """The parts' C placed into C [M, N] float32 (`key` "c_golden": the golden runs')."""
    out = np.full(shape, np.nan, np.float32)
    for p, r in zip(parts, results):
        out[p.rows[0]:p.rows[1], p.cols[0]:p.cols[1]] = r[key]
    return out
