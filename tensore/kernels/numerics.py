"""Numerics of a kernel's result: against float64 numpy on the quantised inputs, and against the
engine's exact contract (model.array.matmul per K slice, PSUM accumulation per D-16..D-18)."""
from __future__ import annotations

import numpy as np

from tensore.model import dtypes as dt
from tensore.model.array import matmul, widen64
from tensore.model.dtypes import Dtype
from tensore.model.mac import canonical_nan
from tensore.model.psum import sr_reset_states

ULP_BINS = (0, 1, 2, 3, 4, 8, 16, 64, 256)          # histogram edges: 0, 1, 2, 3, 4-7, ..., >= 256


def operands64(prog) -> tuple:
    """(A_q, B_q) float64: the quantised inputs' values (MX: with their block scales; fp32 LOW: the
    hi parts, D-12)."""
    if prog.mx:
        from tensore.kernels import mx
        return (mx.values(prog.a_codes, prog.a_scales, prog.dtype, prog.gen, axis=1),
                mx.values(prog.b_codes, prog.b_scales, prog.dtype, prog.gen, axis=0))
    a = widen64(dt.to_fp32(prog.a_codes, prog.dtype, prog.gen))
    b = widen64(dt.to_fp32(prog.b_codes, prog.dtype, prog.gen))
    if prog.dtype == Dtype.FP32 and prog.fp32_mode == 1:          # LOW: the hi parts only (D-12)
        a, b = (widen64(dt.split_fp32(x.astype(np.float32))[0]) for x in (a, b))
    return a, b


def reference64(prog) -> np.ndarray:
    """float64 A_q @ B_q: the exact-arithmetic answer on the quantised inputs (fp32 LOW: hi parts)."""
    a, b = operands64(prog)
    return a @ b


def unit_roundoff(out_dtype) -> float:
    """u = 2^-(p) of the output format (p significand bits with the hidden one): fp32 2^-24, bf16 2^-8."""
    return 2.0 ** -(dt.format_of(Dtype.parse(out_dtype), dt.Gen.MAVERICK).man_bits + 1)


def componentwise(prog, C) -> np.ndarray:
    """|C - A_q B_q| / (u (|A_q| |B_q|)) per element, u the output format's unit roundoff: the error
    of a dot product relative to the size of its terms (docs/kernels.md "Pictures"), the quantity the
    standard bound |fl(a.b) - a.b| <= gamma_K |a|.|b| (gamma_K ~ K u) limits.  Unlike ulps or the
    relative error it stays meaningful where the sum cancels to near zero; 0 where every term is 0
    and C is exact."""
    a, b = operands64(prog)
    err = np.abs(np.asarray(C, np.float64) - a @ b)
    scale = unit_roundoff(prog.out_dtype) * (np.abs(a) @ np.abs(b))
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(err == 0, 0.0, err / scale)


def _slice_sums(prog) -> list:
    """[N, M] float32 column sums of each K slice, in group order (model.array.matmul, D-10..D-12)."""
    out = []
    if prog.sparse_w is not None:                                  # 2:4: row pairs share a group's fmaps
        from tensore.kernels.sparse import moving_fmaps
        mv = moving_fmaps(prog.a_codes.T)
        for k0, k1 in prog.k_slices:
            r0, r1 = k0 // 2, k1 // 2
            out.append(matmul(prog.sparse_w[r0:r1], mv[r0:r1], in_dtype=prog.dtype, gen=prog.gen,
                              tags=prog.sparse_tags[r0:r1]))
        return out
    for k0, k1 in prog.k_slices:
        w, a = prog.b_codes[k0:k1], prog.a_codes[:, k0:k1].T
        if (k1 - k0) % prog.pe_pack:                               # double row: pad a zero pair
            w = np.concatenate([w, np.zeros((1, w.shape[1]), w.dtype)])
            a = np.concatenate([a, np.zeros((1, a.shape[1]), a.dtype)])
        if prog.mx:
            out.append(matmul(w, a, in_dtype=prog.dtype, gen=prog.gen, perf_mode=prog.mx,
                              stationary_scales=prog.b_scales[k0 // 32:k1 // 32],
                              moving_scales=prog.a_scales[k0 // 32:k1 // 32]))
            continue
        out.append(matmul(w, a, in_dtype=prog.dtype, gen=prog.gen, fp32_mode=int(prog.fp32_mode),
                          perf_mode="double_row" if prog.pe_pack == 2 else None))
    return out


def contract(prog) -> np.ndarray:
    """C [M, N] float32 as the engine must produce it, computed without the engine."""
    sums = _slice_sums(prog)
    if prog.out_dtype == Dtype.FP32:
        acc = sums[0]
        for s in sums[1:]:
            acc = canonical_nan((acc + s).astype(np.float32))     # PSUM accumulate: RNE fp32 add
        return acc.T.copy()
    if prog.rounding == "rne":
        cell = dt.from_fp32(sums[0], Dtype.BFLOAT16, prog.gen)
        for s in sums[1:]:
            cell = dt.from_fp32(_widen(cell) + s, Dtype.BFLOAT16, prog.gen)
        return _widen(cell).T.copy()
    return _contract_sr(prog, sums)


def _widen(cell):
    return (cell.astype(np.uint32) << 16).view(np.float32)


def _contract_sr(prog, sums) -> np.ndarray:
    """BF16 cells with stochastic rounding (D-08, D-09): one xorshift32 state per (partition, bank,
    element parity), advanced once per write, writes in program order and vector order."""
    states = sr_reset_states().astype(np.uint32)
    out = np.zeros(prog.out_shape, np.float32)
    for tile in sorted(prog.tiles, key=lambda t: t.first_op):
        cols = np.arange(tile.n)
        part, bank = cols % prog.half, tile.bank + cols // prog.half
        cell = np.zeros((tile.n, tile.m), np.uint16)
        for i, s in enumerate(sums):
            x = s[tile.n0:tile.n0 + tile.n, tile.m0:tile.m0 + tile.m]
            if i:
                x = (_widen(cell) + x).astype(np.float32)
            for v in range(tile.m):
                st = dt.xorshift32(states[part, bank, v & 1])
                states[part, bank, v & 1] = st
                cell[:, v] = dt.sr_bf16(x[:, v].view(np.uint32), st & 0xFFFF)
        out[tile.m0:tile.m0 + tile.m, tile.n0:tile.n0 + tile.n] = _widen(cell).T
    return out


def ulps(x, ref, out_dtype=Dtype.FP32) -> np.ndarray:
    """Distance in units in the last place of the output format between x and ref rounded to it."""
    r = np.asarray(ref, np.float64).astype(np.float32)
    if out_dtype == Dtype.BFLOAT16:
        r = _widen(dt.from_fp32(r, Dtype.BFLOAT16, dt.Gen.MAVERICK))
    ia, ib = (_ordered(v) for v in (np.asarray(x, np.float32), r))
    d = np.abs(ia - ib)
    return d >> 16 if out_dtype == Dtype.BFLOAT16 else d


def _ordered(x):
    i = x.view(np.int32).astype(np.int64)
    return np.where(i < 0, -(i & 0x7FFFFFFF), i)


def normwise_rel(C, ref) -> float:
    """The normwise relative error ||C - ref||_F / ||ref||_F (Frobenius norms, in float64; 0 when
    both are 0)."""
    ref = np.asarray(ref, np.float64)
    diff = np.linalg.norm(np.asarray(C, np.float64) - ref)
    return float(diff / max(np.linalg.norm(ref), np.finfo(float).tiny)) if diff else 0.0


def report(prog, C) -> dict:
    """Errors of C against float64 and the contract; `max_rel` is max |C - ref| / |ref| over the cells
    with ref != 0, `normwise_rel` the Frobenius ||C - ref||_F / ||ref||_F (normwise_rel), `ulp_hist`
    counts per ULP_BINS bin, `componentwise_max` is the largest finite `componentwise` error (D-T87)."""
    ref, exact = reference64(prog), contract(prog)
    err = np.abs(C.astype(np.float64) - ref)
    scale = np.abs(ref)
    rel = np.divide(err, scale, out=np.zeros_like(err), where=scale > 0)
    u = ulps(C, ref, prog.out_dtype)
    hist = np.histogram(np.minimum(u, ULP_BINS[-1]), bins=list(ULP_BINS) + [ULP_BINS[-1] + 1])[0]
    same = C.view(np.uint32) == exact.view(np.uint32)
    cw = componentwise(prog, C)
    cw = cw[np.isfinite(cw)]
    return {"componentwise_max": float(cw.max()) if cw.size else 0.0, "shape": prog.out_shape, "max_abs": float(err.max()), "max_rel": float(rel.max()),
            "normwise_rel": normwise_rel(C, ref),
            "ulp_max": int(u.max()), "ulp_hist": hist.tolist(), "ulp_bins": list(ULP_BINS),
            "contract_mismatches": int((~same).sum()), "bit_exact": bool(same.all()),
            "error": err, "ulps": u}


def format_report(rep: dict) -> str:
    bins = rep["ulp_bins"]
    labels = [f"{a}" if b - a == 1 else f"{a}-{b - 1}" for a, b in zip(bins, bins[1:])] + [f">={bins[-1]}"]
    hist = ", ".join(f"{lab}: {c}" for lab, c in zip(labels, rep["ulp_hist"]) if c)
    return (f"numerics vs float64 of the quantised inputs: max abs {rep['max_abs']:.3g}, max rel "
            f"{rep['max_rel']:.3g}, normwise rel (Frobenius) {rep['normwise_rel']:.3g}, max {rep['ulp_max']} ulp, "
            f"max {rep['componentwise_max']:.3g} u |A||B| (componentwise; the dot-product bound is about K)\n"
            f"  ulp histogram: {hist}\n"
            f"  vs the engine contract (model.array.matmul + PSUM): "
            f"{'bit-exact' if rep['bit_exact'] else str(rep['contract_mismatches']) + ' cells differ'}")
