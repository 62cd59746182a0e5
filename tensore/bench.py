"""`make bench`: measured speeds, written to JSON, each against a baseline from the same run."""
from __future__ import annotations

import argparse
import json
import platform
import sys
import time
from pathlib import Path

import ml_dtypes as md
import numpy as np

from model import dtypes as dt


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


BENCHES = {"from_fp32": bench_from_fp32}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="tensore-bench")
    parser.add_argument("-o", "--output", default="build/bench.json")
    parser.add_argument("--only", nargs="*", choices=sorted(BENCHES))
    args = parser.parse_args(argv)
    results = []
    for name in args.only or BENCHES:
        print(f"running {name} ...", flush=True)
        results.extend(BENCHES[name]())
    report = {"machine": {"python": sys.version.split()[0], "platform": platform.platform(),
                          "numpy": np.__version__}, "results": results}
    out = Path(args.output)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(report, indent=2))
    print(f"\n{'benchmark':<28} {'value':>16} {'baseline':>16} {'ratio':>8}")
    for r in results:
        value = r.get("elements_per_s")
        base = r.get("baseline_elements_per_s")
        print(f"{r['name']:<28} {value:>14.3g}/s {base:>14.3g}/s {r['ratio_vs_baseline']:>8.3f}")
    print(f"\nwritten {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
