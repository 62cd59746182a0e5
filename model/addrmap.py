"""The ADDR4 address map (D-19): SBUF and PSUM windows, per partition."""
from __future__ import annotations

from dataclasses import dataclass

from tensore.model.dtypes import Gen

PARTITIONS = 128
SBUF_BASE = 0x0000_0000
SBUF_PARTITION_BYTES = 0x4_0000            # 256 KiB window per partition: partition = addr >> 18
SBUF_END = SBUF_BASE + PARTITIONS * SBUF_PARTITION_BYTES        # 0x0200_0000
# SBUF bytes a partition holds, per generation (D-T97): AWS Neuron architecture guides (NeuronCore-v2
# 24 MiB, v3 28 MiB, v4 32 MiB over 128 partitions); MAVERICK (unpublished) keeps the whole window
SBUF_BYTES = {Gen.SUNDA: 192 << 10, Gen.CAYMAN: 224 << 10, Gen.MARIANA: 256 << 10, Gen.MARIANA_PLUS: 256 << 10,
              Gen.MAVERICK: 256 << 10}
assert max(SBUF_BYTES.values()) <= SBUF_PARTITION_BYTES
PSUM_BASE = 0x0200_0000
PSUM_PARTITION_BYTES = 0x4000              # 16 KiB per partition: partition = (addr >> 14) & 0x7F
PSUM_END = PSUM_BASE + PARTITIONS * PSUM_PARTITION_BYTES        # 0x0220_0000
PSUM_BANKS = 8
PSUM_BANK_BYTES = 0x800                    # 2 KiB = 512 fp32 cells (D-16)
PSUM_BANK_CELLS = PSUM_BANK_BYTES // 4
PSUM_SR_SLOTS = 2                          # stochastic-rounding states per bank and partition (D-16)

# ADDR4 bit fields: partition = addr[OFFSET_BITS : OFFSET_BITS + PARTITION_BITS], offset = addr[:OFFSET_BITS]
PARTITION_BITS = (PARTITIONS - 1).bit_length()                  # 7
SBUF_OFFSET_BITS = (SBUF_PARTITION_BYTES - 1).bit_length()      # 18
PSUM_OFFSET_BITS = (PSUM_PARTITION_BYTES - 1).bit_length()      # 14
PSUM_BANK_BITS = (PSUM_BANKS - 1).bit_length()                  # bank = offset[OFFSET - BANK_BITS:]
assert SBUF_BASE == 0 and PSUM_BASE % (PARTITIONS * PSUM_PARTITION_BYTES) == 0     # the splits need no subtraction


@dataclass(frozen=True)
class Location:
    memory: str        # "sbuf" or "psum"
    partition: int
    offset: int        # byte offset inside the partition's window

    @property
    def bank(self) -> int:
        return self.offset // PSUM_BANK_BYTES

    @property
    def cell(self) -> int:
        """fp32 cell index inside the bank (PSUM)."""
        return (self.offset % PSUM_BANK_BYTES) // 4


def sbuf_bytes(gen) -> int:
    """SBUF bytes per partition on `gen` (D-T97); offsets from there to the 256 KiB window's end are a hole."""
    return SBUF_BYTES[Gen.parse(gen)]


def split(addr, memory: str) -> tuple:
    """(partition, offset) of an address in `memory` ("sbuf" or "psum"), for ints and for Amaranth
    values alike (a value is sliced, so the RTL reads the same bit fields)."""
    bits = SBUF_OFFSET_BITS if memory == "sbuf" else PSUM_OFFSET_BITS
    if isinstance(addr, int):
        return (addr >> bits) & (PARTITIONS - 1), addr & ((1 << bits) - 1)
    return addr[bits:bits + PARTITION_BITS], addr[:bits]


def locate(addr: int) -> Location | None:
    """Where an address points, or None when it is in neither window."""
    if SBUF_BASE <= addr < SBUF_END:
        return Location("sbuf", *split(addr, "sbuf"))
    if PSUM_BASE <= addr < PSUM_END:
        return Location("psum", *split(addr, "psum"))
    return None


def sbuf_addr(partition: int, offset: int = 0) -> int:
    if not (0 <= partition < PARTITIONS and 0 <= offset < SBUF_PARTITION_BYTES):
        raise ValueError(f"sbuf(p={partition}, off={offset:#x}) is outside SBUF "
                         f"(partitions 0..{PARTITIONS - 1}, offsets 0..{SBUF_PARTITION_BYTES - 1:#x})")
    return SBUF_BASE + partition * SBUF_PARTITION_BYTES + offset


def psum_addr(partition: int, bank: int = 0, offset: int = 0) -> int:
    """`offset` is in bytes inside the bank."""
    if not (0 <= partition < PARTITIONS and 0 <= bank < PSUM_BANKS and 0 <= offset < PSUM_BANK_BYTES):
        raise ValueError(f"psum(p={partition}, bank={bank}, off={offset:#x}) is outside PSUM "
                         f"(partitions 0..{PARTITIONS - 1}, banks 0..{PSUM_BANKS - 1}, "
                         f"offsets 0..{PSUM_BANK_BYTES - 1:#x})")
    return PSUM_BASE + partition * PSUM_PARTITION_BYTES + bank * PSUM_BANK_BYTES + offset
