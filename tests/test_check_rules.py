"""Every validity rule of model/isa/check.py (SPEC D-23, D-T22) at its boundary: one descriptor just
inside (the rule does not fire) and one just outside (it fires, at its own call site).

The rules are read from check.py itself: each `self.bad(E.CODE, field, ...)` and each `Violation(...)`
of `check()` is a rule, named `function:CODE:field` (`#k` for the k-th site of the same name, in
source order), and from the table of model/isa/rules.py that check.py walks (`_Checker.rules`), each
row named the same way by its family (`Rule.name`), and the rules rules.py makes for the structure
and for each pattern walk, named by what they check (`rules.STRUCTURE`, `rules.PATTERN`).  Which
sites a descriptor reaches is recorded by wrapping check.py's Violation, so a fixture proves the very
site (or table row) it names fired; a rule added to check.py or to the table without a fixture here
fails test_every_rule_has_a_fixture."""
import ast
import dataclasses
import importlib
import sys

import ml_dtypes
import numpy as np
import pytest

from tensore.model import addrmap
from tensore.model import dtypes as dt
from tensore.model.addrmap import psum_addr, sbuf_addr
from tensore.model.dtypes import Dtype, Gen
from tensore.model.isa import decode
from tests.fixtures import valid

CHECK = importlib.import_module("tensore.model.isa.check")
RULES = importlib.import_module("tensore.model.isa.rules")
INTERPRETER = "rules"           # _Checker.rules walks the table: its call is no rule of its own


def rule_sites() -> dict:
    """{rule name: (first line, last line)} of every rule call in check.py, in source order."""
    tree = ast.parse(open(CHECK.__file__).read())
    found = []
    for fn in ast.walk(tree):
        if not isinstance(fn, ast.FunctionDef) or fn.name == INTERPRETER:
            continue
        for node in ast.walk(fn):
            if not isinstance(node, ast.Call):
                continue
            f = node.func
            bad = isinstance(f, ast.Attribute) and f.attr == "bad" and getattr(f.value, "id", None) == "self"
            violation = isinstance(f, ast.Name) and f.id == "Violation" and fn.name != "bad"
            if bad or violation:
                field = node.args[1]
                field = field.value if isinstance(field, ast.Constant) else ast.unparse(field)
                found.append((node.lineno, node.end_lineno, f"{fn.name}:{ast.unparse(node.args[0]).split('.')[-1]}:{field}"))
    sites, seen = {}, {}
    for lo, hi, name in sorted(found):
        seen[name] = seen.get(name, 0) + 1
        sites[name if seen[name] == 1 else f"{name}#{seen[name]}"] = (lo, hi)
    for name in [n for n in sites if seen.get(n, 0) > 1]:          # the first of several is #1
        sites[f"{name}#1"] = sites.pop(name)
    for name in [rule.name for rule in RULES.RULES + RULES.OPCODE] + list(RULES.STRUCTURE + RULES.PATTERN):
        assert name not in sites, name
        sites[name] = None
    return sites


SITES = rule_sites()


def fired(desc: bytes, gen: str, **kw) -> set:
    """The rule sites check() reaches on `desc`."""
    hits = set()
    real = CHECK.Violation

    def record(*args, **kwargs):
        frame = sys._getframe(1)
        while frame is not None:
            if frame.f_code.co_filename == CHECK.__file__:
                hits.update(n for n, at in SITES.items() if at and at[0] <= frame.f_lineno <= at[1])
                rule = frame.f_locals.get("rule")
                if frame.f_code.co_name == INTERPRETER and isinstance(rule, RULES.Rule):
                    hits.add(rule.name)
            frame = frame.f_back
        return real(*args, **kwargs)
    CHECK.Violation = record
    try:
        violations = CHECK.check(desc, gen, **kw)
    finally:
        CHECK.Violation = real
    assert bool(hits) == bool(violations)
    return hits


def t3(addr, n, steps=(1, 0, 0), dims=(1, 1)):
    return dict(start_addr=addr, step_elem=list(steps), num_elem=[n, *dims])


MAV_MX = dict(in_dtype="fp4_exp2", perf_mode="quad_row",
              src_mem_pattern=dict(kind="mxtensor_v2", data_addr=sbuf_addr(0), scale_addr=sbuf_addr(0, 0x8000),
                                   num_elem=[64, 1], scale_dtype="sfp8_e8", p_f_dim=0x23),
              dst_mem_pattern=t3(psum_addr(0, 1), 16))
C256 = dict(row_size_log2="r128", col_size_log2="c256")
R64 = dict(row_size_log2="r64", col_size_log2="c128")
SEED_MM = dict(in_dtype="fp32", fp32_mode="high", out_dtype="fp32", num_active_rows=1, num_active_cols=0,
               tile_size=dict(row_size_log2="r64", col_size_log2="c256"), flags=dict(xpose_mode=1, seed_mode="load_seed"),
               src_mem_pattern=t3(sbuf_addr(0, 0x100), 256),
               dst_mem_pattern=dict(start_addr=psum_addr(0, 6, 0x100), step_elem=[1, 0, 1], num_elem=[1, 1, 2]))
SAVE_MM = {**SEED_MM, "flags": dict(xpose_mode=1, seed_mode="save_seed")}
XPOSE = dict(in_dtype="int32", flags=dict(xpose_mode=1), dst_mem_pattern=t3(psum_addr(0, 1), 128))
SEED_LOAD = dict(mode="load_seed", dst_seed_mem_pattern={},
                 src_seed_mem_pattern=dict(start_addr=sbuf_addr(0, 0x800), step_elem=[1, 0], num_elem=[128, 1]))
LUT16 = dict(num_entries=16, src_mem_pattern=dict(start_addr=sbuf_addr(0), step_elem=[1], num_elem=[16]))


def _opcode(b: bytes, code: int) -> bytes:
    return bytes([code]) + b[1:]


# rule: (gen, op, inside override, outside override[, (inside, outside) check() keywords]); the inside has no
# violation at all unless the rule is in DIRTY_INSIDE
FIXTURES = {
    "events:BAD_EVENT:events.wait_event": ("maverick", "matmul", dict(events=dict(wait_event=63)),
                                           dict(events=dict(wait_event=64))),
    "events:BAD_EVENT:events.set_event": ("cayman", "ldtags", dict(events=dict(set_event=0xFF)),
                                          dict(events=dict(set_event=0xFE))),
    "structure:RESERVED_NONZERO:bytes": ("maverick", "matmul", dict(reserved1=0), dict(reserved1=1)),
    "structure:BAD_DTYPE:byte": ("mariana", "matmul", dict(in_dtype=0x10), dict(in_dtype=0x11)),
    "structure:BAD_ENUM:byte": ("cayman", "matmul", dict(psum_zero_region=3), dict(psum_zero_region=4)),
    "structure:RESERVED_NONZERO:bits": ("maverick", "matmul", dict(flags=dict(reserved=0)),
                                                dict(flags=dict(reserved=1))),
    "structure:BAD_ENUM:bits": ("maverick", "ldweights", dict(tile_size=dict(row_size_log2=7, col_size_log2=7)),
                                        dict(tile_size=dict(row_size_log2=5, col_size_log2=7))),
    "pattern:UNSUPPORTED_PATTERN:indirect16b": ("maverick", "matmul", {},
                                         dict(src_mem_pattern=dict(kind="indirect16b", start_addr=0, num_elem=[64, 1]))),
    "tensor:BAD_PATTERN:num_elem": ("cayman", "matmul", dict(src_mem_pattern=t3(sbuf_addr(0), 64)),
                                              dict(src_mem_pattern=t3(sbuf_addr(0), 64, dims=(0, 1)))),
    "window:BAD_ADDRESS:memory": ("maverick", "ldweights", dict(src_mem_pattern=t3(sbuf_addr(0, 0x3FF00), 128)),
                                                  dict(src_mem_pattern=t3(psum_addr(0), 128))),
    "window:BAD_ADDRESS:bytes": ("mariana", "matmul", dict(src_mem_pattern=t3(sbuf_addr(0, 0x3FF80), 64)),
                                dict(src_mem_pattern=t3(sbuf_addr(0, 0x3FF82), 64))),
    "window:BAD_ADDRESS:partitions": ("cayman", "matmul",
                                                  dict(num_active_rows=127, src_mem_pattern=t3(sbuf_addr(1), 64)),
                                                  dict(num_active_rows=128, src_mem_pattern=t3(sbuf_addr(1), 64))),
    "mx_pattern:BAD_MX:scale_dtype": ("maverick", "matmul", MAV_MX,
                                                {**MAV_MX, "src_mem_pattern": {**MAV_MX["src_mem_pattern"],
                                                                               "scale_dtype": "sfp8_e7"}}),
    "mx_pattern:BAD_MX:p_f_dim": ("maverick", "matmul", MAV_MX,
                                            {**MAV_MX, "src_mem_pattern": {**MAV_MX["src_mem_pattern"], "p_f_dim": 0x22}}),
    "mx_pattern:BAD_PATTERN:num_elem": ("maverick", "matmul", MAV_MX,
                                                  {**MAV_MX, "src_mem_pattern": {**MAV_MX["src_mem_pattern"],
                                                                                 "num_elem": [64, 0]}}),
    "mx_dtype:BAD_MX:in_dtype": ("mariana", "matmul_mx", dict(in_dtype="fp8_exp5"), dict(in_dtype="bf16")),
    "rows_cols:BAD_ACTIVE_RANGE:num_active_rows": ("mariana", "matmul", dict(num_active_rows=128),
                                                   dict(num_active_rows=129)),
    "rows_cols:BAD_ACTIVE_RANGE:num_active_cols": ("mariana", "matmul", dict(num_active_cols=128),
                                                   dict(num_active_cols=129)),
    "rows_cols:BAD_TILE:tile_sel": ("maverick", "ldweights", dict(tile_sel=dict(row_sel=1), num_active_rows=64, tile_size=R64),
                                    dict(tile_sel=dict(row_sel=2), num_active_rows=64, tile_size=R64)),
    "rows_cols:BAD_TILE:tile_sel.row_sel": ("maverick", "ldweights",
                                            dict(tile_sel=dict(row_sel=1), num_active_rows=64, tile_size=R64),
                                            dict(tile_sel=dict(row_sel=1), num_active_rows=64)),
    "rows_cols:BAD_TILE:tile_sel.col_sel": ("maverick", "ldweights", dict(tile_sel=dict(col_sel=1)),
                                            dict(tile_sel=dict(col_sel=1), tile_size=C256)),
    "rows_cols:BAD_TILE:num_active_rows": ("maverick", "ldweights", dict(num_active_rows=64, tile_size=R64),
                                           dict(num_active_rows=65, tile_size=R64)),
    "rows_cols:BAD_TILE:num_active_cols": ("maverick", "ldweights", dict(num_active_cols=128),
                                           dict(num_active_cols=129, src_mem_pattern=t3(sbuf_addr(0), 129))),
    "rows_cols:BAD_TILE:row_grp#1": ("cayman", "ldweights", dict(row_grp=1, num_active_rows=96),
                                     dict(row_grp=1, num_active_rows=97)),
    "rows_cols:BAD_TILE:col_grp#1": ("mariana", "ldweights",
                                     dict(col_grp=1, num_active_cols=96, src_mem_pattern=t3(sbuf_addr(0), 96)),
                                     dict(col_grp=1, num_active_cols=97, src_mem_pattern=t3(sbuf_addr(0), 97))),
    # NeuronCore-v2 has no 32-row / 32-column tiles (D-T97)
    "rows_cols:BAD_TILE:row_grp#2": ("sunda", "ldweights", dict(row_grp=2, num_active_rows=32),
                                     dict(row_grp=1, num_active_rows=32)),
    "rows_cols:BAD_TILE:col_grp#2": ("sunda", "matmul", dict(col_grp=2, num_active_cols=32,
                                                            dst_mem_pattern=t3(psum_addr(0, 0), 64)),
                                     dict(col_grp=3, num_active_cols=32, dst_mem_pattern=t3(psum_addr(0, 0), 64))),
    "fp32_mode:BAD_FP32_MODE:fp32_mode#1": ("maverick", "matmul", dict(in_dtype="fp32", fp32_mode="low"),
                                            dict(in_dtype="fp32", fp32_mode="none")),
    "fp32_mode:BAD_FP32_MODE:fp32_mode#2": ("cayman", "matmul", dict(fp32_mode="none"), dict(fp32_mode="low")),
    "compute_dtype:BAD_LUT:in_dtype": ("maverick", "matmul", dict(in_dtype="uint8", flags=dict(scalar_mode="lut")),
                                       dict(in_dtype="int8", flags=dict(scalar_mode="lut"))),
    "compute_dtype:BAD_DTYPE:in_dtype#1": ("maverick", "matmul", XPOSE, {**XPOSE, "in_dtype": "int64"}),
    "compute_dtype:BAD_DTYPE:in_dtype#2": ("maverick", "matmul", dict(in_dtype="fp8_exp2"), dict(in_dtype="int8")),
    "compute_dtype:DTYPE_MIX:in_dtype": ("mariana", "matmul", {}, {}, (dict(stationary_dtype=Dtype.BFLOAT16),
                                                                      dict(stationary_dtype=Dtype.FP32))),
    "perf:BAD_DTYPE:perf_opt": ("cayman", "matmul", dict(perf_opt="double_row", in_dtype="fp8_exp4",
                                                         dst_mem_pattern=t3(psum_addr(0, 1), 32)),
                                dict(perf_opt="double_row", in_dtype="bf16", dst_mem_pattern=t3(psum_addr(0, 1), 32))),
    # double row's public limits (D-T97): CAYMAN and later, no column tiling
    "perf:BAD_ENUM:perf_opt": ("sunda", "matmul", dict(in_dtype="fp8_exp4"),
                                 dict(perf_opt="double_row", in_dtype="fp8_exp4", dst_mem_pattern=t3(psum_addr(0, 1), 32))),
    "perf:BAD_TILE:col_grp": ("cayman", "matmul",
                              dict(perf_opt="double_row", in_dtype="fp8_exp4", num_active_cols=96,
                                   dst_mem_pattern=t3(psum_addr(0, 1), 32)),
                              dict(perf_opt="double_row", in_dtype="fp8_exp4", num_active_cols=96, col_grp=1,
                                   dst_mem_pattern=t3(psum_addr(0, 1), 32))),
    "destination:BAD_PATTERN:src_mem_pattern": ("cayman", "matmul",
                                                dict(src_mem_pattern=t3(sbuf_addr(0, 0x100), 512),
                                                     dst_mem_pattern=t3(psum_addr(0, 0), 512)),
                                                dict(src_mem_pattern=t3(sbuf_addr(0, 0x100), 513),
                                                     dst_mem_pattern=t3(psum_addr(0, 0), 513))),
    "out_dtype:BAD_OUT_DTYPE:out_dtype": ("cayman", "matmul", dict(out_dtype="fp32"), dict(out_dtype="bf16")),
    "accumulate:BAD_ACCUMULATE:psum_accumulate_flags#1": ("cayman", "matmul", dict(psum_accumulate_flags=7),
                                                          dict(psum_accumulate_flags=8)),
    "accumulate:BAD_ACCUMULATE:psum_accumulate_flags#2": ("mariana", "matmul", dict(psum_accumulate_flags=6),
                                                          dict(psum_accumulate_flags=5)),
    "accumulate:BAD_ACCUMULATE:flags.accumulate_flag": ("mariana", "matmul", dict(flags=dict(accumulate_flag=0)),
                                                        dict(flags=dict(accumulate_flag=1))),
    "seed_mode:BAD_SEED_OP:flags.seed_mode": ("mariana", "ldweights", dict(flags=dict(seed_mode=0)),
                                              dict(flags=dict(seed_mode=1))),
    "seed_mode:BAD_SEED_OP:tile_size.row_size_log2": ("maverick", "matmul", SEED_MM,
                                                      {**SEED_MM, "tile_size": dict(row_size_log2="r128",
                                                                                    col_size_log2="c256")}),
    "seed_mode:BAD_SEED_OP:tile_size.col_size_log2": ("maverick", "matmul", SEED_MM,
                                                      {**SEED_MM, "tile_size": dict(row_size_log2="r64",
                                                                                    col_size_log2="c128")}),
    "seed_mode:BAD_SEED_OP:in_dtype": ("maverick", "matmul", SEED_MM, {**SEED_MM, "in_dtype": "bf16"}),
    "seed_mode:BAD_SEED_OP:fp32_mode": ("maverick", "matmul", SEED_MM, {**SEED_MM, "fp32_mode": "low"}),
    "seed_mode:BAD_SEED_OP:flags.xpose_mode": ("maverick", "matmul", SEED_MM,
                                               {**SEED_MM, "flags": dict(xpose_mode=0, seed_mode="save_seed")}),
    "seed_mode:BAD_SEED_OP:num_active_rows": ("maverick", "matmul", SEED_MM, {**SEED_MM, "num_active_rows": 2}),
    "seed_mode:BAD_SEED_OP:num_active_cols": ("maverick", "matmul", SEED_MM, {**SEED_MM, "num_active_cols": 128}),
    "seed_mode:BAD_SEED_OP:out_dtype": ("maverick", "matmul", SEED_MM, {**SEED_MM, "out_dtype": "bf16"}),
    "seed_mode:BAD_SEED_OP:dst_mem_pattern": ("maverick", "matmul", SAVE_MM,
                                              {**SAVE_MM, "dst_mem_pattern": dict(start_addr=psum_addr(0, 6, 0x100),
                                                                                  step_elem=[1, 0, 1], num_elem=[1, 1, 1])}),
    "array_op:BAD_MX:perf_mode": ("maverick", "matmul", dict(perf_mode="none"), dict(perf_mode="quad_row")),
    "ldweights:BAD_ENUM:bg_xpose_mode": ("mariana", "ldweights", dict(bg_xpose_mode=0), dict(bg_xpose_mode=1)),
    "ldweights:BAD_SPARSE:tag_weight_mode": ("cayman", "ldweights", dict(tag_weight_mode="tag_weight", in_dtype="fp16"),
                                             dict(tag_weight_mode="tag_weight", in_dtype="fp8_exp5")),
    "ldweights:BAD_PATTERN:src_mem_pattern": ("maverick", "ldweights", dict(src_mem_pattern=t3(sbuf_addr(0), 128)),
                                              dict(src_mem_pattern=t3(sbuf_addr(0), 127))),
    "matmul:BAD_PATTERN:src_mem_pattern": ("cayman", "matmul",
                                           dict(perf_opt="double_row", in_dtype="fp8_exp4",
                                                dst_mem_pattern=t3(psum_addr(0, 1), 32)),
                                           dict(perf_opt="double_row", in_dtype="fp8_exp4",
                                                src_mem_pattern=t3(sbuf_addr(0, 0x100), 63),
                                                dst_mem_pattern=t3(psum_addr(0, 1), 32))),
    "seed_patterns:BAD_SEED_OP:src_mem_pattern": ("maverick", "matmul", SEED_MM,
                                                  {**SEED_MM, "src_mem_pattern": t3(sbuf_addr(0, 0x100), 255)}),
    "transpose_destination:BAD_PATTERN:src_mem_pattern": ("maverick", "matmul",
                                                          {**XPOSE, "src_mem_pattern": t3(sbuf_addr(0, 0x100), 128)},
                                                          {**XPOSE, "src_mem_pattern": t3(sbuf_addr(0, 0x100), 129)}),
    "transpose_destination:BAD_OUT_DTYPE:out_dtype": ("maverick", "matmul", {**XPOSE, "in_dtype": "bf16", "out_dtype": "bf16"},
                                                      {**XPOSE, "out_dtype": "bf16"}),
    "transpose_destination:BAD_PATTERN:dst_mem_pattern": ("maverick", "matmul", XPOSE,
                                                          {**XPOSE, "dst_mem_pattern": t3(psum_addr(0, 1), 127)}),
    "destination:BAD_PATTERN:dst_mem_pattern.num_elem": (
        "maverick", "matmul",
        dict(num_active_cols=0, tile_size=C256, dst_mem_pattern=t3(psum_addr(0), 64, (1, 0, 512), (1, 2))),
        dict(num_active_cols=0, tile_size=C256, dst_mem_pattern=t3(psum_addr(0), 128, (1, 0, 512), (1, 1)))),
    "destination:BAD_PATTERN:dst_mem_pattern#1": (
        "maverick", "matmul",
        dict(num_active_cols=0, tile_size=C256, dst_mem_pattern=t3(psum_addr(0), 64, (1, 0, 512), (1, 2))),
        dict(num_active_cols=0, tile_size=C256, dst_mem_pattern=t3(psum_addr(0), 63, (1, 0, 512), (1, 2)))),
    "destination:BAD_PATTERN:dst_mem_pattern#2": ("cayman", "matmul", dict(dst_mem_pattern=t3(psum_addr(0), 64)),
                                                  dict(dst_mem_pattern=t3(psum_addr(0), 63))),
    "matmul_sparse:BAD_SPARSE:flags": ("mariana", "matmul_sparse", dict(flags=dict(xpose_mode=0)),
                                       dict(flags=dict(xpose_mode=1))),
    "matmul_sparse:BAD_SPARSE:src_mem_pattern.num_elem[3]": (
        "maverick", "matmul_sparse", dict(src_mem_pattern=dict(start_addr=0, step_elem=[1, 0, 0, 16], num_elem=[16, 1, 1, 4])),
        dict(src_mem_pattern=dict(start_addr=0, step_elem=[1, 0, 0, 16], num_elem=[16, 1, 1, 5]))),
    "ldtags:BAD_SPARSE:in_dtype": ("mariana", "ldtags", dict(in_dtype="uint16"), dict(in_dtype="uint8")),
    "ldtags:BAD_SPARSE:force_tag_bits": ("cayman", "ldtags", dict(force_tag_bits=0xC), dict(force_tag_bits=0xD)),
    "pe_manage_seed:BAD_SEED_OP:mode": ("mariana", "pe_manage_seed", dict(mode="save_seed"), dict(mode="none")),
    "pe_manage_seed:BAD_SEED_OP:num_active_rows": ("mariana", "pe_manage_seed", dict(num_active_rows=16),
                                                   dict(num_active_rows=15)),
    "pe_manage_seed:BAD_SEED_OP:identity_dtype": ("mariana", "pe_manage_seed", dict(identity_dtype="fp32r"),
                                                  dict(identity_dtype="fp32")),
    "pe_manage_seed:BAD_SEED_OP:identity_mem_pattern.num_elem": (
        "mariana", "pe_manage_seed", {}, dict(identity_mem_pattern=dict(start_addr=sbuf_addr(0, 0x400), step_elem=[1],
                                                                        num_elem=[15]))),
    "pe_manage_seed:BAD_SEED_OP:src_seed_mem_pattern.num_elem": (
        "mariana", "pe_manage_seed", SEED_LOAD,
        {**SEED_LOAD, "src_seed_mem_pattern": dict(start_addr=sbuf_addr(0, 0x800), step_elem=[1, 0], num_elem=[127, 1])}),
    "pe_manage_seed:BAD_SEED_OP:src_seed_mem_pattern.start_addr": (
        "mariana", "pe_manage_seed", SEED_LOAD,
        {**SEED_LOAD, "src_seed_mem_pattern": dict(start_addr=sbuf_addr(1, 0x800), step_elem=[1, 0], num_elem=[128, 1])}),
    "pe_manage_seed:BAD_SEED_OP:dst_seed_mem_pattern#1": (
        "mariana", "pe_manage_seed", SEED_LOAD,
        {**SEED_LOAD, "dst_seed_mem_pattern": dict(start_addr=0, step_elem=[0, 0], num_elem=[1, 0])}),
    "pe_manage_seed:BAD_SEED_OP:dst_seed_mem_pattern#2": (
        "mariana", "pe_manage_seed", {},
        dict(dst_seed_mem_pattern=dict(start_addr=0x0200_0000, step_elem=[1, 256], num_elem=[2, 8]))),
    "pe_manage_seed:BAD_SEED_OP:src_seed_mem_pattern": (
        "mariana", "pe_manage_seed", {}, dict(src_seed_mem_pattern=dict(start_addr=4, step_elem=[0, 0], num_elem=[0, 0]))),
    "mx_op:BAD_MX:flags": ("mariana", "ldweights_mx", dict(flags=dict(xpose_mode=0)), dict(flags=dict(xpose_mode=1))),
    "mx_op:UNSUPPORTED_PATTERN:src_mem_pattern.index_addr": (
        "mariana", "ldweights_mx", {},
        dict(src_mem_pattern=dict(data_addr=0, scale_addr=0x8000, index_addr=0x100, step_elem=1, num_elem=512))),
    "mx_op:BAD_PATTERN:src_mem_pattern.num_elem#1": (
        "mariana", "ldweights_mx", {},
        dict(src_mem_pattern=dict(data_addr=0, scale_addr=0x8000, step_elem=1, num_elem=0))),
    "mx_op:BAD_PATTERN:src_mem_pattern.num_elem#2": (
        "mariana", "matmul_mx", {},
        dict(src_mem_pattern=dict(data_addr=0, scale_addr=0x8000, step_elem=1, num_elem=62))),
    "mx_op:BAD_PATTERN:src_mem_pattern.num_elem#3": (
        "mariana", "ldweights_mx", {},
        dict(src_mem_pattern=dict(data_addr=0, scale_addr=0x8000, step_elem=1, num_elem=508))),
    "pe_reg_write:BAD_REGISTER:reg": ("maverick", "pe_reg_write", dict(reg=0), dict(reg=1)),
    "pe_reg_write:BAD_REGISTER:value": ("cayman", "pe_reg_write", dict(value=1), dict(value=2)),
    "pe_reg_write:BAD_PATTERN:src_mem_pattern.num_elem": (
        "mariana", "pe_reg_write", {}, dict(src_mem_pattern=dict(start_addr=sbuf_addr(5, 0x10), step_elem=[1], num_elem=[2]))),
    "conv_lut_load:BAD_LUT:in_dtype": ("maverick", "conv_lut_load", dict(in_dtype="bf16"), dict(in_dtype="int8")),
    "conv_lut_load:BAD_LUT:num_entries": (
        "mariana", "conv_lut_load", dict(num_entries=256, src_mem_pattern=dict(start_addr=0, step_elem=[1], num_elem=[256])),
        dict(num_entries=257, src_mem_pattern=dict(start_addr=0, step_elem=[1], num_elem=[257]))),
    "conv_lut_load:BAD_LUT:src_mem_pattern.num_elem": (
        "maverick", "conv_lut_load", LUT16, {**LUT16, "src_mem_pattern": dict(start_addr=0, step_elem=[1], num_elem=[15])}),
}
# the MX flags rule on each flag it refuses, and on MatmulMX
EXTRA_OUTSIDE = [("mx_op:BAD_MX:flags", "mariana", "ldweights_mx", dict(flags=dict(seed_mode=1))),
                 ("mx_op:BAD_MX:flags", "mariana", "ldweights_mx", dict(flags=dict(scalar_mode="lut"))),
                 ("mx_op:BAD_MX:flags", "mariana", "matmul_mx", dict(flags=dict(xpose_mode=1)))]
# inside descriptors next to a boundary that another rule refuses (the boundary value itself is dirty)
DIRTY_INSIDE = {"structure:BAD_DTYPE:byte": "0x10 (FP4_EXP2) is MARIANA's, but no matmul input",
                "accumulate:BAD_ACCUMULATE:psum_accumulate_flags#1": "7 sets BEGIN and BEGIN_ACCUM"}
# Outsides that fire more than their rule, and why: the rest fire their rule alone, so a rule that
# fires on a neighbour's fault (a count read where its pattern was not walked) is a second report.
OUTSIDE_ALSO = {
    "rows_cols:BAD_ACTIVE_RANGE:num_active_rows": ({"rows_cols:BAD_TILE:row_grp#1", "window:BAD_ADDRESS:partitions"},
                                                   "the rows past the array are past the tile and the partitions"),
    "rows_cols:BAD_ACTIVE_RANGE:num_active_cols": ({"rows_cols:BAD_TILE:col_grp#1"}, "the columns past the tile"),
    "seed_mode:BAD_SEED_OP:tile_size.col_size_log2": ({"rows_cols:BAD_TILE:num_active_cols"},
                                                      "the narrower tile holds fewer columns than are active"),
    "seed_mode:BAD_SEED_OP:in_dtype": ({"fp32_mode:BAD_FP32_MODE:fp32_mode#2"}, "the fp32 mode needs an fp32 input"),
    "pe_reg_write:BAD_REGISTER:reg": ({"structure:BAD_ENUM:byte"}, "the register byte is no PeReg either"),
}
RAW = {  # rules of the opcode byte (rules.OPCODE), on bytes: (gen, inside bytes, outside bytes[, gen the outside is checked on])
    "opcode:BAD_OPCODE:header.opcode": ("cayman", valid("ldweights", "cayman"), _opcode(valid("ldweights", "cayman"), 0x05)),
    "opcode:OPCODE_NOT_IN_GEN:header.opcode": ("mariana", valid("matmul_mx", "mariana"), valid("matmul_mx", "mariana"),
                                              "cayman"),
}

# what each rule's outside fixture reads as (check()'s messages, in order): each names the values the
# fixture wrote (count, address, dtype, register), the limit it breaks and the generation
OUTSIDE_MESSAGES = {
    "accumulate:BAD_ACCUMULATE:flags.accumulate_flag": [
        "BAD_ACCUMULATE (0x13) flags.accumulate_flag: MARIANA accumulates by psum_accumulate_flags; "
        "accumulate_flag must be 0",
    ],
    "accumulate:BAD_ACCUMULATE:psum_accumulate_flags#1": [
        "BAD_ACCUMULATE (0x13) psum_accumulate_flags: 0x8 has bits beyond the three flags",
    ],
    "accumulate:BAD_ACCUMULATE:psum_accumulate_flags#2": [
        "BAD_ACCUMULATE (0x13) psum_accumulate_flags: BEGIN and BEGIN_ACCUM together",
    ],
    "array_op:BAD_MX:perf_mode": [
        "BAD_MX (0x0e) perf_mode: QUAD_ROW / OCT_ROW pumps need an MXTensorV2 source",
    ],
    "compute_dtype:BAD_DTYPE:in_dtype#1": [
        "BAD_DTYPE (0x05) in_dtype: INT64 cannot be transposed (8/16/32-bit data only)",
    ],
    "compute_dtype:BAD_DTYPE:in_dtype#2": [
        "BAD_DTYPE (0x05) in_dtype: INT8 is not a matmul input (BFLOAT16, FP16, FP32, FP8_EXP2, FP8_EXP3, "
        "FP8_EXP4, FP8_EXP5)",
    ],
    "compute_dtype:BAD_LUT:in_dtype": [
        "BAD_LUT (0x11) in_dtype: LUT mode operands are UINT8 table indices",
    ],
    "compute_dtype:DTYPE_MIX:in_dtype": [
        "DTYPE_MIX (0x06) in_dtype: moving BFLOAT16 with stationary FP32: FP32 (tf32) operands cannot mix with low "
        "precision",
    ],
    "conv_lut_load:BAD_LUT:in_dtype": [
        "BAD_LUT (0x11) in_dtype: LUT entries are BFLOAT16, FP16 or FP32",
    ],
    "conv_lut_load:BAD_LUT:num_entries": [
        "BAD_LUT (0x11) num_entries: 257 is not in 1..256",
    ],
    "conv_lut_load:BAD_LUT:src_mem_pattern.num_elem": [
        "BAD_LUT (0x11) src_mem_pattern.num_elem: the pattern must hold num_entries elements",
    ],
    "destination:BAD_PATTERN:dst_mem_pattern#1": [
        "BAD_PATTERN (0x0c) dst_mem_pattern: dst holds 63 elements per half, moving has 64",
    ],
    "destination:BAD_PATTERN:dst_mem_pattern#2": [
        "BAD_PATTERN (0x0c) dst_mem_pattern: dst has 63 elements per partition, moving has 64",
    ],
    "destination:BAD_PATTERN:dst_mem_pattern.num_elem": [
        "BAD_PATTERN (0x0c) dst_mem_pattern.num_elem: with c256 the upper dim of dst must have size 2 (PE columns "
        "0-127 and 128-255)",
    ],
    "destination:BAD_PATTERN:src_mem_pattern": [
        "BAD_PATTERN (0x0c) src_mem_pattern: 513 moving vectors; one matmul on CAYMAN streams at most 512 (D-T97)",
    ],
    "events:BAD_EVENT:events.set_event": [
        "BAD_EVENT (0x12) events.set_event: 254 is not an event (0..63, or 0xff for none)",
    ],
    "events:BAD_EVENT:events.wait_event": [
        "BAD_EVENT (0x12) events.wait_event: 64 is not an event (0..63, or 0xff for none)",
    ],
    "fp32_mode:BAD_FP32_MODE:fp32_mode#1": [
        "BAD_FP32_MODE (0x07) fp32_mode: FP32 input needs LOW, HIGH or LOW_HIGH",
    ],
    "fp32_mode:BAD_FP32_MODE:fp32_mode#2": [
        "BAD_FP32_MODE (0x07) fp32_mode: only FP32 input takes an fp32_mode",
    ],
    "ldtags:BAD_SPARSE:force_tag_bits": [
        "BAD_SPARSE (0x0f) force_tag_bits: 0xd is not 0x0/0x4/0x8/0xC",
    ],
    "ldtags:BAD_SPARSE:in_dtype": [
        "BAD_SPARSE (0x0f) in_dtype: tags are packed 4 per UINT16",
    ],
    "ldweights:BAD_ENUM:bg_xpose_mode": [
        "BAD_ENUM (0x04) bg_xpose_mode: background transpose is not modelled; must be 0 (D-T14)",
    ],
    "ldweights:BAD_PATTERN:src_mem_pattern": [
        "BAD_PATTERN (0x0c) src_mem_pattern: 127 elements per partition; the weight tile needs 128 (columns x "
        "elements per PE)",
    ],
    "ldweights:BAD_SPARSE:tag_weight_mode": [
        "BAD_SPARSE (0x0f) tag_weight_mode: TAG_WEIGHT elements are {u16 weight, u16 tag}: in_dtype must be "
        "BFLOAT16 or FP16",
    ],
    "matmul:BAD_PATTERN:src_mem_pattern": [
        "BAD_PATTERN (0x0c) src_mem_pattern: 63 elements per partition is not a whole number of 2-element PE steps",
    ],
    "matmul_sparse:BAD_SPARSE:flags": [
        "BAD_SPARSE (0x0f) flags: MatmulSparse does not transpose or move seeds",
    ],
    "matmul_sparse:BAD_SPARSE:src_mem_pattern.num_elem[3]": [
        "BAD_SPARSE (0x0f) src_mem_pattern.num_elem[3]: 5 fmaps; MatmulSparse sends 2, 3 or 4 per partition",
    ],
    "mx_dtype:BAD_MX:in_dtype": [
        "BAD_MX (0x0e) in_dtype: BFLOAT16 is not an MX element dtype (FP8_EXP2/3/4/5, FP4_EXP2, INT4)",
    ],
    "mx_op:BAD_MX:flags": [
        "BAD_MX (0x0e) flags: MX micro-ops do not transpose, move seeds or use the LUT",
    ],
    "mx_op:BAD_PATTERN:src_mem_pattern.num_elem#1": [
        "BAD_PATTERN (0x0c) src_mem_pattern.num_elem: count must be >= 1",
    ],
    "mx_op:BAD_PATTERN:src_mem_pattern.num_elem#2": [
        "BAD_PATTERN (0x0c) src_mem_pattern.num_elem: 62 is not a whole number of 4-element PE steps",
    ],
    "mx_op:BAD_PATTERN:src_mem_pattern.num_elem#3": [
        "BAD_PATTERN (0x0c) src_mem_pattern.num_elem: the weight tile needs columns x 4 = 512 elements per partition",
    ],
    "mx_op:UNSUPPORTED_PATTERN:src_mem_pattern.index_addr": [
        "UNSUPPORTED_PATTERN (0x14) src_mem_pattern.index_addr: indirect MX indexing is not executed (D-T18)",
    ],
    "mx_pattern:BAD_MX:p_f_dim": [
        "BAD_MX (0x0e) src_mem_pattern.p_f_dim: the scale block is 8 partitions x 4 elements (p_f_dim 0x23, D-21), "
        "got 0x22",
    ],
    "mx_pattern:BAD_MX:scale_dtype": [
        "BAD_MX (0x0e) src_mem_pattern.scale_dtype: MX scales are SFP8_E8 (E8M0), or 0 for none",
    ],
    "mx_pattern:BAD_PATTERN:num_elem": [
        "BAD_PATTERN (0x0c) src_mem_pattern.num_elem: every count must be >= 1, got [64, 0]",
    ],
    "out_dtype:BAD_OUT_DTYPE:out_dtype": [
        "BAD_OUT_DTYPE (0x08) out_dtype: BFLOAT16 is not an output dtype on CAYMAN (FP32, INVALID)",
    ],
    "pattern:UNSUPPORTED_PATTERN:indirect16b": [
        "UNSUPPORTED_PATTERN (0x14) src_mem_pattern: INDIRECT16B patterns are not executed by the PE (D-T18)",
    ],
    "pe_manage_seed:BAD_SEED_OP:dst_seed_mem_pattern#1": [
        "BAD_SEED_OP (0x0d) dst_seed_mem_pattern: LoadSeed has no destination pattern (must be 0)",
    ],
    "pe_manage_seed:BAD_SEED_OP:dst_seed_mem_pattern#2": [
        "BAD_SEED_OP (0x0d) dst_seed_mem_pattern: SaveSeed writes num_elem [2, 8], step_elem [1, 512] from "
        "0x02000000 (seed 000 section 5.2)",
    ],
    "pe_manage_seed:BAD_SEED_OP:identity_dtype": [
        "BAD_SEED_OP (0x0d) identity_dtype: the identity is BF16, FP16, FP32R or FP8",
    ],
    "pe_manage_seed:BAD_SEED_OP:identity_mem_pattern.num_elem": [
        "BAD_SEED_OP (0x0d) identity_mem_pattern.num_elem: the identity diagonal has 16 elements",
    ],
    "pe_manage_seed:BAD_SEED_OP:mode": [
        "BAD_SEED_OP (0x0d) mode: PE_MANAGE_SEED needs LOAD_SEED (1) or SAVE_SEED (2)",
    ],
    "pe_manage_seed:BAD_SEED_OP:num_active_rows": [
        "BAD_SEED_OP (0x0d) num_active_rows: PE_MANAGE_SEED runs on 16 rows x 128 columns",
    ],
    "pe_manage_seed:BAD_SEED_OP:src_seed_mem_pattern": [
        "BAD_SEED_OP (0x0d) src_seed_mem_pattern: SaveSeed has no source pattern (must be 0)",
    ],
    "pe_manage_seed:BAD_SEED_OP:src_seed_mem_pattern.num_elem": [
        "BAD_SEED_OP (0x0d) src_seed_mem_pattern.num_elem: LoadSeed reads 128 INT32 per partition",
    ],
    "pe_manage_seed:BAD_SEED_OP:src_seed_mem_pattern.start_addr": [
        "BAD_SEED_OP (0x0d) src_seed_mem_pattern.start_addr: seeds sit in SBUF partitions 0-15",
    ],
    "pe_reg_write:BAD_PATTERN:src_mem_pattern.num_elem": [
        "BAD_PATTERN (0x0c) src_mem_pattern.num_elem: PeRegWrite fetches one UINT32 from SBUF",
    ],
    "pe_reg_write:BAD_REGISTER:reg": [
        "BAD_ENUM (0x04) reg: 1 is not a PeReg",
        "BAD_REGISTER (0x10) reg: 0x1 is not a PE register",
    ],
    "pe_reg_write:BAD_REGISTER:value": [
        "BAD_REGISTER (0x10) value: PSUM_ROUND takes 0 (RNE) or 1 (SR), got 0x2",
    ],
    "perf:BAD_DTYPE:perf_opt": [
        "BAD_DTYPE (0x05) perf_opt: DOUBLE_ROW needs FP8 input",
    ],
    "perf:BAD_ENUM:perf_opt": [
        "BAD_ENUM (0x04) perf_opt: DOUBLE_ROW does not exist on SUNDA (NeuronCore-v3 and later)",
    ],
    "perf:BAD_TILE:col_grp": [
        "BAD_TILE (0x0a) col_grp: DOUBLE_ROW cannot be combined with column tiling; col_grp must be 0",
    ],
    "rows_cols:BAD_ACTIVE_RANGE:num_active_cols": [
        "BAD_ACTIVE_RANGE (0x09) num_active_cols: 129 is not in 1..128",
        "BAD_TILE (0x0a) col_grp: column group 0 (columns 0..) with 129 columns leaves the array",
    ],
    "rows_cols:BAD_ACTIVE_RANGE:num_active_rows": [
        "BAD_ACTIVE_RANGE (0x09) num_active_rows: 129 is not in 1..128",
        "BAD_TILE (0x0a) row_grp: row group 0 (rows 0..) with 129 rows leaves the array",
        "BAD_ADDRESS (0x0b) src_mem_pattern.start_addr: partitions 0..128 run past partition 127",
    ],
    "rows_cols:BAD_TILE:col_grp#1": [
        "BAD_TILE (0x0a) col_grp: column group 1 (columns 32..) with 97 columns leaves the array",
    ],
    "rows_cols:BAD_TILE:col_grp#2": [
        "BAD_TILE (0x0a) col_grp: column group 3 starts a 32-column tile; SUNDA has 64- and 128-column tiles only "
        "(col_grp 0 or 2)",
    ],
    "rows_cols:BAD_TILE:num_active_cols": [
        "BAD_TILE (0x0a) num_active_cols: 129 columns do not fit a c128 tile",
    ],
    "rows_cols:BAD_TILE:num_active_rows": [
        "BAD_TILE (0x0a) num_active_rows: 65 rows do not fit a r64 tile",
    ],
    "rows_cols:BAD_TILE:row_grp#1": [
        "BAD_TILE (0x0a) row_grp: row group 1 (rows 32..) with 97 rows leaves the array",
    ],
    "rows_cols:BAD_TILE:row_grp#2": [
        "BAD_TILE (0x0a) row_grp: row group 1 starts a 32-row tile; SUNDA has 64- and 128-row tiles only (row_grp "
        "0 or 2)",
    ],
    "rows_cols:BAD_TILE:tile_sel": [
        "BAD_TILE (0x0a) tile_sel: selectors must be <= 1, got {'row_sel': 2, 'col_sel': 0}",
    ],
    "rows_cols:BAD_TILE:tile_sel.col_sel": [
        "BAD_TILE (0x0a) tile_sel.col_sel: col_sel 1 needs a c128 tile",
    ],
    "rows_cols:BAD_TILE:tile_sel.row_sel": [
        "BAD_TILE (0x0a) tile_sel.row_sel: row_sel 1 needs a r64 tile",
    ],
    "seed_mode:BAD_SEED_OP:dst_mem_pattern": [
        "BAD_SEED_OP (0x0d) dst_mem_pattern: SaveSeed writes a 1x1x2 PSUM tensor",
    ],
    "seed_mode:BAD_SEED_OP:flags.seed_mode": [
        "BAD_SEED_OP (0x0d) flags.seed_mode: on MARIANA seeds move through PE_MANAGE_SEED",
    ],
    "seed_mode:BAD_SEED_OP:flags.xpose_mode": [
        "BAD_SEED_OP (0x0d) flags.xpose_mode: a seed SAVE_SEED micro-op needs flags.xpose_mode = ENABLED",
    ],
    "seed_mode:BAD_SEED_OP:fp32_mode": [
        "BAD_SEED_OP (0x0d) fp32_mode: a seed LOAD_SEED micro-op needs fp32_mode = HIGH",
    ],
    "seed_mode:BAD_SEED_OP:in_dtype": [
        "BAD_FP32_MODE (0x07) fp32_mode: only FP32 input takes an fp32_mode",
        "BAD_SEED_OP (0x0d) in_dtype: a seed LOAD_SEED micro-op needs in_dtype = FP32",
    ],
    "seed_mode:BAD_SEED_OP:num_active_cols": [
        "BAD_SEED_OP (0x0d) num_active_cols: a seed LOAD_SEED micro-op needs num_active_cols = 0 (256)",
    ],
    "seed_mode:BAD_SEED_OP:num_active_rows": [
        "BAD_SEED_OP (0x0d) num_active_rows: a seed LOAD_SEED micro-op needs num_active_rows = 1",
    ],
    "seed_mode:BAD_SEED_OP:out_dtype": [
        "BAD_SEED_OP (0x0d) out_dtype: a seed LOAD_SEED micro-op needs out_dtype = FP32",
    ],
    "seed_mode:BAD_SEED_OP:tile_size.col_size_log2": [
        "BAD_TILE (0x0a) num_active_cols: 256 columns do not fit a c128 tile",
        "BAD_SEED_OP (0x0d) tile_size.col_size_log2: a seed LOAD_SEED micro-op needs tile_size.col_size_log2 = c256",
    ],
    "seed_mode:BAD_SEED_OP:tile_size.row_size_log2": [
        "BAD_SEED_OP (0x0d) tile_size.row_size_log2: a seed LOAD_SEED micro-op needs tile_size.row_size_log2 = r64",
    ],
    "seed_patterns:BAD_SEED_OP:src_mem_pattern": [
        "BAD_SEED_OP (0x0d) src_mem_pattern: LoadSeed reads 256 INT32 seeds (one per column), the pattern has 255",
    ],
    "structure:BAD_DTYPE:byte": [
        "BAD_DTYPE (0x05) in_dtype: 0x11 is not a dtype of MARIANA",
    ],
    "structure:BAD_ENUM:bits": [
        "BAD_ENUM (0x04) tile_size.row_size_log2: 5 is not a TileRowSize",
    ],
    "structure:BAD_ENUM:byte": [
        "BAD_ENUM (0x04) psum_zero_region: 4 is not a ZeroRegion",
    ],
    "structure:RESERVED_NONZERO:bits": [
        "RESERVED_NONZERO (0x03) flags.reserved: reserved bits must be zero",
    ],
    "structure:RESERVED_NONZERO:bytes": [
        "RESERVED_NONZERO (0x03) reserved1: reserved bytes must be zero, got 01000000000000",
    ],
    "tensor:BAD_PATTERN:num_elem": [
        "BAD_PATTERN (0x0c) src_mem_pattern.num_elem: every count must be >= 1, got [64, 0, 1]",
    ],
    "transpose_destination:BAD_OUT_DTYPE:out_dtype": [
        "BAD_OUT_DTYPE (0x08) out_dtype: 32-bit data cannot be transposed into 2-byte BF16 cells",
    ],
    "transpose_destination:BAD_PATTERN:dst_mem_pattern": [
        "BAD_PATTERN (0x0c) dst_mem_pattern: a transpose writes 128 elements (one per row) per partition; dst has 127",
    ],
    "transpose_destination:BAD_PATTERN:src_mem_pattern": [
        "BAD_PATTERN (0x0c) src_mem_pattern: a transpose writes one PSUM partition per moving element, all in one "
        "write slot: 129 elements need 129 active columns of one slot (at most 128)",
    ],
    "window:BAD_ADDRESS:bytes": [
        "BAD_ADDRESS (0x0b) src_mem_pattern: pattern bytes 0x3ff82..0x40001 leave the SBUF partition (0..0x3ffff "
        "on MARIANA)",
    ],
    "window:BAD_ADDRESS:memory": [
        "BAD_ADDRESS (0x0b) src_mem_pattern.start_addr: 0x02000000 is in PSUM; must be in SBUF",
    ],
    "window:BAD_ADDRESS:partitions": [
        "BAD_ADDRESS (0x0b) src_mem_pattern.start_addr: partitions 1..128 run past partition 127",
    ],
}


@pytest.mark.parametrize("rule", sorted(FIXTURES))
def test_rule_boundary(rule):
    gen, op, inside, outside, *kw = FIXTURES[rule]
    kw_in, kw_out = kw[0] if kw else ({}, {})
    hits_in = fired(valid(op, gen, **inside), gen, **kw_in)
    assert rule not in hits_in, f"inside fires {rule}"
    if rule not in DIRTY_INSIDE:
        assert not hits_in, f"inside is not clean: {sorted(hits_in)}"
    hits_out = fired(valid(op, gen, **outside), gen, **kw_out)
    assert rule in hits_out, f"outside does not fire {rule}"
    assert hits_out - {rule} == OUTSIDE_ALSO.get(rule, (set(),))[0], f"outside fires more: {sorted(hits_out)}"


@pytest.mark.parametrize("rule", sorted(FIXTURES))
def test_outside_messages(rule):
    gen, op, inside, outside, *kw = FIXTURES[rule]
    kw_out = kw[0][1] if kw else {}
    assert [str(v) for v in CHECK.check(valid(op, gen, **outside), gen, **kw_out)] == OUTSIDE_MESSAGES[rule]


@pytest.mark.parametrize("rule,gen,op,outside", EXTRA_OUTSIDE)
def test_more_outside(rule, gen, op, outside):
    assert rule in fired(valid(op, gen, **outside), gen)


def _seed_source(addr) -> dict:
    return {**SEED_LOAD, "src_seed_mem_pattern": dict(start_addr=addr, step_elem=[1, 0], num_elem=[128, 1])}


# Descriptors at an edge, with everything they fire: a one-entry LUT is clean, an empty one refused
# alone; a LoadSeed source at the
# last SBUF byte (partition 127), at PSUM's first byte (partition 0: a memory the window refuses, but
# partition 0), at its last and one past it (no memory: the partition rule stays quiet); a SaveSeed's
# unread source is not walked.
EDGES = [
    ("mariana", "conv_lut_load", dict(num_entries=1, src_mem_pattern=dict(start_addr=0, step_elem=[1], num_elem=[1])),
     set()),
    ("mariana", "conv_lut_load", dict(num_entries=0, src_mem_pattern=dict(start_addr=0, step_elem=[1], num_elem=[0])),
     {"conv_lut_load:BAD_LUT:num_entries"}),
    ("mariana", "pe_manage_seed", _seed_source(addrmap.SBUF_END - 1),
     {"pe_manage_seed:BAD_SEED_OP:src_seed_mem_pattern.start_addr", "window:BAD_ADDRESS:bytes",
      "window:BAD_ADDRESS:partitions"}),
    ("mariana", "pe_manage_seed", _seed_source(addrmap.PSUM_BASE), {"window:BAD_ADDRESS:memory"}),
    ("mariana", "pe_manage_seed", _seed_source(addrmap.PSUM_END - 1),
     {"pe_manage_seed:BAD_SEED_OP:src_seed_mem_pattern.start_addr", "window:BAD_ADDRESS:memory"}),
    ("mariana", "pe_manage_seed", _seed_source(addrmap.PSUM_END), {"window:BAD_ADDRESS:memory"}),
    ("mariana", "pe_manage_seed", dict(mode="save_seed", src_seed_mem_pattern=_seed_source(addrmap.SBUF_END)[
        "src_seed_mem_pattern"]),
     {"pe_manage_seed:BAD_SEED_OP:src_seed_mem_pattern"}),
    # MatmulSparse never transposes: INT8 is refused as no matmul input, not passed as transposable data
    ("mariana", "matmul_sparse", dict(in_dtype="int8"), {"compute_dtype:BAD_DTYPE:in_dtype#2"}),
    # no fmaps: no moving vector, so the destination's count is not compared
    ("maverick", "matmul_sparse", dict(src_mem_pattern=dict(start_addr=0, step_elem=[1, 0, 0, 16], num_elem=[16, 1, 1, 0])),
     {"matmul_sparse:BAD_SPARSE:src_mem_pattern.num_elem[3]", "tensor:BAD_PATTERN:num_elem"}),
    # an empty source: no weight tile and no moving vector to compare with
    ("mariana", "ldweights", dict(src_mem_pattern=t3(sbuf_addr(0), 0)), {"tensor:BAD_PATTERN:num_elem"}),
    ("mariana", "matmul", dict(src_mem_pattern=t3(sbuf_addr(0, 0x100), 0)), {"tensor:BAD_PATTERN:num_elem"}),
    # a MARIANA Matmul's seed flag is refused alone: its destination stays a plain one
    ("mariana", "matmul", dict(flags=dict(seed_mode="load_seed")), {"seed_mode:BAD_SEED_OP:flags.seed_mode"}),
    # a transpose of no element writes one partition (127 is the last), of two elements two
    ("maverick", "matmul", {**XPOSE, "src_mem_pattern": t3(sbuf_addr(0, 0x100), 0), "dst_mem_pattern": t3(psum_addr(127, 1), 128)},
     {"tensor:BAD_PATTERN:num_elem"}),
    ("maverick", "matmul", {**XPOSE, "src_mem_pattern": t3(sbuf_addr(0, 0x100), 1), "dst_mem_pattern": t3(psum_addr(127, 1), 128)},
     set()),
    ("maverick", "matmul", {**XPOSE, "src_mem_pattern": t3(sbuf_addr(0, 0x100), 2), "dst_mem_pattern": t3(psum_addr(127, 1), 128)},
     {"window:BAD_ADDRESS:partitions"}),
    # LUT mode on a byte that is no dtype: the byte's rule alone
    ("maverick", "matmul", dict(in_dtype=0xEE, flags=dict(scalar_mode="lut")), {"structure:BAD_DTYPE:byte"}),
    # group 4 starts past the array even with no rows (or columns) in it
    ("mariana", "matmul", dict(row_grp=4, num_active_rows=0),
     {"rows_cols:BAD_ACTIVE_RANGE:num_active_rows", "rows_cols:BAD_TILE:row_grp#1"}),
    ("mariana", "matmul", dict(col_grp=4, num_active_cols=0),
     {"rows_cols:BAD_ACTIVE_RANGE:num_active_cols", "rows_cols:BAD_TILE:col_grp#1"}),
    ("mariana", "matmul", dict(num_active_cols=1), set()),
    # a c256 tile with one slot's columns (128 of 256) writes one slot: no upper dim of 2
    ("maverick", "matmul", dict(tile_size=C256, num_active_cols=128), set()),
    # a destination of one element is compared with the moving count; an empty one is refused alone
    ("mariana", "matmul", dict(dst_mem_pattern=t3(psum_addr(0, 1), 1)), {"destination:BAD_PATTERN:dst_mem_pattern#2"}),
    ("mariana", "matmul", dict(dst_mem_pattern=t3(psum_addr(0, 1), 0)), {"tensor:BAD_PATTERN:num_elem"}),
    # one fmap: 16 moving vectors, which the 8-element destination does not hold
    ("maverick", "matmul_sparse", dict(src_mem_pattern=dict(start_addr=0, step_elem=[1, 0, 0, 16], num_elem=[16, 1, 1, 1]),
                                       dst_mem_pattern=t3(psum_addr(0, 0), 8)),
     {"matmul_sparse:BAD_SPARSE:src_mem_pattern.num_elem[3]", "destination:BAD_PATTERN:dst_mem_pattern#2"}),
    # a refused MARIANA seed flag leaves a plain destination: 64 bf16 results (not 4-byte seed states)
    # end at the PSUM partition's last byte
    ("mariana", "matmul", dict(out_dtype="bf16", flags=dict(seed_mode="load_seed"), dst_mem_pattern=t3(psum_addr(0, 7, 0x780), 64)),
     {"seed_mode:BAD_SEED_OP:flags.seed_mode"}),
    # a LoadSeed source past PSUM (in no memory) or in PSUM at partition 0 with an offset: the window's
    # rule alone, the partition rule stays quiet
    ("mariana", "pe_manage_seed", _seed_source(addrmap.PSUM_END + addrmap.PSUM_PARTITION_BYTES),
     {"window:BAD_ADDRESS:memory"}),
    ("mariana", "pe_manage_seed", _seed_source(psum_addr(0, 0, 4)), {"window:BAD_ADDRESS:memory"}),
    # a register byte that is no PeReg is refused as such, whatever its value
    ("cayman", "pe_reg_write", dict(reg=1, value=2), {"structure:BAD_ENUM:byte", "pe_reg_write:BAD_REGISTER:reg"}),
    ("cayman", "ldtags", dict(force_tag_bits=0x8), set()),
    # a MAVERICK seed load of 1 source element is short; of none, refused by the count rule alone; a
    # SaveSeed's source count is not compared
    ("maverick", "matmul", {**SEED_MM, "src_mem_pattern": t3(sbuf_addr(0, 0x100), 1)},
     {"seed_patterns:BAD_SEED_OP:src_mem_pattern"}),
    ("maverick", "matmul", {**SEED_MM, "src_mem_pattern": t3(sbuf_addr(0, 0x100), 0)}, {"tensor:BAD_PATTERN:num_elem"}),
    ("maverick", "matmul", {**SAVE_MM, "src_mem_pattern": t3(sbuf_addr(0, 0x100), 255)}, set()),
    # a transpose's destination of 1 element is short; of none, refused by the count rule alone
    ("maverick", "matmul", {**XPOSE, "dst_mem_pattern": t3(psum_addr(0, 1), 1)},
     {"transpose_destination:BAD_PATTERN:dst_mem_pattern"}),
    ("maverick", "matmul", {**XPOSE, "dst_mem_pattern": t3(psum_addr(0, 1), 0)}, {"tensor:BAD_PATTERN:num_elem"}),
    # 65 MX elements are 16 quad-row steps and one element
    ("mariana", "matmul_mx", dict(src_mem_pattern=dict(data_addr=sbuf_addr(0), scale_addr=sbuf_addr(0, 0x8000), step_elem=1,
                                                        num_elem=65)),
     {"mx_op:BAD_PATTERN:src_mem_pattern.num_elem#2"}),
]


@pytest.mark.parametrize("gen,op,fields,want", EDGES, ids=range(len(EDGES)))
def test_edges_fire_what_they_should(gen, op, fields, want):
    assert fired(valid(op, gen, **fields), gen) == want


@pytest.mark.parametrize("rule", sorted(RAW))
def test_raw_rule_boundary(rule):
    gen, inside, outside, *out_gen = RAW[rule]
    assert not fired(inside, gen)
    assert rule in fired(outside, out_gen[0] if out_gen else gen)


def test_every_rule_has_a_fixture():
    """The rules read from check.py are exactly the rules with fixtures: a new rule needs one, a
    dropped rule leaves a fixture naming a site that no longer exists."""
    assert len(SITES) > 70
    assert set(SITES) == set(FIXTURES) | set(RAW), (sorted(set(SITES) - set(FIXTURES) - set(RAW)),
                                                    sorted(set(FIXTURES) | set(RAW) - set(SITES)))
    assert set(OUTSIDE_MESSAGES) == set(FIXTURES)


def test_tile_sel_refuses_col_sel_2():
    """MAVERICK tile selectors are 0 or 1: col_sel 2 (a 4-bit field) is refused like row_sel 2."""
    assert "rows_cols:BAD_TILE:tile_sel" in fired(valid("ldweights", "maverick", tile_sel=dict(col_sel=2)), "maverick")
    assert "rows_cols:BAD_TILE:tile_sel" in fired(valid("matmul", "maverick", tile_sel=dict(col_sel=2)), "maverick")


def test_mx_window_counts_the_vector_bytes():
    """An MXTensorV2 source of 64 bytes per vector must end inside the 0x40000-byte SBUF partition:
    at 0x3FFC0 its last byte is 0x3FFFF, at 0x3FFC2 it is 0x40001 (out)."""
    def at(offset):
        return {**MAV_MX, "src_mem_pattern": {**MAV_MX["src_mem_pattern"], "data_addr": sbuf_addr(0, offset)}}
    assert not fired(valid("matmul", "maverick", **at(0x3FFC0)), "maverick")
    assert "window:BAD_ADDRESS:bytes" in fired(valid("matmul", "maverick", **at(0x3FFC2)), "maverick")


def test_mx_scale_window_is_a_byte_per_step():
    """An MXTensorV2's scales are one byte per PE step of `pack` elements (D-21, D-T25): MAV_MX's 64
    FP4 elements, 4 per quad-row step, have 16 scale bytes, so the scales may start at 0x3FFF0 (last
    byte 0x3FFFF) and not at 0x3FFF1."""
    def at(offset):
        return {**MAV_MX, "src_mem_pattern": {**MAV_MX["src_mem_pattern"], "scale_addr": sbuf_addr(0, offset)}}
    assert not fired(valid("matmul", "maverick", **at(0x3FFF0)), "maverick")
    assert "window:BAD_ADDRESS:bytes" in fired(valid("matmul", "maverick", **at(0x3FFF1)), "maverick")


def test_window_message_names_the_last_byte():
    """64 bf16 elements from SBUF byte 0x3FF82 are bytes 0x3FF82..0x40001; the message says so."""
    violations = CHECK.check(valid("matmul", "mariana", src_mem_pattern=t3(sbuf_addr(0, 0x3FF82), 64)), "mariana")
    assert [str(v) for v in violations] == [
        "BAD_ADDRESS (0x0b) src_mem_pattern: pattern bytes 0x3ff82..0x40001 leave the SBUF partition "
        "(0..0x3ffff on MARIANA)"]


def _seed_dst(offset) -> dict:
    return {**SEED_MM, "dst_mem_pattern": dict(start_addr=psum_addr(0, 7, offset), step_elem=[1, 0, 1], num_elem=[1, 1, 2])}


_SBUF_END = 0x40000             # MARIANA's SBUF partition bytes


def _edge(gen, op, fields, nbytes, name="src_mem_pattern") -> list:
    """MESSAGES cases of a pattern of `nbytes` bytes (`fields(address)`) ending at the SBUF partition's
    last byte (clean) and one byte past it (refused, its bytes named)."""
    end = _SBUF_END - nbytes
    return [(gen, op, fields(sbuf_addr(0, end)), []),
            (gen, op, fields(sbuf_addr(0, end + 1)),
             [f"BAD_ADDRESS (0x0b) {name}: pattern bytes {end + 1:#x}..0x40000 leave the SBUF partition "
              f"(0..0x3ffff on {gen.upper()})"])]


def _mx_source(**kw) -> dict:
    """A MARIANA MatmulMX source (MXMEM_PATTERN1D) of 64 elements, 16 scale bytes, with `kw` over it."""
    return dict(src_mem_pattern={**dict(data_addr=sbuf_addr(0), scale_addr=sbuf_addr(0, 0x8000), step_elem=1, num_elem=64),
                                 **kw})


def _lut_at(offset, **kw) -> dict:
    return dict(src_mem_pattern=dict(start_addr=sbuf_addr(0, offset), step_elem=[1], num_elem=[16]), **kw)


_NO_LUT_DTYPE = ["BAD_DTYPE (0x05) in_dtype: 0xEE is not a dtype of MARIANA",
                 "BAD_LUT (0x11) in_dtype: LUT entries are BFLOAT16, FP16 or FP32"]


def _mav_mx(**kw) -> dict:
    return {**MAV_MX, "src_mem_pattern": {**MAV_MX["src_mem_pattern"], **kw}}


def _sparse_dst(offset, out="fp32") -> dict:
    return dict(out_dtype=out, dst_mem_pattern=t3(psum_addr(0, 7, offset), 16))


# (gen, op, fields, the messages check() gives, in order) besides OUTSIDE_MESSAGES: a byte that is no
# dtype named in hex, PSUM windows by element size
MESSAGES = [
    ("cayman", "matmul", dict(out_dtype=0x77),
     ["BAD_DTYPE (0x05) out_dtype: 0x77 is not a dtype of CAYMAN",
      "BAD_OUT_DTYPE (0x08) out_dtype: 0x77 is not an output dtype on CAYMAN (FP32, INVALID)"]),
    # 16 fp32 (64 bytes) or bf16 (32 bytes) results end at the PSUM partition's last byte, or one past it
    ("mariana", "matmul_sparse", _sparse_dst(0x7C0), []),
    ("mariana", "matmul_sparse", _sparse_dst(0x7C1),
     ["BAD_ADDRESS (0x0b) dst_mem_pattern: pattern bytes 0x3fc1..0x4000 leave the PSUM partition (0..0x3fff on MARIANA)"]),
    ("mariana", "matmul_sparse", _sparse_dst(0x7E0, "bf16"), []),
    ("mariana", "matmul_sparse", _sparse_dst(0x7E1, "bf16"),
     ["BAD_ADDRESS (0x0b) dst_mem_pattern: pattern bytes 0x3fe1..0x4000 leave the PSUM partition (0..0x3fff on MARIANA)"]),
    # the order check() lists them in: a family's rules before a pattern walk (step 0 / 1), the walk's,
    # the rules after it (step 2) (D-T101)
    ("mariana", "matmul_mx", dict(src_mem_pattern=dict(data_addr=sbuf_addr(0, 0x3FFF0), scale_addr=sbuf_addr(0, 0x8000),
                                                        step_elem=1, num_elem=65)),
     ["BAD_ADDRESS (0x0b) src_mem_pattern: pattern bytes 0x3fff0..0x40030 leave the SBUF partition (0..0x3ffff on MARIANA)",
      "BAD_PATTERN (0x0c) src_mem_pattern.num_elem: 65 is not a whole number of 4-element PE steps"]),
    ("mariana", "ldweights_mx", dict(src_mem_pattern=dict(data_addr=sbuf_addr(0, 0x3FFF0), scale_addr=sbuf_addr(0, 0x8000),
                                                           step_elem=1, num_elem=508)),
     ["BAD_ADDRESS (0x0b) src_mem_pattern: pattern bytes 0x3fff0..0x401eb leave the SBUF partition (0..0x3ffff on MARIANA)",
      "BAD_PATTERN (0x0c) src_mem_pattern.num_elem: the weight tile needs columns x 4 = 512 elements per partition"]),
    ("mariana", "pe_manage_seed", _seed_source(sbuf_addr(1, 0x3FF00)),
     ["BAD_ADDRESS (0x0b) src_seed_mem_pattern: pattern bytes 0x3ff00..0x400ff leave the SBUF partition (0..0x3ffff on MARIANA)",
      "BAD_SEED_OP (0x0d) src_seed_mem_pattern.start_addr: seeds sit in SBUF partitions 0-15"]),
    ("mariana", "pe_manage_seed", {**SEED_LOAD, "src_seed_mem_pattern": dict(start_addr=sbuf_addr(0, 0x800), step_elem=[1, 0],
                                                                              num_elem=[127, 1]),
                                   "identity_mem_pattern": dict(start_addr=sbuf_addr(0, _SBUF_END - 31), step_elem=[1],
                                                                num_elem=[16])},
     ["BAD_ADDRESS (0x0b) identity_mem_pattern: pattern bytes 0x3ffe1..0x40000 leave the SBUF partition (0..0x3ffff on MARIANA)",
      "BAD_SEED_OP (0x0d) src_seed_mem_pattern.num_elem: LoadSeed reads 128 INT32 per partition"]),
    ("mariana", "pe_manage_seed", {**_seed_source(sbuf_addr(0, 0x3FF00)), "dst_seed_mem_pattern": dict(start_addr=4)},
     ["BAD_ADDRESS (0x0b) src_seed_mem_pattern: pattern bytes 0x3ff00..0x400ff leave the SBUF partition (0..0x3ffff on MARIANA)",
      "BAD_SEED_OP (0x0d) dst_seed_mem_pattern: LoadSeed has no destination pattern (must be 0)"]),
    ("mariana", "pe_manage_seed", dict(mode="save_seed", src_seed_mem_pattern=dict(start_addr=4),
                                       dst_seed_mem_pattern=dict(start_addr=0x0200_0000, step_elem=[1, 512], num_elem=[2, 7])),
     ["BAD_SEED_OP (0x0d) dst_seed_mem_pattern: SaveSeed writes num_elem [2, 8], step_elem [1, 512] from 0x02000000 "
      "(seed 000 section 5.2)",
      "BAD_SEED_OP (0x0d) src_seed_mem_pattern: SaveSeed has no source pattern (must be 0)"]),
    ("maverick", "matmul", {**_seed_dst(0x7FC), "src_mem_pattern": t3(sbuf_addr(0, 0x100), 255)},
     ["BAD_ADDRESS (0x0b) dst_mem_pattern: pattern bytes 0x3ffc..0x4003 leave the PSUM partition (0..0x3fff on MAVERICK)",
      "BAD_SEED_OP (0x0d) src_mem_pattern: LoadSeed reads 256 INT32 seeds (one per column), the pattern has 255"]),
    ("maverick", "matmul", {**XPOSE, "out_dtype": "bf16", "src_mem_pattern": t3(sbuf_addr(0, 0x100), 129),
                            "dst_mem_pattern": t3(psum_addr(1, 7, 0x700), 128)},
     ["BAD_PATTERN (0x0c) src_mem_pattern: a transpose writes one PSUM partition per moving element, all in one write "
      "slot: 129 elements need 129 active columns of one slot (at most 128)",
      "BAD_OUT_DTYPE (0x08) out_dtype: 32-bit data cannot be transposed into 2-byte BF16 cells",
      "BAD_ADDRESS (0x0b) dst_mem_pattern.start_addr: partitions 1..128 run past partition 127"]),
    ("cayman", "matmul", dict(src_mem_pattern=t3(sbuf_addr(0, 0x100), 513), dst_mem_pattern=t3(psum_addr(0, 7, 0x7FC), 513)),
     ["BAD_PATTERN (0x0c) src_mem_pattern: 513 moving vectors; one matmul on CAYMAN streams at most 512 (D-T97)",
      "BAD_ADDRESS (0x0b) dst_mem_pattern: pattern bytes 0x3ffc..0x47ff leave the PSUM partition (0..0x3fff on CAYMAN)"]),
    # each walk's element size and partitions at the SBUF partition's end (MARIANA's is 0x40000 bytes): the
    # last byte, or one past it
    *_edge("mariana", "matmul", lambda a: dict(in_dtype="fp32", fp32_mode="high", src_mem_pattern=t3(a, 64)), 256),
    *_edge("mariana", "matmul", lambda a: dict(in_dtype="fp8_exp4", src_mem_pattern=t3(a, 64)), 64),
    *_edge("mariana", "ldtags", lambda a: dict(src_mem_pattern=t3(a, 32)), 64),
    *_edge("mariana", "pe_reg_write", lambda a: dict(src_mem_pattern=dict(start_addr=a, step_elem=[1], num_elem=[1])), 4),
    *_edge("mariana", "conv_lut_load", lambda a: dict(src_mem_pattern=dict(start_addr=a, step_elem=[1], num_elem=[16])), 64),
    *_edge("mariana", "pe_manage_seed", lambda a: dict(identity_mem_pattern=dict(start_addr=a, step_elem=[1], num_elem=[16])),
           32, "identity_mem_pattern"),
    *_edge("mariana", "ldweights", lambda a: dict(tag_weight_mode="tag_weight", src_mem_pattern=t3(a, 128)), 512),
    *_edge("mariana", "matmul_mx", lambda a: _mx_source(data_addr=a), 64),
    *_edge("mariana", "matmul_mx", lambda a: _mx_source(scale_addr=a), 16, "src_mem_pattern.scale"),
    ("mariana", "pe_manage_seed", _seed_source(sbuf_addr(0, _SBUF_END - 512)), []),
    ("mariana", "pe_manage_seed", _seed_source(sbuf_addr(0, _SBUF_END - 508)),
     ["BAD_ADDRESS (0x0b) src_seed_mem_pattern: pattern bytes 0x3fe04..0x40003 leave the SBUF partition (0..0x3ffff on MARIANA)"]),
    # a tags-only dtype still walks 2-byte tags; a LUT of a byte that is no dtype walks 1-byte entries
    ("mariana", "ldtags", dict(in_dtype="uint8", src_mem_pattern=t3(sbuf_addr(0, _SBUF_END - 63), 32)),
     ["BAD_SPARSE (0x0f) in_dtype: tags are packed 4 per UINT16",
      "BAD_ADDRESS (0x0b) src_mem_pattern: pattern bytes 0x3ffc1..0x40000 leave the SBUF partition (0..0x3ffff on MARIANA)"]),
    ("mariana", "conv_lut_load", _lut_at(_SBUF_END - 16, in_dtype=0xEE), _NO_LUT_DTYPE),
    ("mariana", "conv_lut_load", _lut_at(_SBUF_END - 15, in_dtype=0xEE),
     [*_NO_LUT_DTYPE,
      "BAD_ADDRESS (0x0b) src_mem_pattern: pattern bytes 0x3fff1..0x40000 leave the SBUF partition (0..0x3ffff on MARIANA)"]),
    # one-element sources take one partition: the last one is 127
    ("mariana", "pe_reg_write", dict(src_mem_pattern=dict(start_addr=sbuf_addr(127), step_elem=[1], num_elem=[1])), []),
    ("mariana", "conv_lut_load", dict(src_mem_pattern=dict(start_addr=sbuf_addr(127), step_elem=[1], num_elem=[16])), []),
    # fewer MX elements than a PE step still have one scale byte: at SBUF's first or last byte
    ("mariana", "matmul_mx", _mx_source(num_elem=2, scale_addr=sbuf_addr(0)),
     ["BAD_PATTERN (0x0c) src_mem_pattern.num_elem: 2 is not a whole number of 4-element PE steps"]),
    ("mariana", "matmul_mx", _mx_source(num_elem=2, scale_addr=sbuf_addr(0, _SBUF_END - 1)),
     ["BAD_PATTERN (0x0c) src_mem_pattern.num_elem: 2 is not a whole number of 4-element PE steps"]),
    ("maverick", "matmul", _mav_mx(num_elem=[2, 1], scale_addr=sbuf_addr(0)),
     ["BAD_PATTERN (0x0c) src_mem_pattern: 2 elements per partition is not a whole number of 4-element PE steps"]),
    ("maverick", "matmul", _mav_mx(num_elem=[2, 1], scale_addr=sbuf_addr(0, _SBUF_END - 1)),
     ["BAD_PATTERN (0x0c) src_mem_pattern: 2 elements per partition is not a whole number of 4-element PE steps"]),
    # an MXTensorV2 with no scales has no scale rules; an empty one walks no window
    ("maverick", "matmul", _mav_mx(scale_dtype=0, p_f_dim=0x22), []),
    ("maverick", "matmul", _mav_mx(num_elem=[0, 64]),
     ["BAD_PATTERN (0x0c) src_mem_pattern.num_elem: every count must be >= 1, got [0, 64]"]),
    ("maverick", "matmul", _mav_mx(num_elem=[64, 0], scale_addr=psum_addr(0)),
     ["BAD_PATTERN (0x0c) src_mem_pattern.num_elem: every count must be >= 1, got [64, 0]"]),
    # an MX source's moving count is its elements per PE step
    ("maverick", "matmul", {**MAV_MX, "dst_mem_pattern": t3(psum_addr(0, 1), 15)},
     ["BAD_PATTERN (0x0c) dst_mem_pattern: dst has 15 elements per partition, moving has 16"]),
    # negative steps reach below the start: 64 bf16 down from byte 126 end at byte 0; 2 fp8 from byte 0 at -1
    ("mariana", "matmul", dict(src_mem_pattern=t3(sbuf_addr(0, 126), 64, steps=(-1, 0, 0))), []),
    ("mariana", "matmul", dict(src_mem_pattern=t3(sbuf_addr(0, 125), 64, steps=(-1, 0, 0))),
     ["BAD_ADDRESS (0x0b) src_mem_pattern: pattern bytes -0x1..0x7e leave the SBUF partition (0..0x3ffff on MARIANA)"]),
    ("mariana", "matmul", dict(in_dtype="fp8_exp4", src_mem_pattern=t3(sbuf_addr(0), 2, steps=(-1, 0, 0)),
                               dst_mem_pattern=t3(psum_addr(0, 1), 2)),
     ["BAD_ADDRESS (0x0b) src_mem_pattern: pattern bytes -0x1..0x0 leave the SBUF partition (0..0x3ffff on MARIANA)"]),
    # two fp8 elements with step 1 span one byte past the first
    *_edge("mariana", "matmul",
           lambda a: dict(in_dtype="fp8_exp4", src_mem_pattern=t3(a, 2), dst_mem_pattern=t3(psum_addr(0, 1), 2)), 2),
    # a count is the product of every dim: 64 x 2 is the 128-column weight tile
    ("mariana", "ldweights", dict(src_mem_pattern=t3(sbuf_addr(0), 64, steps=(1, 64, 0), dims=(2, 1))), []),
    # a destination in SBUF, or at PSUM's end
    ("mariana", "matmul", dict(dst_mem_pattern=t3(sbuf_addr(0), 64)),
     ["BAD_ADDRESS (0x0b) dst_mem_pattern.start_addr: 0x00000000 is in SBUF; must be in PSUM"]),
    ("mariana", "matmul", dict(dst_mem_pattern=t3(addrmap.PSUM_END, 64)),
     ["BAD_ADDRESS (0x0b) dst_mem_pattern.start_addr: 0x02200000 is in no memory; must be in PSUM"]),
    # a seed bank's two 4-byte states
    ("maverick", "matmul", _seed_dst(0x7F8), []),
    ("maverick", "matmul", _seed_dst(0x7FC),
     ["BAD_ADDRESS (0x0b) dst_mem_pattern: pattern bytes 0x3ffc..0x4003 leave the PSUM partition (0..0x3fff on MAVERICK)"]),
]


@pytest.mark.parametrize("gen,op,fields,want", MESSAGES, ids=range(len(MESSAGES)))
def test_messages_name_the_values(gen, op, fields, want):
    assert [str(v) for v in CHECK.check(valid(op, gen, **fields), gen)] == want


# bytes per element by numpy / ml_dtypes' itemsize (4-bit types take a byte there too); the 8-bit codes
# with no numpy type (FP8_EXP2, the scale and CPTC formats) as uint8, INVALID (no format) as one byte
ITEMSIZE = {Dtype.INVALID: np.uint8, Dtype.UINT64: np.uint64, Dtype.INT8: np.int8, Dtype.UINT8: np.uint8,
            Dtype.INT16: np.int16, Dtype.UINT16: np.uint16, Dtype.BFLOAT16: ml_dtypes.bfloat16,
            Dtype.FP16: np.float16, Dtype.INT32: np.int32, Dtype.UINT32: np.uint32, Dtype.FP32: np.float32,
            Dtype.FP32R: np.float32, Dtype.INT64: np.int64, Dtype.FP8_EXP3: ml_dtypes.float8_e3m4,
            Dtype.FP8_EXP4: ml_dtypes.float8_e4m3, Dtype.FP8_EXP5: ml_dtypes.float8_e5m2,
            Dtype.FP4_EXP2: ml_dtypes.float4_e2m1fn, Dtype.FP8_EXP2: np.uint8, Dtype.INT4: ml_dtypes.int4,
            Dtype.SFP8_E8: ml_dtypes.float8_e8m0fnu, Dtype.SFP8_E7: np.uint8, Dtype.SFP8_E6: np.uint8,
            Dtype.SFP8_E5: np.uint8, **{d: np.uint8 for d in Dtype if d.name.startswith("CPTC")}}


def test_element_bytes_are_numpy_itemsizes():
    """elem_bytes (uncached: every call runs it) is numpy's itemsize; a byte that is no dtype takes one."""
    assert set(ITEMSIZE) == set(Dtype)
    assert {d: RULES.elem_bytes.__wrapped__(d) for d in Dtype} == {d: np.dtype(t).itemsize for d, t in ITEMSIZE.items()}
    assert RULES.elem_bytes.__wrapped__(0xEE) == 1


@pytest.mark.parametrize("gen", list(Gen))
def test_dtype_code_tables(gen):
    """dtype_codes' size tables by the itemsizes above: 2- and 4-byte elements (any generation's),
    32-bit dtypes of `gen`, and the transposable ones: `gen`'s valid dtypes of at most 4 bytes, no CPTC."""
    size = {int(d): np.dtype(t).itemsize for d, t in ITEMSIZE.items()}
    codes = lambda which: set(RULES.dtype_codes.__wrapped__(gen, which))   # noqa: E731
    assert codes("bytes2") == {c for c, n in size.items() if n == 2}
    assert codes("bytes4") == {c for c, n in size.items() if n == 4}
    assert codes("wide") == {c for c, n in size.items() if n == 4 and dt.is_in_enum(c, gen)}
    assert codes("xpose") == {c for c, n in size.items() if n <= 4 and dt.is_valid_dtype(c, gen)
                              and not Dtype(c).name.startswith("CPTC")}


def test_bf16_output_from_mariana():
    """Matmul outputs: FP32 (or 0 for it) on every generation, BFLOAT16 from MARIANA on (seed 000 section 8)."""
    bf16 = {g for g in Gen if Dtype.BFLOAT16 in RULES.out_dtypes.__wrapped__(g)}
    assert bf16 == {Gen.MARIANA, Gen.MARIANA_PLUS, Gen.MAVERICK}
    assert all({Dtype.INVALID, Dtype.FP32} <= RULES.out_dtypes.__wrapped__(g) for g in Gen)


def test_a_union_reads_as_any_member():
    """Ints reads a union's bytes as the member a path names, as the hardware reads every member: a
    tensor3d destination read as an indirect16b gives the bytes at that member's offsets."""
    desc = decode(valid("matmul", "maverick", dst_mem_pattern=dict(start_addr=psum_addr(3, 1, 0x40), step_elem=[1, 7, 9],
                                                                   num_elem=[64, 5, 2])), "maverick")
    v = RULES.Ints(desc, None, None)
    at = desc.layout.field("dst_mem_pattern").offset
    word = lambda o, n: int.from_bytes(desc.raw[at + o:at + o + n], "little")   # noqa: E731
    assert v["dst_mem_pattern.tensor3d.num_elem"] == [64, 5, 2]
    for _ in range(2):                  # the second read is the kept view's
        assert v["dst_mem_pattern.indirect16b.start_addr"] == psum_addr(3, 1, 0x40)
        assert v["dst_mem_pattern.indirect16b.index_addr"] == word(4, 4)
        assert list(v["dst_mem_pattern.indirect16b.num_elem"]) == [word(12, 2), word(14, 2)]


def test_rules_are_frozen():
    """The table is shared by every check() and the decoder: a row cannot be changed in place."""
    with pytest.raises(dataclasses.FrozenInstanceError):
        RULES.RULES[0].code = RULES.RULES[1].code


# (gen, op, rows, cols, fields, what rules.array_fits says as Engine.fits does): a block on a scaled-down
# array, inside its tile and the array or one row / column past them
FITS = [
    ("maverick", "ldweights", 16, 32, dict(num_active_rows=8, num_active_cols=16, tile_size=R64), []),
    ("maverick", "ldweights", 16, 32,
     dict(num_active_rows=8, num_active_cols=16, tile_size=R64, tile_sel=dict(row_sel=1, col_sel=1)), []),
    ("maverick", "ldweights", 16, 32, dict(num_active_rows=9, num_active_cols=16, tile_size=R64),
     ["fits:BAD_TILE:num_active_rows: 9 rows do not fit a 8-row tile of this 16-row array"]),
    ("maverick", "ldweights", 16, 32, dict(num_active_rows=8, num_active_cols=17, tile_size=R64),
     ["fits:BAD_TILE:num_active_cols: 17 columns do not fit a 16-column tile of this 32-column array"]),
    ("maverick", "ldweights", 16, 32, dict(num_active_rows=16, num_active_cols=32, tile_size=C256), []),
    ("maverick", "ldweights", 16, 32, dict(num_active_rows=17, num_active_cols=33, tile_size=C256),
     ["fits:BAD_TILE:num_active_rows: 17 rows do not fit a 16-row tile of this 16-row array",
      "fits:BAD_TILE:num_active_cols: 33 columns do not fit a 32-column tile of this 32-column array",
      "fits:BAD_ACTIVE_RANGE:num_active_rows: rows 0..16 do not fit this 16-row array",
      "fits:BAD_ACTIVE_RANGE:num_active_cols: columns 0..32 do not fit this 32-column array"]),
    ("mariana", "ldweights", 64, 64, dict(row_grp=1, num_active_rows=48, col_grp=1, num_active_cols=48), []),
    ("mariana", "ldweights", 64, 64, dict(row_grp=1, num_active_rows=49, col_grp=1, num_active_cols=49),
     ["fits:BAD_ACTIVE_RANGE:num_active_rows: rows 16..64 do not fit this 64-row array",
      "fits:BAD_ACTIVE_RANGE:num_active_cols: columns 16..64 do not fit this 64-column array"]),
    ("mariana", "pe_reg_write", 8, 8, {}, []),          # no block of PEs
]


@pytest.mark.parametrize("gen,op,rows,cols,fields,want", FITS, ids=range(len(FITS)))
def test_array_fits(gen, op, rows, cols, fields, want):
    v = RULES.Ints(decode(valid(op, gen, **fields), gen), cols)
    assert [f"{r.name}: {r.message(v)}" for r in RULES.array_fits(v, rows, cols)] == want
