"""Timing profiles (model/timing.py PROFILES, D-T98): a profile is looked up by name, travels with a
program to the golden engine, the RTL's elaboration, the build cache and reproducers, and each
profile's golden engine and RTL agree every cycle."""
import json
from dataclasses import replace

import numpy as np
import pytest

from tensore.cli import main
from tensore.cosim import hdl, lockstep
from tensore.cosim import programs as P
from tensore.cosim import random_programs as R
from tensore.model import timing
from tensore.model.engine import Engine
from tensore.model.isa.asm import assemble
from tensore.rtl.config import Config
from tensore.rtl.seq import Sequencer
from tensore.rtl.top import Engine as RtlEngine


def test_profiles_by_name():
    assert list(timing.PROFILES) == ["public", "contract"] and timing.DEFAULT_PROFILE == "public"
    assert timing.profile("PUBLIC") is timing.PROFILES["public"] and timing.profile(timing.PROFILES["public"]).name == "public"
    assert f"{timing.profile('contract')}" == "contract"        # a profile's text is its name (module names, reports)
    with pytest.raises(ValueError, match="one of public, contract"):
        timing.profile("fast")
    with pytest.raises(ValueError, match="timing profile"):
        Engine("mariana", rows=8, cols=8, timing="fast")


def _events(prog):
    _, trace, _ = prog.golden()
    return [(e.cycle, e.kind, e.op, repr(e.data)) for e in trace.events], trace.cycles


def _writes(prog) -> list:
    """The PSUM writes as (partition, offset, bits), in order of place: the values, whenever."""
    _, trace, _ = prog.golden()
    return sorted((e.data["partition"], e.data["offset"], e.data["bits"]) for e in trace.events if e.kind == "psum_write")


def test_public_gives_the_same_values():
    """Every library program of three generations writes the same PSUM bits under `public` as under
    `contract`; the row wavefront makes programs that load after a matmul shorter (the issue floor
    would make matmuls back to back on one block longer: the library has none shorter than it)."""
    shorter = 0
    for gen in ("cayman", "mariana", "maverick"):
        for q in P.library(gen):
            p = replace(q, timing="contract")
            assert q.timing == "public" and p.timing == "contract"
            assert _writes(q) == _writes(p), (gen, p.name)
            (_, tq), (_, tp) = _events(q), _events(p)
            shorter += tq < tp
    assert shorter >= 5


def _program(rows: int, cols: int, *, loads: int, per_load: int, n: int, fp32: bool = False,
             timing_name: str = "public", order: str = "first_col_first"):
    """On MARIANA, `loads` weight loads in `order`, each followed by `per_load` matmuls of n vectors
    (a bank each), every micro-op as early as its rules let it."""
    b = P._Builder(f"loads{loads}x{per_load}", "mariana", rows, cols, 7)
    dtype, esize, mode = ("fp32", 4, "fp32_mode=high ") if fp32 else ("bf16", 2, "")
    a = b.put(0, b.values(dtype, (rows, n)), esize)
    for k in range(loads):
        w = b.put(0, b.values(dtype, (rows, cols)), esize)
        b.line(f"ldweights in_dtype={dtype} {mode}rows={rows} cols={cols} flags=(load_order={order}) "
               f"src={P._t3(f'sbuf(0,{w:#x})', cols)}")
        for bank in range(k * per_load, (k + 1) * per_load):
            b.line(f"matmul in_dtype={dtype} {mode}out_dtype=fp32 rows={rows} cols={cols} acc=single "
                   f"src={P._t3(f'sbuf(0,{a:#x})', n)} dst={P._t3(f'psum(0,{bank},0)', n)}")
    prog = b.done()
    prog.timing = timing_name
    return prog


def _two_loads(rows: int, cols: int, *, fp32: bool = False, timing_name: str = "public"):
    """Two weight load + matmul pairs, the second load as early as its rule lets it; last column
    first, so the loads stay row-serial under `public` (the row wavefront's loads)."""
    return _program(rows, cols, loads=2, per_load=1, n=6, fp32=fp32, timing_name=timing_name, order="last_col_first")


# the 4-pass variants run in make cosim (about 30 s each on the Amaranth simulator)
@pytest.mark.parametrize("fp32", [False, pytest.param(True, marks=pytest.mark.cosim)], ids=["1-pass", "4-pass"])
def test_row_wavefront_load_follows_the_swap_front(fp32):
    """Under `public` the second load issues by load_front_issue: its last row's shadow write comes
    in the last cycle PE (row, C - 1) works on the first matmul's first vector; `contract` waits for
    the whole array.  Golden and RTL (Amaranth) agree every cycle on 4 x 8."""
    L, passes = 2, 4 if fp32 else 1
    prog = _two_loads(4, 8, fp32=fp32)
    _, trace, _ = prog.golden()
    mm, lw = [o for o in trace.ops if o.name == "matmul"][0], [o for o in trace.ops if o.name == "ldweights"][1]
    t_data = mm.t_issue + L
    assert lw.t_issue == timing.load_front_issue(t_data, passes, 0, 4, 8, L)
    last = max(e.cycle for e in trace.events if e.kind == "shadow_write" and e.op == lw.index)
    assert last == t_data + passes * (3 + 8) - 1
    contract = _two_loads(4, 8, fp32=fp32, timing_name="contract")
    slow = [o for o in contract.golden()[1].ops if o.name == "ldweights"][1]
    assert slow.t_issue == timing.weights_swapped(t_data, passes, 4, 8) - L > lw.t_issue
    assert _writes(prog) == _writes(contract)
    assert lockstep.run_many([prog], psum_partitions=16) == [None]


def _reused(rows: int, cols: int, n: int, *, fp32: bool = False, timing_name: str = "public"):
    """One weight load, three matmuls of n vectors on it."""
    return _program(rows, cols, loads=1, per_load=3, n=n, fp32=fp32, timing_name=timing_name)


@pytest.mark.parametrize("fp32", [False, pytest.param(True, marks=pytest.mark.cosim)], ids=["1-pass", "4-pass"])
def test_issue_floor_spaces_matmuls_on_one_block(fp32):
    """Under `public` matmuls on one block issue min(64, N_stationary) x passes apart or their
    stream apart, whichever is longer (nc_matmul's cost); `contract` only waits for the stream.
    Golden and RTL (Amaranth) agree every cycle on 4 x 8."""
    passes = 4 if fp32 else 1
    for n, gap in ((1, 8 * passes), (11, 11 * passes)):
        prog = _reused(4, 8, n, fp32=fp32)
        issues = [o.t_issue for o in prog.golden()[1].ops if o.name == "matmul"]
        assert [b - a for a, b in zip(issues, issues[1:])] == [gap, gap], n
        contract = _reused(4, 8, n, fp32=fp32, timing_name="contract")
        fast = [o.t_issue for o in contract.golden()[1].ops if o.name == "matmul"]
        assert all(b - a < gap if n == 1 else b - a == gap for a, b in zip(fast, fast[1:])), n
        assert _writes(prog) == _writes(contract)
    assert lockstep.run_many([_reused(4, 8, 1, fp32=fp32)], psum_partitions=16) == [None]


def test_floor_formula():
    pick = lambda c, a, b: a if c else b                                     # noqa: E731
    assert timing.floor_cycles(False, 128, 128, 1, 1, pick) == 64 and timing.floor_cycles(False, 128, 8, 1, 4, pick) == 32
    assert timing.floor_cycles(True, 16, 128, 200, 1, pick) == 64 and timing.floor_cycles(True, 128, 8, 16, 1, pick) == 128
    assert timing.floor_cycles(True, 16, 8, 20, 1, pick) == 20
    assert timing.blocks_overlap((0, 64, 0, 128), (63, 1, 127, 1)) and not timing.blocks_overlap((0, 64, 0, 128), (64, 64, 0, 128))
    assert not timing.blocks_overlap((0, 128, 0, 32), (0, 128, 32, 32))


@pytest.mark.parametrize("fp32", [False, True], ids=["1-pass", "4-pass"])
def test_a_load_a_cycle_earlier_breaks_the_rtl(monkeypatch, fp32):
    """The rule is tight: with the load one cycle earlier in model and RTL alike, the last row's
    shadow write comes while its last PE still takes the first matmul's weights, the PE takes the
    new ones, and the lockstep finds PSUM writes that differ."""
    from tensore.model.engine import issue
    from tensore.rtl import seq
    early = lambda *a: timing.load_front_issue(*a) - 1                      # noqa: E731
    monkeypatch.setattr(issue, "load_front_issue", early)
    monkeypatch.setattr(seq, "load_front_issue", early)
    [bad] = lockstep.run_many([_two_loads(4, 8, fp32=fp32)], psum_partitions=16)
    assert bad is not None and "psum" in str(bad).lower()


def test_the_profile_is_a_build_parameter():
    prog = P.library("mariana")[0]
    con = replace(prog, timing="contract")
    a, b = hdl.Config.of(prog), hdl.Config.of(con)
    assert a.timing == "public" and b.timing == "contract"
    assert b.label == a.label + "_tcontract"
    assert Sequencer(Config("mariana", 8, 8)).module_name + "_tcontract" == \
        Sequencer(Config("mariana", 8, 8, timing="contract")).module_name
    assert RtlEngine("mariana", 8, 8, timing="contract").timing.name == "contract"
    with pytest.raises(ValueError, match="one of public, contract"):
        RtlEngine("mariana", 8, 8, timing="fast")


def test_lockstep_under_public():
    """A transposing matmul over two rounds on a 4 x 8 array, golden and RTL (Amaranth's simulator)
    both under `public`, every cycle."""
    progs = [P.transpose_wide("mariana", 4, 8)]
    for p in progs:
        p.timing = "public"
    assert lockstep.run_many(progs, psum_partitions=16) == [None]
    with pytest.raises(ValueError, match="timing profile"):
        lockstep.one_array([replace(P.transpose_wide("mariana", 4, 8), timing="contract"), progs[0]])


def test_reproducer_keeps_the_profile(tmp_path):
    """A reproducer replays under the profile it was saved with; one saved before profiles (no
    `timing` in its metadata) under `contract`, the only profile there was."""
    p = R.generate("cayman", 3)
    p.timing = "contract"
    R.save(p, tmp_path / "r")
    q = R.load(tmp_path / "r")
    assert q.timing == "contract" and q.text == p.text and np.array_equal(q.sbuf, p.sbuf)
    z = dict(np.load(tmp_path / "r.npz"))
    meta = json.loads(str(z["meta"]))
    del meta["timing"]
    np.savez(tmp_path / "old.npz", **(z | {"meta": json.dumps(meta)}))
    (tmp_path / "old.s").write_text((tmp_path / "r.s").read_text())
    assert R.load(tmp_path / "old").timing == "contract"


def test_cli_takes_the_profile(tmp_path, capsys):
    prog = P.library("cayman")[0]
    (tmp_path / "p.s").write_text(prog.text)
    np.savez(tmp_path / "s.npz", sbuf=prog.sbuf)
    args = ["--gen", "cayman", "--rows", "8", "--sbuf", str(tmp_path / "s.npz")]
    assert main(["run", str(tmp_path / "p.s"), *args, "--timing", "public", "--allow-refused"]) in (0, 1)
    pub = capsys.readouterr().out
    assert main(["run", str(tmp_path / "p.s"), *args, "--allow-refused"]) in (0, 1)
    assert capsys.readouterr().out == pub
    assert main(["cost", str(tmp_path / "p.s"), *args, "--timing", "contract", "--allow-refused"]) in (0, 1)
    assert "timing profile: contract" in capsys.readouterr().out
    assert main(["gemm", "--gen", "mariana", "--rows", "8", "--cols", "8", "--m", "8", "--k", "8", "--n", "8",
                 "--timing", "contract"]) == 0
    assert "timing contract" in capsys.readouterr().out
    assert assemble(prog.text, "cayman")
