"""`tensore check-waves` on the waveforms `tensore cosim --waves` writes, on every simulator and harness:
cocotb on Icarus (FST, VCD), Amaranth's simulator (VCD, FST), the compiled Verilator harness (FST)
and cocotb on Verilator (VCD).  Each run passes check-waves (exit 0: every cycle, the registers and
the PSUM read back after the run are in the waveform), and the same waveform checked against another
SBUF image or program is a mismatch (exit 1), in each file format.

`make test` runs the Icarus FST case (the MARIANA 4 x 4 export of tests/test_check_waves.py and a
3 s Icarus build); the others run in `make cosim`, the Verilator ones on the traced builds
tests/test_cosim_waves.py makes of its small CAYMAN engine (no build of their own)."""
import numpy as np
import pytest

from tensore.cli import main
from tensore.cosim import hdl, toolchain
from tensore.cosim import programs as P

# the engine of tests/test_check_waves.py (its export) and of tests/test_cosim_waves.py's SMALL (its
# traced Verilator builds: -O0, FST of everything for the compiled harness, VCD two levels deep for cocotb)
MARIANA = ["--gen", "mariana", "--rows", "4", "--pack", "2"]
CAYMAN = ["--gen", "cayman", "--rows", "4", "--cols", "4", "--pack", "1", "--dtypes", "bf16"]


def _files(d, prog):
    """The program, its SBUF image and an image with one operand byte changed, as files in `d`."""
    d.mkdir(parents=True, exist_ok=True)
    (d / "prog.s").write_text(prog.text)
    np.savez(d / "sbuf.npz", sbuf=prog.sbuf)
    other = prog.sbuf.copy()
    other[1, 0x200] ^= 0x40                     # a moving value of the first matmul (partition 1)
    np.savez(d / "other.npz", sbuf=other)
    # the program without its last matmul: fewer PSUM writes than the waveform holds
    lines = prog.text.strip().splitlines()
    (d / "short.s").write_text("\n".join(lines[:-1]) + "\n")
    return d


@pytest.fixture(scope="module")
def mariana(tmp_path_factory):
    return _files(tmp_path_factory.mktemp("mariana"), P.accumulate_group("mariana", rows=4, cols=4, n=4))


@pytest.fixture(scope="module")
def cayman(tmp_path_factory):
    return _files(tmp_path_factory.mktemp("cayman"), P.accumulate_group("cayman", rows=4, cols=4, n=8))


def _cosim(d, waves, engine, *extra) -> None:
    assert main(["cosim", str(d / "prog.s"), "--sbuf", str(d / "sbuf.npz"), *engine, "--waves", str(waves),
                 *extra]) == 0


def _check(d, waves, engine, capsys, *, program="prog.s", sbuf="sbuf.npz") -> tuple:
    capsys.readouterr()
    rc = main(["check-waves", str(waves), "--program", str(d / program), "--sbuf", str(d / sbuf), *engine])
    out, err = capsys.readouterr()
    return rc, out + err


def _passes_and_catches(d, waves, engine, capsys, *, also_program=False):
    """check-waves: exit 0 on the run's own program and SBUF; exit 1 with another SBUF image (a
    PSUM write of the first matmul differs) and, if asked, with the program cut short."""
    rc, out = _check(d, waves, engine, capsys)
    assert rc == 0, out
    assert "OK:" in out and "registers checked" in out
    rc, out = _check(d, waves, engine, capsys, sbuf="other.npz")
    assert rc == 1 and "first mismatch at cycle" in out and "PSUM partition" in out, out
    if also_program:
        rc, out = _check(d, waves, engine, capsys, program="short.s")
        assert rc == 1 and "first mismatch at cycle" in out, out


@pytest.mark.slow
@pytest.mark.xdist_group("check_waves")
def test_icarus_fst_passes_check_waves(mariana, tmp_path, capsys):
    """cocotb on Icarus, FST: the PSUM words read back after the run are in the waveform (the bench
    runs idle cycles after its last read, cosim/cocotb_bench.py)."""
    hdl.ensure_icarus()
    waves = tmp_path / "icarus.fst"
    _cosim(mariana, waves, MARIANA, "--sim", "icarus")
    _passes_and_catches(mariana, waves, MARIANA, capsys)


@pytest.mark.slow
@pytest.mark.cosim
@pytest.mark.xdist_group("check_waves")
def test_icarus_vcd_passes_check_waves(mariana, tmp_path, capsys):
    hdl.ensure_icarus()
    waves = tmp_path / "icarus.vcd"
    _cosim(mariana, waves, MARIANA, "--sim", "icarus")
    _passes_and_catches(mariana, waves, MARIANA, capsys, also_program=True)


@pytest.mark.slow
@pytest.mark.cosim
@pytest.mark.xdist_group("check_waves")
@pytest.mark.parametrize("name", ["amaranth.vcd", "amaranth.fst"])
def test_amaranth_passes_check_waves(mariana, tmp_path, capsys, name):
    """Amaranth's simulator: the waveform holds the reset before the run (cosim/amaranth_sim.py) and
    the engine's ports under the names of its signature members (`host__word`)."""
    waves = tmp_path / name
    _cosim(mariana, waves, MARIANA, "--sim", "amaranth")
    _passes_and_catches(mariana, waves, MARIANA, capsys)


@pytest.mark.slow
@pytest.mark.cosim                      # the traced build of test_cosim_waves.py's compiled-harness test
@pytest.mark.verilator
@pytest.mark.xdist_group("cayman")
def test_compiled_harness_passes_check_waves(cayman, tmp_path, capsys):
    """The compiled Verilator harness, FST of everything: a traced run reads the last PSUM word once
    more, so its data is sampled at a rising edge (cosim/harness.py)."""
    toolchain.ensure_fst_headers()
    waves = tmp_path / "harness.fst"
    _cosim(cayman, waves, CAYMAN, "--opt=-O0")
    _passes_and_catches(cayman, waves, CAYMAN, capsys)


@pytest.mark.slow
@pytest.mark.cosim                      # the traced build of test_cosim_waves.py's cocotb-on-Verilator test
@pytest.mark.verilator
@pytest.mark.xdist_group("cayman")
def test_cocotb_verilator_passes_check_waves(cayman, tmp_path, capsys):
    waves = tmp_path / "cocotb.vcd"
    _cosim(cayman, waves, CAYMAN, "--harness", "cocotb", "--waves-depth", "2", "--opt=-O0")
    _passes_and_catches(cayman, waves, CAYMAN, capsys, also_program=True)
