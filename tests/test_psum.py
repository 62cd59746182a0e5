"""The PSUM model's host side (model/psum.py) against plain bytes: the host port's reads and writes
against a byte image kept beside it, its bounds, the seed rows (index 2 * bank + slot, seed 000
section 5) and the fp32 view of one bank (struct's little-endian float32)."""
import struct

import numpy as np
import pytest

from tensore.model import addrmap
from tensore.model.psum import Psum

P, BYTES, BANK = addrmap.PARTITIONS, addrmap.PSUM_PARTITION_BYTES, addrmap.PSUM_BANK_BYTES
SEED = 20261207


def test_host_port_reads_what_it_wrote():
    """Random spans (the first and last bytes of a partition among them) written and read back
    equal the same writes to a bytearray; bytes no write touched read as zero."""
    rng, psum, image = np.random.default_rng(SEED), Psum(), bytearray(P * BYTES)
    spans = [(0, 0, 8), (P - 1, BYTES - 8, 8)] + [
        (int(p), int(off), int(n)) for p, n in zip(rng.integers(0, P, 300), rng.integers(1, 40, 300))
        for off in [rng.integers(0, BYTES - n + 1)]]
    for p, off, n in spans:
        data = rng.integers(0, 256, n, dtype=np.uint8).tobytes()
        psum.write_bytes(p, off, data)
        image[p * BYTES + off:p * BYTES + off + n] = data
    for p, off, n in spans + [(3, 0, BYTES)]:
        assert psum.read(p, off, n) == bytes(image[p * BYTES + off:p * BYTES + off + n]), (p, off, n)


@pytest.mark.parametrize("p,off,n", [(-1, 0, 1), (P, 0, 1), (0, -1, 1), (0, BYTES, 1), (1, BYTES - 3, 4)])
def test_host_port_outside_a_partition_is_one_error(p, off, n):
    psum, msg = Psum(), f"outside {P} partitions x {BYTES:#x} bytes"
    with pytest.raises(ValueError, match=msg):
        psum.read(p, off, n)
    with pytest.raises(ValueError, match=msg):
        psum.write_bytes(p, off, bytes(n))
    assert not psum.mem.any()


@pytest.mark.parametrize("p,off,n", [(0, 0, 1), (P - 1, BYTES - 4, 4), (1, BYTES, 0)])
def test_host_port_reaches_every_edge(p, off, n):
    psum = Psum()
    psum.write_bytes(p, off, b"\xa5" * n)
    assert psum.read(p, off, n) == b"\xa5" * n


def test_seed_rows_are_bank_major():
    """load_seeds / seeds_as_rows: state (p, bank, slot) is row p's column 2 * bank + slot; both copy."""
    rows = np.random.default_rng(SEED).integers(0, 2**32, (P, addrmap.PSUM_BANKS * 2), dtype=np.uint32)
    psum = Psum()
    psum.load_seeds(rows)
    for p, bank, slot in [(0, 0, 0), (0, 0, 1), (5, 3, 1), (P - 1, 7, 0), (P - 1, 7, 1)]:
        assert psum.sr_state[p, bank, slot] == rows[p, 2 * bank + slot]
    out = psum.seeds_as_rows()
    assert out.shape == (P, 16) and (out == rows).all()
    out[0, 0] ^= 1
    rows[0, 1] ^= 1
    assert (psum.seeds_as_rows()[0, :2] == [out[0, 0] ^ 1, rows[0, 1] ^ 1]).all()
    with pytest.raises(ValueError, match=r"seeds are \[128, 16\], got \(128, 15\)"):
        psum.load_seeds(rows[:, :15])


def test_fp32_view_is_one_bank_of_one_partition():
    """fp32_view(p, bank)[i] is the little-endian float32 at byte bank * 2048 + 4 i of partition p,
    and a write through the view is a write to PSUM."""
    psum = Psum()
    psum.write_bytes(6, 3 * BANK + 4 * 17, struct.pack("<f", 1.5))
    psum.write_bytes(6, 3 * BANK + 4 * 511, struct.pack("<f", -2.25))
    psum.write_bytes(6, 4 * BANK, struct.pack("<f", 7.0))          # the next bank: not in the view
    view = psum.fp32_view(6, 3)
    assert view.dtype == np.float32 and view.shape == (BANK // 4,)
    assert (view[17], view[511], view[0]) == (1.5, -2.25, 0.0)
    view[100] = 3.0
    assert psum.read(6, 3 * BANK + 400, 4) == struct.pack("<f", 3.0)


def test_cells_are_two_or_four_bytes():
    psum = Psum()
    assert psum.cells(4).shape == (P, BYTES // 4) and psum.cells(2).shape == (P, BYTES // 2)
    with pytest.raises(KeyError):
        psum.cells(3)
