"""Verilog for external simulators: one PE module definition instantiated rows x cols times.

`export_array` writes the array alone; `export_engine` the whole engine (rtl/top.py), whose
Amaranth-converted top instantiates the same array module, one PSUM partition module, one row-port
module and the PSUM write crossbar.
The PE comes from Amaranth.  The row block and the array are pure wiring (instances and buses), so
they are written here as structural Verilog from the same port layouts (rtl.array / rtl.pe):
Amaranth's backend would take minutes on the ~30,000 instance connections of a 128 x 256 array.
tests/test_rtl_export.py proves the result is the same circuit as the Amaranth Array."""
from __future__ import annotations

import hashlib
import json
import time
from pathlib import Path

from amaranth.back import verilog
from amaranth.hdl import Shape
from amaranth.lib.wiring import In

from tensore.model.addrmap import PARTITIONS
from tensore.model.dtypes import Gen
from tensore.rtl.array import array_module_name, row_module_name
from tensore.rtl.array_loop import array_header, loop_array_verilog
from tensore.rtl.pe import COL_BITS, PE, act_layout, pe_module_name, weight_layout
from tensore.rtl.psum import PsumPartition, psum_module_name
from tensore.rtl.psum_xbar import xbar_module_name, xbar_verilog
from tensore.rtl.rowport import RowPort, rowport_module_name

ENGINE_TOP = "tensore_engine"


def _row_verilog(gen, cols: int, pack: int, dtypes=None) -> str:
    a, w = act_layout(pack).size, weight_layout(pack).size
    name, pe = row_module_name(gen, cols, pack, dtypes), pe_module_name(gen, pack, dtypes)
    lines = [f"// {cols} PEs: moving values pass right, sums go down (rtl/array.py ArrayRow).",
             f"module {name}(clk, rst, act_in, psum_in, psum_valid_in, psum_out, psum_valid_out, advance, phase,",
             "    wl_valid, wl_cols, wl_data, tag_valid, tag_cols, tag_data);",
             "  input clk, rst, advance, wl_valid, tag_valid;", "  input [1:0] phase;",
             f"  input [{a - 1}:0] act_in;", f"  input [{32 * cols - 1}:0] psum_in;",
             f"  input [{cols - 1}:0] psum_valid_in, wl_cols, tag_cols;",
             f"  output [{32 * cols - 1}:0] psum_out;", f"  output [{cols - 1}:0] psum_valid_out;",
             f"  input [{w * cols - 1}:0] wl_data;", f"  input [{4 * cols - 1}:0] tag_data;",
             f"  wire [{a - 1}:0] act [0:{cols}];", "  assign act[0] = act_in;",
             "  genvar c;", f"  generate for (c = 0; c < {cols}; c = c + 1) begin : pe",
             "    wire [31:0] w_code;",
             f"    {pe} u(.clk(clk), .rst(rst), .col_index({COL_BITS}'(c)), .act_in(act[c]), .act_out(act[c + 1]),",
             "      .psum_in(psum_in[32*c +: 32]), .psum_valid_in(psum_valid_in[c]),",
             "      .psum_out(psum_out[32*c +: 32]), .psum_valid_out(psum_valid_out[c]),",
             "      .advance(advance), .phase(phase), .wl_valid(wl_valid & wl_cols[c]),",
             f"      .wl(wl_data[{w}*c +: {w}]), .tag_valid(tag_valid & tag_cols[c]), .tag_in(tag_data[4*c +: 4]),",
             "      .w_code(w_code));", "  end endgenerate", "endmodule", ""]
    return "\n".join(lines)


def _top_verilog(gen, rows: int, cols: int, pack: int, name: str, dtypes=None) -> str:
    a = act_layout(pack).size
    row = row_module_name(gen, cols, pack, dtypes)
    rb = max(1, (rows - 1).bit_length())
    lines = [f"// {rows} x {cols} weight-stationary array (rtl/array.py Array), rows of {row}.",
             *array_header(name, rows, cols, pack),
             f"  wire [{32 * cols - 1}:0] psum [0:{rows}];", f"  wire [{cols - 1}:0] valid [0:{rows}];",
             "  assign psum[0] = top_psum;", "  assign valid[0] = top_valid;",
             "  genvar r;", f"  generate for (r = 0; r < {rows}; r = r + 1) begin : row",
             f"    {row} u(.clk(clk), .rst(rst), .act_in(row_in[{a}*r +: {a}]), .psum_in(psum[r]),",
             "      .psum_valid_in(valid[r]), .psum_out(psum[r + 1]), .psum_valid_out(valid[r + 1]),",
             f"      .advance(advance), .phase(phase), .wl_valid(wl_valid && wl_row == {rb}'(r)), .wl_cols(wl_cols),",
             f"      .wl_data(wl_data), .tag_valid(tag_valid && tag_row == {rb}'(r)), .tag_cols(tag_cols),",
             "      .tag_data(tag_data));", "  end endgenerate",
             f"  assign out_psum = psum[{rows}];", f"  assign out_valid = valid[{rows}];", "endmodule", ""]
    return "\n".join(lines)


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


def export_array(gen, rows: int, cols: int, pack: int, out_dir, name: str = "tensore_array") -> dict:
    """Write the PE, row-block and top modules, files.f and a Verilator control file."""
    pe_name, row_name = pe_module_name(gen, pack), row_module_name(gen, cols, pack)
    t0 = time.perf_counter()
    texts = {f"{pe_name}.v": verilog.convert(PE(gen, pack), name=pe_name, emit_src=False),
             f"{row_name}.v": _row_verilog(gen, cols, pack),
             f"{name}.v": _top_verilog(gen, rows, cols, pack, name)}
    seconds = time.perf_counter() - t0
    res = _write(Path(out_dir), texts, [pe_name, row_name],
                 f"one PE definition for {rows * cols} instances, one row definition for {rows}")
    return res | {"seconds": seconds, "top": name, "gen": Gen.parse(gen).name, "rows": rows, "cols": cols,
                  "pack": pack}


def export_engine(gen, rows: int, cols: int | None = None, *, pack: int | None = None, sbuf_latency: int = 2,
                  psum_partitions: int = PARTITIONS, out_dir, name: str = ENGINE_TOP, dtypes=None) -> dict:
    """Write the engine (rtl/top.py) as Verilog: the PE, the row block, the array (structural), one
    PSUM partition, one row port (rtl/rowport.py), the PSUM write crossbar (rtl/psum_xbar.py,
    behavioural Verilog), the top (Amaranth, with those as instances), files.f, a Verilator control
    file that makes the PE, row, PSUM partition and row port hierarchical blocks, lint.vlt (the
    waivers of `verilator --lint-only -Wall`, rtl/lint.vlt) and engine.json (configuration, ports,
    timings)."""
    from tensore.rtl.top import Engine
    eng = Engine(gen, rows, cols, pack=pack, sbuf_latency=sbuf_latency, psum_partitions=psum_partitions,
                 black_box=True, dtypes=dtypes)
    pe_name, row_name = pe_module_name(gen, eng.pack, dtypes), row_module_name(gen, eng.cols, eng.pack, dtypes)
    psum_name = psum_module_name(eng.psum_ports)
    rowport_name = rowport_module_name(gen, eng.pack, sbuf_latency)
    array_name = array_module_name(gen, rows, eng.cols, eng.pack, dtypes)
    times, texts = {}, {}
    for fname, make in [(f"{pe_name}.v", lambda: verilog.convert(PE(gen, eng.pack, dtypes=dtypes), name=pe_name,
                                                                 emit_src=False)),
                        (f"{row_name}.v", lambda: _row_verilog(gen, eng.cols, eng.pack, dtypes)),
                        (f"{array_name}.v", lambda: _top_verilog(gen, rows, eng.cols, eng.pack, array_name, dtypes)),
                        (f"{psum_name}.v", lambda: verilog.convert(PsumPartition(None, eng.psum_ports),
                                                                   name=psum_name, emit_src=False)),
                        (f"{rowport_name}.v", lambda: verilog.convert(RowPort(gen, eng.pack, sbuf_latency),
                                                                      name=rowport_name, emit_src=False)),
                        (f"{xbar_module_name(psum_partitions, eng.cols, eng.psum_ports)}.v",
                         lambda: xbar_verilog(psum_partitions, eng.cols, eng.psum_ports)),
                        (f"{name}.v", lambda: verilog.convert(eng, name=name, emit_src=False)),
                        (f"{array_name}_loop.sv", lambda: loop_array_verilog(gen, rows, eng.cols, eng.pack,
                                                                             array_name, dtypes=dtypes))]:
        t0 = time.perf_counter()
        texts[fname] = make()
        times[fname] = round(time.perf_counter() - t0, 2)
    loop_file = f"{array_name}_loop.sv"
    structural = {f: t for f, t in texts.items() if f != loop_file}
    res = _write(Path(out_dir), structural, [pe_name, row_name, psum_name, rowport_name],
                 f"{rows * eng.cols} PE instances, {rows} rows and row ports, {psum_partitions} PSUM partitions")
    # the simulator form (D-T60): the array in loop form instead of the PE, row and array modules
    sim_files = [loop_file] + [f for f in structural if f not in (f"{pe_name}.v", f"{row_name}.v", f"{array_name}.v")]
    (Path(out_dir) / loop_file).write_text(texts[loop_file])
    (Path(out_dir) / "files_sim.f").write_text("".join(f + "\n" for f in sim_files))
    (Path(out_dir) / "verilator_sim.vlt").write_text(
        "`verilator_config\n// the array in loop form; PSUM partitions and row ports as hierarchical blocks\n" +
        "".join(f'hier_block -module "{m}"\n' for m in (psum_name, rowport_name)))
    res["digest"] = hashlib.sha256((res["digest"] + texts[loop_file]).encode()).hexdigest()[:16]
    ports = {n: {"width": Shape.cast(mb.shape).width, "dir": "in" if mb.flow == In else "out"}
             for n, mb in eng.signature.members.items()}
    info = {"top": name, "gen": eng.gen.name, "rows": rows, "cols": eng.cols, "pack": eng.pack,
            "dtypes": None if dtypes is None else [int(d) for d in dtypes],
            "sbuf_latency": sbuf_latency, "psum_partitions": psum_partitions, "digest": res["digest"],
            "seconds": times, "ports": ports}
    (Path(out_dir) / "engine.json").write_text(json.dumps(info, indent=1) + "\n")
    (Path(out_dir) / "lint.vlt").write_text((Path(__file__).parent / "lint.vlt").read_text())
    return res | info | {"seconds": sum(times.values()), "times": times}
