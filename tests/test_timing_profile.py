"""Timing profiles (model/timing.py PROFILES, D-T98): a profile is looked up by name, travels with a
program to the golden engine, the RTL's elaboration, the build cache and reproducers, and each
profile's golden engine and RTL agree every cycle."""
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
from tensore.rtl.seq import Sequencer
from tensore.rtl.top import Engine as RtlEngine


def test_profiles_by_name():
    assert list(timing.PROFILES) == ["contract", "public"] and timing.DEFAULT_PROFILE == "contract"
    assert timing.profile("PUBLIC") is timing.PROFILES["public"] and timing.profile(timing.PROFILES["public"]).name == "public"
    with pytest.raises(ValueError, match="one of contract, public"):
        timing.profile("fast")
    with pytest.raises(ValueError, match="timing profile"):
        Engine("mariana", rows=8, cols=8, timing="fast")


def _events(prog):
    _, trace, _ = prog.golden()
    return [(e.cycle, e.kind, e.op, repr(e.data)) for e in trace.events], trace.cycles


def test_public_issues_as_contract_until_its_rules_land():
    """`public` has no rule of its own yet: every library program of a generation gives the same
    events in the same cycles under both profiles (a rule of `public` changes this test)."""
    for gen in ("cayman", "mariana", "maverick"):
        for p in P.library(gen):
            q = replace(p, timing="public")
            assert q.timing == "public" and p.timing == "contract"
            assert _events(q) == _events(p), (gen, p.name)


def test_the_profile_is_a_build_parameter():
    prog = P.library("mariana")[0]
    pub = replace(prog, timing="public")
    a, b = hdl.Config.of(prog), hdl.Config.of(pub)
    assert a.timing == "contract" and b.timing == "public"
    assert b.label == a.label + "_tpublic"
    assert Sequencer("mariana", 8, 8).module_name + "_tpublic" == Sequencer("mariana", 8, 8, timing="public").module_name
    assert RtlEngine("mariana", 8, 8, timing="public").timing.name == "public"
    with pytest.raises(ValueError, match="one of contract, public"):
        RtlEngine("mariana", 8, 8, timing="fast")


def test_lockstep_under_public():
    """A transposing matmul over two rounds on a 4 x 8 array, golden and RTL (Amaranth's simulator)
    both under `public`, every cycle."""
    progs = [P.transpose_wide("mariana", 4, 8)]
    for p in progs:
        p.timing = "public"
    assert lockstep.run_many(progs, psum_partitions=16) == [None]
    with pytest.raises(ValueError, match="timing profile"):
        lockstep.one_array([P.transpose_wide("mariana", 4, 8), progs[0]])


def test_reproducer_keeps_the_profile(tmp_path):
    p = R.generate("cayman", 3)
    p.timing = "public"
    R.save(p, tmp_path / "r")
    q = R.load(tmp_path / "r")
    assert q.timing == "public" and q.text == p.text and np.array_equal(q.sbuf, p.sbuf)


def test_cli_takes_the_profile(tmp_path, capsys):
    prog = P.library("cayman")[0]
    (tmp_path / "p.s").write_text(prog.text)
    np.savez(tmp_path / "s.npz", sbuf=prog.sbuf)
    args = ["--gen", "cayman", "--rows", "8", "--sbuf", str(tmp_path / "s.npz")]
    assert main(["run", str(tmp_path / "p.s"), *args, "--timing", "public", "--allow-refused"]) in (0, 1)
    pub = capsys.readouterr().out
    assert main(["run", str(tmp_path / "p.s"), *args, "--allow-refused"]) in (0, 1)
    assert capsys.readouterr().out == pub
    assert main(["cost", str(tmp_path / "p.s"), *args, "--timing", "public", "--allow-refused"]) in (0, 1)
    assert "timing profile: public" in capsys.readouterr().out
    assert main(["gemm", "--gen", "mariana", "--rows", "8", "--cols", "8", "--m", "8", "--k", "8", "--n", "8",
                 "--timing", "public"]) == 0
    assert "timing public" in capsys.readouterr().out
    assert assemble(prog.text, "cayman")
