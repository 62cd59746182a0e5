"""The RTL decoder names the same error as model.isa.check (+ Engine.fits) for the same bytes, and
hands the sequencer the micro-op model.isa.microop derives.

Verilated once per generation (cosim/vectors.py), then fed every rule's boundary descriptors and a
fixed-seed fuzz of 10^4 mutated descriptors per generation."""
import functools
import random

import numpy as np
import pytest
from tensore.cosim.programs import library
from tensore.cosim.vectors import VectorRunner
from tensore.model.dtypes import Dtype, Gen
from tensore.model.engine import Engine
from tensore.model.isa import ErrorCode, check, decode, error_code
from tensore.model.isa.asm import assemble
from tensore.model.isa.microop import Kind, microop, pack_of, region_of
from tensore.rtl.config import Config
from tensore.rtl.decoder import Decoder
from tensore.rtl.isa import uop_layout

from tests.fixtures import BOUNDARIES, SEED, mutants, valid

LAYOUT_GENS = [Gen.CAYMAN, Gen.MARIANA, Gen.MAVERICK]
DECODER_GENS = [Gen.SUNDA, *LAYOUT_GENS]            # SUNDA's decoder has its own limits (D-T97)


def model_code(data: bytes, gen, rows: int, cols: int, eng: Engine | None = None) -> int:
    """The engine's verdict: the ISA rules, then the array-size and engine-state rules (run())."""
    eng = eng or Engine(gen, rows=rows, cols=cols)
    d = decode(data, gen)
    v = check(d, stationary_dtype=eng._stationary_dtype(d), array_cols=cols)
    if not v and d.layout is not None:
        v = eng.fits(d) + eng._runtime_rules(d)
    return int(error_code(v))


@functools.cache
def _runner(gen, rows, cols) -> VectorRunner:
    """One export and build per decoder shape in a test process."""
    return VectorRunner(Decoder(Config(gen, rows, cols)), f"decoder_{Gen.parse(gen).name.lower()}_{rows}x{cols}")


def rtl_run(gen, rows, cols, descriptors, wt_mix=0, wt_pump=0):
    run = _runner(Gen.parse(gen), rows, cols)
    n = len(descriptors)
    return run(desc=np.array([int.from_bytes(b, "little") for b in descriptors], object),
               wt_mix=np.broadcast_to(np.asarray(wt_mix, np.int64), n), wt_pump=np.broadcast_to(np.asarray(wt_pump, np.int64), n))


def _compare(gen, rows, cols, descriptors, eng=None, **weights):
    eng = eng or Engine(gen, rows=rows, cols=cols)      # model_code only reads the engine's state
    want = [model_code(b, gen, rows, cols, eng) for b in descriptors]
    out = rtl_run(gen, rows, cols, descriptors, **weights)
    got = [int(x) for x in out["error"]]
    bad = [(i, w, g) for i, (w, g) in enumerate(zip(want, got)) if w != g]
    assert not bad, (f"{len(bad)} of {len(descriptors)} differ; first: descriptor {bad[0][0]} "
                     f"{descriptors[bad[0][0]].hex()} model {bad[0][1]:#x} rtl {bad[0][2]:#x}")
    return want, out


@pytest.mark.slow
@pytest.mark.parametrize("gen", DECODER_GENS, ids=[g.name for g in DECODER_GENS])
def test_fuzz_parity_full_size(gen):
    cols = 256 if gen.layout == Gen.MAVERICK else 128
    rnd = random.Random(SEED + 17 * int(gen))
    data = list(mutants(rnd, gen, 10_000))
    want, _ = _compare(gen, 128, cols, data)
    assert len(set(want)) >= 12            # the fuzz reaches most rules, valid descriptors included
    assert 0 in want


def test_rule_boundaries_parity():
    by_gen = {}
    for _, gen, op, over, _ in BOUNDARIES:
        by_gen.setdefault(Gen.parse(gen), []).append(valid(op, gen, **over))
    for gen, descs in by_gen.items():
        _compare(gen, 128, 256 if gen.layout == Gen.MAVERICK else 128, descs)


@pytest.mark.parametrize("gen", DECODER_GENS, ids=[g.name for g in DECODER_GENS])
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
    want, out = _compare(gen, rows, cols, descs)
    assert 0 in want and int(ErrorCode.BAD_ACTIVE_RANGE) in want
    _compare_uops(gen, rows, cols, [d for d, w in zip(descs, want) if w == 0],
                  [u for u, w in zip(out["uop"], want) if w == 0])
    _compare_weight_rules(gen, rows, cols, descs)


def _uop_fields(packed: int) -> dict:
    return {name: (int(packed) >> f.offset) & ((1 << f.width) - 1) for name, f in uop_layout()}


def _compare_uops(gen, rows, cols, descs, packed):
    """The record of every valid descriptor holds model.isa.microop's derivations (D-T69)."""
    kinds = set()
    for data, word in zip(descs, packed):
        u, got = microop(decode(data, gen), rows, cols), _uop_fields(word)
        want = {"kind": u.kind, "mmkind": u.mmkind, "barrier": u.barrier, "xpose": u.xpose, "seed": u.seed,
                "mx": u.mx, "mxmode": u.mxmode, "lut": u.lut, "tagw": u.tagw, "counter": u.counter}
        if u.kind in (Kind.LOAD, Kind.MATMUL, Kind.SEED):
            want |= {"pack": u.pack, "passes": u.passes, "dtype": u.dtype}
        if u.kind in (Kind.LOAD, Kind.MATMUL) and not u.xpose or u.kind == Kind.SEED:
            want |= {"row0": u.row0, "rows": u.rows, "col0": u.col0, "cols": u.cols}
        if u.kind in (Kind.LOAD, Kind.MATMUL):
            want["lcf"] = u.lcf
        if u.kind == Kind.MATMUL and not u.seed:
            want |= {"out_bf16": u.out_bf16, "accumulate": u.accumulate, "zero": bool(u.zero_banks)}
        diff = {k: (int(v), got[k]) for k, v in want.items() if int(v) != got[k]}
        assert not diff, f"{u.op.name} {data.hex()}: (model, rtl) {diff}"
        kinds.add(u.kind)
    assert {Kind.LOAD, Kind.MATMUL, Kind.REGWRITE} <= kinds


def _compare_weight_rules(gen, rows, cols, descs):
    """DTYPE_MIX and BAD_MX at matmul time (D-T31): with every PE's weights loaded as `dtype` with
    `pack`, the engine's verdict equals the decoder's given the weight-state answers for each block."""
    for dtype, pack in ((Dtype.FP32, 1), (Dtype.BFLOAT16, 1), (Dtype.FP8_EXP4, 2), (Dtype.FP8_EXP4, 8)):
        eng = Engine(gen, rows=rows, cols=cols)
        eng.active.dtype[:], eng.active.pack[:] = int(dtype), pack
        mix, pump = [], []
        for data in descs:
            d = decode(data, gen)
            _, n_rows, _, n_cols = region_of(d, rows, cols) if d.layout is not None else (0, 0, 0, 0)
            block = n_rows > 0 and n_cols > 0
            mix.append(int(block and (d.fields.get("in_dtype") == Dtype.FP32) != (dtype == Dtype.FP32)))
            pump.append(int(block and d.layout is not None and pack_of(d) != pack))
        want, _ = _compare(gen, rows, cols, descs, eng, wt_mix=mix, wt_pump=pump)
        assert int(ErrorCode.DTYPE_MIX if pack == 1 else ErrorCode.BAD_MX) in want
