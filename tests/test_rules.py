"""model/isa/rules.py: the validity rules written once and evaluated twice (D-T101).

Every rule of the table is evaluated on sample descriptors by both backends, the model's (`Ints`, on
the decoded fields) and the decoder's (Amaranth values of the 64 descriptor bytes, in Amaranth's
simulator), and the two agree: on which rules exist for the layout (`only`) and on whether each
fires (a rule on a walked pattern's count gets the model's count on both sides).  And the rules of a family in the table are stated nowhere else: neither model/isa/check.py
nor rtl/decoder.py restates them."""
import ast
import importlib
import random
import subprocess
import sys

import pytest
from amaranth.hdl import Const, Module, Signal, Value
from amaranth.sim import Simulator

from tensore.model.dtypes import Dtype, Gen
from tensore.model.isa import decode, opcodes_of
from tensore.model.isa.rules import FAMILIES, RULES, Ints, select
from tensore.rtl import decoder as D
from tensore.rtl.config import Config
from tests.fixtures import valid
from tests.test_check_rules import FIXTURES

CHECK = importlib.import_module("tensore.model.isa.check")
GENS = [Gen.SUNDA, Gen.CAYMAN, Gen.MARIANA, Gen.MAVERICK]
CASES = [(g, op) for g in GENS for op in sorted(opcodes_of(g)) if any(op in r.ops for r in RULES)]


def samples(gen, op, n=60) -> list:
    """The op's valid descriptor, the table rules' fixtures of it (both sides), and mutants that keep
    the opcode byte."""
    out = [valid(op.name.lower(), gen)]
    table = {r.name for r in RULES}
    for name, (fgen, fop, inside, outside, *_) in FIXTURES.items():
        if name in table and Gen.parse(fgen) == gen and fop == op.name.lower():
            out += [valid(fop, gen, **inside), valid(fop, gen, **outside)]
    rnd = random.Random(f"{gen.name}-{op.name}")
    for i in range(n):
        b = bytearray(out[i % len(out)])
        for _ in range(1 + i % 3):
            b[rnd.randrange(1, 64)] = rnd.getrandbits(8)
        out.append(bytes(b))
    return out


def model_view(data, gen, cols=None, stationary_dtype=None) -> Ints:
    """The model's backend on `data` after check.py walked it (so the walked patterns' counts are set)."""
    d = decode(data, gen)
    checker = CHECK._Checker(d, stationary_dtype, cols)
    CHECK._BY_OP[d.op](checker)
    return checker.v


def hardware_verdicts(gen, op, descs, cols, counts):
    """{rule name: [fires on desc]} by the decoder's backend, in Amaranth's simulator; a walked
    pattern's count (`v.count`) is the model's, `counts[k]` for descriptor k."""
    dec = D.Decoder(Config(gen, cols=cols or 0))
    dec._MustUse__silence = True                        # only its fields and ports are used
    dec._m = m = Module()
    o = D._Op(dec, op, Const(1, 1))
    o.counts = {fd.name: Signal(64, name=f"count_{fd.name}") for fd in o.sd.fields if fd.name.endswith("pattern")}
    v = D._Values(o)
    outs = {}
    for rule in select(FAMILIES, op, v):
        s = Signal(name=rule.name.replace(":", "_").replace(".", "_").replace("#", "_"))
        m.d.comb += s.eq(Value.cast(rule.fires(v)))
        outs[rule.name] = s
    got = {name: [] for name in outs}

    async def tb(ctx):
        for b, given in zip(descs, counts):
            ctx.set(dec.desc, int.from_bytes(b, "little"))
            for name, s in o.counts.items():
                ctx.set(s, given.get(name, 0))
            for name, s in outs.items():
                got[name].append(bool(ctx.get(s)))

    sim = Simulator(m)
    sim.add_testbench(tb)
    sim.run()
    return got


@pytest.mark.parametrize("gen,op", CASES, ids=[f"{g.name}-{op.name}" for g, op in CASES])
def test_rules_agree_on_both_backends(gen, op):
    cols = 16 if gen.layout == Gen.MAVERICK else None         # MAVERICK's num_active_cols 0: a scaled array
    descs = samples(gen, op)
    models = [model_view(b, gen, cols) for b in descs]
    got = hardware_verdicts(gen, op, descs, cols, [py.counts for py in models])
    for k, (b, py) in enumerate(zip(descs, models)):
        rules = select(FAMILIES, op, py)
        assert [r.name for r in rules] == list(got), "the backends disagree on which rules exist"
        for r in rules:
            want = bool(r.fires(py))
            assert got[r.name][k] == want, f"{r.name} on {b.hex()}: model {want}, decoder {got[r.name][k]}"
            if want:
                assert isinstance(r.message(py), str) and r.message(py)


def test_every_rule_fires():
    """The samples reach every row of the table (so the agreement above is no agreement on 0); the
    rows that read the engine's loaded weights (`stationary_dtype`) exist on the model side only."""
    fired, model_only = set(), set()
    for gen, op in CASES:
        for b in samples(gen, op, n=0):
            for stationary in (None, Dtype.FP32, Dtype.BFLOAT16):
                py = model_view(b, gen, stationary_dtype=stationary)
                rules = select(FAMILIES, op, py)
                fired |= {r.name for r in rules if r.fires(py)}
                if stationary is not None:
                    model_only |= {r.name for r in rules} - {r.name for r in select(FAMILIES, op, Ints(decode(b, gen)))}
    assert fired == {r.name for r in RULES}, sorted({r.name for r in RULES} - fired)
    assert model_only == {"compute_dtype:DTYPE_MIX:in_dtype"}


def _functions(path):
    return [n for n in ast.walk(ast.parse(open(path).read())) if isinstance(n, ast.FunctionDef)]


def _calls_bad(fn) -> bool:
    return any(isinstance(c, ast.Call) and isinstance(c.func, ast.Attribute) and c.func.attr == "bad"
               for c in ast.walk(fn))


def test_families_are_stated_once():
    """No function of check.py or of the decoder named after a family of the table (its old home;
    array_op, ldtags and matmul_sparse are opcode steps that remain) raises an error itself, and no
    message of the table is restated in check.py."""
    for path in (CHECK.__file__, D.__file__):
        for fn in _functions(path):
            if fn.name.lstrip("_") in FAMILIES:
                assert not _calls_bad(fn), f"{path}: {fn.name} states rules of its table family"
    literals = {n.value for n in ast.walk(ast.parse(open(CHECK.__file__).read()))
                if isinstance(n, ast.Constant) and isinstance(n.value, str)}
    for gen, op in CASES:
        for b in samples(gen, op, n=0):
            py = model_view(b, gen)
            for r in select(FAMILIES, op, py):
                if r.fires(py):
                    assert r.message(py) not in literals, f"check.py restates the message of {r.name}"


def test_check_states_no_rule_itself():
    """check.py raises an error only through `_Checker.rules` (and check()'s opcode errors): every
    rule is model/isa/rules.py's."""
    for fn in _functions(CHECK.__file__):
        if fn.name not in ("rules", "bad", "check"):
            assert not _calls_bad(fn), f"check.py: {fn.name} states a rule of its own"
            assert not any(isinstance(c, ast.Call) and getattr(c.func, "id", None) == "Violation"
                           for c in ast.walk(fn)), f"check.py: {fn.name} makes a Violation of its own"


def test_array_size_rules_are_stated_once():
    """The array-size rules (BAD_TILE, BAD_ACTIVE_RANGE) are rules.array_fits': Engine.fits and the
    decoder's fit bits name neither code themselves."""
    import tensore.model.engine.core as core
    codes = {"BAD_TILE", "BAD_ACTIVE_RANGE"}
    for path, name in ((core.__file__, "fits"), (D.__file__, "_fits")):
        [fn] = [f for f in _functions(path) if f.name == name]
        named = {n.attr for n in ast.walk(fn) if isinstance(n, ast.Attribute)}
        assert not named & codes and "array_fits" in ast.unparse(fn), f"{path}: {name} states an array-size rule"


def test_the_model_does_not_import_amaranth():
    """rules.py (and check.py, which walks it) import no Amaranth."""
    code = ("import sys, importlib; importlib.import_module('tensore.model.isa.rules'); "
            "importlib.import_module('tensore.model.isa.check'); "
            "print(any(m == 'amaranth' or m.startswith('amaranth.') for m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


class _StaticFacts(Ints):
    """An Ints that answers static facts only (generation, opcode, layout through `has`,
    array_cols, stationary_dtype): reading a field's value or a helper's answer fails."""

    def __init__(self, *args):
        super().__init__(*args)
        self.clear()                                    # no field values given

    def __missing__(self, path):
        raise AssertionError(f"only() read {path!r}")


def test_only_reads_static_facts():
    """Ints.select keeps the rows whose `only` holds per static facts (generation, opcode, layout,
    array_cols, stationary_dtype) for every later descriptor of the same facts: no row's `only`
    reads a field's value or a helper's answer, and `has` names no union member's field."""
    for gen, op in CASES:
        layout = decode(valid(op.name.lower(), gen), gen).layout
        for cols, stationary in ((None, None), (16, Dtype.FP32)):
            v = _StaticFacts(decode(valid(op.name.lower(), gen), gen), cols, stationary)
            asked = []
            has = v.has
            v.has = lambda path: asked.append(path) or has(path)
            for rule in RULES:
                rule.only(v)
            for path in asked:
                top = path.split(".")[0]
                assert not any(fd.name == top and type(fd.kind).__name__ == "Union" for fd in layout.fields), path


def test_select_is_kept_per_static_facts():
    """Ints.select's rows, kept per static facts, are those the table's `select` makes for each
    descriptor (samples of every opcode, with and without array_cols and stationary_dtype)."""
    for gen, op in CASES:
        for cols, stationary in ((None, None), (16, Dtype.BFLOAT16)):
            for b in samples(gen, op, n=8):
                v = Ints(decode(b, gen), cols, stationary)
                for step in (None, 0, 1, 2):
                    assert v.select(FAMILIES, step) == tuple(select(FAMILIES, op, v, step))
