"""`make bench`: measured speeds, written to JSON, each against a baseline from the same run."""
from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
from pathlib import Path

# One BLAS thread unless told otherwise, set before numpy and scipy load their OpenBLAS: the golden
# model's chains are many small BLAS calls, which threads only slow down on a shared machine, and its
# np.matmul baselines then run on one thread as well.
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import ml_dtypes as md  # noqa: E402
import numpy as np  # noqa: E402

from tensore.model import dtypes as dt
from tensore.model.timing import DEFAULT_PROFILE, PROFILES


def best_of(fn, repeat: int = 5) -> float:
    """Best wall time of `repeat` calls, in seconds."""
    best = float("inf")
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
    return best


def bench_from_fp32(n: int = 1 << 22) -> list[dict]:
    """from_fp32 throughput against ml_dtypes astype on the same input."""
    rng = np.random.default_rng(7)
    x = (rng.standard_normal(n) * 8).astype(np.float32)
    rows = []
    for dtype, gen, twin in [(dt.Dtype.BFLOAT16, dt.Gen.MAVERICK, md.bfloat16),
                             (dt.Dtype.FP8_EXP4, dt.Gen.MAVERICK, md.float8_e4m3fn),
                             (dt.Dtype.FP8_EXP5, dt.Gen.MAVERICK, md.float8_e5m2)]:
        ours = best_of(lambda: dt.from_fp32(x, dtype, gen))
        ref = best_of(lambda: x.astype(twin))
        rows.append({"name": f"from_fp32 {dtype.name}", "elements": n,
                     "elements_per_s": n / ours, "baseline": f"ml_dtypes astype {twin.__name__}",
                     "baseline_elements_per_s": n / ref, "ratio_vs_baseline": ref / ours})
    return rows


def bench_golden_matmul() -> list[dict]:
    """A 128 x 128 x 512 bf16 matmul in the functional model against np.matmul float32."""
    from tensore.model.array import matmul
    rng = np.random.default_rng(11)
    w32 = rng.standard_normal((128, 128)).astype(np.float32)
    a32 = rng.standard_normal((128, 512)).astype(np.float32)
    w = dt.from_fp32(w32, dt.Dtype.BFLOAT16, dt.Gen.MAVERICK)
    a = dt.from_fp32(a32, dt.Dtype.BFLOAT16, dt.Gen.MAVERICK)
    ours = best_of(lambda: matmul(w, a, in_dtype="bf16", gen="maverick"))
    ref = best_of(lambda: np.matmul(w32.T, a32), repeat=20)
    rows = [{"name": "golden matmul bf16 128x128x512", "seconds": ours, "baseline": "np.matmul float32",
             "baseline_seconds": ref, "ratio_vs_baseline": ours / ref, "target_ratio": 20.0}]
    for name, kw in (("fp8 double row", dict(in_dtype="fp8_e4m3", perf_mode="double_row")),
                     ("fp32 high", dict(in_dtype="fp32", fp32_mode="high"))):
        dtype = kw["in_dtype"]
        ww = dt.from_fp32(w32, dtype, dt.Gen.MAVERICK) if dtype != "fp32" else w32.view(np.uint32)
        aa = dt.from_fp32(a32, dtype, dt.Gen.MAVERICK) if dtype != "fp32" else a32.view(np.uint32)
        t = best_of(lambda: matmul(ww, aa, gen="maverick", **kw), repeat=3)   # the first fp32 call loads numba
        rows.append({"name": f"golden matmul {name} 128x128x512", "seconds": t, "baseline": "np.matmul float32",
                     "baseline_seconds": ref, "ratio_vs_baseline": t / ref})
    return rows


def bench_golden_engine() -> list[dict]:
    """The same matmul as a Ldweights + Matmul program through the cycle-level engine."""
    from tensore.model.engine import Engine
    from tensore.model.isa.asm import assemble
    from tensore.model.sbuf import Sbuf
    rng = np.random.default_rng(12)
    sbuf = Sbuf(np.zeros((128, 0x1000), np.uint8))
    w = dt.from_fp32(rng.standard_normal((128, 128)).astype(np.float32), dt.Dtype.BFLOAT16, dt.Gen.MAVERICK)
    a = dt.from_fp32(rng.standard_normal((128, 512)).astype(np.float32), dt.Dtype.BFLOAT16, dt.Gen.MAVERICK)
    sbuf.data[:, :256] = w.view(np.uint8).reshape(128, 256)
    sbuf.data[:, 0x400:0x400 + 1024] = a.view(np.uint8).reshape(128, 1024)
    tile = "tile_size=(row_size_log2=r128, col_size_log2=c128)"
    prog = assemble(f"ldweights in_dtype=bf16 rows=128 cols=128 {tile} src=(start_addr=sbuf(0,0), step_elem=[1,0,0], "
                    f"num_elem=[128,1,1])\nmatmul in_dtype=bf16 out_dtype=fp32 rows=128 cols=128 {tile} "
                    f"src=(start_addr=sbuf(0,0x400), step_elem=[1,0,0], num_elem=[512,1,1]) "
                    f"dst=(start_addr=psum(0,0,0), step_elem=[1,0,0], num_elem=[512,1,1])", "maverick")
    holder = {}

    def run():
        eng = Engine("maverick", sbuf=sbuf)
        holder["trace"] = eng.run(prog)
    t = best_of(run, repeat=1)
    trace = holder["trace"]
    return [{"name": "golden engine bf16 128x128x512 program", "seconds": t,
             "cycles": trace.cycles, "psum_writes": len(trace.of_kind("psum_write")),
             "simulated_cycles_per_s": trace.cycles / t}]


def bench_amaranth_array() -> list[dict]:
    """Amaranth simulator speed of the RTL array on a bf16 matmul (lockstep checks off)."""
    from tensore.cosim import array_lockstep, programs
    from tensore.model.engine import Engine
    from tensore.model.isa.asm import assemble
    rows = []
    for size in (4, 8):
        prog = programs.single("mariana", "bf16", rows=size, cols=size, n=64)
        eng = Engine(prog.gen, rows=size, cols=size, sbuf=prog.sbuf_model(), record_pe=True,
                     timing="contract")        # the array's testbench drives the row-serial weight bus
        trace = eng.run(assemble(prog.text, prog.gen))
        timing = {}
        t0 = time.perf_counter()
        array_lockstep.run(trace, prog.gen, compare=False, timing=timing)
        total = time.perf_counter() - t0
        t = timing["run_seconds"]
        rows.append({"name": f"amaranth sim array {size}x{size}", "seconds": t, "setup_seconds": total - t,
                     "cycles": trace.cycles, "cycles_per_s": trace.cycles / t,
                     "pe_cycles_per_s": trace.cycles * size * size / t})
    return rows


def bench_amaranth_engine() -> list[dict]:
    """Amaranth simulator speed of the whole engine RTL in lockstep with the golden engine (small)."""
    from tensore.cosim import lockstep, programs
    rows = []
    for size in (4, 8):
        prog = programs.single("mariana", "bf16", rows=size, cols=size, n=64)
        stats = {}
        t0 = time.perf_counter()
        bad = lockstep.run(prog, psum_partitions=max(8, size), stats=stats)
        if bad is not None:
            raise RuntimeError(f"lockstep mismatch in the benchmark: {bad}")
        total = time.perf_counter() - t0
        rows.append({"name": f"amaranth sim engine {size}x{size} (lockstep)", "seconds": stats["seconds"],
                     "setup_seconds": total - stats["seconds"], "cycles": stats["cycles"],
                     "cycles_per_s": stats["cycles"] / stats["seconds"],
                     "pe_cycles_per_s": stats["cycles"] * size * size / stats["seconds"]})
    return rows


def parse_size(text: str) -> tuple[str, int, int]:
    """'N' is a MARIANA N x N engine; 'RxC' with C = 2R a MAVERICK one (two c128-style halves)."""
    rows, _, cols = text.lower().partition("x")
    rows, cols = int(rows), int(cols or rows)
    if cols == rows:
        return "mariana", rows, cols
    if cols == 2 * rows:
        return "maverick", rows, cols
    raise ValueError(f"size {text!r}: N (MARIANA N x N) or R x 2R (MAVERICK)")


SIZES = ("8", "16", "64", "128", "128x256", "128x256:bf16")   # verilator_engine; ":bf16": a specialised build
BASELINE_MAX_ROWS = 16       # the cocotb testbench on the structural array (the former path) up to this size


def _engine_run(prog, *, pack, parts, dtypes, harness="compiled", array_form="loop", opt="-O1"):
    """(exported, built, checked HdlResult, seconds with the checks, unchecked seconds)."""
    from tensore.cosim import harness as compiled
    from tensore.cosim import hdl
    from tensore.cosim.lockstep import Lockstep
    cfg = hdl.Config.of(prog, pack=pack, psum_partitions=parts, dtypes=dtypes)
    exported = hdl.export_cached(cfg, log=print)
    if harness == "compiled":
        built = compiled.build(exported, opt=opt, log=print)
        lk = Lockstep(prog, pack=pack, psum_partitions=parts)
        res = compiled.simulate_many([lk], built)[0]
        return exported, built, res, res.seconds + res.check_seconds, res.seconds
    built = hdl.build_cached(exported, "verilator", array_form=array_form, opt=opt, log=print)
    runs = {}
    for k in (True, False):
        lk = Lockstep(prog, pack=pack, psum_partitions=parts)
        lk.compare = k
        runs[k] = hdl.simulate(lk, built)
    return exported, built, runs[True], runs[True].seconds, runs[False].seconds


def bench_verilator_engine(sizes=SIZES, opt="-O1", timings=(DEFAULT_PROFILE,)) -> list[dict]:
    """The exported engine on Verilator through the compiled harness (D-T60, D-T61): export and build
    time, build peak memory, and simulation speed of a long bf16 matmul checked every cycle against
    the golden engine (the harness's simulation plus the comparison in Python) and unchecked.  4
    elements per PE (FP8 double row, MX quad; 1 for a bf16-only build) and max(16, rows) PSUM
    partitions: the 128 x 128 and 128 x 256 builds are the ones `make cosim-full` uses.  Up to 16 x 16
    the same program also runs the former path (cocotb, a hierarchical block per PE) as the baseline.
    `opt`: the C++ optimisation of the builds; `timings`: the timing profiles to build each size
    with (a row each; a profile other than the default is named in the row)."""
    from tensore.cosim import programs
    from tensore.rtl.fp.pe_mac import parse_dtypes
    rows = []
    for spec, timing in ((s, t) for s in sizes for t in timings):
        size, _, dnames = spec.partition(":")
        gen, r, c = parse_size(size)
        dtypes = parse_dtypes(gen, dnames.split(",")) if dnames else None
        pack = 1 if dtypes else 4
        prog = programs.single(gen, "bf16", rows=r, cols=r, n=512)          # MAVERICK: the left half
        prog.timing = timing
        parts = max(16, r)
        tag = f"{' ' + dnames + ' only' if dnames else ''}{'' if timing == DEFAULT_PROFILE else ' ' + timing}"
        name = f"verilator engine {gen} {r}x{c}{tag}"
        t0 = time.perf_counter()
        try:
            exported, built, res, checked_s, free_s = _engine_run(prog, pack=pack, parts=parts, dtypes=dtypes, opt=opt)
        except ValueError as exc:           # an engine Amaranth cannot convert (rtl/top.py check_convertible)
            rows.append({"name": name, "timing": timing, "error": str(exc)})
            continue
        assert res.mismatch is None, str(res.mismatch)
        row = {"name": name, "timing": timing,
               "export_seconds": exported["wall_seconds"], "build_seconds": built["seconds"], "opt": opt,
               "build_peak_mb": built["peak_child_mb"], "cycles": res.cycles, "seconds": checked_s,
               "cycles_per_s": res.cycles / checked_s, "pe_cycles_per_s": res.cycles * r * c / checked_s,
               "unchecked_cycles_per_s": res.cycles / free_s, "check_overhead": checked_s / free_s,
               "first_call_seconds": time.perf_counter() - t0}
        if r <= BASELINE_MAX_ROWS and not dtypes:
            _, _, base, base_s, _ = _engine_run(prog, pack=pack, parts=parts, dtypes=None, harness="cocotb",
                                                array_form="structural", opt=opt)
            assert base.mismatch is None, str(base.mismatch)
            row.update({"baseline": "cocotb + a hierarchical block per PE (the former path)",
                        "baseline_cycles_per_s": base.cycles / base_s,
                        "ratio_vs_baseline": (base_s / base.cycles) / (checked_s / res.cycles)})
        rows.append(row)
    return rows


# The PE's Yosys cells (proc; flatten; opt -full; wreduce) of commit b3be622, before the lean datapath.
PE_CELLS_BEFORE = {"mariana p1": 470, "mariana p4": 1011, "mariana p8": 1473,
                   "maverick p1": 490, "maverick p4": 1100, "maverick p8": 1618}


def bench_pe_cells() -> list[dict]:
    """The PE's size in Yosys cells (pack 1, 4, 8), and how many of them the loop form computes
    unconditionally (the rest only in the branch that uses them, rtl/loopform.py)."""
    from tensore.rtl.loopform import Netlist, yosys_netlist
    from tensore.rtl.pe import PE
    rows = []
    for key, before in PE_CELLS_BEFORE.items():
        gen, pack = key.split(" p")
        net = Netlist(yosys_netlist(PE(gen, int(pack)), "pe"), "n")
        always = sum(1 for p in net.block_of.values() if p == ())
        rows.append({"name": f"PE cells {key}", "cells": len(net.cells) + len(net.regs), "cells_before": before,
                     "cells_always_evaluated": always, "widest_cell_bits": max(
                         len(c["connections"]["Y"]) for c in net.cells.values())})
    return rows


def bench_golden_paths(repeat: int = 15) -> list[dict]:
    """Every model.array.matmul path on 128 x 128 x 512 against np.matmul float32 (same run), each
    the best of `repeat` calls: on a shared machine a few calls overstate the millisecond paths.
    Target: 10x; the fp32 modes run a compiled float32 FMA (D-T76)."""
    from tensore.kernels.bench import golden_ratios
    r = golden_ratios(repeat=repeat)
    base = r.pop("baseline")
    return [{"name": f"golden matmul {k} 128x128x512", "seconds": v["seconds"], "baseline": base["name"],
             "baseline_seconds": base["seconds"], "ratio_vs_baseline": v["ratio_vs_np_matmul"], "target_ratio": 10.0}
            for k, v in r.items()]


def bench_golden_gemm() -> list[dict]:
    """A 2048^3 bf16 GEMM end to end through the cycle-level golden engine against np.matmul float32
    (tensore/kernels/bench.py; target 20x)."""
    from tensore.kernels.bench import gemm_speed
    return [gemm_speed()]


def bench_kernels() -> list[dict]:
    """Cycle estimates of GEMMs on the full-size golden engines (tensore/kernels/bench.py)."""
    from tensore.kernels.bench import kernel_estimates
    return kernel_estimates()


BENCHES = {"from_fp32": bench_from_fp32, "golden_matmul": bench_golden_matmul,
           "golden_engine": bench_golden_engine, "amaranth_array": bench_amaranth_array,
           "amaranth_engine": bench_amaranth_engine, "verilator_engine": bench_verilator_engine,
           "pe_cells": bench_pe_cells, "golden_paths": bench_golden_paths, "golden_gemm": bench_golden_gemm,
           "kernels": bench_kernels}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="tensore-bench")
    parser.add_argument("-o", "--output", default="build/bench.json")
    parser.add_argument("--only", nargs="*", choices=sorted(BENCHES))
    parser.add_argument("--sizes", nargs="*", default=list(SIZES),
                        help="verilator_engine: engines to export, build and run: N (MARIANA N x N) or R x 2R "
                        "(MAVERICK)")
    parser.add_argument("--opt", default="-O1", choices=["-O0", "-O1", "-O2", "-O3"], metavar="LEVEL",
                        help="verilator_engine: C++ optimisation of the builds (--opt=-O0 builds about twice as "
                        "fast; default -O1)")
    parser.add_argument("--timing", nargs="*", default=[DEFAULT_PROFILE], choices=list(PROFILES), metavar="PROFILE",
                        help=f"verilator_engine: the timing profiles to build each size with (default {DEFAULT_PROFILE}; "
                        "e.g. --timing public contract: the column-serial port's cost in simulation speed)")
    args = parser.parse_args(argv)
    from tensore.cosim import toolchain
    os.environ.setdefault(toolchain.CCACHE_ENV, "0")     # build times are cold builds' (D-T80)
    results = []
    for name in args.only or BENCHES:
        print(f"running {name} ...", flush=True)
        results.extend(BENCHES[name](args.sizes, args.opt, args.timing) if name == "verilator_engine" else BENCHES[name]())
    report = {"machine": {"python": sys.version.split()[0], "platform": platform.platform(),
                          "numpy": np.__version__, "openblas_threads": os.environ["OPENBLAS_NUM_THREADS"]},
              "results": results}
    out = Path(args.output)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(report, indent=2))
    print(f"\n{'benchmark':<44} {'value':>14} {'baseline':>14} {'ratio':>8}")
    for r in results:
        if "error" in r:
            print(f"{r['name']:<44} not built: {r['error']}")
            continue
        if "utilisation" in r:
            value, base = f"{r['cycles']:,} cyc", f"{round(r['ideal_cycles']):,} ideal"
            print(f"{r['name']:<44} {value:>14} {base:>14} {r['utilisation']:>8.1%}")
            continue
        if "cells" in r:
            value, base = f"{r['cells']} cells", f"{r['cells_before']} before"
        elif "elements_per_s" in r:
            value, base = f"{r['elements_per_s']:.3g}/s", f"{r['baseline_elements_per_s']:.3g}/s"
        elif "cycles_per_s" in r:
            value, base = f"{r['cycles_per_s']:.3g} cyc/s", f"{r['pe_cycles_per_s']:.3g} PE-cyc/s"
        elif "baseline_seconds" in r:
            value, base = f"{r['seconds'] * 1e3:.2f} ms", f"{r['baseline_seconds'] * 1e3:.3f} ms"
        else:
            value, base = f"{r['seconds']:.2f} s", f"{r['simulated_cycles_per_s']:.3g} cyc/s"
        ratio = f"{r['ratio_vs_baseline']:.3f}" if "ratio_vs_baseline" in r else "-"
        print(f"{r['name']:<44} {value:>14} {base:>14} {ratio:>8}")
        if "build_seconds" in r:
            print(f"{'':<6}export {r['export_seconds']:.1f} s, Verilator build ({r['opt']}) {r['build_seconds']:.1f} s "
                  f"(peak {r['build_peak_mb']} MB); {r['unchecked_cycles_per_s']:.3g} cyc/s without the golden "
                  f"check (checked / unchecked time {r['check_overhead']:.2f})"
                  + (f"; former path {r['baseline_cycles_per_s']:.3g} cyc/s" if "baseline_cycles_per_s" in r else ""))
        if "cells_always_evaluated" in r:
            print(f"{'':<6}{r['cells_always_evaluated']} computed every cycle, widest {r['widest_cell_bits']} bits")
    print(f"\nwritten {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
