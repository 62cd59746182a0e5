"""A ConvLutLoad's table is num_entries elements of one SBUF partition (D-T19): a table in the last
partition is a valid descriptor, and the golden engine loads it from that partition."""
import numpy as np
import pytest

from tensore.model.addrmap import sbuf_addr
from tensore.model.dtypes import Gen
from tensore.model.engine import Engine
from tensore.model.isa import check, decode
from tests.fixtures import valid


@pytest.mark.parametrize("gen", ["mariana", "maverick"])
def test_lut_in_the_last_partition(gen):
    """A 16-entry fp32 table at partition 127 reads that partition only: check() finds no violation
    and the engine's table holds the bytes written there (the neighbouring partition 126 holds others)."""
    g = Gen.parse(gen)
    desc = valid("conv_lut_load", gen, src_mem_pattern=dict(start_addr=sbuf_addr(127, 0x40), step_elem=[1],
                                                             num_elem=[16]))
    assert check(decode(desc, g), g) == []
    rng = np.random.default_rng(7)
    want = rng.integers(0, 1 << 32, 16, dtype=np.uint64).astype(np.uint32)
    want[(want & 0x7F800000) == 0x7F800000] &= 0xBFFFFFFF          # finite entries: no NaN canonicalisation
    eng = Engine(g)
    eng.sbuf.write(126, 0x40, rng.integers(0, 256, 64, dtype=np.uint8))
    eng.sbuf.write(127, 0x40, want.astype("<u4"))
    trace = eng.run(desc)
    assert [e.data["entries"] for e in trace.events if e.kind == "lut"] == [16]
    assert eng.lut_codes[:16].tolist() == want.tolist()
