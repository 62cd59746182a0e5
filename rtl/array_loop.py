"""The array as one module looping over its PEs' state (D-T60): the simulator form of rtl/array.py.

Same ports and same cycle behaviour as the structural array (`tensore_array_*`, rows of PE
instances), but every PE register is an unpacked array `[rows][cols]` and one clocked block runs the
PE's logic (rtl/loopform.py, generated from the Amaranth PE) for each PE in turn, reading its
neighbours' registers: a simulator compiles the PE once and evaluates it once per PE per cycle.
The PEs update their registers in place, last row and column first, so every PE sees its
neighbours' values of the previous cycle, as the flip-flops of the structural form do; a register
is written only when it loads (rtl/loopform.py)."""
from __future__ import annotations

from tensore.model.timing import LOAD_COLS
from tensore.rtl.loopform import Netlist, yosys_netlist
from tensore.rtl.pe import COL_BITS, PE, act_layout, weight_layout

PREFIX = "cell_"        # the temporaries of the PE's cells (the state arrays are pe_<register>)


def array_header(name: str, rows: int, cols: int, pack: int, sparse32: bool = False,
                 column_loads: bool = False, taps: int = 1) -> list:
    """The Verilog module header of an array (the ports of rtl/array.py Array), for both forms;
    `taps`: the row tiles side by side, each tile but the last with its sums' tap (D-T100)."""
    a, w = act_layout(pack, sparse32).size, weight_layout(pack).size
    rb = max(1, (rows - 1).bit_length())
    cw = [f"  input [{LOAD_COLS * rows - 1}:0] cw_valid;", f"  input [{COL_BITS * rows - 1}:0] cw_col;",
          f"  input [{w * LOAD_COLS * rows - 1}:0] cw_data;"] if column_loads else []
    tap = [f"tap{k}_{x}" for k in range(taps - 1) for x in ("psum", "valid")]
    cw += [f"  output [{(32 if x.endswith('psum') else 1) * cols - 1}:0] {x};" for x in tap]
    return [f"module {name}(clk, rst, row_in, advance, phase, wl_valid, wl_row, wl_cols, wl_data,",
            "    tag_valid, tag_row, tag_cols, tag_data, top_psum, top_valid, out_psum, out_valid"
            + "".join(f", {x}" for x in tap) + (", cw_valid, cw_col, cw_data);" if column_loads else ");"), *cw,
            "  input clk, rst, advance, wl_valid, tag_valid;", "  input [1:0] phase;",
            f"  input [{a * rows - 1}:0] row_in;", f"  input [{rb - 1}:0] wl_row, tag_row;",
            f"  input [{cols - 1}:0] wl_cols, tag_cols;", f"  input [{w * cols - 1}:0] wl_data;",
            f"  input [{4 * cols - 1}:0] tag_data;", f"  input [{32 * cols - 1}:0] top_psum;",
            f"  input [{cols - 1}:0] top_valid;", f"  output [{32 * cols - 1}:0] out_psum;",
            f"  output [{cols - 1}:0] out_valid;"]


def loop_array_verilog(gen, rows: int, cols: int, pack: int, name: str, *, dtypes=None,
                       sparse32: bool = False, column_loads: bool = False, tile: int = 0) -> str:
    """SystemVerilog of the rows x cols array module `name` (the ports of rtl/array.py Array);
    `tile`: the rows of a row tile when tiles run side by side (their sums' taps, D-T100)."""
    taps = rows // tile if tile else 1
    net = Netlist(yosys_netlist(PE(gen, pack, dtypes=dtypes, sparse32=sparse32), "pe"), PREFIX)
    a, w = act_layout(pack, sparse32).size, weight_layout(pack).size
    rb = max(1, (rows - 1).bit_length())
    q = [f"pe_{n}" for n in net.reg_names]         # one array per PE register, named after it
    here = [f"{x}[r][c]" for x in q]
    left = [f"{x}[r][c == 0 ? 0 : c - 1]" for x in q]
    # The moving value's register passes the left input through: a delay line per row holds it.
    # PE (r, c)'s register holds the row's input of `c` advances ago, line[r][k - c] (k counts the
    # advances, modulo a power of two >= cols), so a cycle writes one entry per row, not one per PE.
    line = net.pass_through("act_in", "act_out", "advance")
    kb = max(1, (cols - 1).bit_length())
    if line is not None:                           # nothing in the PE reads it: only its neighbour
        left[line.index] = f"act_line[r][{kb}'(act_k - {kb}'(c - 1))]"
    above = [f"{x}[r == 0 ? 0 : r - 1][c]" for x in q]
    inputs = {"col_index": f"{COL_BITS}'(c)", "act_in": "x_act", "psum_in": "x_psum", "psum_valid_in": "x_pvalid",
              "advance": "advance", "phase": "phase", "wl_valid": "x_wl_valid", "wl": "x_wl",
              "tag_valid": "x_tag_valid", "tag_in": "x_tag"}
    if set(inputs) != {n for n, p in net.ports.items() if p["direction"] == "input"}:
        raise ValueError("the PE's inputs changed; update rtl/array_loop.py")
    lines = [f"// {rows} x {cols} weight-stationary array in loop form (rtl/array_loop.py, D-T60): the PE's",
             "// logic (generated from the Amaranth PE through Yosys) runs once per PE per cycle.",
             *array_header(name, rows, cols, pack, sparse32, column_loads, taps)]
    for reg in net.regs:
        if reg is not line:
            lines.append(f"  logic [{reg.width - 1}:0] {q[reg.index]} [0:{rows - 1}][0:{cols - 1}];")
    if line is not None:
        lines += [f"  logic [{a - 1}:0] act_line [0:{rows - 1}][0:{(1 << kb) - 1}];", f"  logic [{kb - 1}:0] act_k;"]
    outs = [("o", rows - 1), *((f"t{k}", (k + 1) * tile - 1) for k in range(taps - 1))]   # bottom, taps
    lines += [x for o, _ in outs for x in (f"  logic [31:0] {o}_psum [0:{cols - 1}];", f"  logic {o}_valid [0:{cols - 1}];")]
    # The PEs update in place, last row and column first: when PE (r, c) runs, its left and upper
    # neighbours still hold this cycle's values, and the PEs that read it have run.  A PE's inputs
    # and cells are automatic variables of the clocked block: Verilator makes them C++ locals, which
    # the compiler keeps in registers, instead of members of the model stored on every assignment.
    temps = [f"logic [{a - 1}:0] x_act;", "logic [31:0] x_psum;", "logic x_pvalid, x_wl_valid, x_tag_valid;",
             f"logic [{w - 1}:0] x_wl;", "logic [3:0] x_tag;", *net.declarations(""),
             *([f"logic [{LOAD_COLS - 1}:0] x_cw_valid;", f"logic [{COL_BITS - 1}:0] x_cw_col;"] if column_loads else [])]
    lines += ["  always_ff @(posedge clk) begin", *(f"    automatic {t}" for t in temps),
              f"    for (int r = {rows - 1}; r >= 0; r--) begin",
              *(_row_column_write() if column_loads else []),
              f"      for (int c = {cols - 1}; c >= 0; c--) begin",
              f"        x_act = c == 0 ? row_in[{a}*r +: {a}] : {net.output('act_out', left)};",
              f"        x_psum = r == 0 ? top_psum[32*c +: 32] : {net.output('psum_out', above)};",
              f"        x_pvalid = r == 0 ? top_valid[c] : {net.output('psum_valid_out', above)};",
              f"        x_wl_valid = wl_valid && wl_row == {rb}'(r) && wl_cols[c];",
              f"        if (x_wl_valid) x_wl = wl_data[{w}*c +: {w}];",
              *(_column_writes(rows, w) if column_loads else []),
              f"        x_tag_valid = tag_valid && tag_row == {rb}'(r) && tag_cols[c];",
              "        if (x_tag_valid) x_tag = tag_data[4*c +: 4];",
              *net.step(inputs, here, "rst", " " * 8, skip=frozenset({line.index} if line else ())),
              "      end", "    end",
              *([] if line is None else [
                  f"    if (rst) for (int r = 0; r < {rows}; r++) for (int k = 0; k < {1 << kb}; k++) act_line[r][k] = '0;",
                  "    else if (advance) begin",
                  f"      act_k = act_k + {kb}'d1;",
                  f"      for (int r = 0; r < {rows}; r++) act_line[r][act_k] = row_in[{a}*r +: {a}];",
                  "    end"]),
              f"    for (int c = 0; c < {cols}; c++) begin      // the outputs change after the edge",
              *(x for o, r in outs for x in (
                  f"      {o}_psum[c] <= {net.output('psum_out', [f'{x}[{r}][c]' for x in q])};",
                  f"      {o}_valid[c] <= {net.output('psum_valid_out', [f'{x}[{r}][c]' for x in q])};")),
              "    end",
              "  end",
              "  genvar c;", f"  generate for (c = 0; c < {cols}; c = c + 1) begin : col",
              *(x for (o, _), p in zip(outs, ("out", *(f"tap{k}" for k in range(taps - 1)))) for x in (
                  f"    assign {p}_psum[32*c +: 32] = {o}_psum[c];", f"    assign {p}_valid[c] = {o}_valid[c];")),
              "  end endgenerate", "endmodule", ""]
    return "\n".join(lines)


def _row_column_write() -> list:
    """Row r's column write (mask and first column), selected once per row, not once per PE: a
    variable part-select of the wide cw_* ports costs Verilator a shift over the whole port."""
    return [f"      x_cw_valid = cw_valid[{LOAD_COLS}*r +: {LOAD_COLS}];",
            f"      x_cw_col = cw_col[{COL_BITS}*r +: {COL_BITS}];"]


def _column_writes(rows: int, w: int) -> list:
    """PE (r, c)'s column-serial weight write (rtl/column_load.py): record j of row r's group when
    its first column x_cw_col (_row_column_write) is c - j."""
    out = []
    for j in reversed(range(LOAD_COLS)):
        hit = f"x_cw_valid[{j}] && c >= {j} && x_cw_col == {COL_BITS}'(c - {j})"
        out += [f"        if ({hit}) begin", "          x_wl_valid = 1'b1;",
                f"          x_wl = cw_data[{w * LOAD_COLS}*r + {w * j} +: {w}];", "        end"]
    return out
