"""The exported engine Verilog on Verilator (default) or Icarus Verilog, through cocotb's Python runner.

    export_cached(config)        -> <cache>/verilog/<config>-<source hash>/ (rtl.export.export_engine)
    build_cached(exported, sim)  -> <cache>/sim/<sim>-<Verilog + flags hash>/ (cocotb_tools.runner)
    run(program, sim=...)        -> HdlResult: the lockstep of cosim/lockstep.py, run by cosim/cocotb_bench.py

<cache> is $TENSORE_CACHE or build/ in the working directory (toolchain.cache_root, D-T67).  Both
caches are keyed by content: the export by a hash of the RTL and model sources and the
configuration, the simulator build by a hash of the Verilog and the build flags (a traced build by
its waveform format and depth too, beside the untraced one), so a second run reuses both.  A lock
file per directory lets parallel test workers share one build.  Exports and builds show their
progress (cosim/progress.py) when given a `log`."""
from __future__ import annotations

import fcntl
import hashlib
import json
import os
import pickle
import re
import resource
import shutil
import sys
import tempfile
import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from tensore.cosim import toolchain
from tensore.cosim.lockstep import Lockstep, fit_ports, one_array
from tensore.cosim.mismatch import Mismatch
from tensore.cosim.progress import Progress, VerilatorMeter, run_logged, silent
from tensore.cosim.wave_request import Trace
from tensore.model.dtypes import Dtype
from tensore.model.isa.enums import Opcode
from tensore.rtl.config import Config

ROOT = Path(__file__).resolve().parent.parent
SIMS = ("verilator", "icarus")
COSIM_TOP = "tensore_engine_cosim"
VERILATOR_FLAGS = ("-Wno-fatal", "-Wno-lint", "-Wno-style", "--x-assign", "fast", "--x-initial", "fast")


@contextmanager
def locked(directory: Path):
    """Hold `directory`'s lock file (created with the directory): one process at a time builds or
    exports into it, so parallel test workers share one build."""
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
    out = toolchain.cache_root() / "verilog" / f"{cfg.label}-{_source_hash()}"
    with locked(out):
        info_file = out / "engine.json"
        if not info_file.exists():
            from tensore.rtl.export import export_engine
            log(f"exporting Verilog for {cfg.label} ...")
            t0 = time.perf_counter()
            with Progress("export", log, stage="Amaranth -> Verilog (Yosys), loop form"):
                export_engine(cfg.gen, cfg.rows, cfg.cols, pack=cfg.pack, sbuf_latency=cfg.sbuf_latency,
                              psum_partitions=cfg.psum_partitions, out_dir=out, dtypes=cfg.dtypes,
                              psum_ports=cfg.psum_ports, sparse32=cfg.sparse32, timing=cfg.timing)
            log(f"  exported in {time.perf_counter() - t0:.1f} s -> {out}")
        info = json.loads(info_file.read_text())
    return info | {"dir": str(out)}


def _flags(sim: str) -> list[str]:
    return list(VERILATOR_FLAGS) if sim == "verilator" else []


def as_trace(waves) -> Trace | None:
    """A build's tracing: None (untraced), a Trace, or True for a VCD of everything."""
    if waves is None or waves is False:
        return None
    return Trace() if waves is True else waves


def trace_flags(trace: Trace | None, log=print) -> list[str]:
    """Verilator's tracing options (D-T66): the format, every array element and width."""
    if trace is None:
        return []
    if trace.fmt == "fst":
        toolchain.ensure_fst_headers(log)
    return ["--trace-fst" if trace.fmt == "fst" else "--trace", "--trace-max-array", str(1 << 16),
            "--trace-max-width", str(1 << 16)]


def trace_rules(trace: Trace | None) -> str:
    """Control-file rules that trace `depth` levels of the logical hierarchy, the cosim wrapper being
    level 1 (Verilator's --trace-depth counts modules after inlining, which keeps nearly everything)."""
    if trace is None or not trace.depth:
        return ""
    return f'tracing_off -scope "{COSIM_TOP}.*"\ntracing_on -scope "{COSIM_TOP}" -levels {trace.depth}'


def forms(array_form: str) -> tuple[str, str]:
    """(file list, Verilator control file) of an array form (D-T60)."""
    return ("files_sim.f", "verilator_sim.vlt") if array_form == "loop" else ("files.f", "verilator.vlt")


def traced_form(trace: Trace | None, array_form: str = "loop") -> tuple[str, bool]:
    """(array form, hierarchical blocks) of a Verilator build (D-T66).  Untraced, or traced to a depth:
    `array_form` with its hierarchical blocks.  Traced in full: `array_form` with every module
    inlined (Verilator traces nothing inside a hierarchical block), so every PE's registers appear
    by name: in the loop form as the arrays `pe_<register>[row][col]` (rtl/array_loop.py)."""
    return array_form, trace is None or bool(trace.depth)


def control_file(exported: dict, array_form: str, hierarchical: bool, trace: Trace | None = None,
                 extra: str = "") -> str:
    """The Verilator control file of a build: the export's (without its hierarchical blocks if asked),
    the trace's depth rules and `extra`."""
    text = (Path(exported["dir"]) / forms(array_form)[1]).read_text()
    lines = [ln for ln in text.splitlines()[1:] if hierarchical or not ln.startswith("hier_block")]
    return "\n".join(["`verilator_config", *lines, trace_rules(trace), extra]).rstrip() + "\n"


def ensure_icarus(log=print):
    """Icarus Verilog from Debian's packages (the Makefile's `icarus` target does the same)."""
    if not toolchain.have_icarus():
        toolchain.apt_install(["iverilog"], "Icarus Verilog (iverilog, vvp)", "the cocotb runs on Icarus need it", log,
                              present=toolchain.have_icarus)


def build_cached(exported: dict, sim: str = "verilator", *, waves=None, opt: str | None = None,
                 array_form: str = "loop", log=print) -> dict:
    """Compile the exported Verilog for `sim`; reused while Verilog and flags match.  `opt` is the C++
    optimisation of a Verilator build (`toolchain.cxx_opt`): -O0 builds twice as fast as -O1, for
    short test programs.
    `waves` (a Trace; True: a VCD of everything) makes a traced Verilator build (`traced_form`: of
    everything, the loop form with every block inlined, the PEs' registers as `pe_<register>[row][col]`; to a depth, the untraced
    build's form; D-T66), cached beside the untraced one; an Icarus build serves traced and
    untraced runs alike (the format and depth are chosen when it runs)."""
    if sim not in SIMS:
        raise ValueError(f"unknown simulator {sim!r}; one of {', '.join(SIMS)}")
    opt = toolchain.cxx_opt(opt)
    trace = as_trace(waves) if sim == "verilator" else None
    array_form, hier = traced_form(trace, array_form) if sim == "verilator" else ("structural", False)
    flags = _flags(sim) + trace_flags(trace, log)
    extra = _ICARUS_DUMP if sim == "icarus" else ""
    key = hashlib.sha256(f"{exported['digest']}|{sim}|hier={hier}|{trace and trace.key}|{flags}|{opt}|{COSIM_TOP}|"
                         f"{array_form}|{extra}|{trace_rules(trace)}".encode()).hexdigest()[:16]
    out = toolchain.cache_root() / "sim" / f"{sim}-{exported['top']}-{key}"
    stamp = out / "built.json"
    with locked(out):
        if not stamp.exists():
            if sim == "icarus":
                ensure_icarus(log)
            else:
                toolchain.use_verilator()
            d = Path(exported["dir"])
            sources = [d / f for f in (d / forms(array_form)[0]).read_text().split()]
            log(f"building the {sim} model of {exported['top']} ({exported['rows']}x{exported['cols']}"
                f"{', traced' if trace else ''}) ...")
            t0 = time.perf_counter()
            with open(out / "build.log", "w") as logf:
                if sim == "verilator":
                    _verilator_build(exported, sources, out, flags, opt, logf, array_form, hier, trace, log)
                else:
                    _icarus_build(exported, sources, out, logf, log)
            seconds = time.perf_counter() - t0
            peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
            stamp.write_text(json.dumps({"seconds": round(seconds, 1), "peak_child_mb": round(peak),
                                         "flags": flags, "opt": opt, "waves": trace and trace.key}))
            log(f"  built in {seconds:.1f} s")
        built = json.loads(stamp.read_text())
    return built | {"dir": str(out), "sim": sim, "top": COSIM_TOP, "trace": trace, "stamp": str(stamp)}


# Icarus's waveform: a second top whose $dumpvars runs when the run names a file (cocotb's own dump
# module fixes the depth at 0 and the file at <build>/<top>.fst)
_ICARUS_DUMP = f"""// the waveform of a run that asks for one (cosim/hdl.py)
module tensore_dump();
  string path;
  integer depth;
  initial begin
    if ($value$plusargs("tensore_waves=%s", path)) begin
      if (!$value$plusargs("tensore_waves_depth=%d", depth)) depth = 0;
      $dumpfile(path);
      $dumpvars(depth, {COSIM_TOP});
    end
  end
endmodule
"""


def _icarus_build(exported: dict, sources: list, out: Path, logf, log):
    from cocotb_tools.runner import get_runner
    sources = [icarus_source(f, out) for f in sources]
    dump = out / "tensore_dump.v"
    dump.write_text(_ICARUS_DUMP)
    with Progress("build", log, stage="iverilog"), _redirect(logf):
        get_runner("icarus").build(sources=[*sources, wrapper(exported, out), dump], hdl_toplevel=COSIM_TOP,
                                   build_dir=out / "obj", build_args=["-s", "tensore_dump"],
                                   timescale=("1ns", "1ps"), always=True)


def _icarus_runner(fmt: str):
    """cocotb's Icarus runner with the waveform format of the run (cocotb passes `-fst`)."""
    from cocotb_tools.runner import Icarus

    class Runner(Icarus):
        def _test_command(self):
            return [[f"-{fmt}" if a == "-fst" else a for a in cmd] for cmd in super()._test_command()]
    return Runner()


_TRIGGER = re.compile(r"reg (\\\$auto\$verilog_backend\.cc:\d+:dump_module\$\d+ ) = 0;")


def icarus_source(path: Path, out: Path) -> Path:
    """Yosys's Verilog starts its `always @*` blocks by declaring `reg trigger = 0` that every block
    reads; Icarus runs that initialiser without an event, so the blocks would wait for their first
    input change with X outputs.  A copy whose trigger also changes at 1 ps evaluates them all (the
    export already writes input-less `always @*` blocks as `initial` blocks, rtl/export.CONST_ALWAYS)."""
    text = path.read_text()
    fixed = _TRIGGER.sub(lambda m: f"reg {m.group(1)} = 0;\n  initial #1 {m.group(1)} = 1;", text)
    if fixed == text:
        return path
    copy = out / path.name
    copy.write_text(fixed)
    return copy


def wrapper(exported: dict, out: Path) -> Path:
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


def _verilator_build(exported: dict, sources: list, out: Path, flags: list, opt: str, logf,
                     array_form: str = "loop", hierarchical: bool = True, trace: Trace | None = None, log=print):
    """cocotb's Verilator build (its main, its VPI library, the executable name its runner runs)
    with only the wrapper's ports public."""
    import cocotb_tools.config as cfg
    vlt = out / "cosim.vlt"
    vlt.write_text(control_file(exported, array_form, hierarchical, trace,
                                f'public_flat_rw -module "{COSIM_TOP}" -var "*"'))
    cmd = ["verilator", "-cc", "--exe", "-Mdir", str(out / "obj"), "--top-module", COSIM_TOP, "--vpi", "--prefix",
           "Vtop", "-o", COSIM_TOP, "-LDFLAGS", f"-Wl,-rpath,{cfg.libs_dir} -L{cfg.libs_dir} -lcocotbvpi_verilator",
           *flags, "--timescale", "1ns/1ps", str(cfg.share_dir / "lib" / "verilator" / "verilator.cpp"), str(vlt),
           *map(str, sources), str(wrapper(exported, out))]
    verilate(cmd, out, opt, logf, log, hierarchical=hierarchical)


def verilate(cmd: list, out: Path, opt: str, logf, log=print, *, hierarchical: bool = True) -> None:
    """Run a Verilator `--build` of `cmd` (hierarchical: the blocks its .vlt names are Verilated and
    compiled once each) with `opt` for the C++, its output to `logf`, its progress shown.  The build
    starts from an empty `out`/obj: one is made only where no finished build is stamped, so anything
    there is an interrupted build's, whose up-to-date Verilator outputs without their makefile
    (hierarchical) fail every later build; the objects come back from ccache."""
    shutil.rmtree(out / "obj", ignore_errors=True)
    env = toolchain.verilator_env()
    make_flags = f"{env['MAKEFLAGS']} OPT_FAST={opt} OPT_SLOW=-O0 OPT_GLOBAL={opt}"
    cmd = [cmd[0], *(["--hierarchical"] if hierarchical else []), "--build", "-j", str(os.cpu_count() or 2),
           "-MAKEFLAGS", make_flags, *cmd[1:]]
    with Progress("build", log) as progress:
        code = run_logged(cmd, logf, env=env, meter=VerilatorMeter(progress, out / "obj"))
        if code:
            progress.update(stage=f"failed (exit {code})")
    toolchain.drop_pch(out / "obj")
    if code:
        raise RuntimeError(f"the Verilator build failed; see {out / 'build.log'}")


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


def simulate(lk: Lockstep, built: dict, *, waves_to: str | Path | None = None, trace: Trace | None = None
             ) -> HdlResult:
    """Run the lockstep on a built model (cosim/cocotb_bench.py in the simulator process)."""
    return simulate_many([lk], built, waves_to=waves_to, trace=trace)[0]


def _waves_file(built: dict, work: Path, waves_to, trace: Trace | None) -> tuple:
    """(trace, waveform path) of a run: Verilator's build fixes the format and depth; Icarus takes
    them from `trace` (or the file's suffix); with no file named, one in the run's directory."""
    if built["sim"] == "verilator":
        trace = built["trace"]
        if trace is None:
            if waves_to:
                raise ValueError("this Verilator build has no tracing; build it with waves")
            return None, None
    elif trace is None and waves_to:
        trace = Trace.of(waves_to)
    if trace is None:
        return None, None
    path = Path(waves_to).resolve() if waves_to else work / f"waves.{trace.fmt}"
    path.parent.mkdir(parents=True, exist_ok=True)
    return trace, path


def simulate_many(lks: list, built: dict, *, waves_to: str | Path | None = None, trace: Trace | None = None) -> list:
    """Run locksteps one after another in one simulator process, with a reset before each.  A traced
    run writes its waveform whether or not it passes: to `waves_to`, else into the run's directory."""
    from cocotb_tools.runner import get_runner
    if built["sim"] == "verilator":
        toolchain.use_verilator()
    work = Path(tempfile.mkdtemp(prefix="run-", dir=Path(built["dir"])))
    trace, wave_path = _waves_file(built, work, waves_to, trace)
    job, result = work / "job.pkl", work / "result.json"
    with open(job, "wb") as f:
        pickle.dump({"locksteps": lks, "result": str(result)}, f)
    if built["sim"] == "icarus":
        runner = _icarus_runner(trace.fmt if trace else "vcd")
        args = {"plusargs": [f"+tensore_waves={wave_path}", f"+tensore_waves_depth={trace.depth}"] if trace else []}
    else:
        runner = get_runner(built["sim"])
        args = {"test_args": ["--trace-file", str(wave_path)] if trace else []}
    env = {"TENSORE_JOB": str(job), "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]),
           "COCOTB_LOG_LEVEL": "WARNING"}
    log = work / "sim.log"
    with open(log, "w") as logf, _redirect(logf):
        runner.test(test_module="tensore.cosim.cocotb_bench", hdl_toplevel=built["top"], hdl_toplevel_lang="verilog",
                    build_dir=Path(built["dir"]) / "obj", test_dir=work, extra_env=env, waves=trace is not None,
                    timescale=("1ns", "1ps"), **args)
    job.unlink()                        # the SBUF images; the log and any waveform stay for the report
    if not result.exists():
        raise RuntimeError(f"the {built['sim']} simulation did not finish; see {log}")
    if wave_path is not None and not wave_path.exists():
        raise RuntimeError(f"the {built['sim']} simulation wrote no waveform to {wave_path}; see {log}")
    waves = str(wave_path) if wave_path else None
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
        if o.name.startswith("matmul") and o.uop.xpose:
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


PACKED_OPS = (Opcode.LDWEIGHTS, Opcode.LDTAGS, Opcode.LDWEIGHTS_MX, Opcode.MATMUL, Opcode.MATMUL_SPARSE,
              Opcode.MATMUL_MX)


def needed_pack(lk) -> tuple:
    """(elements per PE, the first micro-op needing them): the most a program's executed weight loads
    and matmuls use (the golden run), which the engine must be built with (rtl/top.py raises
    `unsupported` above its pack)."""
    need, first = 1, None
    for o in lk.trace.ops:
        if o.t_issue is not None and o.desc.op in PACKED_OPS and o.uop.pack > need:
            need, first = o.uop.pack, o
    return need, first


def fit_pack(lks, pack: int | None = None) -> int:
    """The elements per PE to build for (D-T67): `pack` when given and enough (a one-line error naming
    the pack to build otherwise), else the programs' default (Lockstep.pack: the program's own or the
    generation's) raised to what they need."""
    (need, op), lk = max(((needed_pack(lk), lk) for lk in lks), key=lambda x: x[0][0])
    if pack:
        if need > pack:
            raise ValueError(f"program {lk.program.name} needs {need} elements per PE (micro-op #{op.index} "
                             f"{op.name}); the engine is built with {pack}: build it with --pack {need}, or leave "
                             "--pack out to fit the program")
        return pack
    return max(need, *(lk.pack for lk in lks))


def fit_sparse32(lks, sparse32: bool | None = None) -> bool:
    """Whether to build with 32-bit MatmulSparse fmaps (D-T40 (3)): `sparse32` when given (False with
    a program that needs them is a one-line error), else whether a program needs them
    (Lockstep.need_sparse32: an executed MatmulSparse of FP32 values, the golden run)."""
    need = [lk for lk in lks if lk.need_sparse32]
    if sparse32 is False and need:
        raise ValueError(f"program {need[0].program.name} runs a MatmulSparse of 32-bit values; the engine is built "
                         "without 32-bit sparse fmaps: build it with them, or leave the choice out to fit the program")
    return bool(need) if sparse32 is None else sparse32


def run(program, *, sim="verilator", waves=False, waves_to=None, waves_depth=0, pack=None, sbuf_latency=2,
        psum_partitions=16, opt=None, tamper=None, compare=True, harness=None, dtypes=None, log=silent,
        mismatch_waves=True) -> HdlResult:
    """Export (cached), build (cached) and run `program` in lockstep on `sim` (`compare=False`: the
    same stimulus without the per-cycle checks, for measuring their cost).  The engine has `pack`
    elements per PE, or as many as the program needs (`fit_pack`); `waves_to` names a waveform file
    (.fst or .vcd) of `waves_depth` levels (0: everything).  `mismatch_waves=False`: a mismatch of
    the compiled harness is reported without its re-run for a waveform (D-T66 (2))."""
    lk = Lockstep(program, sbuf_latency=sbuf_latency, pack=pack, psum_partitions=psum_partitions, tamper=tamper)
    lk.pack = fit_pack([lk], pack)
    lk.compare = compare
    cfg = Config.of(program, pack=lk.pack, sbuf_latency=sbuf_latency, psum_partitions=psum_partitions, dtypes=dtypes,
                    psum_ports=fit_ports([lk]), sparse32=fit_sparse32([lk]))
    return run_locksteps([lk], cfg, sim=sim, waves=waves, waves_to=waves_to, waves_depth=waves_depth, opt=opt,
                         harness=harness, log=log, mismatch_waves=mismatch_waves)[0]


def run_locksteps(lks, cfg: Config, *, sim="verilator", waves=False, waves_to=None, waves_depth=0, opt=None,
                  harness=None, log=silent, mismatch_waves=True) -> list:
    """Locksteps of one engine configuration in one simulator process, on the chosen harness
    (`mismatch_waves`: as `run`'s)."""
    check_dtypes(lks, cfg)
    opt = toolchain.cxx_opt(opt)
    trace = Trace.of(waves_to, waves_depth) if waves_to else Trace(depth=waves_depth) if waves else None
    exported = export_cached(cfg, log=log)
    if _harness(sim, harness) == "compiled":
        from tensore.cosim import harness as compiled
        built = compiled.build(exported, trace=trace, opt=opt, log=log)
        return compiled.simulate_many(lks, built, waves_to=waves_to, log=log, mismatch_waves=mismatch_waves)
    built = build_cached(exported, sim, waves=trace, opt=opt, log=log)
    return simulate_many(lks, built, waves_to=waves_to, trace=trace)


def run_many(programs, *, sim="verilator", pack=None, sbuf_latency=2, psum_partitions=16, opt=None, harness=None,
             dtypes=None, log=silent) -> list:
    """Programs of one generation and array size on one build (the most elements per PE any of them
    needs, `fit_pack`) and in one simulator process: a list of HdlResult, one per program."""
    p0 = one_array(programs)
    lks = [Lockstep(p, sbuf_latency=sbuf_latency, pack=pack, psum_partitions=psum_partitions) for p in programs]
    fit = fit_pack(lks, pack)
    for lk in lks:
        lk.pack = fit
    cfg = Config.of(p0, pack=fit, sbuf_latency=sbuf_latency, psum_partitions=psum_partitions, dtypes=dtypes,
                    psum_ports=fit_ports(lks), sparse32=fit_sparse32(lks))
    return run_locksteps(lks, cfg, sim=sim, opt=opt, harness=harness, log=log)
