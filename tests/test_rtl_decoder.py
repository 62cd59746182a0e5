"""The RTL decoder names the same error as model.isa.check (+ Engine.fits) for the same bytes.

Verilated once per generation (cosim/vectors.py), then fed every rule's boundary descriptors and a
fixed-seed fuzz of 10^4 mutated descriptors per generation."""
import random

import numpy as np
import pytest

from tensore.cosim.programs import library
from tensore.model.dtypes import Gen
from tensore.model.engine import Engine
from tensore.model.isa import ErrorCode, check, decode, error_code
from tensore.model.isa.asm import assemble
from tensore.rtl.decoder import Decoder
from tests.test_isa import BOUNDARIES, SEED, _mutants, valid
from tensore.cosim.vectors import VectorRunner

LAYOUT_GENS = [Gen.CAYMAN, Gen.MARIANA, Gen.MAVERICK]


def model_code(data: bytes, gen, rows: int, cols: int) -> int:
    """The engine's verdict: the ISA rules, then the array-size rules."""
    d = decode(data, gen)
    v = check(d, array_cols=cols)
    if not v and d.layout is not None:
        v = Engine(gen, rows=rows, cols=cols).fits(d)
    return int(error_code(v))


def rtl_codes(gen, rows, cols, descriptors):
    run = VectorRunner(Decoder(gen, rows, cols), f"decoder_{Gen.parse(gen).name.lower()}_{rows}x{cols}")
    out = run(desc=np.array([int.from_bytes(b, "little") for b in descriptors], object))
    return [int(x) for x in out["error"]]


def _compare(gen, rows, cols, descriptors):
    want = [model_code(b, gen, rows, cols) for b in descriptors]
    got = rtl_codes(gen, rows, cols, descriptors)
    bad = [(i, w, g) for i, (w, g) in enumerate(zip(want, got)) if w != g]
    assert not bad, (f"{len(bad)} of {len(descriptors)} differ; first: descriptor {bad[0][0]} "
                     f"{descriptors[bad[0][0]].hex()} model {bad[0][1]:#x} rtl {bad[0][2]:#x}")
    return want


@pytest.mark.slow
@pytest.mark.parametrize("gen", LAYOUT_GENS, ids=[g.name for g in LAYOUT_GENS])
def test_fuzz_parity_full_size(gen):
    cols = 256 if gen.layout == Gen.MAVERICK else 128
    rnd = random.Random(SEED + 17 * int(gen))
    data = list(_mutants(rnd, gen, 10_000))
    want = _compare(gen, 128, cols, data)
    assert len(set(want)) >= 12            # the fuzz reaches most rules, valid descriptors included
    assert 0 in want


def test_rule_boundaries_parity():
    by_gen = {}
    for _, gen, op, over, _ in BOUNDARIES:
        by_gen.setdefault(Gen.parse(gen), []).append(valid(op, gen, **over))
    for gen, descs in by_gen.items():
        _compare(gen, 128, 256 if gen.layout == Gen.MAVERICK else 128, descs)


@pytest.mark.parametrize("gen", LAYOUT_GENS, ids=[g.name for g in LAYOUT_GENS])
def test_small_array_parity(gen):
    """On the 8 x 8 (MAVERICK 8 x 16) test arrays the array-size rules come in: every library
    program's descriptors, and mutants of them."""
    rows, cols = 8, 16 if gen.layout == Gen.MAVERICK else 8
    descs = []
    for p in library(gen):
        prog = assemble(p.text, gen)
        descs += [prog[i:i + 64] for i in range(0, len(prog), 64)]
    rnd = random.Random(SEED)
    for b in list(descs):
        for _ in range(20):
            m = bytearray(b)
            m[rnd.randrange(8, 64)] = rnd.getrandbits(8)
            descs.append(bytes(m))
    want = _compare(gen, rows, cols, descs)
    assert 0 in want and int(ErrorCode.BAD_ACTIVE_RANGE) in want
