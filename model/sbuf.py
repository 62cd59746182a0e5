"""SBUF as the engine sees it: 128 partitions of bytes, read through access patterns (D-19)."""
from __future__ import annotations

import numpy as np

from tensore.model import addrmap
from tensore.model.dtypes import NUMPY_FORMATS, Gen, format_of, numpy_format

ENGINE_ELEMENTS = ", ".join(n for n, f in NUMPY_FORMATS.items() if f.width >= 8)   # for messages


def image_bytes(array, name: str = "SBUF image") -> np.ndarray:
    """An SBUF image as [partitions, bytes] uint8, without any rounding (D-T65).

    uint8: the bytes themselves (the array is shared, not copied).  Elements of an engine format
    (int8 .. uint32, float16, float32, ml_dtypes bfloat16 and float8 types) and raw 1-, 2- or 4-byte
    void elements (what np.save writes for an ml_dtypes array): each element's little-endian
    bytes, element i of a partition at bytes [i * size, (i + 1) * size); dimensions after the first
    (the partition) are flattened in C order.  Anything else (float64, int64, bool, 4-bit
    ml_dtypes types, ml_dtypes formats the engine lacks) raises ValueError: no exact reading."""
    a = np.asarray(array)
    d = a.dtype
    if d.byteorder == ">":
        a = a.astype(d.newbyteorder("<"))
        d = a.dtype
    fmt = numpy_format(d)
    raw = d.kind == "V" and d.isbuiltin == 0 and d.names is None and d.itemsize in (1, 2, 4)
    if fmt is not None and fmt.width < 8:
        raise ValueError(f"{name}: {d} elements are 4-bit codes; SBUF holds two per byte "
                         f"(dtypes.pack_nibbles packs them)")
    if fmt is None and not raw:
        hint = ""
        if d.kind in "iu" and a.size:
            lo, hi = int(a.min()), int(a.max())
            hint = " (values 0..255 that mean bytes: x.astype(np.uint8))" if 0 <= lo and hi <= 255 else \
                f" (values {lo}..{hi} are not bytes)"
        raise ValueError(f"{name}: {d} elements have no exact SBUF form{hint}; give uint8 bytes or elements "
                         f"of an engine format: {ENGINE_ELEMENTS}")
    if a.ndim < 2:
        raise ValueError(f"{name}: expected [partitions, ...], got shape {a.shape}")
    if d != np.uint8:
        a = np.ascontiguousarray(a).view(np.uint8).reshape(a.shape[0], -1)
    elif a.ndim > 2:
        a = a.reshape(a.shape[0], -1)
    if a.shape[0] > addrmap.PARTITIONS or a.shape[1] > addrmap.SBUF_PARTITION_BYTES:
        raise ValueError(f"{name}: {a.shape[0]} partitions x {a.shape[1]:#x} bytes does not fit SBUF "
                         f"({addrmap.PARTITIONS} x {addrmap.SBUF_PARTITION_BYTES:#x})")
    return a


class Sbuf:
    """128 partitions of bytes.  `data`: None (zeros of the given size), or an array read by
    image_bytes (a uint8 [partitions, bytes] array is shared with the caller, not copied; typed
    arrays become their little-endian bytes)."""

    def __init__(self, data: np.ndarray | None = None, partitions: int = addrmap.PARTITIONS,
                 bytes_per_partition: int = addrmap.SBUF_PARTITION_BYTES):
        if data is None:
            data = np.zeros((partitions, bytes_per_partition), np.uint8)
        self.data = image_bytes(data)

    def write(self, partition: int, offset: int, data) -> None:
        """Host write: the bytes of `data` (any array, as stored) into one partition from `offset`."""
        raw = np.frombuffer(np.ascontiguousarray(data).tobytes(), np.uint8)
        self._span(partition, offset, raw.size)
        self.data[partition, offset:offset + raw.size] = raw

    def _span(self, partition, offset, nbytes):
        if not (0 <= partition < self.data.shape[0] and offset >= 0 and offset + nbytes <= self.data.shape[1]):
            raise ValueError(f"SBUF access partition {partition} bytes {offset:#x}..+{nbytes} is outside "
                             f"the model's {self.data.shape[0]} x {self.data.shape[1]:#x} bytes")

    def offsets(self, steps, nums, esize: int) -> np.ndarray:
        """Byte offsets of a pattern's elements, dim 0 innermost."""
        offs = np.zeros(1, np.int64)
        for s, n in zip(steps, nums):
            offs = (np.arange(n, dtype=np.int64)[:, None] * s * esize + offs[None, :]).reshape(-1)
        return offs

    def gather(self, partitions: np.ndarray, byte_offsets: np.ndarray, esize: int) -> np.ndarray:
        """Elements of `esize` bytes: result [len(partitions), len(byte_offsets)] unsigned codes."""
        partitions = np.asarray(partitions, np.intp)
        byte_offsets = np.asarray(byte_offsets, np.int64)
        if partitions.size and (partitions.min() < 0 or partitions.max() >= self.data.shape[0]):
            raise ValueError(f"SBUF partition out of range 0..{self.data.shape[0] - 1}")
        if byte_offsets.size and (byte_offsets.min() < 0 or byte_offsets.max() + esize > self.data.shape[1]):
            raise ValueError(f"SBUF bytes {int(byte_offsets.min()):#x}..{int(byte_offsets.max()) + esize - 1:#x} "
                             f"outside the model's {self.data.shape[1]:#x} bytes per partition")
        idx = byte_offsets[None, :, None] + np.arange(esize)[None, None, :]
        raw = self.data[partitions[:, None, None], idx]                   # [P, E, esize]
        shifts = (8 * np.arange(esize, dtype=np.uint64))
        return (raw.astype(np.uint64) << shifts).sum(axis=-1, dtype=np.uint64)

    def read_pattern(self, start_addr: int, steps, nums, esize: int, partitions: int) -> np.ndarray:
        """[partitions, count] codes of a TENSORnD starting at `start_addr` (partition from the address)."""
        loc = addrmap.locate(start_addr)
        if loc is None or loc.memory != "sbuf":
            raise ValueError(f"{start_addr:#x} is not an SBUF address")
        parts = loc.partition + np.arange(partitions)
        return self.gather(parts, loc.offset + self.offsets(steps, nums, esize), esize)


def element_bytes(dtype, gen=Gen.MAVERICK) -> int:
    """Bytes one element of `dtype` occupies (4-bit codes count as 1)."""
    fmt = format_of(dtype, gen)
    return max(1, fmt.width // 8)

