"""docs/engine_interface.md and docs/cocotb.md do what they say.  The port table is the engine's
signature (every port, its direction and width, on three configurations); the timing diagram and the
example transaction are a real run of docs/examples/cocotb/gemm4.s on a 4 x 4 engine in Amaranth's
simulator, regenerated here and compared with the page; a stationary answer one cycle late is a
mismatch (the engine samples it in exactly one cycle).  The C register example compiles and agrees
with the register map; the cocotb example runs on Icarus and its scoreboard catches a late answer."""
import json
import math
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from tests.test_docs import ROOT, _shims, blocks

PAGE = "docs/engine_interface.md"
EXAMPLE = ROOT / "docs" / "examples" / "cocotb"
ROW = re.compile(r"^\| `([a-z0-9_]+)` \| (in|out) \| `([^`]+)` \|", re.M)
VERILOG_ONLY = {"clk", "rst"}           # the exported module's clock and reset, outside the signature
CONFIGS = [dict(gen="mariana", rows=4, cols=4, psum_partitions=4),
           dict(gen="mariana", rows=8, cols=8, psum_partitions=16, pack=8),
           dict(gen="maverick", rows=8, cols=16, psum_partitions=16, psum_ports=3)]


def port_table() -> dict:
    """{port: (dir, width expression)} of the page's port table."""
    rows = {m.group(1): (m.group(2), m.group(3)) for m in ROW.finditer((ROOT / PAGE).read_text())}
    assert len(rows) > 50
    return rows


def width(expr: str, eng) -> int:
    """A width expression of the table: R, C (array rows, columns), P (PSUM partitions), PK (elements
    per PE), max, clog2."""
    names = {"R": eng.rows, "C": eng.cols, "P": eng.parts, "PK": eng.pack, "max": max,
             "clog2": lambda n: max(1, math.ceil(math.log2(n)))}
    return eval(expr, {"__builtins__": {}}, names)


def row_of(port: str) -> str:
    """The table's row of a port: `mon2_bits`, `mon3_bits`, ... are `mon_bits`'s (one per write port)."""
    return re.sub(r"^mon\d+_", "mon_", port)


@pytest.mark.parametrize("cfg", CONFIGS, ids=lambda c: f"{c['gen']}_{c['rows']}x{c['cols']}")
def test_port_table_is_the_engine_signature(cfg):
    from amaranth.lib.wiring import In

    from tensore.rtl.blackbox import ports
    from tensore.rtl.top import Engine
    cfg = dict(cfg)
    eng = Engine(cfg.pop("gen"), **cfg)
    eng._MustUse__silence = True                        # read for its signature, never elaborated
    table, seen = port_table(), set()
    for name, (value, flow) in ports(eng).items():
        row = row_of(name)
        assert row in table, f"port {name} is not in {PAGE}'s table"
        direction, expr = table[row]
        assert direction == ("in" if flow == In else "out"), name
        assert width(expr, eng) == len(value), f"{name}: the table says {expr} = {width(expr, eng)}, the engine {len(value)}"
        seen.add(row)
    assert set(table) - seen == VERILOG_ONLY, f"rows without a port: {set(table) - seen - VERILOG_ONLY}"


# -- the timing diagram and the example transaction, from a real run -------------------------------
WAVE = ["clk", "bus_we", "desc_valid", "desc_ready", "desc_data", "cl_req_valid[0]", "cl_req_off0[0]",
        "st_resp_data[0:4]", "mv_req_valid[0]", "mv_req_off0[0]", "mv_resp_data[0]", "mv_req_valid[3]", "mon_valid[0]", "mon_offset[0]",
        "mon_valid[3]", "done"]


def gemm4(regs=None):
    """docs/examples/cocotb/gemm4.s on a 4 x 4 MARIANA engine, its SBUF from make_sbuf.py (K = M = N = 4)."""
    sys.path.insert(0, str(ROOT / "docs" / "examples" / "first_program"))
    try:
        from make_sbuf import sbuf_image
    finally:
        sys.path.pop(0)
    import ml_dtypes

    from tensore.cosim.programs import Program
    from tensore.model.dtypes import Gen
    rng = np.random.default_rng(0)
    a = rng.standard_normal((4, 4)).astype(ml_dtypes.bfloat16)
    b = rng.standard_normal((4, 4)).astype(ml_dtypes.bfloat16)
    return Program("gemm4", Gen.MARIANA, 4, 4, (EXAMPLE / "gemm4.s").read_text(), sbuf_image(a, b), regs=regs or {})


def record(late: bool = False):
    """The page's run: gemm4.s with a one-entry instruction FIFO (queue_cfg.fifo_size_sel = 1), every
    port sampled at the end of each cycle (cycle 0: the first after the register setup); and the same
    program with the moving port's answers one cycle late (its Mismatch)."""
    from amaranth.hdl import ClockDomain, Module

    from tensore.cosim.amaranth_sim import simulate
    from tensore.cosim.lockstep import AmaranthPort, Lockstep, bench
    from tensore.rtl.top import Engine
    lk = Lockstep(gemm4({"queue_cfg": 1}), psum_partitions=4)
    late_lk = Lockstep(gemm4(), psum_partitions=4)
    dut = Engine("mariana", 4, 4, pack=lk.pack, psum_partitions=4, psum_ports=lk.psum_ports)
    top = Module()
    top.domains.sync = sync = ClockDomain()
    top.submodules.engine = dut
    samples, results = {}, []

    class Recorder(AmaranthPort):
        cycle = -len(lk.setup)

        async def tick(self):
            if self.cycle < lk.end:
                samples[self.cycle] = {n: self.ctx.get(v) for n, v in self.ports.items()}
            self.cycle += 1
            await super().tick()

    class Late(AmaranthPort):          # each moving-port answer applied one cycle after bench's
        held = None

        def set(self, name, value):
            if name == "mv_resp_data":
                self.held = value
            else:
                super().set(name, value)

        async def tick(self):
            await super().tick()
            if self.held is not None:
                super().set("mv_resp_data", self.held)
                self.held = None

    async def testbench(ctx):
        for port_class, run in ((Recorder, lk), (Late, late_lk)):
            ctx.set(sync.rst, 1)
            for _ in range(2):
                await ctx.posedge(sync.clk)
            ctx.set(sync.rst, 0)
            results.append(await bench(run, port_class(dut, ctx)))

    simulate(top, testbench)
    return lk, samples, results


@pytest.fixture(scope="module")
def run():
    return record()


def _bit(sample, name):
    base, _, index = name.partition("[")
    return sample[base] >> int(index[:-1] or 0) & 1 if index else sample[base]


def wavedrom(lk, samples) -> dict:
    """The page's diagram of the run: cycles -1 (the register write) to the last PSUM write + 1."""
    from tensore.cosim.lockstep import MV_W
    first, last = -len(lk.setup), max(lk.writes) + 1
    cycles = range(first, last + 1)
    Lm = lk.L - 1

    def bits(name):
        wave, prev = "", None
        for c in cycles:
            v = _bit(samples[c], name)
            wave, prev = wave + ("." if v == prev else str(v)), v
        return {"name": name, "wave": wave}

    def lane(name, label):                      # label(cycle) -> text, or None: no value
        wave, data, prev = "", [], None
        for c in cycles:
            text = label(c)
            if text is None:
                wave, prev = wave + ("x" if prev != "x" else "."), "x"
            elif text == prev:
                wave += "."
            else:
                wave, prev = wave + "=", text
                data.append(text)
        return {"name": name, "wave": wave, "data": data}

    accepted = [c for c in cycles if samples[c]["desc_valid"] and samples[c]["desc_ready"]]
    offered = lambda c: f"#{sum(a < c for a in accepted)}" if samples[c]["desc_valid"] else None  # noqa: E731
    off0 = (1 << MV_W["off0"][0]) - 1
    mv0 = lambda c: samples[c]["mv_req_off0"] & off0 if samples[c]["mv_req_valid"] & 1 else None  # noqa: E731
    w0 = lambda c: samples[c]["cl_req_off0"] & off0 if samples[c]["cl_req_valid"] & 1 else None  # noqa: E731
    # (w0: array row 0's weight column requests, answered in the stationary answer's words 0 .. 3)
    return {"head": {"tick": first}, "signal": [
        {"name": "clk", "wave": "p" + "." * (len(cycles) - 1)}, bits("bus_we"), bits("desc_valid"),
        bits("desc_ready"), lane("desc_data", offered),
        bits("cl_req_valid[0]"), lane("cl_req_off0[0]", lambda c: None if w0(c) is None else f"{w0(c):#x}"),
        lane("st_resp_data[0:4]", lambda c: None if c - Lm not in samples or w0(c - Lm) is None
             else f"A[0,{w0(c - Lm) // 2}:{w0(c - Lm) // 2 + 2}]"),
        bits("mv_req_valid[0]"), lane("mv_req_off0[0]", lambda c: None if mv0(c) is None else f"{mv0(c):#x}"),
        lane("mv_resp_data[0]", lambda c: None if c - Lm not in samples or mv0(c - Lm) is None
             else f"B[0,{(mv0(c - Lm) - 0x400) // 2}]"),
        bits("mv_req_valid[3]"), bits("mon_valid[0]"),
        lane("mon_offset[0]", lambda c: f"{samples[c]['mon_offset'] & 0x3FFF:#x}" if samples[c]["mon_valid"] & 1 else None),
        bits("mon_valid[3]"), bits("done")]}


def transaction(lk, samples) -> str:
    """The example transaction's table: each event with its cycles, from the run."""
    ops = {o.name: o for o in lk.trace.ops}
    cyc = lambda name, bit=None: [c for c in sorted(samples) if c >= 0 and  # noqa: E731
                                  (_bit(samples[c], name) if bit is None else samples[c][name] >> bit & 1)]
    desc = [c for c in cyc("desc_valid") if samples[c]["desc_ready"]]
    waiting = [c for c in cyc("desc_valid") if not samples[c]["desc_ready"]]

    def span(cs):
        return f"{cs[0]}..{cs[-1]}" if len(cs) > 1 and cs == list(range(cs[0], cs[-1] + 1)) else ", ".join(map(str, cs))
    Lm = lk.L - 1
    lines = ["| event | cycles |", "|---|---|",
             f"| descriptor #0 (ldweights) accepted: `desc_valid` and `desc_ready` | {desc[0]} |",
             f"| descriptor #1 (matmul) offered, `desc_ready` low (the one-entry FIFO is full) | {span(waiting)} |",
             f"| descriptor #1 accepted | {desc[1]} |",
             f"| ldweights issues (golden trace) | {ops['ldweights'].t_issue} |"]
    for k in range(lk.rows):
        w = cyc("cl_req_valid", k)
        lines.append(f"| row {k}'s weight requests on `cl` row {k} (A[{k}, 0..1], A[{k}, 2..3]), answers in `st_resp_data` "
                     f"words {4 * k}..{4 * k + 3} | {span(w)}; {span([c + Lm for c in w])} |")
    lines.append(f"| matmul issues (golden trace) | {ops['matmul'].t_issue} |")
    for r in range(lk.rows):
        mv = cyc("mv_req_valid", r)
        lines.append(f"| row {r}'s moving requests (B[{r}, 0..3]), answers | {span(mv)}; {span([c + Lm for c in mv])} |")
    for p in range(lk.parts):
        lines.append(f"| PSUM partition {p} writes (C[{p}, 0..3], offsets 0x0..0xc) | {span(cyc('mon_valid', p))} |")
    lines.append(f"| ldweights, matmul complete (golden trace) | {ops['ldweights'].t_complete}, {ops['matmul'].t_complete} |")
    return "\n".join(lines)


def test_timing_diagram_is_the_run(run):
    """The page's WaveDrom block is the recorded run's, and the run passed the lockstep."""
    lk, samples, results = run
    assert results[0] is None, results[0]
    diagrams = [json.loads(text) for info, text in blocks(PAGE) if info == "wavedrom"]
    want = wavedrom(lk, samples)
    assert diagrams and diagrams[0] == want, "the page's diagram is not the run's; the run's:\n" + json.dumps(want)


def test_example_transaction_is_the_run(run):
    lk, samples, _ = run
    table = transaction(lk, samples)
    assert table in (ROOT / PAGE).read_text(), "the page's transaction table is not the run's; the run's:\n" + table


def test_protocol_claims_hold(run):
    """What the page says of the protocol, in the recorded cycles: a descriptor is taken in a cycle with
    valid and ready; the weight load's column groups run down the `cl` rows, a row a cycle;
    every request is answered L - 1 cycles later; an answer one cycle late is a mismatch (the engine
    samples the answer in that one cycle, no response valid)."""
    lk, samples, results = run
    cycles = sorted(c for c in samples if c >= 0)
    taken = [c for c in cycles if samples[c]["desc_valid"] and samples[c]["desc_ready"]]
    assert len(taken) == len(lk.descs) and any(samples[c]["desc_valid"] and not samples[c]["desc_ready"]
                                               for c in cycles)
    assert all(o.t_issue > c for o, c in zip(lk.trace.ops, taken))     # a micro-op issues after its acceptance
    ops = {o.name: o for o in lk.trace.ops}
    assert not any(samples[c]["st_req_valid"] for c in cycles)                # a plain load: the column port
    for k in range(lk.rows):                    # row k's groups g = 0, 1 in cycles t + 1 + k + g (docs/timing.md)
        w = [c for c in cycles if samples[c]["cl_req_valid"] >> k & 1]
        assert w == [ops["ldweights"].t_issue + 1 + k + g for g in range(2)], k
    mv0 = [c for c in cycles if samples[c]["mv_req_valid"] & 1]
    assert mv0[0] == ops["matmul"].t_issue + 1
    writes0 = [c for c in cycles if samples[c]["mon_valid"] & 1]
    t, L, R = ops["matmul"].t_issue, lk.L, lk.rows      # docs/timing.md: partition c, vector n at t + L + n + R + c + 1
    assert writes0 == [t + L + n + R + 1 for n in range(4)]
    late = results[1]
    assert late is not None and "PSUM partition" in late.where, late


# -- the C register example ------------------------------------------------------------------------
def test_regs_c_example_agrees_with_the_register_map(tmp_path):
    from tensore.cosim.programs import backpressure
    from tensore.model.arr_seq_regs import REGISTERS
    from tensore.model.regs import RegisterFile
    exe = tmp_path / "regs_example"
    subprocess.run(["gcc", "-std=c11", "-Wall", "-Werror", "-I", str(ROOT / "rtl" / "regs"),
                    str(ROOT / "docs" / "examples" / "regs_c" / "regs_example.c"), "-o", str(exe)], check=True)
    out = [line.split() for line in subprocess.run([str(exe)], capture_output=True, text=True, check=True)
           .stdout.splitlines()]
    kinds = {k for k, *_ in out}
    assert kinds == {"offset", "reset", "write", "read", "field", "value"}
    model, values = RegisterFile(), {}
    for kind, name, value in out:
        if kind == "offset":
            assert int(value, 16) == REGISTERS[name]["offset"], name
        elif kind == "reset":
            assert int(value, 16) == model.read(REGISTERS[name]["offset"]), name
        elif kind == "write":
            model.write(REGISTERS[name]["offset"], int(value, 16))
        elif kind == "read":
            assert int(value, 16) == model.read(REGISTERS[name]["offset"]), name
        if kind in ("read", "value"):
            values[name] = int(value, 16)
        if kind == "field":
            reg, fname = name.split(".")
            f = REGISTERS[reg]["fields"][fname]
            assert int(value) == values[reg] >> f["lsb"] & ((1 << f["width"]) - 1), name
    written = {name: int(v, 16) for k, name, v in out if k == "write"}
    assert written == backpressure().regs           # the configuration of the library's program


# -- the cocotb example on Icarus -------------------------------------------------------------------
def _scratch(tmp_path):
    (tmp_path / "docs").symlink_to(ROOT / "docs")
    (tmp_path / "rtl").symlink_to(ROOT / "rtl")
    _shims(tmp_path / "bin")
    env = {k: v for k, v in os.environ.items() if k != "PYTEST_CURRENT_TEST"}   # cocotb's runner: not under pytest
    return dict(env, PATH=f"{tmp_path / 'bin'}{os.pathsep}{os.environ['PATH']}",
                TENSORE_CACHE=os.environ.get("TENSORE_CACHE", str(ROOT / "build")))


def _run_sh(doc, tmp_path, env) -> dict:
    outputs = {}
    for info, text in blocks(doc):
        if info != "sh":
            continue
        for line in (ln.strip() for ln in text.splitlines()):
            if line and not line.startswith("#"):
                res = subprocess.run(["sh", "-c", line], cwd=tmp_path, env=env, capture_output=True, text=True,
                                     timeout=300)
                assert res.returncode == 0 and "Traceback" not in res.stderr, f"{line}\n{res.stdout}\n{res.stderr}"
                outputs[line] = res.stdout
    return outputs


def test_engine_interface_commands_run(tmp_path):
    """The page's `sh` blocks (the C example's build and run) from a scratch directory."""
    outputs = _run_sh(PAGE, tmp_path, _scratch(tmp_path))
    assert any("field queue_cfg.fifo_size_sel 1" in out for out in outputs.values())


@pytest.mark.slow
def test_cocotb_walkthrough_on_icarus(tmp_path):
    """docs/cocotb.md's commands: the example test passes on Icarus (its own drivers and the
    project's testbench); a copy that answers the moving port one cycle late fails with the
    scoreboard's mismatch; the export's ports are the page's table's, clk and rst included."""
    from tensore.cosim import hdl
    hdl.ensure_icarus()
    env = _scratch(tmp_path)
    outputs = _run_sh("docs/cocotb.md", tmp_path, env)
    runs = [out for cmd, out in outputs.items() if "run.py" in cmd]
    assert len(runs) == 2 and all("test_gemm on Icarus: 1 of 1 passed" in out for out in runs), runs
    # the summary line the page shows, printed by both runs (its own drivers and `--bench`)
    shown = next(text for info, text in blocks("docs/cocotb.md") if info == "text" and "test_gemm on Icarus" in text)
    summary = re.search(r"gemm4: \d+ descriptors, \d+ PSUM writes, \d+ checks: OK$", shown, re.M)
    assert summary, shown
    for out in runs:
        printed = re.findall(r"gemm4: \d+ descriptors, \d+ PSUM writes, \d+ checks: OK$", out, re.M)
        assert printed == [summary.group(0)], out[-3000:]
    bad = tmp_path / "bad"
    bad.mkdir()
    for f in ("run.py", "test_gemm.py"):
        shutil.copy(EXAMPLE / f, bad / f)
    text = (bad / "test_gemm.py").read_text()
    assert text.count("cycle + lk.L - 1, {})[\"mv\"]") == 1
    (bad / "test_gemm.py").write_text(text.replace("cycle + lk.L - 1, {})[\"mv\"]", "cycle + lk.L, {})[\"mv\"]"))
    res = subprocess.run([sys.executable, str(bad / "run.py"), "docs/examples/cocotb/gemm4.s", "--sbuf",
                          "build/cocotb/sbuf.npz", "--work", "build/bad"], cwd=tmp_path, env=env,
                         capture_output=True, text=True, timeout=300)
    assert res.returncode == 1 and "0 of 1 passed" in res.stdout and "PSUM partition" in res.stdout, res.stdout[-3000:]
    # the exported engine (cached by run.py): engine.json's ports and the top module's clk / rst
    prog = gemm4()
    exported = hdl.export_cached(hdl.Config.of(prog, psum_partitions=4), log=lambda *a: None)
    table = port_table()
    for name, p in exported["ports"].items():
        assert table[row_of(name)][0] == p["dir"], name
    header = (Path(exported["dir"]) / f"{exported['top']}.v").read_text()
    for name in VERILOG_ONLY:
        assert re.search(rf"^\s*input {name};", header, re.M), name
