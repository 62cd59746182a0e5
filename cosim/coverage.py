"""Functional coverage of golden-engine runs (issue #18 item 4, D-T74).

`facts(program, trace)` reads one run of the golden engine (the decoded descriptors, their refusal
codes, issue cycles and events) and names the coverage bins it hits, once per program:

    opcode            every opcode the generation has, executed
    load              weight loads: dtype x mode (plain, transposed, TAG_WEIGHT, LUT, FP8 double row,
                      MX quad / oct) x load order
    matmul            opcode x dtype x mode (plain, moving dtype other than the stationary one, fp32
                      LOW / HIGH / LOW_HIGH, double row, LUT moving codes, LUT weights, MX, transpose,
                      seed move)
    flags             accumulate group (MAVERICK: overwrite / accumulate) x zero region x out dtype
    mx                op x element dtype x perf mode (the element orders: interleaved, tiled)
    xpose             transposed element width x out dtype;  sparse: fmaps, tag source
    tiles             row / column groups (MAVERICK tile size and selects)
    error             every error code;  stall: every issue rule that delayed an issue (`stalls`)
    zero              banks zeroed x wrapping past bank 7;  rounding: bf16 PSUM writes under RNE / SR,
                      PeRegWrite value x source (SBUF fetch or bypass)
    seed, events, config, values   seed moves, event set / wait / wait that stalled, host register
                      settings, classes of the values written to PSUM (NaN, Inf, -0, subnormal, ...)

`unreachable(gen)` names the bins of the model that no program of `gen` can hit, each with its
reason (D-T95): a cross the ISA check refuses (computed: `model.isa.check` of a descriptor of that
cross) or an issue rule another rule always subsumes; they are ignore bins of the database, and the
reports count "N / M reachable bins hit" and list them with their reasons.

`Coverage` accumulates facts and writes them through cocotb-coverage (CoverPoint / CoverCross, one
cross per group, illegal combinations as ignore bins) to its XML database; shards' databases merge
with cocotb-coverage's `merge_coverage`; `report(xml)` lists every group's coverage and its holes,
as text and HTML.  `stalls(trace, regs)` names, for each issued micro-op, the issue rules of
docs/timing.md that set its issue cycle: a monitor that restates the rules from the trace alone,
so a micro-op whose cycle none of them explains is reported as `unexplained`."""
from __future__ import annotations

import ast
import functools
import html
import threading
from collections import Counter
from itertools import product
from pathlib import Path
from xml.etree import ElementTree

import numpy as np

from tensore.model import addrmap
from tensore.model import dtypes as dt
from tensore.model.dtypes import Dtype, Gen
from tensore.model.isa import ErrorCode, Opcode, opcodes_of
from tensore.model.isa.check import matmul_input_dtypes
from tensore.model.isa.enums import AccumulateGroup, LoadOrder, MXPerfMode, TileColSize, TileRowSize
from tensore.model.isa.layouts import EVENT_NONE
from tensore.model.isa.microop import (DOUBLE_ROW_FROM, DOUBLE_ROW_PACK, PUMP_PACK, SEED_STATES, Kind, MmKind,
                                       group_step, psum_half, row_tile)
from tensore.model.timing import (DEFAULT_PROFILE, MAX_IN_FLIGHT, blocks_overlap, boxes_overlap, column_load,
                                  column_load_end, column_load_issue, column_port_free, column_port_next, floor_cycles,
                                  load_front_issue, profile, psum_box, tap_of, tile_stream, write_lead)

PREFIX = "tensore"
_LOCK = threading.Lock()            # cocotb-coverage keeps one database per process
RULES = ("fifo_full", "inter_instr_delay", "after_barrier", "barrier", "dependency_check_off", "weight_port",
         "swap_wait", "sparse_drain", "moving_port", "after_load", "pass_or_kind_change", "in_flight_limit",
         "wait_event", "pass_rhythm", "unexplained")
# the rules a profile adds (docs/timing.md, 'Timing profiles'), by the Profile flag that brings each
PROFILE_RULES = {"row_front": "row_wavefront", "issue_floor": "issue_floor", "column_front": "column_loads",
                 "column_load_end": "column_loads", "write_order": "row_tiles"}


def stall_rules(timing=DEFAULT_PROFILE) -> list:
    """The issue rules of a profile: the stall group's bins."""
    prof = profile(timing)
    return [r for r in RULES if r != "unexplained"] + [r for r, flag in PROFILE_RULES.items() if getattr(prof, flag)]


FP8 = {Dtype.FP8_EXP2, Dtype.FP8_EXP3, Dtype.FP8_EXP4, Dtype.FP8_EXP5}
VALUES = ("zero", "-0", "normal", "subnormal", "+inf", "-inf", "nan")


def _cv():
    try:
        from cocotb_coverage import coverage
    except ImportError as exc:           # the `regress` / `test` extras install it
        raise ValueError("functional coverage needs cocotb-coverage: pip install 'tensore[regress]'") from exc
    return coverage


def _name(x) -> str:
    return x.name.lower() if hasattr(x, "name") else str(x)


# --- the coverage model of a generation --------------------------------------------------------------

def _mx_dtypes(gen) -> list:
    return [_name(d) for d in sorted(dt.dtypes_of(gen)) if dt.is_valid_mx_dtype(d, gen)]


def model(gen, timing=DEFAULT_PROFILE) -> dict:
    """{group: (axes {axis: bins}, legal(*bin) or None)} for `gen` under the timing profile `timing`:
    the bins and the combinations that count (the rest are ignore bins of the cross)."""
    gen = Gen.parse(gen)
    mav, mx = gen.layout == Gen.MAVERICK, gen >= Gen.MARIANA
    mm_dtypes = [_name(d) for d in sorted(matmul_input_dtypes(gen))]
    mxd = _mx_dtypes(gen) if mx else []
    fp8 = {_name(d) for d in FP8}
    sixteen = {"bfloat16", "fp16"}
    dr = not mav and gen >= DOUBLE_ROW_FROM        # FP8 double row (D-T97)
    load_modes = ["plain", "xpose"] + ([] if mav else ["tag_weight"]) + (["double_row"] if dr else []) + \
        (["lut"] if mx else []) + \
        (["mx_quad", "mx_oct"] if mx else [])

    def load_ok(d, mode, order):
        if mode == "lut":
            return d == "uint8"
        if mode.startswith("mx"):
            return d in mxd
        if mode == "xpose":                        # any element dtype, 4-bit codes too (D-T40 (1))
            return d != "uint8" and (d in mm_dtypes or d in mxd)
        if d == "uint8" or (d not in mm_dtypes):
            return False
        return {"tag_weight": d in sixteen, "double_row": d in fp8}.get(mode, True)

    mm_ops = ["matmul", "matmul_sparse"] + (["matmul_mx"] if mx and not mav else [])
    mm_modes = ["plain", "mixed", "fp32_low", "fp32_high", "fp32_low_high", "xpose"] + \
        (["double_row"] if dr else []) + (["lut", "lut_weights", "mx"] if mx else []) + (["seed"] if mav else [])

    def mm_ok(op, d, mode):
        if op == "matmul_mx" or mode == "mx":
            return mode == "mx" and d in mxd and op == ("matmul" if mav else "matmul_mx")
        if mode == "lut" or d == "uint8":
            return mode == "lut" and d == "uint8"          # LUT-mode Matmul and MatmulSparse (D-T40 (4))
        if d not in mm_dtypes:
            return False
        if op == "matmul_sparse":
            return mode == "plain" and d in sixteen
        if mode.startswith("fp32"):
            return d == "fp32"
        if mode == "seed":
            return d == "fp32"
        if d == "fp32":
            return mode == "xpose"
        return {"mixed": d in sixteen | fp8, "double_row": d in fp8, "lut_weights": d in sixteen}.get(mode, True)

    accs = ["overwrite", "accumulate"] if mav else [_name(a) for a in AccumulateGroup]
    zeros = ["none"] if mav else ["none", "1", "2", "4", "8"]
    outs = ["fp32", "bfloat16"] if mx else ["fp32"]
    groups = {
        "opcode": ({"op": [_name(o) for o in sorted(opcodes_of(gen))]}, None),
        "load": ({"dtype": sorted(set(mm_dtypes + mxd + (["uint8"] if mx else []))), "mode": load_modes,
                  "order": [_name(o) for o in LoadOrder]}, load_ok),
        "matmul": ({"op": mm_ops, "dtype": sorted(set(mm_dtypes + mxd + (["uint8"] if mx else []))), "mode": mm_modes},
                   mm_ok),
        "flags": ({"acc": accs, "zero": zeros, "out": outs},       # a group start zeroes 1 bank or more
                  lambda a, z, o: mav or (z == "none") == (a in ("multi_mid", "multi_end"))),
        "xpose": ({"width": ["8", "16", "32"], "out": outs}, lambda w, o: not (w == "32" and o == "bfloat16")),
        "sparse_fmaps": ({"fmaps": ["2", "3", "4"]}, None),
        "sparse_tags": ({"source": ["force_0", "force_4", "force_8", "force_12"] + ([] if mav else ["tag_weight"])},
                        None),
        "tiles": ({"tile": _tiles(gen)}, None),
        "error": ({"code": _error_bins(gen)}, None),
        "stall": ({"rule": stall_rules(timing)}, None),
        "events": ({"event": ["set", "wait", "wait_stalled"]}, None),
        "config": ({"setting": ["fifo_1", "dependency_check_off", "inter_instr_delay", "bypass_peregwrite",
                                "matmul_done_first", "perf_counters"]}, None),
        "values": ({"value": list(VALUES)}, None),
        "round_reg": ({"value": ["rne", "sr"], "source": ["sbuf", "bypass"]}, None),
    }
    if not mav:
        groups["zero"] = ({"banks": ["1", "2", "4", "8"], "wrap": ["no", "yes"]}, lambda b, w: not (b == "1" and w == "yes"))
    if mx:
        groups["mx"] = ({"op": ["load", "matmul"], "dtype": mxd,
                         "perf": [_name(m) for m in MXPerfMode if m != MXPerfMode.NONE]}, None)
        groups["rounding"] = ({"bf16_write": ["rne", "sr"]}, None)
        groups["seed"] = ({"move": ["save_seed", "load_seed"]}, None)
    return groups


def _refusal(gen, text: str):
    """The first violation `model.isa.check` finds in the descriptor `text` on `gen` (None: legal)."""
    from tensore.model.isa.asm import assemble
    from tensore.model.isa.check import check
    v = check(assemble(text, gen), gen)
    return min(v, key=lambda x: x.code) if v else None


AFTER_LOAD = ("a micro-op decodes after the previous one issues (engine: t_decode >= issue(prev) + 1), so the "
              "last load's issue + 1 <= t_decode: the decode rule (t_decode + 1) binds first (docs/timing.md)")


@functools.lru_cache(maxsize=None)
def _unreachable(gen) -> tuple:
    gen = Gen.parse(gen)
    out = {}
    axes, load_ok = model(gen)["load"]
    tile = "tile_size=(row_size_log2=r128, col_size_log2=c128) " if gen.layout == Gen.MAVERICK else ""
    xp = "flags=(xpose_mode=enabled) " if gen >= Gen.MARIANA else "transpose_mode=enabled "
    for d in axes["dtype"]:
        if not any(load_ok(d, "xpose", o) for o in axes["order"]):
            continue
        mode = "fp32_mode=high " if d == "fp32" else ""
        v = _refusal(gen, f"ldweights in_dtype={d} {mode}rows=1 cols=1 {tile}{xp}"
                          "src=(start_addr=sbuf(0,0x0), step_elem=[1,0,0], num_elem=[1,1,1])")
        if v is not None:                      # MAVERICK's 4-bit gate (dtypes.is_valid_dtype)
            for o in axes["order"]:
                out[("load", (d, "xpose", o))] = f"model.isa.check refuses a transposed {d} load: {v}"
    out[("stall", ("after_load",))] = AFTER_LOAD
    return tuple(out.items())


def unreachable(gen) -> dict:
    """{(group, bin tuple): reason} of the bins of `model(gen)` no program can hit (D-T95)."""
    return dict(_unreachable(Gen.parse(gen)))


def _error_bins(gen) -> list:
    """The refusal codes a descriptor of `gen` can draw: not OPCODE_NOT_IN_GEN where every PE opcode
    exists, no seed / LUT / indirect-pattern codes before MARIANA, no accumulate-flag code on
    MAVERICK (its accumulate_flag is one bit), no BAD_MX without double row (its only source there is
    the pump rule, D-T97)."""
    never = set()
    if {int(o) for o in Opcode} <= {int(o) for o in opcodes_of(gen)}:
        never.add(ErrorCode.OPCODE_NOT_IN_GEN)
    if gen < Gen.MARIANA:
        never |= {ErrorCode.BAD_SEED_OP, ErrorCode.BAD_LUT, ErrorCode.UNSUPPORTED_PATTERN}
    if gen.layout == Gen.MAVERICK:
        never.add(ErrorCode.BAD_ACCUMULATE)
    elif gen < DOUBLE_ROW_FROM:
        never.add(ErrorCode.BAD_MX)
    return [_name(e) for e in ErrorCode if e != ErrorCode.NONE and e not in never]


def _tiles(gen) -> list:
    if gen.layout == Gen.MAVERICK:
        return ["r128_c128", "r128_c256", "r64_c128_0_0", "r64_c128_0_1", "r64_c128_1_0", "r64_c128_1_1", "r64_c256_0",
                "r64_c256_1", "r128_c128_col1"]
    step = group_step(gen)                        # 64-row / 64-column tiles only before NeuronCore-v3 (D-T97)
    return [f"row{r}_col{c}" for r in range(0, 4, step) for c in range(0, 4, step)]


# --- what one run hits -------------------------------------------------------------------------------

def _tile(gen, f) -> str:
    if gen.layout == Gen.MAVERICK:
        ts, sel = f["tile_size"], f["tile_sel"]
        r = "r64" if ts["row_size_log2"] == TileRowSize.R64 else "r128"
        c = "c128" if ts["col_size_log2"] == TileColSize.C128 else "c256"
        if r == "r64":
            return f"r64_{c}_{sel['row_sel']}" + (f"_{sel['col_sel']}" if c == "c128" else "")
        return f"{r}_{c}" + ("_col1" if c == "c128" and sel["col_sel"] else "")
    return f"row{f.get('row_grp', 0)}_col{f.get('col_grp', 0)}"


def _load_mode(u, f) -> str:
    """A weight load's mode bin, from its micro-op `u` (MX pumps: 4 elements per step, or 8)."""
    if u.mx:
        return "mx_quad" if PUMP_PACK[f["perf_mode"]] == 4 else "mx_oct"
    if u.lut:
        return "lut"
    if u.tagw:
        return "tag_weight"
    if u.xpose:
        return "xpose"
    return "double_row" if u.pack == DOUBLE_ROW_PACK else "plain"


def _mm_mode(u, f, stationary) -> str:
    """A matmul's mode bin, from its micro-op `u` and the stationary dtype."""
    if u.seed:
        return "seed"
    if u.mx:
        return "mx"
    if u.xpose:
        return "xpose"
    if u.fp32_mode:
        return "fp32_" + _name(u.fp32_mode)
    if u.pack == DOUBLE_ROW_PACK:
        return "double_row"
    if u.lut:
        return "lut"
    if stationary == "lut":
        return "lut_weights"
    return "mixed" if stationary not in (None, _name(f["in_dtype"])) else "plain"


def _acc(u, f) -> tuple:
    """(accumulate group, banks its first write zeroes or 'none')."""
    zero = str(u.zero_banks) if u.zero_banks else "none"
    if "psum_accumulate_flags" in f:
        return _name(AccumulateGroup(f["psum_accumulate_flags"] & 3)), zero
    return _name(f["flags"]["accumulate_flag"]), zero


def _value_classes(trace) -> set:
    out = set()
    for nbytes, shift in ((4, 0), (2, 16)):
        bits = np.array([e.data["bits"] for e in trace.events if e.kind == "psum_write" and e.data["bytes"] == nbytes],
                        np.uint32)
        if not bits.size:
            continue
        x = (bits << np.uint32(shift)).view(np.float32)
        with np.errstate(invalid="ignore"):
            for name, hit in (("zero", (x == 0) & ~np.signbit(x)), ("-0", (x == 0) & np.signbit(x)),
                              ("nan", np.isnan(x)), ("+inf", x == np.inf), ("-inf", x == -np.inf),
                              ("subnormal", (x != 0) & (np.abs(x) < np.finfo(np.float32).tiny)),
                              ("normal", np.abs(x) >= np.finfo(np.float32).tiny)):
                if (hit & ~np.isnan(x) if name == "normal" else hit).any():
                    out.add(name)
    return out


def _config(regs: dict) -> set:
    from tensore.model.regs import RegisterFile
    rf = RegisterFile()
    for name, value in regs.items():
        rf.write(rf.offset_of(name), value)
    checks = {"fifo_1": ("queue_cfg", "fifo_size_sel", 1), "dependency_check_off": ("queue_cfg", "disable_dependency_check", 1),
              "inter_instr_delay": ("arr_cluster_cfg", "en_inter_instr_dly", 1),
              "bypass_peregwrite": ("queue_cfg", "bypass_peregwrite_instr", 1),
              "matmul_done_first": ("arr_cluster_cfg", "matmul_done_last", 0), "perf_counters": ("perf_cntr_cfg", "cntr_en", 1)}
    return {k for k, (reg, field, want) in checks.items() if rf.get(reg, field) == want}


def _matmul_facts(hit, gen, o, st):
    d, f, u = o.desc, o.desc.fields, o.uop
    mode = _mm_mode(u, f, st["stationary"])
    hit("matmul", o.name, _name(f["in_dtype"]), mode)
    if mode == "seed":
        hit("seed", _name(u.seed))
        return
    out = _name(f.get("out_dtype") or Dtype.FP32)
    hit("flags", *_acc(u, f), out)
    if mode == "mx":
        hit("mx", "matmul", _name(f["in_dtype"]), _name(MXPerfMode(f["perf_mode"])))
    if mode == "xpose":
        hit("xpose", str(dt.format_of(f["in_dtype"], gen).width), out)
    if d.op == Opcode.MATMUL_SPARSE:
        hit("sparse_fmaps", str(f["src_mem_pattern"]["num_elem"][3]))
    if out == "bfloat16" and mode != "xpose":
        hit("rounding", "sr" if st["round_sr"] else "rne")


def _op_facts(hit, trace, o, st):
    """The bins an executed micro-op hits; `st` carries the stationary dtype and the rounding mode."""
    d, f, u = o.desc, o.desc.fields, o.uop
    hit("opcode", o.name)
    for name, event in (("set", d.events.set_event), ("wait", d.events.wait_event)):
        if event != EVENT_NONE:
            hit("events", name)
    if "tile_size" in f or "row_grp" in f:
        hit("tiles", _tile(trace.gen, f))
    if d.op in (Opcode.LDWEIGHTS, Opcode.LDWEIGHTS_MX):
        mode = _load_mode(u, f)
        order = LoadOrder.LAST_COL_FIRST if u.lcf else LoadOrder.FIRST_COL_FIRST
        hit("load", _name(f["in_dtype"]), mode, _name(order))
        st["stationary"] = "lut" if mode == "lut" else _name(f["in_dtype"])
        if mode == "tag_weight":
            hit("sparse_tags", "tag_weight")
        if u.mx:
            hit("mx", "load", _name(f["in_dtype"]), _name(MXPerfMode(f["perf_mode"])))
    elif d.op == Opcode.LDTAGS:
        hit("sparse_tags", f"force_{f['force_tag_bits']}")
    elif u.kind == Kind.MATMUL:
        _matmul_facts(hit, trace.gen, o, st)
    elif d.op == Opcode.PE_REG_WRITE:
        value = next((e.data["value"] for e in trace.events if e.kind == "reg" and e.op == o.index), 0)
        st["round_sr"] = value == 1
        hit("round_reg", "sr" if st["round_sr"] else "rne", "bypass" if st["bypass"] else "sbuf")
    elif d.op == Opcode.PE_MANAGE_SEED:
        hit("seed", _name(u.seed))


def facts(program, trace, sbuf_latency: int = 2) -> set:
    """The bins one golden run hits: {(generation, group, bin tuple)}."""
    out: set = set()

    def hit(group, *key):
        out.add((trace.gen.name, group, tuple(str(k) for k in key)))
    config = _config(program.regs)
    for s in config:
        hit("config", s)
    st = {"stationary": None, "round_sr": False, "bypass": "bypass_peregwrite" in config}
    for o in trace.ops:
        if o.error != ErrorCode.NONE:
            hit("error", _name(o.error))
        elif o.t_issue is not None:
            _op_facts(hit, trace, o, st)
    for e in trace.events:
        if e.kind == "psum_zero":
            hit("zero", str(e.data["banks"]), "yes" if e.data["bank"] + e.data["banks"] > 8 else "no")
    for v in _value_classes(trace):
        hit("values", v)
    for _, rules in stalls(trace, program.regs, sbuf_latency, program.timing):
        for r in rules & set(stall_rules(program.timing)):
            hit("stall", r)
            if r == "wait_event":
                hit("events", "wait_stalled")
    return out


# --- the issue-rule monitor (docs/timing.md) ---------------------------------------------------------

def _column(o, prof) -> bool:
    """A load on the column-serial port (the `column_loads` profiles, docs/timing.md)."""
    u = o.uop
    return prof.column_loads and u.kind == Kind.LOAD and \
        bool(column_load(o.desc.op == Opcode.LDTAGS, u.tagw, u.xpose, u.mx, u.lut, u.lcf))


def _rules_of(o, st, R, C, L, regs, prof) -> dict:
    """Each issue rule's earliest cycle for micro-op `o` in the state `st` the earlier ones left,
    under the timing profile `prof`."""
    d, u = o.desc, o.uop
    c = {"decode": o.t_decode + 1, "after_barrier": st["barrier"] + 1}
    if regs.get("arr_cluster_cfg", "en_inter_instr_dly"):
        c["inter_instr_delay"] = st["last_issue"] + 1 + regs.get("arr_cluster_cfg", "inter_instr_dly_cnt")
    if u.barrier or regs.get("queue_cfg", "disable_dependency_check"):
        c["barrier" if u.barrier else "dependency_check_off"] = st["all"] + 1
    elif u.kind == Kind.LOAD:
        mm = st["mm"]
        c["weight_port"] = column_port_next(st["lw_port"], st["lw_end"], st["lw_skew"], *st["lw_rows"], u.row0,
                                            _pick) if _column(o, prof) else st["lw_end"]
        fronts = [f for f in (st["tile_mm"][i] for i in _row_tiles(st, u.row0, u.rows)) if f]   # its tiles' last matmuls
        if fronts and _column(o, prof):
            c["column_front"] = max(column_load_issue(f["t_data"], mm["passes"], u.row0, u.col0, u.cols, L)
                                    for f in fronts)
        elif fronts and prof.row_wavefront and d.op != Opcode.LDTAGS:
            c["row_front"] = max(load_front_issue(f["t_data"], f["passes"], u.row0, u.rows, C, L) for f in fronts)
        elif fronts:
            c["swap_wait"] = max(f["t_data"] + f["passes"] * (R + C) - L for f in fronts)
        if d.op == Opcode.LDTAGS:
            c["sparse_drain"] = st["sparse_end"]
    else:
        if u.kind == Kind.MATMUL:      # its stream reaches tile i's entry passes x (rows above it) after issue
            entry, span = _stream(st, u)
            c["moving_port"] = max(st["tile_port"][i] - u.passes * (i * st["tile"] - entry)
                                   for i in _row_tiles(st, entry, span))
            if prof.row_tiles and not u.seed:    # its first write after the last of each lower tap's into its cells
                lead, box, tap = write_lead(L, span, u.col0, u.passes), _box(st, u), tap_of(entry, span, st["tile"])
                c["write_order"] = max([w[0] - lead + 1 for k, w in enumerate(st["tap_writes"])
                                        if k > tap and w and boxes_overlap(w[1], box)], default=0)
        else:
            c["moving_port"] = max(st["tile_port"])
        c["after_load"] = max(st["last_lw"], st["last_ldtags"]) + 1
        if st["lw_skew"] not in (0, u.passes):          # a column-serial load of other passes: its end
            c["column_load_end"] = st["lw_end"]
        mm = st["mm"]
        if mm and (mm["passes"] != u.passes or mm["kind"] != u.mmkind):
            c["pass_or_kind_change"] = mm["t_complete"] + 1
        floor = st["floor"]
        if prof.issue_floor and u.kind == Kind.MATMUL and floor and blocks_overlap(floor[1], u.block):
            c["issue_floor"] = floor[0]
    if len(st["done"]) >= MAX_IN_FLIGHT:
        c["in_flight_limit"] = sorted(st["done"])[-MAX_IN_FLIGHT] + 1
    we = d.events.wait_event
    if we != EVENT_NONE:
        sets = [s for s in st["events"].get(we, []) if s >= st["consumed"].get(we, -1)]
        c["wait_event"] = min(sets) + 1 if sets else 10 ** 12
    return c


def _mm(st, stream, port, **mm) -> dict:
    """The last matmul's timing; its t_complete the latest of every matmul so far (docs/timing.md).
    Each row tile its stream (entry row, span) crosses keeps it as its last matmul, its t_data taken
    back to row 0 (t_data - passes x entry), and its entry busy until the stream has passed it
    (`port`: the stream's last vector at its entry row; under row tiles, D-T100)."""
    if st["mm"] is not None:
        mm["t_complete"] = max(mm["t_complete"], st["mm"]["t_complete"])
    entry, p = stream[0], mm["passes"]
    for i in _row_tiles(st, *stream):
        st["tile_mm"][i] = dict(mm, t_data=mm["t_data"] - p * entry)
        st["tile_port"][i] = port + p * (i * st["tile"] - entry)
    return mm


def _row_tiles(st, row0, rows) -> range:
    """The row tiles rows row0 .. row0 + rows - 1 cover (one tile: the array, without row tiles)."""
    return range(row0 // st["tile"], -(-(row0 + rows) // st["tile"]))


def _box(st, u) -> tuple:
    """The PSUM box (timing.psum_box) of a matmul's destination; every cell for a seed's."""
    if u.kind != Kind.MATMUL or u.seed or u.dst is None:
        return 0, 1 << 16, 0, 1 << 30
    loc = addrmap.locate(u.dst.addr)
    cols = min(u.cols, st["half"])
    return psum_box(loc.partition, cols, loc.offset, u.dst.steps, u.dst.nums, 2 if u.out_bf16 else 4, _pick)


def _tap_writes(st, u, stream, t, last):
    """The tap below a stream: its last write and box (with its earlier ones' still writing at t)."""
    k, box = tap_of(*stream, st["tile"]), _box(st, u)
    old = st["tap_writes"][k]
    if old and old[0] >= t:
        box = tuple(f(a, b) for f, a, b in zip((min, max, min, max), old[1], box))
        last = max(last, old[0])
    st["tap_writes"][k] = (last, box)


def _stream(st, u) -> tuple:
    """(entry row, rows to the sum tap) of a matmul's stream: its first row and whole tiles under row
    tiles, a transpose's row 0 and the array (D-T100)."""
    if st["tile"] == st["rows"]:
        return 0, st["rows"]
    return tile_stream(u.row0, u.rows, u.xpose, st["rows"], st["tile"], _pick)


def _pick(cond, a, b):
    return a if cond else b


def _advance(o, st, R, C, L, prof):
    """The state after micro-op `o` issued (the timestamps docs/timing.md's rules read)."""
    d, u, t = o.desc, o.uop, o.t_issue
    st["last_issue"], st["all"] = t, max(st["all"], o.t_complete)
    st["done"].append(o.t_complete)
    if u.barrier:
        st["barrier"] = o.t_complete
    if d.events.set_event != EVENT_NONE:
        st["events"].setdefault(d.events.set_event, []).append(o.t_complete)
    if u.kind == Kind.LOAD and _column(o, prof):
        skew = st["mm"]["passes"] if st["mm"] else 1
        st["lw_port"], st["lw_end"] = column_port_free(t, skew, u.cols), column_load_end(t, skew, u.rows, u.cols)
        st["lw_skew"], st["last_lw"], st["lw_rows"] = skew, t, (u.row0, u.rows)
    elif u.kind in (Kind.LOAD, Kind.SEED):
        st["lw_port"] = st["lw_end"] = t + u.rows
        st["lw_skew"] = 0
        st["last_ldtags" if d.op == Opcode.LDTAGS else "last_lw"] = t
    every = (0, st["rows"])
    if u.kind == Kind.SEED:                       # the identity load of its states, then their transpose
        t_mm = t + u.rows + L
        st["mm"] = _mm(st, every, t_mm + SEED_STATES, t_data=t_mm + L, passes=1, t_complete=o.t_complete,
                       kind=MmKind.XPOSE, t_issue=t_mm)
        _tap_writes(st, u, every, t, o.t_complete)
    elif u.kind == Kind.MATMUL and u.seed:
        st["mm"] = _mm(st, every, t + 1, t_data=t + L, passes=1, t_complete=o.t_complete, kind=MmKind.XPOSE,
                       t_issue=t)
        st["floor"] = (t + _floor(u.mmkind == MmKind.XPOSE, u.rows, u.cols, 1, 1), u.block)
        _tap_writes(st, u, every, t, o.t_complete)
    elif u.kind == Kind.MATMUL:
        vectors = u.rows if u.xpose else o.psum_writes // max(1, u.cols)
        stream = _stream(st, u)
        st["mm"] = _mm(st, stream, t + vectors * u.passes, t_data=t + L, passes=u.passes,
                       t_complete=o.t_complete, kind=u.mmkind, t_issue=t)
        _tap_writes(st, u, stream, t, o.t_complete)
        st["floor"] = (t + _floor(u.mmkind == MmKind.XPOSE, u.rows, u.cols, vectors, u.passes), u.block)
        if d.op == Opcode.MATMUL_SPARSE:
            st["sparse_end"] = t + vectors + C


def _floor(xpose, rows, cols, vectors, passes) -> int:
    """A matmul's public cost before the next on its block (model/timing.py floor_cycles)."""
    return floor_cycles(xpose, rows, cols, vectors, passes, lambda c, a, b: a if c else b)


def stalls(trace, regs: dict | None = None, sbuf_latency: int = 2, timing=DEFAULT_PROFILE) -> list:
    """[(OpRecord, {rules})] for every issued micro-op: the issue rules (docs/timing.md) whose cycle is
    its issue cycle when that is later than decode + 1 (`fifo_full` when it waited to enter the
    FIFO); {'unexplained'} when no rule gives its issue cycle."""
    from tensore.model.regs import RegisterFile
    rf = RegisterFile()
    for name, value in (regs or {}).items():
        rf.write(rf.offset_of(name), value)
    R, C, L = trace.rows, trace.cols, sbuf_latency
    neg = -10 ** 9
    prof = profile(timing)
    tile = row_tile(trace.gen, R) if prof.row_tiles else R
    st = {"last_issue": neg, "all": -1, "barrier": -1, "lw_port": 0, "lw_end": 0, "lw_skew": 0, "lw_rows": (0, 0),
          "last_lw": neg, "last_ldtags": neg, "sparse_end": neg, "mm": None, "floor": None, "done": [],
          "events": {}, "consumed": {}, "rows": R, "tile": tile, "tile_port": [0] * (R // tile),
          "tile_mm": [None] * (R // tile), "tap_writes": [None] * (R // tile), "half": psum_half(trace.gen, C)}
    out = []
    for i, o in enumerate(trace.ops):
        if o.error != ErrorCode.NONE or o.t_issue is None:
            continue
        c = _rules_of(o, st, R, C, L, rf, prof)
        t = max(c.values())
        mm = st["mm"]
        passes = o.uop.passes
        rhythm = t
        while passes > 1 and mm is not None and rhythm <= mm["t_complete"] and (rhythm - mm["t_issue"]) % passes:
            rhythm += 1
        if rhythm != o.t_issue:
            rules = {"unexplained"}
        elif rhythm > t:
            rules = {"pass_rhythm"}
        else:
            rules = {r for r, v in c.items() if v == t and r != "decode"} if t > c["decode"] else set()
        if o.t_push > i:
            rules.add("fifo_full")
        we = o.desc.events.wait_event
        if we != EVENT_NONE:
            st["consumed"][we] = o.t_issue
        _advance(o, st, R, C, L, prof)
        out.append((o, rules))
    return out


# --- the database (cocotb-coverage) ---------------------------------------------------------------

def _group(cv, name: str, axes: dict, legal, unreach=frozenset()):
    """The cocotb-coverage items of one group: a CoverPoint per axis and, with two or more axes, their
    CoverCross with the illegal and the unreachable combinations ignored (one axis: the unreachable
    bins left out); returns the sampling function (one bin tuple)."""
    points = [f"{name}.{a}" for a in axes]
    if len(axes) == 1:
        axes = {a: [b for b in bins if (b,) not in unreach] for a, bins in axes.items()}

    def sample(key):
        return None
    covers = [cv.CoverPoint(point, xf=lambda key, i=i: key[i], bins=list(bins))
              for i, (point, bins) in enumerate(zip(points, axes.values()))]
    f = sample
    if len(axes) > 1:                   # innermost: it reads the points' hits of this sample
        ign = [combo for combo in product(*axes.values()) if (legal and not legal(*combo)) or combo in unreach]
        f = cv.CoverCross(f"{name}.cross", items=points, ign_bins=ign)(f)
    for cover in reversed(covers):
        f = cover(f)
    return f


class Coverage:
    """Facts of many runs (hits = runs that hit a bin), written as a cocotb-coverage database."""

    def __init__(self, gens=None, timing=DEFAULT_PROFILE):
        self.gens = [Gen.parse(g) for g in (gens or list(Gen))]
        self.timing = timing
        self.hits: Counter = Counter()
        self.runs = 0

    def add(self, program, trace, sbuf_latency: int = 2):
        self.add_facts(facts(program, trace, sbuf_latency))

    def add_facts(self, hit: set):
        """One run's facts ({(generation, group, bin tuple)})."""
        self.hits.update(hit)
        self.runs += 1

    def update(self, other: Coverage):
        self.hits.update(other.hits)
        self.runs += other.runs

    def write_xml(self, path) -> Path:
        """The database of the facts so far: cocotb-coverage's XML (tensore.<GEN>.<group>...)."""
        cv = _cv()
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        with _LOCK:
            cv.coverage_db.clear()
            samplers = {(g.name, name): _group(cv, f"{PREFIX}.{g.name}.{name}", axes, legal,
                                               frozenset(k for (grp, k) in unreachable(g) if grp == name))
                        for g in self.gens for name, (axes, legal) in model(g, self.timing).items()}
            for (g, name, key), n in sorted(self.hits.items()):
                if (g, name) in samplers:
                    for _ in range(n):
                        samplers[(g, name)](key)
            cv.coverage_db.export_to_xml(str(path))
            cv.coverage_db.clear()
        return path


def merge(paths, out) -> Path:
    """Merge shards' databases (cocotb-coverage's merge_coverage)."""
    _cv().merge_coverage(lambda *a: None, str(out), *map(str, paths))
    return Path(out)


# --- reports -------------------------------------------------------------------------------------------

def read(xml) -> dict:
    """{group name: {"size", "covered", "bins": {label: hits}}} of the crosses and single points of a
    database (a group of several axes reports its cross)."""
    root = ElementTree.parse(str(xml)).getroot()
    items: dict = {}
    for el in root.iter():
        name = el.attrib.get("abs_name", "")
        if "bin" in el.attrib:
            parent = name.rsplit(".", 1)[0]
            items.setdefault(parent, {"bins": {}})["bins"][_label(el.attrib["bin"])] = int(el.attrib["hits"])
    groups: dict = {}
    for name, item in items.items():
        group = name.rsplit(".", 1)[0].removeprefix("top.").removeprefix(f"{PREFIX}.")
        is_cross = name.endswith(".cross")
        if group in groups and not is_cross:
            continue
        groups[group] = item | {"size": len(item["bins"]), "covered": sum(1 for h in item["bins"].values() if h)}
    return dict(sorted(groups.items()))


def _label(text: str) -> str:
    try:
        value = ast.literal_eval(text)
    except (ValueError, SyntaxError):
        return text
    return " x ".join(map(str, value)) if isinstance(value, tuple) else str(value)


def holes(xml) -> dict:
    """{group: [bins never hit]}."""
    return {g: [b for b, h in item["bins"].items() if not h] for g, item in read(xml).items()}


def unreachable_of(xml) -> list:
    """[(generation.group, bin label, reason)] of the unreachable bins of the generations in a database."""
    gens = sorted({name.split(".", 1)[0] for name in read(xml)}, key=lambda g: Gen[g])
    return [(f"{g}.{grp}", " x ".join(key), why) for g in gens for (grp, key), why in unreachable(g).items()]


def _summary(groups) -> tuple:
    size = sum(g["size"] for g in groups.values())
    covered = sum(g["covered"] for g in groups.values())
    return covered, size, f"{covered} / {size} reachable bins hit ({100 * covered / max(size, 1):.1f}%)"


def text_report(xml, *, max_holes: int = 40) -> str:
    groups = read(xml)
    _, _, summary = _summary(groups)
    dead = unreachable_of(xml)
    lines = [f"functional coverage: {summary}; {len(dead)} unreachable bins (below, with reasons)", ""]
    for name, g in groups.items():
        missing = [b for b, h in g["bins"].items() if not h]
        lines.append(f"{name:<28} {g['covered']:>4}/{g['size']:<4} {100 * g['covered'] / max(g['size'], 1):5.1f}%")
        if missing:
            shown = ", ".join(missing[:max_holes]) + (f", ... ({len(missing) - max_holes} more)"
                                                      if len(missing) > max_holes else "")
            lines.append(f"    holes: {shown}")
    if dead:
        lines += ["", "unreachable bins (not counted):"]
        lines += [f"  {group} {label}: {why}" for group, label, why in dead]
    return "\n".join(lines) + "\n"


def html_report(xml, title: str = "tensore functional coverage") -> str:
    groups = read(xml)
    rows = []
    for name, g in groups.items():
        pct = 100 * g["covered"] / max(g["size"], 1)
        colour = "#c8f0c8" if pct == 100 else "#f8e8b0" if pct >= 75 else "#f4c0c0"
        cells = "".join(f'<span class="{"hit" if h else "hole"}" title="{h} run(s)">{html.escape(b)}</span> '
                        for b, h in g["bins"].items())
        rows.append(f'<tr><td>{html.escape(name)}</td><td style="background:{colour}">{g["covered"]}/{g["size"]} '
                    f'({pct:.1f}%)</td><td>{cells}</td></tr>')
    _, _, summary = _summary(groups)
    dead = "".join(f"<tr><td>{html.escape(g)}</td><td>{html.escape(b)}</td><td>{html.escape(why)}</td></tr>"
                   for g, b, why in unreachable_of(xml))
    return (f"<!doctype html><html><head><meta charset='utf-8'><title>{html.escape(title)}</title><style>"
            "body{font-family:sans-serif} td{vertical-align:top;padding:4px;border-bottom:1px solid #ddd}"
            ".hit{color:#206020} .hole{color:#fff;background:#c03030;padding:0 3px}</style></head><body>"
            f"<h1>{html.escape(title)}</h1><p>{html.escape(summary)}; holes in red.</p>"
            "<table><tr><th>group</th><th>covered</th><th>bins</th></tr>" + "".join(rows) + "</table>"
            + (f"<h2>Unreachable bins (not counted)</h2><table><tr><th>group</th><th>bin</th><th>reason</th></tr>{dead}"
               "</table>" if dead else "") + "</body></html>")


def write_report(xml, out) -> str:
    """Write the report `out` (.html: HTML; else text) of a database; returns the text report."""
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    text = text_report(xml)
    out.write_text(html_report(xml) if out.suffix in (".html", ".htm") else text)
    return text
