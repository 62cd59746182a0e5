"""Lockstep of the RTL array (rtl/array.py) against the golden cycle model, in Amaranth's simulator.

The model's trace (Engine(record_pe=True)) says when each weight row is written and when each
moving vector enters; the testbench drives the array with exactly that, and in every cycle compares
every PE's active weight, moving value, partial sum and valid bit with Trace.pe_state(cycle).
The first difference is reported with cycle, PE, signal, expected and actual (bits and value),
and a VCD of the run up to it is written."""
from __future__ import annotations

from functools import partial
from pathlib import Path

import numpy as np

from tensore.cosim.amaranth_sim import simulate
from tensore.cosim.mismatch import Mismatch, first_with_waveform
from tensore.rtl.array import Array
from tensore.rtl.config import Config
from tensore.rtl.pe import SPARSE_FMAPS


def _slots(codes, pack: int) -> dict:
    codes = [int(x) for x in codes] + [0] * (pack - len(codes))
    return {f"s{j}": codes[j] for j in range(pack)}


def frames(trace, pack: int):
    """Per-cycle array inputs from the trace's PE log: {cycle: {...}}."""
    out: dict[int, dict] = {}

    def at(c):
        return out.setdefault(c, {"vec": {}, "wl": None, "advance": 1, "phase": 0})
    for rec in trace.pe_log:
        if rec["kind"] == "xpose":                 # element (k, n) enters column n's top at t_data + k + n
            ncol, k_all = rec["bits"].shape
            for n in range(ncol):
                for k in range(k_all):
                    at(rec["timing"].t_data + k + n).setdefault("top", {})[n] = int(rec["bits"][n, k])
            continue
        if rec["kind"] == "tags":
            for k in range(rec["rows"]):
                at(rec["t"] + k + rec["latency"])["tags"] = (rec["row0"] + k, rec["phys"], rec["tags"][k])
            continue
        if rec["kind"] == "lw":
            for k in range(rec["rows"]):
                f = at(rec["t"] + k + rec["latency"])
                f["wl"] = (rec["row0"] + k, rec["phys"], rec["codes"][k], rec["dtype"], rec["scales"][k])
        else:
            tm, codes = rec["timing"], rec["a_codes"]
            rows, _, n = codes.shape
            p = tm.passes
            if p > 1:
                for cyc in range(tm.t_data, tm.t_data + p * (n + trace.rows + trace.cols + 1)):
                    f = at(cyc)
                    f["phase"] = (cyc - tm.t_data) % p
                    f["advance"] = int(f["phase"] == p - 1)
            for v in range(n):
                for k in range(rows):              # row r reads its partition P*r cycles later (the skew)
                    r = rec["row0"] + k
                    for cyc in range(tm.t_data + p * (v + r), tm.t_data + p * (v + r + 1)):
                        f = at(cyc)
                        sa = rec["sa"][k, v]
                        f["vec"][r] = {
                            "valid": 1, "swap": int(v == 0), "first": int(k == 0),
                            "col_lo": rec["col0"], "col_hi": rec["col0"] + rec["cols"],
                            "dtype": rec["a_dtype"], "fp32_mode": rec["fp32_mode"],
                            "multi": int(rec["pack"] > 1 and not rec.get("fmaps")), "scaled": int(rec["mx"]),
                            "sa": 0 if np.isnan(sa) else int(sa), "sa_nan": int(np.isnan(sa)),
                            "fmaps": rec.get("fmaps", 0), "lanes": (rec["pack"] - 1).bit_length(),
                            "code": _slots(codes[k, :, v], max(pack, SPARSE_FMAPS))}
    return out


def run(trace, gen, *, pack: int = 1, vcd: str | None = None, stop_at: int | None = None, compare: bool = True,
        timing: dict | None = None):
    """Simulate and compare; returns None when every cycle matches, else the first Mismatch.
    compare=False only drives the array; `timing` receives the seconds spent in the simulator run."""
    dut = Array(Config(gen, trace.rows, trace.cols, pack), column_loads=False)
    plan = frames(trace, pack)
    end = trace.cycles if stop_at is None else stop_at + 1
    result: list = []
    zero_act = {"valid": 0, "swap": 0, "first": 0, "col_lo": 0, "col_hi": 0, "dtype": 0, "fp32_mode": 0,
                "multi": 0, "scaled": 0, "sa": 0, "sa_nan": 0, "fmaps": 0, "lanes": 0,
                "code": _slots([], max(pack, SPARSE_FMAPS))}
    zero_w = {"code": _slots([], pack), "dtype": 0, "scale": 0, "scale_nan": 0}

    async def bench(ctx):
        for cycle in range(end):
            f = plan.get(cycle, {"vec": {}, "wl": None, "advance": 1, "phase": 0})
            for r in range(trace.rows):
                ctx.set(dut.row_in[r], f["vec"].get(r, zero_act))
            top = f.get("top", {})
            for c in range(trace.cols):
                ctx.set(dut.top_psum[c], top.get(c, 0))
            ctx.set(dut.top_valid, sum(1 << c for c in top))
            ctx.set(dut.advance, f["advance"])
            ctx.set(dut.phase, f["phase"])
            if f["wl"] is not None:
                row, phys, codes, dtype, scales = f["wl"]
                mask = 0
                for i, c in enumerate(phys):
                    mask |= 1 << int(c)
                    sc = scales[i]
                    ctx.set(dut.wl.data[int(c)], {"code": _slots(codes[i], pack),
                                                  "dtype": dtype, "scale": 0 if np.isnan(sc) else int(sc),
                                                  "scale_nan": int(np.isnan(sc))})
                ctx.set(dut.wl.valid, 1)
                ctx.set(dut.wl.row, row)
                ctx.set(dut.wl.cols, mask)
            else:
                ctx.set(dut.wl.valid, 0)
            if f.get("tags") is not None:
                row, phys, tags = f["tags"]
                for i, c in enumerate(phys):
                    ctx.set(dut.tag.data[int(c)], int(tags[i]))
                ctx.set(dut.tag.valid, 1)
                ctx.set(dut.tag.row, row)
                ctx.set(dut.tag.cols, sum(1 << int(c) for c in phys))
            else:
                ctx.set(dut.tag.valid, 0)
            expect = trace.pe_state(cycle) if compare else None
            for r in range(trace.rows if compare else 0):
                for c in range(trace.cols):
                    pe = dut.pes[r][c]
                    checks = [("active weight", int(expect["weight"][r, c]), ctx.get(pe.w_code)),
                              ("psum valid", int(expect["valid"][r, c]), ctx.get(pe.psum_valid_out))]
                    if expect["valid"][r, c]:
                        checks.append(("psum", int(expect["psum"][r, c]), ctx.get(pe.psum_out)))
                    if expect["act_valid"][r, c]:
                        checks.append(("moving value", int(expect["act"][r, c]), ctx.get(pe.act_out.code.s0)))
                    for name, want, got in checks:
                        if want != got:
                            result.append(Mismatch.at_pe(cycle, r, c, name, want, got))
                            return
            await ctx.tick()
            for r in range(trace.rows):
                ctx.set(dut.row_in[r], zero_act)
            for c in range(trace.cols):
                ctx.set(dut.wl.data[c], zero_w)

    seconds = simulate(dut, bench, vcd)
    if timing is not None:
        timing["run_seconds"] = seconds
        timing["cycles"] = end
    return result[0] if result else None


def check(trace, gen, *, pack: int = 1, vcd_dir: str = "build/lockstep", name: str = "array"):
    """Run; on a mismatch re-run with a VCD up to it and return the report (None if all match)."""
    return first_with_waveform(partial(run, trace, gen, pack=pack), Path(vcd_dir) / f"{name}.vcd")
