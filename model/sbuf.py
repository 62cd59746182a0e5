"""SBUF as the engine sees it: 128 partitions of bytes, read through access patterns (D-19)."""
from __future__ import annotations

import numpy as np

from tensore.model import addrmap
from tensore.model.dtypes import Gen, format_of


class Sbuf:
    """`data` is [partitions, bytes_per_partition] uint8 (a numpy array the caller may share)."""

    def __init__(self, data: np.ndarray | None = None, partitions: int = addrmap.PARTITIONS,
                 bytes_per_partition: int = addrmap.SBUF_PARTITION_BYTES):
        if data is None:
            data = np.zeros((partitions, bytes_per_partition), np.uint8)
        data = np.asarray(data)
        if data.dtype != np.uint8 or data.ndim != 2 or data.shape[0] > addrmap.PARTITIONS \
                or data.shape[1] > addrmap.SBUF_PARTITION_BYTES:
            raise ValueError(f"SBUF is a uint8 array [<= {addrmap.PARTITIONS}, <= "
                             f"{addrmap.SBUF_PARTITION_BYTES}], got {data.dtype} {data.shape}")
        self.data = data

    @classmethod
    def from_npz(cls, path) -> "Sbuf":
        with np.load(path) as z:
            if "sbuf" not in z:
                raise ValueError(f"{path}: expected an array named 'sbuf' ([partitions, bytes] uint8)")
            return cls(z["sbuf"].astype(np.uint8))

    def write(self, partition: int, offset: int, data) -> None:
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
    fmt = format_of(dtype, gen)
    return max(1, fmt.width // 8)

