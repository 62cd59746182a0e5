"""Waveforms and builds (D-T66, D-T67): the format follows the file's suffix on every simulator, the
file is written under the name given whether or not the run passes, `--waves-depth` (default:
everything, the PEs' registers included) cuts the hierarchy, a traced build is cached beside the
untraced one, builds show progress as plain lines when not on a terminal, the cache honours
TENSORE_CACHE, and cosim picks the elements per PE a program needs before building.  The two tests
that need traced Verilator builds of their own run in `make cosim`; Icarus and Amaranth share the
builds of tests/test_cosim_hdl.py and run in `make test`."""
import dataclasses
import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from tensore.cosim import hdl, toolchain
from tensore.cosim import programs as P
from tensore.cosim.lockstep import Lockstep
from tensore.cosim.wave_request import Trace, convert_vcd, hierarchy, signals
from tensore.rtl.fp.pe_mac import parse_dtypes
from tests.test_savefile import assert_named_signals_exist

ROOT = Path(__file__).resolve().parent.parent
PE_REGS = {"active", "psum_out"}            # the PE's weight and partial-sum registers (rtl/pe.py)
LOOP_REGS = PE_REGS | {"shadow", "pending", "acc"}    # each named in the loop form (rtl/loopform.py)
# the small engine of tests/test_rtl_specialised.py: CAYMAN 4 x 4, bf16 only, one element per PE, -O0
BF16 = parse_dtypes("cayman", ["bf16"])
SMALL = dict(dtypes=BF16, pack=1, opt="-O0")


def _prog():
    return P.accumulate_group("cayman", rows=4, cols=4, n=8)


def _pe_regs(names, regs=PE_REGS) -> set:
    """The PE register names of `regs` among a waveform's signals (a signal in a PE's scope)."""
    out = set()
    for n in names:
        parts = re.sub(r" \[\d+:\d+\]$", "", n).split(".")
        if parts[-1] in regs and any(re.match(r"pe\d*(\[\d+\])?$", p) for p in parts[:-1]):
            out.add(parts[-1])                                   # structural: ...pe[c].u.active
        # loop form: pe_active[r][c], or pe_active_16[r][c] for a part Yosys split out (rtl/loopform.py)
        loop = re.match(r"pe_(\w+?)(_\d+)?((\[\d+\])|(\(\d+\)))*$", parts[-1])
        if loop and loop.group(1) in regs:
            out.add(loop.group(1))
    return out


def _levels(path, top: str) -> int:
    """The deepest scope holding signals in a waveform file, `top` (the cosim wrapper) being level 1."""
    return max(len(p) - p.index(top) for p in (s.split(".") for s in hierarchy(path)[0]) if top in p)


def _is_fst(path) -> bool:
    return not Path(path).read_bytes()[:64].lstrip().startswith(b"$")


def _tamper(trace):
    e = [e for e in trace.events if e.kind == "psum_write"][3]
    e.data["bits"] ^= 1 << 5


# -- requests, conversion, progress, cache, pack: no simulator build ---------------------------------------

def test_suffix_picks_the_format():
    assert Trace.of("a/run.FST") == Trace("fst", 0) and Trace.of("run.vcd", 3) == Trace("vcd", 3)
    for bad in ("run.txt", "run", "run.vcd.gz"):
        with pytest.raises(ValueError, match=r"\.fst .*\.vcd"):
            Trace.of(bad)
    with pytest.raises(ValueError, match="levels"):
        Trace.of("run.fst", -1)


def test_cli_refuses_a_bad_waveform_name_before_building(tmp_path):
    src = tmp_path / "prog.s"
    src.write_text(_prog().text)
    res = subprocess.run([sys.executable, "-m", "tensore.cli", "cosim", str(src), "--gen", "cayman", "--rows", "4",
                          "--waves", str(tmp_path / "out.txt")], capture_output=True, text=True, timeout=120,
                         env=dict(os.environ, TENSORE_CACHE=str(tmp_path / "cache")))
    assert res.returncode == 2, res.stderr
    assert res.stderr.count("\n") == 1 and ".fst" in res.stderr and "Traceback" not in res.stderr
    assert not (tmp_path / "cache").exists()                # nothing exported or built


def _tiny_vcd(path):
    path.write_text("$timescale 1 ns $end\n$scope module bench $end\n$scope module top $end\n"
                    "$var wire 1 ! clk $end\n$var wire 4 \" n $end\n$scope module pe0 $end\n"
                    "$var wire 8 # psum_out $end\n$upscope $end\n$upscope $end\n$upscope $end\n"
                    "$enddefinitions $end\n#0\n$dumpvars\n0!\nb0 \"\nb0 #\n$end\n#5\n1!\nb11 \"\nb1010 #\n#10\n0!\n")


def test_convert_vcd_to_fst_and_depth(tmp_path):
    """Amaranth's VCD becomes FST through pylibfst, every signal kept at depth 0, the PE dropped at 1."""
    src = tmp_path / "am.vcd"
    _tiny_vcd(src)
    full = convert_vcd(src, tmp_path / "full.fst")
    assert _is_fst(full) and sorted(signals(full)) == ["bench.top.clk", "bench.top.n", "bench.top.pe0.psum_out"]
    cut = convert_vcd(src, tmp_path / "cut.vcd", depth=1)
    assert sorted(signals(cut)) == ["bench.top.clk", "bench.top.n"]
    assert "b1010" not in cut.read_text() and "b11 \"" in cut.read_text()
    from pylibfst import ffi, fstReaderIterBlocks, get_scopes_signals2, lib
    ctx = lib.fstReaderOpen(str(full).encode())
    handle = get_scopes_signals2(ctx)[1].by_name["bench.top.pe0.psum_out"].handle
    lib.fstReaderSetFacProcessMask(ctx, handle)
    seen = []
    fstReaderIterBlocks(ctx, lambda _d, t, _h, v: seen.append((t, ffi.string(v).decode())))
    lib.fstReaderClose(ctx)
    assert seen == [(0, "00000000"), (5, "00001010")]


_FAKE_BUILD = r"""
import os, sys, time
obj = sys.argv[1]
os.makedirs(obj, exist_ok=True)
print("verilator -f Vtop__hierMkArgs.f", flush=True)
open(os.path.join(obj, "Vtop_classes.mk"), "w").write(
    "VM_PARALLEL_BUILDS = 1\nVM_CLASSES_FAST += \\\n  Vtop \\\n  Vtop__0 \\\n\nVM_CLASSES_SLOW += \\\n"
    "  Vtop__Slow \\\n\nVM_GLOBAL_FAST += \\\n  verilated \\\n\n")
print("- Verilator: Built from 1.0 MB sources in 3 modules, into 0.1 MB in 4 C++ files", flush=True)
for f in ["-x c++-header Vtop__pch.h -o Vtop__pch.h.fast.gch", "-x c++-header Vtop__pch.h -o Vtop__pch.h.slow.gch",
          "-c -o Vtop.o Vtop.cpp", "-c -o Vtop__0.o Vtop__0.cpp", "-c -o Vtop__Slow.o Vtop__Slow.cpp",
          "-c -o verilated.o verilated.cpp"]:
    print("g++ -O0 -I. " + f, flush=True)
print("g++    verilated.o Vtop__ALL.a       -o harness", flush=True)
"""


def _fake_build_code(tmp_path) -> str:
    """A process that runs a fake Verilator build (_FAKE_BUILD) through the progress meter."""
    script = tmp_path / "fake_build.py"
    script.write_text(_FAKE_BUILD)
    return ("import sys; from pathlib import Path\n"
            "from tensore.cosim.progress import Progress, VerilatorMeter, run_logged\n"
            f"obj = Path({str(tmp_path / 'obj')!r})\n"
            "with open(obj.parent / 'build.log', 'w') as logf, Progress('build', print) as p:\n"
            f"    rc = run_logged([sys.executable, {str(script)!r}, str(obj)], logf, meter=VerilatorMeter(p, obj))\n"
            "sys.exit(rc)\n")


def test_build_progress_is_plain_lines_off_a_terminal(tmp_path):
    """A build's output through the progress meter, in a process whose stderr is a pipe: plain lines
    with the stage, files compiled of the number planned and the elapsed time; its log keeps all."""
    code = _fake_build_code(tmp_path)
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60,
                         env=dict(os.environ, CI="", TERM="xterm"))
    assert res.returncode == 0, res.stderr
    lines = res.stderr.splitlines()
    assert "\r" not in res.stderr and "\x1b" not in res.stderr
    assert any(re.fullmatch(r"  build: Verilating, \d+ s", ln) for ln in lines), lines
    assert lines[-1].startswith("  build: done, 6/6 files, ") and lines[-1].endswith(" s"), lines
    assert "g++ -O0 -I. -c -o Vtop.o Vtop.cpp" in (tmp_path / "build.log").read_text()


def test_build_progress_is_a_bar_on_a_terminal(tmp_path):
    """The same build with stderr on a terminal: one line redrawn in place, with a bar."""
    import pty
    code = _fake_build_code(tmp_path)
    leader, follower = pty.openpty()
    env = {k: v for k, v in os.environ.items() if k != "CI"} | {"TERM": "xterm"}
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.DEVNULL, stderr=follower, env=env)
    os.close(follower)
    out = b""
    while True:
        try:
            chunk = os.read(leader, 4096)
        except OSError:
            break
        if not chunk:
            break
        out += chunk
    assert proc.wait(timeout=60) == 0
    text = out.decode()
    assert "\r\x1b[K  build: " in text and "[########################] 6/6 files" in text, text
    assert text.count("\n") <= 2                          # redrawn in place, one line at the end


def test_cache_root(tmp_path, monkeypatch):
    monkeypatch.delenv(toolchain.CACHE_ENV, raising=False)
    monkeypatch.chdir(tmp_path)
    assert toolchain.cache_root() == tmp_path.resolve() / "build"
    monkeypatch.setenv(toolchain.CACHE_ENV, str(tmp_path / "c"))
    assert toolchain.cache_root() == (tmp_path / "c").resolve()


def test_export_goes_to_tensore_cache_with_progress(tmp_path, monkeypatch, capfd):
    """export_cached writes under $TENSORE_CACHE (never the source tree) and shows its progress."""
    import json

    import tensore.rtl.export as export

    def fake_export(gen, rows, cols, *, out_dir, **kw):
        Path(out_dir, "engine.json").write_text(json.dumps({"top": "tensore_engine", "digest": "x"}))
    monkeypatch.setattr(export, "export_engine", fake_export)
    monkeypatch.setenv(toolchain.CACHE_ENV, str(tmp_path / "cache"))
    got = hdl.export_cached(hdl.Config("CAYMAN", 4, 4, 1, psum_partitions=16), log=print)
    assert Path(got["dir"]).parent == (tmp_path / "cache" / "verilog").resolve()
    assert not str(got["dir"]).startswith(str(ROOT / "build"))
    err = capfd.readouterr().err
    assert "  export: Amaranth -> Verilog" in err and "  export: done" in err


def test_pack_fits_the_program():
    """An MX quad-row program needs 4 elements per PE: picked when no pack is given, refused (naming
    the pack to build) when a smaller one is, before anything is built."""
    mx = dataclasses.replace(P.mx("mariana", "fp8_e4m3", "quad_row", rows=8, cols=4, n=4), pack=0)
    lk = Lockstep(mx)
    assert lk.pack == 2 and hdl.needed_pack(lk)[0] == 4
    assert hdl.fit_pack([lk]) == 4 and hdl.fit_pack([lk], 8) == 8
    with pytest.raises(ValueError, match=r"needs 4 elements per PE .*--pack 4"):
        hdl.fit_pack([lk], 2)
    plain = Lockstep(_prog())
    assert hdl.needed_pack(plain)[0] == 1 and hdl.fit_pack([plain]) == 2       # CAYMAN's default
    assert hdl.fit_pack([plain, lk]) == 4


def test_cli_pack_too_small_is_refused(tmp_path):
    mx = P.mx("mariana", "fp8_e4m3", "quad_row", rows=8, cols=4, n=4)
    src, image = tmp_path / "mx.s", tmp_path / "mx.npz"
    src.write_text(mx.text)
    np.savez(image, sbuf=mx.sbuf)
    res = subprocess.run([sys.executable, "-m", "tensore.cli", "cosim", str(src), "--gen", "mariana", "--rows", "8",
                          "--cols", "4", "--sbuf", str(image), "--pack", "2"], capture_output=True, text=True,
                         timeout=120, env=dict(os.environ, TENSORE_CACHE=str(tmp_path / "cache")))
    assert res.returncode == 2 and "--pack 4" in res.stderr and "Traceback" not in res.stderr, res.stderr
    assert not (tmp_path / "cache").exists()


# -- simulators -------------------------------------------------------------------------------------------

@pytest.mark.slow
@pytest.mark.xdist_group("cayman")
def test_amaranth_writes_fst_always(tmp_path):
    """Amaranth's simulator: the file under the name given, in the format of its suffix (FST through
    pylibfst), the PE registers in it at full depth, for a passing run and for a failing one."""
    from tensore.cosim import lockstep
    out = tmp_path / "waves"
    prog = P.single("cayman", "bf16", rows=4, cols=4, n=2)
    for name, tamper in (("amaranth_pass.fst", None), ("amaranth_fail.vcd", _tamper)):
        path = out / name
        bad = lockstep.run_waves(prog, path, tamper=tamper)
        assert (bad is None) == (tamper is None) and path.exists() and _is_fst(path) == name.endswith(".fst")
        assert bad is None or bad.vcd == str(path.resolve())
        assert _pe_regs(signals(path)) == PE_REGS
    from tensore.cosim import savefile
    assert_named_signals_exist(savefile.text(out / "amaranth_pass.fst"), out / "amaranth_pass.fst")


@pytest.mark.cosim                      # a traced Verilator build of its own: minutes (make cosim)
@pytest.mark.verilator
@pytest.mark.xdist_group("cayman")
def test_compiled_harness_waves_and_cache(tmp_path):
    """The compiled harness: FST by the suffix, PE registers at full depth, written for a passing and a
    failing run; the traced build sits beside the untraced one, which toggling waves never rebuilds."""
    from tensore.cosim import harness
    toolchain.ensure_fst_headers()
    prog = _prog()
    exported = hdl.export_cached(hdl.Config.of(prog, pack=1, dtypes=BF16), log=lambda *a: None)
    plain = harness.build(exported, opt="-O0", log=lambda *a: None)
    stamp = Path(plain["stamp"]).stat().st_mtime_ns
    out = tmp_path / "waves"
    ok, bad = out / "harness_pass.fst", out / "harness_fail.fst"
    res = hdl.run(prog, waves_to=ok, **SMALL)
    assert res.mismatch is None and res.waves == str(ok.resolve()) and _is_fst(ok)
    assert _pe_regs(signals(ok), LOOP_REGS) == LOOP_REGS
    assert_named_signals_exist(ok.with_suffix(".gtkw").read_text(), ok)        # the save file beside it
    traced = res.build
    assert traced["dir"] != plain["dir"] and traced["trace"] == Trace("fst", 0)
    res = hdl.run(prog, waves_to=bad, tamper=_tamper, **SMALL)
    assert res.mismatch is not None and res.mismatch.vcd == str(bad.resolve()) and _is_fst(bad)
    again = hdl.run(prog, **SMALL)                           # waves off again: the untraced build, as it was
    assert again.mismatch is None and again.build["dir"] == plain["dir"]
    assert Path(plain["stamp"]).stat().st_mtime_ns == stamp
    keys = {str(harness.plan(exported, t, o)["dir"]) for t, o in ((None, "-O0"), (Trace("fst", 0), "-O0"),
            (Trace("vcd", 0), "-O0"), (Trace("fst", 2), "-O0"), (Trace("fst", 9), "-O0"), (Trace("fst", 0), "-O1"))}
    assert len(keys) == 6 and {plain["dir"], traced["dir"]} <= keys       # format, depth and opt in the key


@pytest.mark.cosim                      # a traced Verilator build of its own: minutes (make cosim)
@pytest.mark.verilator
@pytest.mark.xdist_group("cayman")
def test_cocotb_verilator_vcd_depth(tmp_path):
    """cocotb on Verilator: a VCD under the name given, two levels deep (the wrapper and the engine)."""
    path = tmp_path / "waves" / "cocotb_d2.vcd"
    res = hdl.run(_prog(), harness="cocotb", waves_to=path, waves_depth=2, **SMALL)
    assert res.mismatch is None and path.exists() and not _is_fst(path)
    assert _levels(path, "tensore_engine_cosim") == 2 and not _pe_regs(signals(path))


@pytest.mark.slow
@pytest.mark.xdist_group("mariana")
def test_icarus_formats_and_depth(tmp_path):
    """Icarus: one build writes VCD or FST as the suffix says, at the depth asked for, PEs included at
    full depth; the build does not change with the waveform request."""
    hdl.ensure_icarus()
    out = tmp_path / "waves"
    prog = P.single("mariana", "bf16", n=4)                 # the Icarus engine of tests/test_cosim_hdl.py
    runs = {}
    for name, depth in (("icarus.fst", 0), ("icarus_d1.vcd", 1)):
        path = out / name
        res = hdl.run(prog, sim="icarus", waves_to=path, waves_depth=depth)
        assert res.mismatch is None and path.exists() and _is_fst(path) == name.endswith(".fst")
        runs[name] = res
    assert len({r.build["dir"] for r in runs.values()}) == 1
    assert _pe_regs(signals(out / "icarus.fst")) == PE_REGS
    from tensore.cosim import savefile
    assert_named_signals_exist(savefile.text(out / "icarus.fst"), out / "icarus.fst")
    assert _levels(out / "icarus_d1.vcd", "tensore_engine_cosim") == 1
