"""cosim/random_programs.py: constrained-random programs of every generation on the golden engine
(legal and illegal descriptors, every generated opcode, special values), delta debugging, the
shrinking of a failing program and its reproducer; a few random programs on the RTL (make cosim)."""
from pathlib import Path

import numpy as np
import pytest

import tensore.model.engine.execute
from tensore import model
from tensore.cosim import lockstep
from tensore.cosim import random_programs as R
from tensore.inputs import load_sbuf
from tensore.model import addrmap
from tensore.model.dtypes import Gen
from tensore.model.isa import DESCRIPTOR_BYTES, ErrorCode, Opcode, check, error_code, opcodes_of
from tensore.model.isa.asm import assemble
from tensore.model.sbuf import Sbuf
from tests.fixtures import RTL_GAPS

SEEDS = range(12)

REPRO = Path(__file__).parent / "repro"
STEMS = sorted(p.stem for p in REPRO.glob("*.s"))


def test_generate_is_deterministic():
    p, q = R.generate("mariana", 5), R.generate("mariana", 5)
    assert p.text == q.text and np.array_equal(p.sbuf, q.sbuf) and p.regs == q.regs
    assert R.generate("mariana", 6).text != p.text


@pytest.mark.parametrize("gen", list(Gen), ids=lambda g: g.name)
def test_random_programs_on_the_golden_engine(gen):
    """Every program runs to the end; a descriptor `check` refuses on the program's array (as the
    engine checks it: a MAVERICK LoadSeed reads one seed per column of that array) is refused with
    that code or a smaller one (D-23); legal and illegal descriptors and every opcode the generator
    knows occur."""
    seen, legal, illegal = set(), 0, 0
    for seed in SEEDS:
        p = R.generate(gen, seed)
        data = assemble(p.text, gen)
        for i in range(len(data) // DESCRIPTOR_BYTES):
            d = data[i * DESCRIPTOR_BYTES:(i + 1) * DESCRIPTOR_BYTES]
            seen.add(d[0])
            code = error_code(check(d, gen, array_cols=p.cols))
            if code != ErrorCode.NONE:
                illegal += 1
                assert i in p.refused and p.refused[i] <= code, (seed, i, code, p.refused.get(i))
            else:
                legal += 1
        assert p.expect_fp32 and len(p.expect_fp32) == min(128, p.cols) * addrmap.PSUM_BANKS
    expected = {int(op) for op in opcodes_of(gen)} - {int(Opcode.PE_MANAGE_SEED)}
    assert expected <= seen, sorted(expected - seen)
    assert seen - expected, "no descriptor with an opcode outside the generation"
    assert legal > 8 * illegal > 0


def test_random_programs_carry_special_values():
    """Across seeds the golden PSUM holds NaN, +-Inf, -0 and subnormals."""
    classes = set()
    for gen in (Gen.CAYMAN, Gen.MARIANA, Gen.MAVERICK):
        for seed in SEEDS:
            p = R.generate(gen, seed)
            bits = np.concatenate([b for _, b in p.expect_fp32.values()])
            e, m = (bits >> 23) & 0xFF, bits & 0x7FFFFF
            classes |= {name for name, hit in (("nan", ((e == 255) & (m != 0)).any()), ("inf", (bits << 1 == 0xFF000000).any()),
                                               ("-0", (bits == 0x80000000).any()), ("sub", ((e == 0) & (m != 0)).any()))
                        if hit}
    assert classes == {"nan", "inf", "-0", "sub"}


def test_ddmin_finds_a_one_minimal_sublist():
    calls = []

    def fails(items):
        calls.append(1)
        return 3 in items and 17 in items

    assert R.ddmin(list(range(40)), fails) == [3, 17]
    assert len(calls) < 80
    assert R.ddmin([1, 2, 3], lambda items: True) == []


def _perturbed_fp16(bit=0):
    """The engine's column chain with one result bit flipped for fp16 x fp16 products (22 bits)."""
    chain = model.engine.execute.column_chain

    def perturbed(w, a, *, sig_bits=48, **kw):
        result = chain(w, a, sig_bits=sig_bits, **kw)
        if sig_bits != 22:
            return result
        flip = lambda x: (x.view(np.uint32) ^ np.uint32(1 << bit)).view(np.float32)   # noqa: E731
        return (flip(result[0]), [flip(s) for s in result[1]]) if isinstance(result, tuple) else flip(result)
    return perturbed


def _fails_with_perturbed_fp16(monkeypatch):
    def fails(program):
        with monkeypatch.context() as m:
            m.setattr(model.engine.execute, "column_chain", _perturbed_fp16())
            eng, _ = R.run_golden(program, shared=False)
        cells = eng.psum.cells(4)
        per_bank = addrmap.PSUM_BANK_BYTES // 4
        return any(not np.array_equal(cells[p, b * per_bank:(b + 1) * per_bank], bits)
                   for (p, b), (_, bits) in program.expect_fp32.items())
    return fails


def test_shrink_finds_the_fp16_matmul(monkeypatch, tmp_path):
    """A program failing only through an fp16 matmul (a perturbed chain) shrinks to that matmul with
    its fields reduced; the reproducer replays."""
    fails = _fails_with_perturbed_fp16(monkeypatch)
    program = next(p for p in (R.generate("cayman", s) for s in range(40))
                   if fails(p) and len(p.text.splitlines()) > 10)
    small = R.shrink(program, fails)
    lines = small.text.strip().splitlines()
    assert fails(small) and len(lines) <= 2 < len(program.text.splitlines()), lines
    mm = lines[-1]
    assert mm.startswith("matmul in_dtype=fp16") and "rows=1 " in mm and "cols=1 " in mm, mm
    assert "num_elem=[1,1,1]" in mm and "psum(0,0,0)" in mm, mm
    # the reproducer: .s + .npz, replayed on the golden engine and readable by `tensore run --sbuf`
    s_path, npz_path = R.save(small, tmp_path / "repro")
    back = R.load(tmp_path / "repro")
    assert back.text == small.text and back.gen == small.gen and back.regs == small.regs
    assert np.array_equal(Sbuf(load_sbuf(str(npz_path))).data, small.sbuf)
    eng, _ = R.run_golden(back)
    per_bank = addrmap.PSUM_BANK_BYTES // 4
    for (p, b), (_, bits) in back.expect_fp32.items():
        assert np.array_equal(eng.psum.cells(4)[p, b * per_bank:(b + 1) * per_bank], bits)
    assert fails(back)


def test_shrink_refuses_a_passing_program():
    with pytest.raises(ValueError, match="does not fail"):
        R.shrink(R.generate("mariana", 1), lambda p: False)


@pytest.mark.slow
@pytest.mark.cosim
@pytest.mark.parametrize("gen,size", [(Gen.CAYMAN, (4, 4)), (Gen.MARIANA, (8, 4)), (Gen.MAVERICK, (8, 4))],
                         ids=["CAYMAN", "MARIANA", "MAVERICK"])
def test_random_programs_on_the_rtl(gen, size):
    """Random programs on the engine RTL in Amaranth's simulator, in lockstep with the golden engine."""
    progs = [R.generate(gen, seed, rows=size[0], cols=size[1], blocks=5) for seed in range(3)]
    results = lockstep.run_many(progs, psum_partitions=8)
    failed = [(p.name, str(bad)) for p, bad in zip(progs, results) if bad is not None]
    assert not failed, failed


# --- reproducers of failures found by random programs (tests/repro/<name>.s + .npz) -------------------

@pytest.mark.parametrize("stem", STEMS)
def test_reproducer_replays_on_the_golden_engine(stem):
    p = R.load(REPRO / stem)
    eng, trace = R.run_golden(p)
    assert {o.index: o.error for o in trace.ops if o.error != ErrorCode.NONE} == p.refused
    per_bank = addrmap.PSUM_BANK_BYTES // 4
    for (part, bank), (_, bits) in p.expect_fp32.items():
        assert np.array_equal(eng.psum.cells(4)[part, bank * per_bank:(bank + 1) * per_bank], bits)


@pytest.mark.slow
@pytest.mark.cosim
@pytest.mark.parametrize("stem", [pytest.param(s, marks=[pytest.mark.xfail(reason=RTL_GAPS[s], strict=True)]
                                               if s in RTL_GAPS else []) for s in STEMS])
def test_reproducer_on_the_rtl(stem):
    bad = lockstep.run(R.load(REPRO / stem), psum_partitions=8)
    assert bad is None, str(bad)


# --- the extra blocks (second random stream, D-T73) ------------------------------------------------

def test_extra_blocks_keep_the_first_streams_program():
    """A seed's first-stream program is the prefix of its program with extra blocks, bit for bit."""
    for gen in (Gen.CAYMAN, Gen.MAVERICK):
        for seed in range(4):
            base, full = R.generate(gen, seed, extras=0), R.generate(gen, seed, extras=5)
            assert full.text.startswith(base.text) and len(full.text) > len(base.text)
            assert np.array_equal(full.sbuf[:, :0x100], base.sbuf[:, :0x100])


def test_extra_blocks_reach_what_the_first_stream_does_not():
    """Across seeds the extra blocks execute seed moves (every opcode of MARIANA), transposed and
    TAG_WEIGHT loads, 2-D patterns, row / column groups, 32-bit transposes, LUT moving codes, the MX
    element orders, and the bypass / done-first / perf-counter registers."""
    import re
    text, regs, executed = "", set(), set()
    for seed in range(16):
        p = R.generate("mariana", seed, extras=6)
        _, trace = R.run_golden(p)
        executed |= {o.desc.op for o in trace.ops if o.error == ErrorCode.NONE}
        text += p.text
        regs |= set(p.regs)
    assert {int(op) for op in opcodes_of("mariana")} <= {int(op) for op in executed}
    for needle in ("pe_manage_seed mode=save_seed", "pe_manage_seed mode=load_seed", "xpose_mode=enabled, load_order",
                   "tag_weight_mode=tag_weight", "step_elem=[1,", "row_grp=1", "in_dtype=fp32 fp32_mode=high out_dtype",
                   "in_dtype=uint8 out_dtype=fp32", "oct_row_interleave"):
        assert needle in text, needle
    assert len(set(re.findall(r"perf_mode=(\w+)", text))) >= 5
    assert {"queue_cfg", "arr_cluster_cfg", "perf_cntr_cfg"} <= regs
