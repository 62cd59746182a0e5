"""Compiled fp32 fused multiply-add chains for the fp32 modes (SPEC D-10, D-12; D-T76).

numpy and BLAS have no float32 fused multiply-add, and a product of two fp32 values is not an fp32
value, so D-10's step `RNE_fp32(psum + exact(w a))` is `fmaf(w, a, psum)` (IEEE 754 fusedMultiplyAdd
in binary32: one rounding, subnormals kept, Inf / NaN by IEEE) and nothing cheaper in numpy.  These
loops are numba-compiled (cached on disk: the first call in a fresh checkout compiles, later
processes load the machine code) and call LLVM's `llvm.fma.f32`, which is that operation by
definition: the FMA instruction where the CPU has one, else libm's fmaf.  No fast-math flags, so
LLVM may not reassociate or flush; it vectorises the j loops.

Imported on the first fp32 matmul only (fastpaths.fp32_chain): loading numba takes a few tenths of a
second that other paths need not pay."""
from __future__ import annotations

from numba import njit, types
from numba.extending import intrinsic


@intrinsic
def fmaf(typingctx, x, y, z):
    """x * y + z in float32 with one rounding (llvm.fma.f32)."""
    if not all(t == types.float32 for t in (x, y, z)):
        return None
    return types.float32(types.float32, types.float32, types.float32), \
        lambda context, builder, signature, args: builder.fma(*args)


_MAT, _STEPS = "float32[:, ::1]", "float32[:, :, ::1]"


@njit(cache=True)
def _check_pairs(m, n, p):
    """The chains read and write stationary columns in pairs: M even and p [M, N], else they would
    run past the arrays."""
    if m % 2 or p.shape[0] != m or p.shape[1] != n:
        raise ValueError("fp32 chain: w has an even number of columns, p is [M, N]")


@njit(f"void({_MAT}, {_MAT}, {_MAT}, {_STEPS})", cache=True)
def chain1(w, a, p, steps):
    """p[i, j] = fmaf(w[r, i], a[r, j], p[i, j]) for r = 0, 1, ... in order (one product per row);
    steps[r] = p after row r when steps has rows.  w [rows, M], a [rows, N], p [M, N], M even: two
    cells i, i + 1 share each load of a[r, j]."""
    rows, m = w.shape
    n = a.shape[1]
    _check_pairs(m, n, p)
    keep = steps.shape[0] > 0
    for i in range(0, m, 2):
        for r in range(rows):
            w0, w1 = w[r, i], w[r, i + 1]
            for j in range(n):
                x = a[r, j]
                p[i, j] = fmaf(w0, x, p[i, j])
                p[i + 1, j] = fmaf(w1, x, p[i + 1, j])
            if keep:
                for j in range(n):
                    steps[r, i, j], steps[r, i + 1, j] = p[i, j], p[i + 1, j]


@njit(f"void({_MAT}, {_MAT}, {_MAT}, {_MAT}, {_MAT}, {_STEPS})", cache=True)
def chain4(wh, wl, ah, al, p, steps):
    """LOW_HIGH rows (D-12, D-T24): four fused adds per row, moving x stationary in the order
    hi*hi, hi*lo, lo*hi, lo*lo; otherwise as chain1."""
    rows, m = wh.shape
    n = ah.shape[1]
    _check_pairs(m, n, p)
    keep = steps.shape[0] > 0
    for i in range(0, m, 2):
        for r in range(rows):
            h0, l0, h1, l1 = wh[r, i], wl[r, i], wh[r, i + 1], wl[r, i + 1]
            for j in range(n):
                x, y = ah[r, j], al[r, j]
                p[i, j] = fmaf(y, l0, fmaf(y, h0, fmaf(x, l0, fmaf(x, h0, p[i, j]))))
                p[i + 1, j] = fmaf(y, l1, fmaf(y, h1, fmaf(x, l1, fmaf(x, h1, p[i + 1, j]))))
            if keep:
                for j in range(n):
                    steps[r, i, j], steps[r, i + 1, j] = p[i, j], p[i + 1, j]
