"""What every part of the golden engine shares: an op's record (OpRecord), a plane of PE weights
(Weights) and two numpy helpers."""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from tensore.model.isa import Descriptor, ErrorCode, Opcode
from tensore.model.isa.microop import MAX_PACK, MicroOp


@dataclass
class OpRecord:
    index: int
    desc: Descriptor
    error: ErrorCode = ErrorCode.NONE
    violations: list = field(default_factory=list)
    t_push: int = 0
    t_decode: int = 0
    t_issue: int | None = None
    t_complete: int | None = None
    psum_writes: int = 0
    uop: MicroOp | None = None          # what the engine ran (None for a refused descriptor)
    fault: ErrorCode = ErrorCode.NONE   # an error the issued micro-op reported (D-T38 (6)), at t_complete

    @property
    def name(self) -> str:
        return self.desc.op.name.lower() if isinstance(self.desc.op, Opcode) else f"0x{self.desc.op:02x}"


class Weights:
    """One plane of PE weight registers (active or shadow): values and codes per pack slot."""

    def __init__(self, rows: int, cols: int):
        self.val = np.zeros((rows, cols, MAX_PACK))
        self.code = np.zeros((rows, cols, MAX_PACK), np.uint32)
        self.dtype = np.zeros((rows, cols), np.int16)          # Dtype code of the load, 0 = never loaded
        self.pack = np.ones((rows, cols), np.int8)
        self.scale = np.zeros((rows, cols))                    # E8M0 exponent of the MX block (NaN: NaN scale)

    def copy_from(self, other: "Weights", mask: np.ndarray):
        every = bool(mask.all())
        for name in ("val", "code", "dtype", "pack", "scale"):
            dst = getattr(self, name)
            np.copyto(dst, getattr(other, name), where=True if every else
                      mask.reshape(mask.shape + (1,) * (dst.ndim - 2)))


def _run(idx: np.ndarray):
    """idx as a slice when it is a run of consecutive indices, ascending or descending (numpy
    moves a slice fastest), else idx itself."""
    n = idx.size
    if n and idx[0] >= 0 and (idx == idx[0] + np.arange(n)).all():
        return slice(int(idx[0]), int(idx[0]) + n)
    if n and idx[0] - n >= -1 and (idx == idx[0] - np.arange(n)).all():
        return slice(int(idx[0]), int(idx[0]) - n if idx[0] >= n else None, -1)
    return idx


def _distinct(x: np.ndarray) -> np.ndarray:
    """np.unique(x), with the common case of one value found in two reductions."""
    if x.size and x.min() == x.max():
        return x.reshape(-1)[:1].copy()
    return np.unique(x)
