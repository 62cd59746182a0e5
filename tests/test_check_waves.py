"""`tensore check-waves` (cosim/waves.py) on waveforms of the self-contained SystemVerilog testbench
(cosim/sv_testbench.py) run by Icarus Verilog and Verilator: a correct run passes with every cycle
and register checked, a waveform with bits changed at a known cycle fails at that cycle with the
cosim report, and the exported engine gives the same results from random initial values
(Verilator --x-initial unique, several seeds)."""
import re
import shutil

import numpy as np
import pytest

from tensore.cli import main
from tensore.cosim import hdl, sv_testbench, toolchain, waves
from tensore.cosim import programs as P
from tensore.cosim.lockstep import Lockstep
from tensore.cosim.mismatch import Mismatch

GEN, ROWS, PACK = "mariana", 4, 2
pytestmark = pytest.mark.xdist_group("check_waves")          # one export, one Verilator build


@pytest.fixture(scope="module")
def exported():
    return hdl.export_cached(hdl.Config(GEN.upper(), ROWS, ROWS, PACK, psum_partitions=16), log=lambda *a: None)


def _testbench(prog, exported, out):
    lk = Lockstep(prog, pack=PACK)
    return lk, sv_testbench.write(lk, exported, out)


def _check(path, prog, exported):
    return waves.check_file(path, prog, exported, pack=PACK)


@pytest.fixture(scope="module")
def icarus_vcd(exported, tmp_path_factory):
    """An accumulate group (three matmuls, bank zeroing) on Icarus, as VCD."""
    hdl.ensure_icarus()
    prog = P.accumulate_group(GEN, rows=ROWS, cols=ROWS)
    lk, tb = _testbench(prog, exported, tmp_path_factory.mktemp("tb_acc"))
    path = tmp_path_factory.mktemp("waves") / "acc.vcd"
    sv_testbench.run(tb, "icarus", path, log=lambda *a: None)
    return prog, lk, tb, path


def test_icarus_testbench_passes_check_waves(exported, tmp_path):
    """Register setup, backpressure and inter-instruction delays, refused descriptors: FST from
    Icarus, every cycle of the golden run and every register checked, no output X after reset."""
    hdl.ensure_icarus()
    for prog in (P.backpressure(GEN, rows=ROWS, cols=ROWS), P.invalid_mixed(GEN, rows=ROWS, cols=ROWS)):
        lk, tb = _testbench(prog, exported, tmp_path / prog.name)
        out = sv_testbench.run(tb, "icarus", tmp_path / f"{prog.name}.fst", log=lambda *a: None)
        assert "idle" in out and "WATCHDOG" not in out
        res = _check(tmp_path / f"{prog.name}.fst", prog, exported)
        assert res.mismatch is None, str(res.mismatch)
        assert res.cycles == lk.end and res.regs_read == len(lk.regs) and res.checks > res.cycles
        assert lk.expected_writes() > 0 or prog.refused


def _alter_vcd(text: str, name: str, t_from: int, t_to: int, value: str) -> str:
    """`name` holds `value` (VCD value text) from t_from to t_to, then its value before t_from again."""
    head, body = text.split("$enddefinitions $end\n", 1)
    ident = re.search(rf"\$var \S+ \d+ (\S+) {name}[ \[]", head).group(1)
    blocks: dict[int, list] = {}
    pre, cur = [], None
    for line in body.splitlines():
        if line.startswith("#"):
            cur = blocks.setdefault(int(line[1:]), [])
        else:
            (pre if cur is None else cur).append(line)
    old = None
    for t in sorted(blocks):
        if t >= t_from:
            break
        for line in blocks[t]:
            if line.endswith(f" {ident}") or (len(line) > 1 and line[1:] == ident and line[0] in "01xz"):
                old = line
    assert old is not None
    fmt = (lambda v: f"{v}{ident}") if old[0] in "01xz" and not old.startswith("b") else (lambda v: f"b{v} {ident}")
    blocks.setdefault(t_from, []).append(fmt(value))
    blocks.setdefault(t_to, []).insert(0, old)
    out = [head + "$enddefinitions $end", *pre]
    for t in sorted(blocks):
        out += [f"#{t}", *blocks[t]]
    return "\n".join(out) + "\n"


def test_altered_waveform_fails_at_its_cycle(exported, icarus_vcd, tmp_path):
    prog, lk, _, path = icarus_vcd
    assert _check(path, prog, exported).mismatch is None
    ports = waves.Ports(exported)
    dump = waves.Dump(path, ports, waves.needed_roles(lk))
    _, k0 = waves.start_edge(dump, ports)
    # one bit of one PSUM write, in the cycle of the group's last write
    cycle = max(lk.writes)
    part, off, bits, nbytes = min(lk.writes[cycle])
    edge = int(dump.edges[k0 + cycle])
    mon = dump.samples("mon_bits")[k0 + cycle] ^ (1 << (32 * part + 3))
    bad_path = tmp_path / "altered.vcd"
    bad_path.write_text(_alter_vcd(path.read_text(), "mon_bits", edge - 1, edge, f"{mon:b}"))
    bad = _check(bad_path, prog, exported).mismatch
    assert bad is not None and bad.cycle == cycle and bad.where == f"PSUM partition {part} write"
    assert bad.expected != bad.actual and (off, bits ^ 8, nbytes) in bad.actual
    assert f"first mismatch at cycle {cycle}" in str(bad) and str(bad_path) in str(bad)
    assert "np." not in str(bad)                                # each write's value as a plain number
    # an X on an output after reset (here `error`, two cycles earlier)
    edge2 = int(dump.edges[k0 + cycle - 2])
    x_path = tmp_path / "x.vcd"
    x_path.write_text(_alter_vcd(path.read_text(), "error", edge2 - 1, edge2, "x"))
    bad = _check(x_path, prog, exported).mismatch
    assert bad is not None and bad.cycle == cycle - 2 and "error" in bad.where and "unknown" in bad.where
    # one bit of the PSUM read back after the run (the testbench reads every written word)
    _, _, k = waves._registers(dump, lk, k0 + lk.end)
    word, w0 = dump.samples("host_word"), lk.final_words[0]
    while word[k] != w0:
        k += 1
    edge3 = int(dump.edges[k + 1])
    lanes = dump.samples("host_lanes")[k + 1] ^ (1 << 5)
    r_path = tmp_path / "readback.vcd"
    r_path.write_text(_alter_vcd(path.read_text(), "host_lanes", edge3 - 1, edge3, f"{lanes:b}"))
    bad = _check(r_path, prog, exported).mismatch
    assert bad is not None and bad.where == f"final PSUM partition 0 word at offset {4 * w0:#x}", str(bad)


def test_mismatch_report_shows_plain_numbers():
    """A mismatch report shows each PSUM word's value as a plain number (`-2.224636`), not a numpy
    repr; fp32 and bf16 words, NaN and a register's fp32 word alike."""
    writes = Mismatch(7, "PSUM partition 0 write", {(0, 0xC00E6070, 4), (4, 0x4049, 2)}, {(0, 0x7FC00000, 4)})
    text = str(writes)
    assert "np." not in text and "float32" not in text
    assert "0xc00e6070 = -2.224636)" in text and "0x00004049 = 3.140625)" in text and "0x7fc00000 = nan)" in text
    word = str(Mismatch(9, "final PSUM partition 0 word at offset 0x0", 0xC00E6070, 0x7F800000, fp32=True))
    assert "np." not in word and "0xc00e6070 (-2.224636)" in word and "0x7f800000 (inf)" in word


def test_cli_exit_codes(exported, icarus_vcd, tmp_path, capsys):
    """0 pass, 1 mismatch, 2 bad input (one line, no traceback)."""
    prog, lk, tb, path = icarus_vcd
    src, sbuf = tmp_path / "acc.s", tmp_path / "acc.npz"
    src.write_text(prog.text)
    np.savez(sbuf, sbuf=prog.sbuf)
    args = ["--program", str(src), "--sbuf", str(sbuf), "--gen", GEN, "--rows", str(ROWS), "--pack", str(PACK),
            "--engine", tb["dir"]]
    assert main(["check-waves", str(path), *args]) == 0
    assert "OK" in capsys.readouterr().out
    ports = waves.Ports(exported)
    dump = waves.Dump(path, ports, waves.needed_roles(lk))
    cut = int(dump.edges[waves.start_edge(dump, ports)[1] + 10])
    text = path.read_text()
    short = tmp_path / "short.vcd"                      # the simulation stopped before cycle 10
    short.write_text(text[:text.index(f"\n#{cut}\n") + 1])
    assert main(["check-waves", str(short), *args]) == 1
    assert "first mismatch at cycle 10, the waveform" in capsys.readouterr().out
    garbage = tmp_path / "garbage.vcd"
    garbage.write_bytes(b"\x00\x01 not a waveform")
    other = tmp_path / "other.vcd"
    other.write_text("$timescale 1ns $end\n$scope module top $end\n$var wire 1 ! clk $end\n$upscope $end\n"
                     "$enddefinitions $end\n#0\n0!\n#5\n1!\n#10\n0!\n")
    for bad in (garbage, other, tmp_path / "missing.vcd"):
        assert main(["check-waves", str(bad), *args]) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and "Traceback" not in err and "error" in err, err
    assert main(["check-waves", str(path), *args[:-1], str(tmp_path)]) == 2       # no engine.json there


def test_cayman_outputs_known_on_icarus(tmp_path):
    """No output is X after reset on Icarus (the CAYMAN 8 x 8 export test_cosim_hdl.py builds)."""
    hdl.ensure_icarus()
    prog = P.single("cayman", "bf16", 8, 8, n=4)
    lk = Lockstep(prog, pack=2)
    cayman = hdl.export_cached(hdl.Config.of(prog, pack=2), log=lambda *a: None)
    tb = sv_testbench.write(lk, cayman, tmp_path / "tb")
    sv_testbench.run(tb, "icarus", tmp_path / "cayman.fst", log=lambda *a: None)
    bad = waves.check_lockstep(tmp_path / "cayman.fst", lk, cayman).mismatch
    assert bad is None, str(bad)


@pytest.mark.slow
@pytest.mark.cosim                      # a `--binary` Verilator build of its own: about 90 s (make cosim)
@pytest.mark.verilator
def test_verilator_binary_and_random_initial_values(exported, icarus_vcd, tmp_path):
    """`verilator --binary --timing` with --x-assign unique --x-initial unique: without a seed (zero
    initial values) and with a `+verilator+seed` value (random initial values) the waves pass
    the same checks, and the PSUM writes seen agree with Icarus's cycle for cycle."""
    prog, lk, tb, path = icarus_vcd
    toolchain.use_verilator()
    ports = waves.Ports(exported)

    def writes(p):
        dump = waves.Dump(p, ports, waves.needed_roles(lk))
        _, k0 = waves.start_edge(dump, ports)
        return [dump.samples(f"mon_{f}")[k0:k0 + lk.end] for f in ("valid", "offset", "bits")]

    icarus = writes(path)
    for seed in (None, 1):
        wave = tmp_path / f"verilator_{seed}.vcd"
        sv_testbench.run(tb, "verilator", wave, x_unique=True, seed=seed, log=lambda *a: None)
        res = _check(wave, prog, exported)
        assert res.mismatch is None, f"seed {seed}: {res.mismatch}"
        assert res.cycles == lk.end and res.regs_read == len(lk.regs)
        assert writes(wave) == icarus, seed
    shutil.rmtree(tmp_path, ignore_errors=True)


@pytest.mark.slow
@pytest.mark.cosim
@pytest.mark.verilator
@pytest.mark.parametrize("gen,pack,build", [
    ("cayman", 2, lambda: P.double_row("cayman", rows=4, cols=4, n=4)),
    ("maverick", 4, lambda: P.mx("maverick", "fp8_e4m3", "quad_row", rows=8, cols=4, n=4))])
def test_random_initial_values_every_generation(gen, pack, build, tmp_path):
    """CAYMAN and MAVERICK (micro-op fields their decoder never drives, written by the export as
    `initial` blocks) pass the same checks under `--x-initial unique` with random seeds."""
    toolchain.use_verilator()
    prog = build()
    exported = hdl.export_cached(hdl.Config.of(prog, pack=pack), log=lambda *a: None)
    lk = Lockstep(prog, pack=pack)
    tb = sv_testbench.write(lk, exported, tmp_path / "tb")
    for seed in (1, 2):
        wave = tmp_path / f"verilator_{seed}.vcd"
        sv_testbench.run(tb, "verilator", wave, x_unique=True, seed=seed, log=lambda *a: None)
        res = waves.check_file(wave, prog, exported, pack=pack)
        assert res.mismatch is None, f"seed {seed}: {res.mismatch}"
