"""Verilog for external simulators: one definition per block, instantiated many times (D-T35, D-T39).

`export_array` writes the array alone; `export_engine` the whole engine (rtl/top.py): the top,
converted by Amaranth with its blocks as black boxes (rtl/blackbox.py), and each block the design
instantiates (`blocks()`, recursively: the array, its row and PE, the row port and the row ports, the
PSUM partition and bank, the PSUM write crossbar, a write-back column, a weight-state row, D-T79;
the sequencer, the load unit and its LUT table, the launch and write-back units, D-T82) once.  A
block with its own writer (`verilog()`: the structural row and array of rtl/array.py, the row ports
of rtl/rows.py, the PSUM bank of rtl/psum_bank.py, the behavioural crossbar of rtl/psum_xbar.py)
uses it; the others are converted by Amaranth.  tests/test_rtl_export.py proves
each writer's module the same circuit as its Amaranth form."""
from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

from amaranth.back import verilog
from amaranth.hdl import Shape
from amaranth.lib.wiring import In

from tensore.model.addrmap import PARTITIONS
from tensore.model.dtypes import Gen
from tensore.model.timing import DEFAULT_PROFILE
from tensore.rtl.array import Array
from tensore.rtl.array_loop import loop_array_verilog
from tensore.rtl.blackbox import convert_ports, ports, prototype
from tensore.rtl.config import PSUM_PORTS, Config

ENGINE_TOP = "tensore_engine"
JOBS_ENV = "TENSORE_EXPORT_JOBS"         # processes of an engine export (D-T82)


# an `always @*` block that reads nothing: the backend's constant value of the bits of a signal no
# statement drives (e.g. micro-op fields a generation does not use).  Event-driven simulators and
# Verilator (ALWNEVER) never run it, so those bits would keep their initial value (X, or random under
# `--x-initial unique`): the export writes it as an `initial` block.
CONST_ALWAYS = re.compile(r"  always @\*\n(    [^\n;]+ = \d+'[hbd][0-9a-fA-F]+;\n)")


def block_verilog(block, name: str | None = None) -> str:
    """A block's Verilog module: its own writer, or Amaranth's with rtl/blackbox.py's port names
    (its input-less `always @*` blocks as `initial` blocks, CONST_ALWAYS)."""
    if hasattr(block, "verilog"):
        return block.verilog()
    text = verilog.convert(block, name=name or block.module_name, ports=convert_ports(block), emit_src=False)
    return CONST_ALWAYS.sub(r"  initial begin\n\1  end\n", text)


def blocks_of(design) -> list:
    """Every block below `design` (its `blocks()`, recursively), each module once, leaves first."""
    out: dict = {}

    def walk(b):
        for sub in (b.blocks() if hasattr(b, "blocks") else []):
            if sub.module_name not in out:
                walk(sub)
                out[sub.module_name] = sub
    walk(design)
    return list(out.values())


def _write(out: Path, texts: dict, vlt_modules: list, comment: str) -> dict:
    """The files, files.f and verilator.vlt: the repeated blocks (`vlt_modules`) are hierarchical
    blocks, each Verilated and compiled once for all its instances when Verilator runs with
    --hierarchical (a `no_inline` PE still costs ~0.6 MB of C++ per instance: D-T41)."""
    out.mkdir(parents=True, exist_ok=True)
    for fname, text in texts.items():
        (out / fname).write_text(text)
    (out / "files.f").write_text("".join(f + "\n" for f in texts))
    (out / "verilator.vlt").write_text(
        "`verilator_config\n" f"// {comment}\n" + "".join(f'hier_block -module "{m}"\n' for m in vlt_modules))
    digest = hashlib.sha256("".join(texts[f] for f in sorted(texts)).encode()).hexdigest()[:16]
    return {"files": [out / f for f in texts], "filelist": out / "files.f", "vlt": out / "verilator.vlt",
            "digest": digest}


def export_array(gen, rows: int, cols: int, pack: int, out_dir, name: str = "tensore_array", *,
                 column_loads: bool = False, timing: str = DEFAULT_PROFILE) -> dict:
    """Write the PE, row-block and top modules, files.f and a Verilator control file (`column_loads`:
    the array with the column-serial weight writes; `timing`: the profile, whose row tiles give the
    array its taps, D-T100)."""
    array = Array(Config(gen, rows, cols, pack, timing=timing), column_loads=column_loads)
    row = array.blocks()[0]
    pe = row.blocks()[0]
    t0 = time.perf_counter()
    texts = {f"{pe.module_name}.v": block_verilog(pe), f"{row.module_name}.v": block_verilog(row),
             f"{name}.v": array.verilog(name)}
    seconds = time.perf_counter() - t0
    res = _write(Path(out_dir), texts, [pe.module_name, row.module_name],
                 f"one PE definition for {rows * cols} instances, one row definition for {rows}")
    return res | {"seconds": seconds, "top": name, "gen": Gen.parse(gen).name, "rows": rows, "cols": cols,
                  "pack": pack}


def _jobs() -> int:
    """$TENSORE_EXPORT_JOBS, else 2 on a machine of two or more cores."""
    text = os.environ.get(JOBS_ENV, "").strip()
    if not text:
        return min(2, os.cpu_count() or 1)
    if not text.isdigit() or int(text) < 1:
        raise ValueError(f"${JOBS_ENV} must be a positive whole number of processes, not {text!r}")
    return int(text)


def _engine(args: dict):
    """The engine to export, from export_engine's arguments (plain values: they cross processes)."""
    from tensore.rtl.top import Engine
    return Engine.of(Config(**args), black_box=True)


class _Beside:
    """Blocks of an engine (`files`) converted by `python -m tensore.rtl.export <dir>` in a second
    process while this one converts the rest; `result()`: {file: (text, seconds)}."""

    def __init__(self, args: dict, files: list, work: Path):
        self.work, self.files, self.proc = work, files, None
        if files:
            work.mkdir(parents=True, exist_ok=True)
            (work / "job.json").write_text(json.dumps({"args": args, "files": files}))
            self.proc = subprocess.Popen([sys.executable, "-m", "tensore.rtl.export", str(work)],
                                         stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)

    def result(self) -> dict:
        if self.proc is None:
            return {}
        err = self.proc.communicate()[1]
        if self.proc.returncode:
            last = (err.strip().splitlines() or ["no output"])[-1]
            raise RuntimeError(f"converting {', '.join(self.files)} in a second process failed: {last}")
        done = json.loads((self.work / "done.json").read_text())
        out = {f: ((self.work / f).read_text(), done[f]) for f in self.files}
        shutil.rmtree(self.work)
        return out

    def close(self):
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()


def _convert_apart(work: Path) -> None:
    """The second process of `_Beside`: each file of work/job.json converted into work/."""
    job = json.loads((work / "job.json").read_text())
    blocks = {f"{b.module_name}.v": b for b in blocks_of(_engine(job["args"]))}
    seconds = {}
    for fname in job["files"]:
        t0 = time.perf_counter()
        (work / fname).write_text(block_verilog(blocks[fname]))
        seconds[fname] = round(time.perf_counter() - t0, 2)
    (work / "done.json").write_text(json.dumps(seconds))


def export_engine(gen, rows: int, cols: int | None = None, *, pack: int | None = None, sbuf_latency: int = 2,
                  psum_partitions: int = PARTITIONS, out_dir, name: str = ENGINE_TOP, dtypes=None,
                  sparse32: bool = False, psum_ports: int = PSUM_PORTS, jobs: int | None = None,
                  timing: str = DEFAULT_PROFILE) -> dict:
    """Write the engine (rtl/top.py) as Verilog: each of its blocks once, the top (Amaranth, with the
    blocks as instances), files.f, a Verilator control file that makes the repeated blocks (`repeated`:
    PE, row, PSUM partition, row port) hierarchical blocks, the simulator form (the array in loop form,
    D-T60: files_sim.f, verilator_sim.vlt), lint.vlt (the waivers of `verilator --lint-only -Wall`,
    rtl/lint.vlt) and engine.json (configuration, ports, each file's conversion seconds and the
    export's wall-clock `wall_seconds`).  `psum_ports`: Engine's (the writes
    a PSUM partition takes in one cycle, D-T40 (6)).  `sparse32`: Engine's (32-bit
    MatmulSparse fmaps, D-T40 (3)); its blocks' module names end in `_s32`.  `jobs` (default
    $TENSORE_EXPORT_JOBS, else 2 on a machine of two or more cores): from 2, the blocks that say
    `export_apart` are converted in a second process meanwhile (D-T82).  `timing`: the sequencer's
    profile of issue rules (D-T98)."""
    t_start = time.perf_counter()
    jobs = _jobs() if jobs is None else jobs
    args = Config(Gen.parse(gen).name, rows, cols or 0, pack or 0, sbuf_latency, psum_partitions, dtypes, psum_ports,
                  sparse32, timing).plain()
    eng = prototype(_engine(args))
    eng.check_convertible()
    blocks = blocks_of(eng)
    array = next(b for b in blocks if isinstance(b, Array))
    loop_file = f"{array.module_name}_loop.sv"
    apart = [f"{b.module_name}.v" for b in blocks if getattr(b, "export_apart", False)] if jobs > 1 else []
    beside = _Beside(args, apart, Path(out_dir) / ".apart")
    times, texts = {}, {}
    try:
        for fname, make in [*((f"{b.module_name}.v", lambda b=b: block_verilog(b)) for b in blocks),
                            (f"{name}.v", lambda: block_verilog(eng, name)),
                            (loop_file, lambda: loop_array_verilog(gen, rows, eng.cols, eng.pack, array.module_name,
                                                                   dtypes=dtypes, sparse32=sparse32,
                                                                   column_loads=array.column_loads,
                                                                   tile=array.tile))]:
            if fname in apart:
                texts[fname] = None                 # its place in files.f
                continue
            t0 = time.perf_counter()
            texts[fname] = make()
            times[fname] = round(time.perf_counter() - t0, 2)
        for fname, (text, seconds) in beside.result().items():
            texts[fname], times[fname] = text, seconds
    finally:
        beside.close()
    structural = {f: t for f, t in texts.items() if f != loop_file}
    repeated = [b.module_name for b in blocks if getattr(b, "repeated", False)]
    res = _write(Path(out_dir), structural, repeated,
                 f"{rows * eng.cols} PE instances, {rows} rows and row ports, {psum_partitions} PSUM partitions")
    # the simulator form (D-T60): the array in loop form instead of the PE, row and array modules
    in_array = {array.module_name} | {b.module_name for b in blocks_of(array)}
    sim_files = [loop_file] + [f for f in structural if f.removesuffix(".v") not in in_array]
    (Path(out_dir) / loop_file).write_text(texts[loop_file])
    (Path(out_dir) / "files_sim.f").write_text("".join(f + "\n" for f in sim_files))
    (Path(out_dir) / "verilator_sim.vlt").write_text(
        "`verilator_config\n// the array in loop form; PSUM partitions and row ports as hierarchical blocks\n" +
        "".join(f'hier_block -module "{m}"\n' for m in repeated if m not in in_array))
    res["digest"] = hashlib.sha256((res["digest"] + texts[loop_file]).encode()).hexdigest()[:16]
    port_info = {n: {"width": Shape.cast(v.shape()).width, "dir": "in" if flow == In else "out"}
                 for n, (v, flow) in ports(eng).items()}
    info = {"top": name, "gen": eng.gen.name, "rows": rows, "cols": eng.cols, "pack": eng.pack,
            "dtypes": None if dtypes is None else [int(d) for d in dtypes], "sparse32": sparse32,
            "sbuf_latency": sbuf_latency, "psum_partitions": psum_partitions, "psum_ports": psum_ports,
            "timing": args["timing"], "digest": res["digest"],
            "seconds": times, "wall_seconds": round(time.perf_counter() - t_start, 2), "ports": port_info}
    (Path(out_dir) / "engine.json").write_text(json.dumps(info, indent=1) + "\n")
    (Path(out_dir) / "lint.vlt").write_text((Path(__file__).parent / "lint.vlt").read_text())
    return res | info | {"seconds": sum(times.values()), "times": times}


if __name__ == "__main__":
    _convert_apart(Path(sys.argv[1]))
