"""check() per descriptor on a fixed corpus (D-T101; docs/benchmarks.md).

    python -m tensore.cosim.check_speed [reps]

Corpus: per generation the library programs' descriptors and `fuzz.mutants(gen, 0, 2500)` (valid,
mutated and random bytes, fixed seed); `check(bytes, gen)` includes the decode, as its callers use
it.  Prints the best of `reps` CPU microseconds per check, plain and with the engine's facts
(`array_cols`, `stationary_dtype`), and per generation."""
import sys
import time

from tensore.cosim import fuzz, programs
from tensore.model.dtypes import Dtype, Gen
from tensore.model.isa.asm import assemble
from tensore.model.isa.check import check

GENS = (Gen.SUNDA, Gen.CAYMAN, Gen.MARIANA, Gen.MAVERICK)


def corpus() -> dict:
    """{generation: [64-byte descriptors]}."""
    out = {}
    for gen in GENS:
        lib = []
        for p in programs.library(gen):
            code = assemble(p.text, gen)
            lib += [code[i:i + 64] for i in range(0, len(code), 64)]
        out[gen] = lib + fuzz.mutants(gen, 0, 2500)
    return out


def _per_check(items, kw) -> float:
    t0 = time.process_time()
    for d, g in items:
        check(d, g, **kw)
    return (time.process_time() - t0) / len(items) * 1e6


def measure(reps: int = 3) -> dict:
    corp = corpus()
    items = [(d, g) for g, ds in corp.items() for d in ds]
    out = {"descriptors": len(items)}
    for label, kw in (("plain", {}), ("engine_facts", {"array_cols": 64, "stationary_dtype": Dtype.BFLOAT16})):
        _per_check(items[:200], kw)                              # warm the caches
        out[label] = round(min(_per_check(items, kw) for _ in range(reps)), 1)
        out[f"{label}_per_gen"] = {g.name: round(_per_check([(d, g) for d in ds], kw), 1) for g, ds in corp.items()}
    return out


if __name__ == "__main__":
    print(measure(int(sys.argv[1]) if sys.argv[1:] else 3))
