"""PSUM: 128 partitions x 8 banks x 2 KiB, with the stochastic-rounding states (SPEC section 6).

Cells are raw bytes; an FP32 destination uses 4-byte cells (512 per bank), a BF16 one 2-byte cells
(1024 per bank, D-T22).  Every write is one read-modify-write of one cell:
  FP32  overwrite: v            accumulate: RNE_fp32(old + v)
  BF16  overwrite: round(v)     accumulate: round(RNE_fp32(bf16_to_fp32(old) + v))   (D-18)
where round is RNE, or SR (D-08) with the state (partition, bank, in-bank index parity) advanced
once per write (D-09).  NaN results are the canonical NaN (D-10)."""
from __future__ import annotations

import numpy as np

from tensore.model import addrmap
from tensore.model.dtypes import Dtype, sr_bf16, xorshift32
from tensore.model.isa.enums import PsumRound
from tensore.model.mac import canonical_nan

SR_STATE_BASE = 0x9E3779B9        # D-09
SR_SLOTS = addrmap.PSUM_SR_SLOTS


def sr_reset_states(partitions: int = addrmap.PARTITIONS, banks: int = addrmap.PSUM_BANKS) -> np.ndarray:
    """The reset value of every state: 0x9E3779B9 ^ ((p << 8) | (b << 1) | j), shape [P, B, 2]."""
    p = np.arange(partitions, dtype=np.uint32)[:, None, None]
    b = np.arange(banks, dtype=np.uint32)[None, :, None]
    j = np.arange(SR_SLOTS, dtype=np.uint32)[None, None, :]
    return np.uint32(SR_STATE_BASE) ^ ((p << 8) | (b << 1) | j)


def bf16_round(values: np.ndarray, mode: PsumRound, states: np.ndarray | None = None):
    """fp32 values -> bf16 codes with RNE or SR; SR returns the advanced states too."""
    from tensore.model.dtypes import from_fp32, Gen
    if mode == PsumRound.SR:
        new_states = xorshift32(states)
        return sr_bf16(values.view(np.uint32), new_states & 0xFFFF), new_states
    return from_fp32(values, Dtype.BFLOAT16, Gen.MARIANA), states


def _cells_index(cells: np.ndarray, partitions: np.ndarray, idx: np.ndarray):
    """The index of cells[partitions, idx]: two slices when it is a rectangle inside `cells` (a
    column of consecutive partitions against a row of consecutive cells), which numpy moves fastest."""
    if partitions.ndim == idx.ndim == 2 and partitions.shape[1] == idx.shape[0] == 1 and partitions.size and idx.size:
        p, i = partitions[:, 0], idx[0]
        if 0 <= p[0] and p[0] + p.size <= cells.shape[0] and 0 <= i[0] and i[0] + i.size <= cells.shape[1] and \
                (p == p[0] + np.arange(p.size)).all() and (i == i[0] + np.arange(i.size)).all():
            return slice(p[0], p[0] + p.size), slice(i[0], i[0] + i.size)
    return partitions, idx


class Psum:
    """The PSUM array of one engine: `mem` is [partitions, 16384] raw bytes (cells(4) / cells(2)
    view it as fp32 / bf16 cells, fp32_view one bank as float32), `sr_state` the [partitions, 8, 2]
    stochastic-rounding states."""

    def __init__(self, partitions: int = addrmap.PARTITIONS):
        self.partitions = partitions
        self.mem = np.zeros((partitions, addrmap.PSUM_PARTITION_BYTES), np.uint8)
        self.sr_state = sr_reset_states(partitions)
        self.round_mode = PsumRound.RNE

    # -- raw views ---------------------------------------------------------------------------
    def cells(self, width: int) -> np.ndarray:
        """A [partitions, cells] view of the memory as 4-byte (fp32) or 2-byte (bf16) cells."""
        return self.mem.view({4: np.uint32, 2: np.uint16}[width])

    def read(self, partition: int, offset: int, nbytes: int) -> bytes:
        """Host port: raw bytes of one partition."""
        self._check_span(partition, offset, nbytes)
        return self.mem[partition, offset:offset + nbytes].tobytes()

    def write_bytes(self, partition: int, offset: int, data: bytes):
        """Host port: raw write of one partition."""
        self._check_span(partition, offset, len(data))
        self.mem[partition, offset:offset + len(data)] = np.frombuffer(bytes(data), np.uint8)

    def _check_span(self, partition, offset, nbytes):
        if not (0 <= partition < self.partitions and 0 <= offset and offset + nbytes <= self.mem.shape[1]):
            raise ValueError(f"PSUM access partition {partition} bytes {offset:#x}..+{nbytes} is outside "
                             f"{self.partitions} partitions x {self.mem.shape[1]:#x} bytes")

    # -- the matmul write path ---------------------------------------------------------------
    def zero_banks(self, partitions: np.ndarray, first_bank: int, count: int):
        """Clear `count` banks from `first_bank`, wrapping inside each partition (D-17)."""
        for i in range(count):
            b = (first_bank + i) % addrmap.PSUM_BANKS
            self.mem[partitions, b * addrmap.PSUM_BANK_BYTES:(b + 1) * addrmap.PSUM_BANK_BYTES] = 0

    def write(self, partitions: np.ndarray, offsets: np.ndarray, values: np.ndarray, *,
              out_dtype: Dtype, accumulate: bool) -> np.ndarray:
        """One write per listed partition (distinct partitions): returns the stored cell bits.
        A [P, 1] column of partitions against [1, V] offsets is one write per cell of the grid."""
        partitions = np.asarray(partitions, np.intp)
        offsets = np.asarray(offsets, np.intp)
        values = np.asarray(values, np.float32)
        if len(np.unique(partitions)) != len(partitions):
            raise ValueError("one PSUM write per partition per step")
        if out_dtype == Dtype.BFLOAT16:
            cells = self.cells(2)
            idx = offsets // 2
            at = _cells_index(cells, partitions, idx)
            if accumulate:
                old = (cells[at].astype(np.uint32) << 16).view(np.float32)
                with np.errstate(invalid="ignore", over="ignore"):
                    values = canonical_nan((old + values).astype(np.float32, copy=False))
            bank = offsets // addrmap.PSUM_BANK_BYTES
            slot = (offsets % addrmap.PSUM_BANK_BYTES // 2) & 1
            states = self.sr_state[partitions, bank, slot]
            codes, states = bf16_round(values, self.round_mode, states)
            if self.round_mode == PsumRound.SR:
                self.sr_state[partitions, bank, slot] = states
            cells[at] = codes
            return codes.astype(np.uint32)
        cells = self.cells(4)
        at = _cells_index(cells, partitions, offsets // 4)
        if accumulate:
            old = cells[at].view(np.float32)
            with np.errstate(invalid="ignore", over="ignore"):
                values = (old + values).astype(np.float32, copy=False)
        bits = canonical_nan(values).view(np.uint32)
        cells[at] = bits
        return bits

    def write_raw32(self, partitions: np.ndarray, offsets: np.ndarray, bits: np.ndarray):
        """Transposes and SaveSeed store bit patterns as they are (D-13)."""
        self.cells(4)[np.asarray(partitions, np.intp), np.asarray(offsets, np.intp) // 4] = bits

    # -- seeds (seed 000 section 5) ----------------------------------------------------------
    def seeds_as_rows(self) -> np.ndarray:
        """The states as [partition, 16] with index 2*bank + slot."""
        return self.sr_state.reshape(self.partitions, addrmap.PSUM_BANKS * SR_SLOTS).copy()

    def load_seeds(self, rows: np.ndarray):
        """Set every state from [partition, 16] (index 2*bank + slot)."""
        rows = np.asarray(rows, np.uint32)
        if rows.shape != (self.partitions, addrmap.PSUM_BANKS * SR_SLOTS):
            raise ValueError(f"seeds are [{self.partitions}, 16], got {rows.shape}")
        self.sr_state = rows.reshape(self.partitions, addrmap.PSUM_BANKS, SR_SLOTS).copy()

    def fp32_view(self, partition: int, bank: int) -> np.ndarray:
        """One bank of one partition as 512 float32 values (a view: writes show through)."""
        cells = self.cells(4)[partition]
        n = addrmap.PSUM_BANK_CELLS
        return cells[bank * n:(bank + 1) * n].view(np.float32)
