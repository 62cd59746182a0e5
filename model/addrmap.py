"""The ADDR4 address map (D-19): SBUF and PSUM windows, per partition."""
from __future__ import annotations

from dataclasses import dataclass

PARTITIONS = 128
SBUF_BASE = 0x0000_0000
SBUF_PARTITION_BYTES = 0x4_0000            # 256 KiB window per partition: partition = addr >> 18
SBUF_END = SBUF_BASE + PARTITIONS * SBUF_PARTITION_BYTES        # 0x0200_0000
PSUM_BASE = 0x0200_0000
PSUM_PARTITION_BYTES = 0x4000              # 16 KiB per partition: partition = (addr >> 14) & 0x7F
PSUM_END = PSUM_BASE + PARTITIONS * PSUM_PARTITION_BYTES        # 0x0220_0000
PSUM_BANKS = 8
PSUM_BANK_BYTES = 0x800                    # 2 KiB = 512 fp32 cells (D-16)
PSUM_BANK_CELLS = PSUM_BANK_BYTES // 4


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


def locate(addr: int) -> Location | None:
    """Where an address points, or None when it is in neither window."""
    if SBUF_BASE <= addr < SBUF_END:
        return Location("sbuf", (addr - SBUF_BASE) >> 18, addr & (SBUF_PARTITION_BYTES - 1))
    if PSUM_BASE <= addr < PSUM_END:
        return Location("psum", (addr >> 14) & 0x7F, addr & (PSUM_PARTITION_BYTES - 1))
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
