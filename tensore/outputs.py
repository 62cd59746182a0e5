"""The result file of `run -o`, `cosim -o`, `gemm -o` and `conv -o` (D-T89): one .npz layout,
written here only.

    psum         uint8 [128, 16384]   the golden engine's PSUM at the end, its bytes
    sr_state     uint32 [...]         the golden engine's stochastic-rounding states at the end
    psum_writes  int64 [n, 4]         every PSUM write of the golden run in the engine's order:
                                      cycle, partition, byte offset, stored bits (unsigned: a bf16
                                      cell's 16 bits, an fp32 cell's 32)
    rtl_psum_writes  int64 [n, 4]     the same columns from the RTL, when it ran (cosim, --rtl), in
                                      the order (cycle, partition, offset)
    c, c_bits    float32 / uint32 or uint16 [M, N]   kernels: C read back from the golden run, and
                                      its bit patterns (uint16 for bf16 PSUM cells)
    rtl_c, rtl_c_bits                 kernels, when the RTL ran: C from the RTL's writes
    y            float32 image        conv: C in the input's layout (NCHW or NHWC)
"""
from __future__ import annotations

from pathlib import Path

import numpy as np

RUN_ARRAYS = "psum [128, 16384] bytes, sr_state, psum_writes [cycle, partition, offset, bits]"
LAYOUT_HELP = ("npz of the results (.npz added when missing): psum, sr_state, psum_writes [cycle, partition, "
               "offset, bits] of the golden run as `tensore run -o` writes them, rtl_psum_writes when the RTL ran")


def npz_path(path) -> Path:
    """`path`, with .npz added when missing (np.savez would add it anyway)."""
    path = str(path)
    return Path(path if path.endswith(".npz") else path + ".npz")


def psum_write_rows(trace) -> np.ndarray:
    """[n, 4] int64 (cycle, partition, offset, bits) of every PSUM write of a golden trace, in the
    order of `Trace.events` (Trace.write_rows without its bytes column)."""
    return trace.write_rows()[:, :4]


def harness_write_rows(writes: np.ndarray) -> np.ndarray:
    """[n, 4] int64 (cycle, partition, offset, bits) of the compiled harness's recorded writes
    (cycle, port, partition, offset, bits, bf16), a bf16 write's bits cut to 16, in the order
    (cycle, partition, offset)."""
    w = np.asarray(writes, np.int64).reshape(-1, 6)
    bits = np.where(w[:, 5] == 1, w[:, 4] & 0xFFFF, w[:, 4] & 0xFFFFFFFF)
    rows = np.stack([w[:, 0], w[:, 2], w[:, 3], bits], axis=1)
    return rows[np.lexsort((rows[:, 2], rows[:, 1], rows[:, 0]))]


def save_results(path, engine, trace, *, rtl_writes: np.ndarray | None = None, **arrays) -> Path:
    """Write the result file (the layout above) of a golden run (`engine`, `trace`), the RTL's
    writes when given and any further named arrays; returns the path written."""
    out = npz_path(path)
    res = dict(psum=engine.psum.mem, sr_state=engine.psum.sr_state, psum_writes=psum_write_rows(trace))
    if rtl_writes is not None:
        res["rtl_psum_writes"] = np.asarray(rtl_writes, np.int64).reshape(-1, 4)
    np.savez_compressed(out, **res, **arrays)
    return out
