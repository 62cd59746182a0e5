"""What a micro-op reads from SBUF: codes through its access pattern, MX scales, and their values
(the LUT mode applied, D-T15), in the element order of its pump mode (D-T25)."""
from __future__ import annotations

import numpy as np

from tensore.model import addrmap
from tensore.model import dtypes as dt
from tensore.model.array import _values as decode_values
from tensore.model.dtypes import Dtype
from tensore.model.isa.microop import MX_BLOCK, MX_TILE, MicroOp, MxOrder, Pattern

from tensore.model.engine.records import _run


def _in_order(codes: np.ndarray, order: np.ndarray) -> np.ndarray:
    """codes[:, order] (order [vectors, pack] element indices): a view when order is the pattern order."""
    if np.array_equal(order.reshape(-1), np.arange(order.size)):
        return codes[:, :order.size].reshape(codes.shape[0], *order.shape)
    return codes[:, order]


class Operands:
    """SBUF reads of an Engine (`self.sbuf`, the LUT, the generation's formats)."""

    def _physical_cols(self, u: MicroOp, col0, cols) -> np.ndarray:
        """Physical column of each logical stationary column m (D-14 load order)."""
        m = np.arange(cols)
        return col0 + (cols - 1 - m if u.lcf else m)

    def _element_order(self, u: MicroOp, vectors: int) -> np.ndarray:
        """Pattern element index of (vector v, slot j): [vectors, pack] (D-T25)."""
        v = np.arange(vectors)[:, None]
        j = np.arange(u.pack)[None, :]
        if u.mxmode == MxOrder.INTERLEAVE:
            return j * vectors + v
        if u.mxmode == MxOrder.TILED:
            t = min(MX_TILE, vectors)
            return (v // t) * t * u.pack + j * t + v % t
        return v * u.pack + j

    def _read_codes(self, pat: Pattern, partitions: int, count: int, esize_bits: int):
        """A pattern's codes: [partitions, count] (4-bit codes one per element), and its first partition."""
        offs = pat.elements(count)
        loc = addrmap.locate(pat.addr)
        parts = loc.partition + np.arange(partitions)
        if esize_bits == 4:
            nib = loc.offset * 2 + offs
            byte = self.sbuf.gather(parts, nib >> 1, 1)
            codes = (byte >> ((nib & 1) * 4).astype(np.uint64)) & 0xF
        else:
            codes = self._gather(parts, loc.offset + offs * (esize_bits // 8), esize_bits // 8)
        return codes[:, :count], loc.partition

    def _gather(self, parts: np.ndarray, offsets: np.ndarray, esize: int) -> np.ndarray:
        """Sbuf.gather of consecutive partitions at offsets of one alignment mod esize, as unsigned
        integers of esize bytes: through a little-endian typed view of those rows (one index per
        element, not per byte)."""
        data = self.sbuf.data
        r = int(offsets[0]) % esize if offsets.size else 0
        width = (data.shape[1] - r) // esize
        inside = parts.size and offsets.size and offsets.min() >= 0 and offsets.max() + esize <= data.shape[1] and \
            parts[-1] < data.shape[0] and not ((offsets - r) % esize).any()
        if not inside:
            return self.sbuf.gather(parts, offsets, esize)
        rows = data[parts[0]:parts[-1] + 1, r:r + width * esize].view(f"<u{esize}")
        return np.array(rows[:, _run((offsets - r) // esize)], f"u{esize}")

    def _read_scales(self, pat: Pattern, blocks: int, pack: int, count: int) -> np.ndarray:
        """E8M0 exponents [blocks, count]: block b's scales are bytes at scale_addr's offset in
        partition scale_addr + b * (32 / pack), one per vector or column (D-T25).  No scales: every
        exponent 0."""
        if pat.scale_addr is None:
            return np.zeros((blocks, count))
        loc = addrmap.locate(pat.scale_addr)
        parts = loc.partition + np.arange(blocks) * (MX_BLOCK // pack)
        return dt.e8m0_exponents(self.sbuf.gather(parts, loc.offset + np.arange(count), 1))

    def _to_values(self, codes: np.ndarray, dtype, lut: bool):
        """(values, codes as stored, dtype of the values) with the LUT mode applied (D-T15)."""
        if lut:
            idx = codes.astype(np.intp)
            return self.lut[idx], self.lut_codes[idx], self.lut_dtype
        narrow = {8: np.uint8, 16: np.uint16}.get(self._width(dtype))
        if narrow is not None and codes.dtype != narrow and codes.size and not int(codes.max()) >> self._width(dtype):
            codes = codes.astype(narrow)                                      # decode_values: one table look-up
        return decode_values(codes, dtype, self.gen, self.e4m3), codes, Dtype(dtype)

    def _width(self, dtype) -> int:
        return dt.format_of(dtype, self.gen).width
