"""Mutation testing of the golden model and the RTL (D-T96): how much of a wrong model or a
wrong Amaranth design the tests catch.

    check_map(root)                     findings of the unit -> tests map (UNIT_TESTS): units no test covers
    enumerate_mutants(root, targets)    every single mutation of the target files, in source order
    select(mutants, sample, seed)       a reproducible sample of them
    run_shard(cfg, i, n)                shard i of n of the selection run: a shard result (JSON-ready dict)
    merge(results, out_dir, name)       <name>.json and <name>.html under out_dir

A mutant is one change to one node of a file's syntax tree (`ast`): an arithmetic, shift, bitwise,
comparison or boolean operator swapped, a shift amount or an integer constant moved by one, a
`True` / `False` flipped, a `not`, `-` or `~` removed, a returned value replaced by `None`.  Its id
is `file:line:col:operator`, stable while the file is.  A mutant whose module compiles to the
original's bytecode is equivalent without a run; so is one listed with a reason in
tests/mutants_equivalent.txt.  The others are run: the test set in a fresh `pytest -x` process whose
`sitecustomize` (a PYTHONPATH overlay) puts the mutated module's code in front of the installed
one, so the repository's files are never written; the caches a run writes (bytecode, Hypothesis's
database, numba's, Verilog exports and simulator builds) go to a private directory.  A test failure
kills the mutant; so, counted apart, does a crash of the run (a stillborn mutant: an import error,
a collection error, an elaboration error) or a timeout.

A target is a unit: a file of model/ or rtl/.  UNIT_TESTS maps each unit to the test files (or node
ids) that exercise it, fastest first; a mutant runs its unit's tests first (the test set `unit`),
then the rest of the set, and stops at the first failure.  Under line coverage (D-T106, coverage.py
in every process of the unmutated run) it runs instead, alone, the tests of its set that run its
line (with `confirm`, the whole set if they pass); a mutant of a line no test runs survives without
a run.  An rtl unit's tests run the Amaranth
simulator (the overlay changes what it elaborates; a Verilator test would export and build anew in
each run's own cache, minutes a mutant), at least one of them in lockstep with the golden model where
one reaches the unit.  The timeout is per unit: 4 x its tests' share of the unmutated run (the
timing plugin's seconds) + 30 s; check_map names the units no test covers.

Shards, their files and the dask path are cosim/regress.py's (parse_shard, write_shard, read_shards,
run_dask): shard i of n takes every n-th mutant of the selection."""
from __future__ import annotations

import ast
import copy
import difflib
import functools
import hashlib
import html
import importlib.util
import json
import marshal
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from pathlib import Path
from types import CodeType

ROOT = Path(__file__).resolve().parent.parent
# CPython 3.11's conversion between syntax trees and C keeps a process-wide recursion count, so two
# threads parsing or compiling at once can fail with "AST constructor recursion depth mismatch"
_AST = threading.Lock()


def _parse(source: str, filename: str = "<unknown>"):
    with _AST:
        return ast.parse(source, filename=filename)


def _compile(source, filename: str) -> CodeType:
    with _AST:
        return compile(source, filename, "exec")

DEFAULT_TARGETS = ["model/dtypes.py", "model/psum.py", "model/mac.py", "model/fp.py", "model/timing.py",
                   "model/isa/check.py", "model/isa/rules.py", "model/fastpaths.py"]
# `fast`: pure-Python tests of make test, those that name numbers first (about 20 s on one core)
FAST_TESTS = ["tests/test_constants_literal.py", "tests/test_dtypes.py", "tests/test_mac.py", "tests/test_fp32_fast.py",
              "tests/test_model_corners.py", "tests/test_microop.py", "tests/test_isa.py", "tests/test_check_rules.py",
              "tests/test_engine.py", "tests/test_array.py", "tests/test_psum_collisions.py",
              "tests/test_array_paths.py", "tests/test_oracle.py", "tests/test_aggregate_trace.py"]
TEST_SETS = {"fast": FAST_TESTS}
UNIT_SET = "unit"                               # the test set of each mutant's own unit (UNIT_TESTS)
DEFAULT_TESTS = [UNIT_SET, "fast"]              # the unit's tests first, then the fast model tests
# The tests that exercise each unit, fastest first (D-T96): found by the imports of the unit and of
# the classes it defines in tests/.  A model unit's are fast tests of make test.  An rtl unit's run
# Amaranth's simulator, with a lockstep against the golden model where one reaches the unit
# (test_rtl_top's quick corners and test_rtl_array's PE registers, every cycle); none needs Verilator.
# A Verilog writer's own check is its Yosys proof against the Amaranth form where that is fast
# (the crossbar's, about 5 s): the simulator tests never read the text.
# rtl/array_loop.py (the loop-form Verilog) has only Verilator tests: check_map names it.
UNIT_TESTS = {
    "model/dtypes.py": ["tests/test_dtypes.py", "tests/test_constants_literal.py", "tests/test_mac.py"],
    "model/psum.py": ["tests/test_psum.py", "tests/test_psum_collisions.py", "tests/test_engine.py",
                      "tests/test_constants_literal.py::test_sr_adds_all_16_random_bits"],
    "model/mac.py": ["tests/test_mac.py", "tests/test_fp32_fast.py", "tests/test_oracle.py"],
    "model/fp.py": ["tests/test_mac.py", "tests/test_fp32_fast.py", "tests/test_oracle.py"],
    "model/timing.py": ["tests/test_timing_formulas.py", "tests/test_engine.py", "tests/test_microop.py",
                        "tests/test_array_paths.py", "tests/test_row_tiles.py::test_sums_leave_below_the_tile",
                        "tests/test_timing_profile.py::test_profiles_by_name", "tests/test_public_cost.py",
                        "tests/test_timing_profile.py::test_row_wavefront_load_follows_the_swap_front"],
    "model/isa/check.py": ["tests/test_lut_partition.py", "tests/test_check_rules.py", "tests/test_isa.py",
                           "tests/test_model_corners.py"],
    "model/isa/rules.py": ["tests/test_check_rules.py", "tests/test_rules.py", "tests/test_isa.py"],
    "model/fastpaths.py": ["tests/test_array_paths.py", "tests/test_constants_literal.py", "tests/test_engine.py"],
    "model/engine/core.py": ["tests/test_engine_edges.py", "tests/test_engine.py", "tests/test_api.py",
                             "tests/test_model_corners.py"],
    "model/engine/issue.py": ["tests/test_issue_rules.py", "tests/test_timing_formulas.py", "tests/test_engine.py",
                              "tests/test_public_cost.py", "tests/test_row_tiles.py",
                              "tests/test_timing_profile.py::test_issue_floor_spaces_matmuls_on_one_block"],
    "model/engine/execute.py": ["tests/test_engine_edges.py", "tests/test_engine.py", "tests/test_model_corners.py",
                                "tests/test_oracle.py", "tests/test_background_loads.py",
                                # the tag loads' and a sparse matmul's PE log drive the RTL array
                                # (cosim/array_lockstep.py)
                                "tests/test_rtl_array.py::test_array_lockstep[mariana-16]",
                                "tests/test_rtl_array.py::test_array_lockstep[cayman-18]"],
    "model/engine/seeds.py": ["tests/test_engine.py", "tests/test_oracle.py"],
    "model/engine/operands.py": ["tests/test_engine_edges.py", "tests/test_engine.py", "tests/test_microop.py",
                                 "tests/test_model_corners.py"],
    "model/engine/psum_order.py": ["tests/test_aggregate_trace.py", "tests/test_psum_collisions.py",
                                   "tests/test_engine.py", "tests/test_issue_rules.py"],
    "model/engine/records.py": ["tests/test_engine.py", "tests/test_aggregate_trace.py", "tests/test_engine_edges.py"],
    "rtl/array.py": ["tests/test_rtl_array.py", "tests/test_rtl_top.py", "tests/test_rtl_row_tiles.py"],
    "rtl/array_loop.py": [],
    "rtl/blackbox.py": ["tests/test_rtl_generations.py::test_twin_rtl_is_the_same_netlist", "tests/test_rtl_top.py"],
    "rtl/column_load.py": ["tests/test_background_loads.py"],
    "rtl/config.py": ["tests/test_rtl_config.py", "tests/test_rtl_top.py"],
    "rtl/decoder.py": ["tests/test_rules.py", "tests/test_rtl_decoder.py"],
    "rtl/export.py": ["tests/test_rtl_export_apart.py", "tests/test_rtl_generations.py::test_twin_rtl_is_the_same_netlist"],
    "rtl/fp/fused_add.py": ["tests/test_rtl_psum.py", "tests/test_rtl_array.py", "tests/test_rtl_top.py"],
    "rtl/fp/pe_mac.py": ["tests/test_rtl_int4.py", "tests/test_rtl_array.py", "tests/test_rtl_top.py"],
    "rtl/fp/raw.py": ["tests/test_rtl_psum.py", "tests/test_rtl_array.py", "tests/test_rtl_top.py"],
    "rtl/fp/round.py": ["tests/test_rtl_psum.py", "tests/test_rtl_top.py"],
    "rtl/fp/shifts.py": ["tests/test_rtl_psum.py", "tests/test_rtl_array.py", "tests/test_rtl_top.py"],
    "rtl/interfaces.py": ["tests/test_rtl_units.py", "tests/test_rtl_top.py"],
    "rtl/isa.py": ["tests/test_rtl_decoder.py", "tests/test_microop.py", "tests/test_rtl_seq.py"],
    "rtl/links.py": ["tests/test_rtl_config.py", "tests/test_rtl_top.py"],
    "rtl/launch.py": ["tests/test_xpose_pattern3d.py", "tests/test_c256_pattern3d.py", "tests/test_rtl_mx.py",
                      "tests/test_rtl_top.py", "tests/test_xpose_rounds.py", "tests/test_rtl_row_tiles.py",
                      "tests/test_background_loads.py::test_rtl_in_lockstep"],
    "rtl/load_unit.py": ["tests/test_rtl_mx.py", "tests/test_rtl_top.py"],
    "rtl/mx.py": ["tests/test_rtl_mx.py", "tests/test_rtl_top.py"],
    "rtl/pe.py": ["tests/test_rtl_array.py", "tests/test_rtl_top.py"],
    "rtl/psum.py": ["tests/test_rtl_psum.py", "tests/test_psum_collisions.py", "tests/test_rtl_top.py"],
    "rtl/psum_bank.py": ["tests/test_rtl_psum.py", "tests/test_rtl_top.py"],
    "rtl/psum_xbar.py": ["tests/test_formal.py::test_psum_xbar_writer_is_the_amaranth_crossbar",
                         "tests/test_rtl_units.py", "tests/test_rtl_top.py", "tests/test_rtl_row_tiles.py"],
    "rtl/regs.py": ["tests/test_rtl_regs.py", "tests/test_rtl_seq.py"],
    "rtl/rng.py": ["tests/test_constants_literal.py", "tests/test_rtl_psum.py", "tests/test_rtl_top.py"],
    "rtl/rowport.py": ["tests/test_rtl_units.py", "tests/test_rtl_top.py", "tests/test_xpose_rounds.py",
                       "tests/test_rtl_row_tiles.py"],
    "rtl/rows.py": ["tests/test_rtl_top.py", "tests/test_xpose_rounds.py", "tests/test_rtl_row_tiles.py"],
    "rtl/seq.py": ["tests/test_seq_after_load.py", "tests/test_rtl_seq.py", "tests/test_rtl_top.py",
                   "tests/test_rtl_seq_tiles.py"],
    "rtl/top.py": ["tests/test_rtl_top.py", "tests/test_xpose_rounds.py", "tests/test_rtl_row_tiles.py"],
    "rtl/weight_state.py": ["tests/test_rtl_seq.py", "tests/test_rtl_top.py"],
    "rtl/wires.py": ["tests/test_rtl_units.py", "tests/test_rtl_top.py"],
    "rtl/writeback.py": ["tests/test_rtl_top.py", "tests/test_xpose_rounds.py", "tests/test_rtl_row_tiles.py"],
}
MARKS = "not cosim and not verilator"          # make test's selection, less what needs a C++ build
# The tests that read a Verilog writer's text (D-T96 Writers): they run for a mutant inside a function
# whose name has `verilog`, and for every mutant of a unit with no UNIT_TESTS (the loop form's writers,
# whose every line serves the text), under make test's marks WRITER_MARKS, Verilator included.  Each
# such run exports and builds anew (its own cache): minutes where the simulator's tests take seconds;
# no simulator test reads the text.
WRITER_TESTS = {
    "rtl/array.py": ["tests/test_rtl_export.py::test_exported_hierarchy_equals_flat_amaranth"],
    "rtl/array_loop.py": ["tests/test_rtl_loopform.py"],
    "rtl/loopform.py": ["tests/test_rtl_specialised.py::test_specialised_pe_is_smaller", "tests/test_rtl_loopform.py"],
    "rtl/psum_bank.py": ["tests/test_rtl_export.py::test_psum_bank_verilog_equals_amaranth"],
    "rtl/psum_xbar.py": ["tests/test_formal.py::test_psum_xbar_writer_is_the_amaranth_crossbar",
                         "tests/test_rtl_export.py::test_psum_xbar_verilog_equals_amaranth"],
    "rtl/rows.py": ["tests/test_rtl_export.py::test_rows_verilog_equals_amaranth"],
}
WRITER_MARKS = "not cosim"
WRITER = "#writer"                              # a test-set key's suffix: a unit's writer tests
EQUIVALENT_FILE = "tests/mutants_equivalent.txt"
MUTANT_ENV = "TENSORE_MUTANT"                  # module=code file, read by the overlay's sitecustomize

KILLED, CRASHED, TIMEOUT, SURVIVED, EQUIVALENT = "killed", "crashed", "timeout", "survived", "equivalent"
STATUSES = (SURVIVED, KILLED, CRASHED, TIMEOUT, EQUIVALENT)
USAGE_ERROR = 4                                 # pytest.ExitCode.USAGE_ERROR: a node id its collection lacks

_BINOPS = {ast.Add: ast.Sub, ast.Sub: ast.Add, ast.Mult: ast.FloorDiv, ast.FloorDiv: ast.Mult, ast.Div: ast.Mult,
           ast.Mod: ast.FloorDiv, ast.LShift: ast.RShift, ast.RShift: ast.LShift, ast.BitAnd: ast.BitOr,
           ast.BitOr: ast.BitAnd, ast.BitXor: ast.BitOr, ast.Pow: ast.Mult}
_CMPOPS = {ast.Lt: ast.LtE, ast.LtE: ast.Lt, ast.Gt: ast.GtE, ast.GtE: ast.Gt, ast.Eq: ast.NotEq,
           ast.NotEq: ast.Eq, ast.Is: ast.IsNot, ast.IsNot: ast.Is, ast.In: ast.NotIn, ast.NotIn: ast.In}
_SYMBOL = {ast.Add: "+", ast.Sub: "-", ast.Mult: "*", ast.FloorDiv: "//", ast.Div: "/", ast.Mod: "%",
           ast.LShift: "<<", ast.RShift: ">>", ast.BitAnd: "&", ast.BitOr: "|", ast.BitXor: "^", ast.Pow: "**",
           ast.Lt: "<", ast.LtE: "<=", ast.Gt: ">", ast.GtE: ">=", ast.Eq: "==", ast.NotEq: "!=", ast.Is: "is",
           ast.IsNot: "is not", ast.In: "in", ast.NotIn: "not in", ast.And: "and", ast.Or: "or"}
NO_MUTATE = "pragma: no mutate"                # a line with this comment is left alone


@dataclass(frozen=True)
class Mutant:
    """One mutation: `node` (type, line, col, end line, end col) is the node replaced, `op` the
    change (e.g. `Add->Sub`, `const-1`, `Lt->LtE@0` for a comparison's first operator)."""
    id: str
    file: str
    line: int
    col: int
    op: str
    desc: str
    node: tuple
    original: str = ""                          # the source line
    mutated: str = ""                           # the line as mutated (a one-line node; else empty)
    writer: bool = False                        # in a Verilog writer: run WRITER_TESTS (D-T96 Writers)

    @property
    def key(self) -> str:
        """The key of its test set (and time cap): its unit, or its unit's writer tests."""
        return self.file + WRITER if self.writer else self.file

    @classmethod
    def from_json(cls, d: dict) -> Mutant:
        return cls(**{k: (tuple(v) if k == "node" else v) for k, v in d.items() if k in cls.__dataclass_fields__})


@dataclass
class Config:
    targets: list = field(default_factory=lambda: list(DEFAULT_TARGETS))
    tests: list = field(default_factory=lambda: list(DEFAULT_TESTS))
    marks: str = MARKS
    sample: int | None = None
    seed: int = 0
    timeout: float | None = None                # seconds per mutant (None: 4 x the baseline run + 30 s)
    jobs: int = 1                               # mutants run side by side in a shard
    root: str = str(ROOT)
    equivalent: str = EQUIVALENT_FILE
    ids: list | None = None                     # only these mutants (before the sample)
    lines: bool = True                          # line coverage picks each mutant's tests (D-T106)
    confirm: bool = False                       # a survivor of its line's tests runs its whole set

    @classmethod
    def from_json(cls, d: dict) -> Config:
        return cls(**{k: v for k, v in d.items() if k in cls.__dataclass_fields__})


# --- enumeration ----------------------------------------------------------------------------------

def _key(node) -> tuple:
    return (type(node).__name__, node.lineno, node.col_offset, node.end_lineno, node.end_col_offset)


def _skipped(tree) -> set:
    """Nodes not mutated: docstrings, annotations and `if __name__ == "__main__"` / TYPE_CHECKING blocks."""
    out = set()

    def skip(node):
        out.update(id(n) for n in ast.walk(node))
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            for a in [*node.args.posonlyargs, *node.args.args, *node.args.kwonlyargs, node.args.vararg, node.args.kwarg]:
                if a is not None and a.annotation is not None:
                    skip(a.annotation)
            if node.returns is not None:
                skip(node.returns)
        elif isinstance(node, ast.AnnAssign):
            skip(node.annotation)
        elif isinstance(node, ast.If) and ("__main__" in ast.unparse(node.test) or "TYPE_CHECKING" in ast.unparse(node.test)):
            skip(node)
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and node.body and \
                isinstance(node.body[0], ast.Expr) and isinstance(node.body[0].value, ast.Constant):
            skip(node.body[0])
    return out


def _int_text(value: int, like: str) -> str:
    return (f"{'-' if value < 0 else ''}0x{abs(value):X}" if like.lower().startswith("0x") else
            f"0b{value:b}" if like.lower().startswith("0b") and value >= 0 else str(value))


def _with(node, **fields):
    """A deep copy of `node` with `fields` replaced (built only when a mutant is applied or shown)."""
    def make():
        out = copy.deepcopy(node)
        for k, v in fields.items():
            if k == "ops":
                out.ops[v[0]] = v[1]()
            else:
                setattr(out, k, v() if callable(v) else v)
        return out
    return make


def _segment(lines: list, node) -> str:
    if node.lineno != node.end_lineno:
        return ""
    return lines[node.lineno - 1].encode()[node.col_offset:node.end_col_offset].decode()


def _variants(node, lines: list) -> list:
    """[(op, a function making the replacement node, description)] of one node."""
    out = []
    if isinstance(node, (ast.BinOp, ast.AugAssign)) and type(node.op) in _BINOPS:
        to = _BINOPS[type(node.op)]
        out.append((f"{type(node.op).__name__}->{to.__name__}", _with(node, op=to),
                    f"{_SYMBOL[type(node.op)]} -> {_SYMBOL[to]}"))
        if isinstance(node, ast.BinOp) and isinstance(node.op, (ast.LShift, ast.RShift)) and \
                not (isinstance(node.right, ast.Constant) and isinstance(node.right.value, int)):
            amount = ast.unparse(node.right)
            for sign, op in (("+", ast.Add), ("-", ast.Sub)):
                out.append((f"shift{sign}1", _with(node, right=lambda op=op: ast.BinOp(copy.deepcopy(node.right), op(),
                                                                                      ast.Constant(1))),
                            f"shift amount {amount} -> {amount} {sign} 1"))
    elif isinstance(node, ast.Compare):
        for k, op in enumerate(node.ops):
            if type(op) in _CMPOPS:
                to = _CMPOPS[type(op)]
                out.append((f"{type(op).__name__}->{to.__name__}@{k}", _with(node, ops=(k, to)),
                            f"{_SYMBOL[type(op)]} -> {_SYMBOL[to]}"))
    elif isinstance(node, ast.BoolOp):
        to = ast.Or if isinstance(node.op, ast.And) else ast.And
        out.append((f"{type(node.op).__name__}->{to.__name__}", _with(node, op=to),
                    f"{_SYMBOL[type(node.op)]} -> {_SYMBOL[to]}"))
    elif isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.Not, ast.USub, ast.Invert)):
        what = {ast.Not: "not", ast.USub: "-", ast.Invert: "~"}[type(node.op)]
        out.append((f"{type(node.op).__name__}-removed", lambda: copy.deepcopy(node.operand), f"{what} removed"))
    elif isinstance(node, ast.Constant) and isinstance(node.value, bool):
        out.append((f"{node.value}->{not node.value}", lambda: ast.Constant(not node.value),
                    f"{node.value} -> {not node.value}"))
    elif isinstance(node, ast.Constant) and isinstance(node.value, int):
        seg = _segment(lines, node) or str(node.value)
        for sign, value in (("+", node.value + 1), ("-", node.value - 1)):    # the lowest bit flipped is one of them
            out.append((f"const{sign}1", lambda value=value: ast.Constant(value), f"{seg} -> {_int_text(value, seg)}"))
    elif isinstance(node, ast.Return) and node.value is not None and \
            not (isinstance(node.value, ast.Constant) and node.value.value is None):
        value = _segment(lines, node.value) or "..."
        value = value if len(value) <= 40 else value[:37] + "..."
        out.append(("return->None", lambda: ast.Return(ast.Constant(None)), f"return {value} -> return None"))
    return out


def _text(node, new, desc: str) -> str:
    """The source text of a replacement node (an integer constant written as the original is)."""
    if isinstance(node, ast.Constant) and isinstance(new, ast.Constant) and not isinstance(new.value, bool):
        return desc.rsplit(" -> ", 1)[1]
    return ast.unparse(new)


def _replaced(lines: list, node, text: str) -> list:
    """The lines of `node` with the node replaced by `text`."""
    first, last = lines[node.lineno - 1].encode(), lines[node.end_lineno - 1].encode()
    return (first[:node.col_offset] + text.encode() + last[node.end_col_offset:]).decode().splitlines()


def _shown(lines: list, node, new, desc: str) -> str:
    """The source line with the mutant applied, for the report (a one-line node; else empty)."""
    if node.end_lineno != node.lineno:
        return ""
    return _replaced(lines, node, _text(node, new, desc))[0]


def file_mutants(root, rel: str, source: str | None = None, shown: bool = True) -> list:
    """Every mutant of one file (path `rel` under `root`), in source order; `shown`: with the
    mutated line (the report's; --list needs none)."""
    path = Path(root) / rel
    source = path.read_text() if source is None else source
    tree = _parse(source, str(path))
    skipped, lines = _skipped(tree), source.splitlines()
    in_writer = _writer_lines(tree, rel)
    found = []
    for node in ast.walk(tree):
        if id(node) in skipped or not hasattr(node, "lineno") or NO_MUTATE in lines[node.lineno - 1]:
            continue
        for op, make, desc in _variants(node, lines):
            line = lines[node.lineno - 1]
            mutated = _shown(lines, node, make(), desc) if shown else ""
            found.append((node.lineno, node.col_offset, op, Mutant(
                id=f"{rel}:{node.lineno}:{node.col_offset}:{op}", file=rel, line=node.lineno, col=node.col_offset,
                op=op, desc=f"{rel}:{node.lineno} {desc}", node=_key(node), original=line, mutated=mutated,
                writer=in_writer(node.lineno))))
    found.sort(key=lambda t: t[:3])
    seen: dict = {}
    out = []
    for *_, m in found:                             # two nodes at one place (a call and its name): number them
        n = seen.get(m.id, 0)
        seen[m.id] = n + 1
        out.append(m if not n else Mutant(**{**asdict(m), "id": f"{m.id}#{n}", "node": m.node}))
    return out


def _writer_lines(tree, rel: str):
    """line -> whether a mutant there is a Verilog writer's (D-T96 Writers): in a unit of WRITER_TESTS,
    inside a function whose name has `verilog`, or anywhere in a unit with no UNIT_TESTS."""
    if rel not in WRITER_TESTS:
        return lambda line: False
    if writer_only(rel):
        return lambda line: True
    spans = [(n.lineno, n.end_lineno) for n in ast.walk(tree)
             if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)) and "verilog" in n.name]
    return lambda line: any(a <= line <= b for a, b in spans)


UNIT_DIRS = ("model", "rtl")


def check_targets(root, targets: list) -> list:
    """The target files as paths relative to root: each an existing .py file under model/ or rtl/."""
    if not targets:
        raise ValueError("no target files")
    out = []
    for t in targets:
        rel = Path(t)
        rel = rel.relative_to(Path(root).resolve()) if rel.is_absolute() and rel.is_relative_to(Path(root).resolve()) else rel
        if rel.parts[:1] not in [(d,) for d in UNIT_DIRS] or rel.suffix != ".py" or ".." in rel.parts:
            raise ValueError(f"--units {t}: a unit is a .py file under model/ or rtl/ (or a group: {', '.join(GROUPS)})")
        if not (Path(root) / rel).is_file():
            raise ValueError(f"--units {t}: no such file under {root}")
        out.append(rel.as_posix())
    return out


def rtl_units(root) -> list:
    """Every rtl/ file with code (its __init__.py files hold none)."""
    return sorted(p.relative_to(root).as_posix() for p in (Path(root) / "rtl").rglob("*.py") if p.name != "__init__.py")


def engine_units(root) -> list:
    """Every file of the golden engine's package with code (model/engine/, D-T96): units of the map
    outside the default targets (`--units engine`)."""
    return sorted(p.relative_to(root).as_posix() for p in (Path(root) / "model" / "engine").glob("*.py")
                  if p.name != "__init__.py")


GROUPS = {"model": lambda root: list(DEFAULT_TARGETS),
          "engine": engine_units,
          "rtl": lambda root: [u for u in rtl_units(root) if covered(u)],
          "all": lambda root: list(DEFAULT_TARGETS) + engine_units(root) + [u for u in rtl_units(root) if covered(u)]}


def covered(unit: str) -> bool:
    """Whether the map names tests for the unit (its own, or its Verilog writer's)."""
    return bool(UNIT_TESTS.get(unit) or WRITER_TESTS.get(unit))


def writer_only(unit: str) -> bool:
    """A unit that is all Verilog writer: WRITER_TESTS and no UNIT_TESTS (every mutant a writer's)."""
    return bool(WRITER_TESTS.get(unit)) and not UNIT_TESTS.get(unit)


def expand_units(root, names: list) -> list:
    """Unit names with the groups (`model`: DEFAULT_TARGETS, `engine`: the engine's files, `rtl`: the rtl
    files the map covers, `all`) expanded, each once, in the order given."""
    out = []
    for name in names:
        out += [u for u in (GROUPS[name](root) if name in GROUPS else [name]) if u not in out]
    return check_targets(root, out)


@functools.lru_cache(maxsize=None)
def _file(root, rel: str) -> Path:
    return (Path(root) / rel).resolve()


def _covers(item: str, nodeid: str, root=ROOT) -> bool:
    """Whether pytest node `nodeid` is one of test item `item`'s (a file, a test or a test's case),
    their files compared as paths (the timing plugin names a file by its absolute path)."""
    ifile, _, itest = item.partition("::")
    nfile, _, ntest = nodeid.partition("::")
    if _file(root, ifile) != _file(root, nfile):
        return False
    return not itest or ntest == itest or ntest.startswith((itest + "::", itest + "["))


def collected(root, items: list, marks: str = MARKS) -> list:
    """The node ids pytest selects from `items` under `-m marks` (a collection, no run)."""
    cmd = [sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider", "-m", marks,
           "-o", "addopts=", *items]
    out = subprocess.run(cmd, cwd=root, capture_output=True, text=True).stdout
    return [ln.strip() for ln in out.splitlines() if "::" in ln and not ln.startswith(" ")]


def check_map(root, collect: bool = False, marks: str = MARKS) -> list:
    """The findings of UNIT_TESTS, one line each: a unit (a default model target, a file of the
    engine or an rtl file) with no covering test, a test file that does not exist, an entry that is
    no unit; with `collect`, a unit whose tests select no test under `-m marks` (its mutants would
    run nothing)."""
    units = list(DEFAULT_TARGETS) + engine_units(root) + rtl_units(root)
    found = [f"{u}: no covering test in UNIT_TESTS" for u in units if not covered(u)]
    for name, table, table_marks in (("UNIT_TESTS", UNIT_TESTS, marks), ("WRITER_TESTS", WRITER_TESTS, WRITER_MARKS)):
        found += [f"{u}: {name} names it, but it is no unit (a model target or an rtl file)"
                  for u in table if u not in units]
        found += [f"{u}: {t}: no such test file" for u in units for t in table.get(u, [])
                  if not (Path(root) / t.split("::")[0]).is_file()]
        if collect:
            items = sorted({t for u in units for t in table.get(u, []) if (Path(root) / t.split("::")[0]).is_file()})
            nodes = collected(root, items, table_marks) if items else []
            found += [f"{u}: its {name} select no test under -m '{table_marks}'" for u in units
                      if table.get(u) and not any(_covers(t, n, root) for t in table[u] for n in nodes)]
    return found


def enumerate_mutants(root, targets: list, sources: dict | None = None) -> list:
    """Every mutant of the target files, file by file in the order given, each in source order."""
    sources = sources or {}
    return [m for rel in check_targets(root, targets) for m in file_mutants(root, rel, sources.get(rel))]


def select(mutants: list, sample: int | None, seed: int = 0) -> list:
    """`sample` mutants drawn with random.Random(seed) (all of them if None or more), in source order."""
    if sample is None or sample >= len(mutants):
        return list(mutants)
    picked = set(random.Random(seed).sample(range(len(mutants)), sample))
    return [m for k, m in enumerate(mutants) if k in picked]


# --- applying a mutant ----------------------------------------------------------------------------

class _Replace(ast.NodeTransformer):
    def __init__(self, key: tuple, new):
        self.key, self.new, self.done = key, new, False

    def generic_visit(self, node):
        if not self.done and hasattr(node, "lineno") and _key(node) == self.key:
            self.done = True
            return ast.copy_location(self.new, node)
        return super().generic_visit(node)


def mutated_tree(root, mutant: Mutant, source: str | None = None):
    """The file's syntax tree with the mutant applied; ValueError if the file no longer has it."""
    path = Path(root) / mutant.file
    source = path.read_text() if source is None else source
    tree = _parse(source, str(path))
    for node in ast.walk(tree):
        if hasattr(node, "lineno") and _key(node) == mutant.node:
            for op, make, _ in _variants(node, source.splitlines()):
                if op == mutant.op:
                    rep = _Replace(mutant.node, make())
                    tree = ast.fix_missing_locations(rep.visit(tree))
                    if rep.done:
                        return tree
    raise ValueError(f"mutant {mutant.id}: {mutant.file} has changed since it was enumerated")


def diff(mutant: Mutant, source: str) -> str:
    """The mutant as a unified diff of its file (one line of context), for the report's survivors."""
    lines = source.splitlines()
    node = next(n for n in ast.walk(_parse(source)) if hasattr(n, "lineno") and _key(n) == mutant.node)
    make, desc = next((make, desc) for op, make, desc in _variants(node, lines) if op == mutant.op)
    after = lines[:node.lineno - 1] + _replaced(lines, node, _text(node, make(), desc)) + lines[node.end_lineno:]
    return "".join(difflib.unified_diff([ln + "\n" for ln in lines], [ln + "\n" for ln in after],
                                        f"a/{mutant.file}", f"b/{mutant.file}", n=1))


def _shape(code: CodeType) -> tuple:
    """A code object without its positions: what it does."""
    return (code.co_code, code.co_names, code.co_varnames, code.co_freevars, code.co_cellvars, code.co_flags,
            code.co_argcount, code.co_kwonlyargcount, code.co_posonlyargcount, code.co_name,
            tuple(_shape(c) if isinstance(c, CodeType) else (type(c).__name__, repr(c)) for c in code.co_consts))


def same_bytecode(root, mutant: Mutant, source: str | None = None) -> bool:
    """Whether the mutated file compiles to the original's bytecode (an equivalent mutant)."""
    path = Path(root) / mutant.file
    source = path.read_text() if source is None else source
    return _shape(_compile(source, str(path))) == _shape(_compile(mutated_tree(root, mutant, source), str(path)))


def module_name(rel: str) -> str:
    """model/isa/check.py -> tensore.model.isa.check (the installed name, pyproject.toml)."""
    parts = list(Path(rel).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(["tensore", *parts])


def read_equivalent(path) -> dict:
    """{mutant id: reason} from an equivalence file: `ID  reason` per line, `#` comments."""
    path = Path(path)
    if not path.is_file():
        return {}
    out = {}
    for k, line in enumerate(path.read_text().splitlines(), 1):
        line = line.split(" #", 1)[0].strip() if not line.lstrip().startswith("#") else ""
        if not line:
            continue
        ident, _, reason = line.partition(" ")
        if not reason.strip():
            raise ValueError(f"{path}:{k}: {ident} has no reason (a line is `ID  reason`)")
        out[ident] = reason.strip()
    return out


# --- running a mutant -----------------------------------------------------------------------------

_SITECUSTOMIZE = '''\
"""tensore mutate's overlay (cosim/mutate.py): the module named in $TENSORE_MUTANT runs the code of its mutant."""
import os as _os

_spec = _os.environ.get("TENSORE_MUTANT")
if _spec:
    import importlib.abc as _abc
    import importlib.util as _util
    import marshal as _marshal
    import sys as _sys

    _name, _origin, _code = _spec.split("=", 2)

    class _Loader(_abc.Loader):
        def create_module(self, spec):
            return None

        def exec_module(self, module):
            with open(_code, "rb") as f:
                exec(_marshal.load(f), module.__dict__)

    class _Finder(_abc.MetaPathFinder):
        def find_spec(self, fullname, path=None, target=None):
            if fullname != _name:
                return None
            package = _os.path.basename(_origin) == "__init__.py"
            return _util.spec_from_file_location(fullname, _origin, loader=_Loader(),
                                                 submodule_search_locations=[_os.path.dirname(_origin)] if package else None)

    _sys.meta_path.insert(0, _Finder())

_cover = _os.environ.get("TENSORE_MUTATE_COVER")
if _cover:                                      # the unmutated run's line coverage, every process
    import atexit as _atexit

    import coverage as _coverage

    _cov = _coverage.Coverage(data_file=_cover, data_suffix=True, config_file=False,
                              include=_os.environ["TENSORE_MUTATE_INCLUDE"].split(_os.pathsep))
    # silent: a test reads a child's stderr, and a child that imports no unit collects no data
    _cov.set_option("run:disable_warnings", ["no-data-collected", "module-not-imported", "module-not-measured"])
    _cov.start()
    _cov.switch_context(_os.environ.get("TENSORE_MUTATE_CONTEXT", ""))  # a child: the test that started it

    def _save():
        _cov.stop()
        _cov.save()
    _atexit.register(_save)
'''


def test_sets(root, tests: list, unit: str) -> dict:
    """{key: pytest arguments} of a unit's mutants (Mutant.key): its own tests unless it has only a
    writer's, and its writer's if it has them."""
    out = {} if writer_only(unit) else {unit: test_files(root, tests, unit)}
    if WRITER_TESTS.get(unit):
        out[unit + WRITER] = test_files(root, tests, unit, writer=True)
    return out


def marks_of(key: str, marks: str) -> str:
    """The -m expression a test set runs under: WRITER_MARKS for a writer's, else the run's."""
    return WRITER_MARKS if key.endswith(WRITER) else marks


def test_files(root, tests: list, unit: str | None = None, writer: bool = False) -> list:
    """The pytest arguments of a test set for a mutant of `unit`: named sets expanded (`unit`: the
    unit's UNIT_TESTS, or its WRITER_TESTS for a `writer` mutant; `fast`), each item once in the order
    given, each file checked."""
    out = []
    own = (WRITER_TESTS if writer else UNIT_TESTS).get(unit, [])
    for t in tests:
        for item in own if t == UNIT_SET else TEST_SETS.get(t, [t]):
            if not (Path(root) / item.split("::")[0]).exists():
                raise ValueError(f"--tests {item}: no such test file under {root}")
            if item not in out:
                out.append(item)
    if not out:
        raise ValueError(f"empty test set for {unit} (--tests names no test, and UNIT_TESTS none)" if unit else
                         "empty test set (--tests names no test)")
    return out


_TIMES_PLUGIN = '''\
"""tensore mutate's pytest plugin (cosim/mutate.py): each test's file (absolute), name and seconds,
as JSON to $TENSORE_MUTATE_TIMES at the end of the session; under line coverage (the overlay's),
each test's lines under its name (a coverage context, inherited by the processes it starts), its
caches emptied first (a test reusing an engine an earlier test elaborated still needs its lines)."""
import json as _json
import os as _os
import time as _time

import pytest as _pytest

_times = {}


def _name(item):
    return f"{item.path}::{item.nodeid.partition('::')[2]}"


def _forget():
    """Each test runs the code a cache would spare it, so the lines it needs are its own: the
    functools caches of tensore's and the tests' modules, the lockstep's elaborated engines."""
    import functools
    import sys
    mods = [m for n, m in list(sys.modules.items()) if n.startswith(("tensore.", "tests.")) and m is not None]
    for value in (v for m in mods for v in list(vars(m).values())):
        if isinstance(value, functools._lru_cache_wrapper):
            value.cache_clear()
    lockstep = sys.modules.get("tensore.cosim.lockstep")
    if lockstep is not None:
        lockstep.forget_engines()


@_pytest.hookimpl(wrapper=True)
def pytest_runtest_protocol(item, nextitem):
    cov = None
    if _os.environ.get("TENSORE_MUTATE_COVER"):
        import coverage
        cov = coverage.Coverage.current()
    if cov is not None:
        _forget()
        cov.switch_context(_name(item))
        _os.environ["TENSORE_MUTATE_CONTEXT"] = _name(item)
    t0 = _time.perf_counter()
    try:
        return (yield)
    finally:
        _times[_name(item)] = _time.perf_counter() - t0
        if cov is not None:
            cov.switch_context("")
            _os.environ["TENSORE_MUTATE_CONTEXT"] = ""


def pytest_sessionfinish(session):
    if _os.environ.get("TENSORE_MUTATE_TIMES"):
        with open(_os.environ["TENSORE_MUTATE_TIMES"], "w") as f:
            _json.dump(_times, f)
'''
TIMES_PLUGIN = "tensore_mutate_times"
TIMES_ENV = "TENSORE_MUTATE_TIMES"
COVER_ENV, INCLUDE_ENV = "TENSORE_MUTATE_COVER", "TENSORE_MUTATE_INCLUDE"
_COMPOUND = (ast.If, ast.For, ast.AsyncFor, ast.While, ast.With, ast.AsyncWith, ast.Try, ast.TryStar, ast.Match,
             ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)


def run_lines(tree, key: tuple) -> range:
    """The lines of which one must run for a mutant of node `key` to change anything (D-T106): its
    innermost statement's, from a decorator's line; of a compound statement, its header's (the first
    line to the node's last)."""
    def first(stmt):
        return min([stmt.lineno, *(d.lineno for d in getattr(stmt, "decorator_list", []))])
    around = [s for s in ast.walk(tree) if isinstance(s, ast.stmt) and first(s) <= key[1] and key[3] <= s.end_lineno]
    stmt = max(around, key=lambda s: (s.lineno, -s.end_lineno))
    last = key[3] if isinstance(stmt, _COMPOUND) and _key(stmt) != key else stmt.end_lineno
    return range(min(first(stmt), key[1]), last + 1)


def in_a_call(tree, key: tuple) -> bool:
    """Whether node `key` runs when a function (or lambda) is called, rather than when its module
    is imported: inside a body, not in a decorator, a default or module or class code.  Code run at
    import sets values every test sees, whichever test the import ran under."""
    def inside(node, body) -> bool:
        return any((b.lineno, b.col_offset) <= key[1:3] and key[3:5] <= (b.end_lineno, b.end_col_offset) for b in body)
    return any(inside(n, n.body) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)) else inside(n, [n.body])
               for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)))


def read_cover(directory, files: dict) -> dict:
    """{unit: {line: {test names}}} from the coverage data files the overlay wrote in `directory`
    (every process of the unmutated run); `files`: {unit: its absolute path}.  The name '' stands for
    lines run outside a test (imports, collection); a unit none of whose lines ran is left out."""
    import coverage
    by_path = {str(Path(p).resolve()): rel for rel, p in files.items()}
    out: dict = {}
    for path in sorted(Path(directory).glob("cover.*")):
        data = coverage.CoverageData(basename=str(path))
        data.read()
        for measured in data.measured_files():
            rel = by_path.get(str(Path(measured).resolve()))
            for line, names in (data.contexts_by_lineno(measured) if rel else {}).items():
                out.setdefault(rel, {}).setdefault(line, set()).update(names)
    return out


def unit_timeout(items: list, seconds: dict, overhead: float, root=ROOT) -> float:
    """A mutant's time cap: 4 x (its tests' seconds in the unmutated run + the start-up) + 30."""
    return round(4 * (overhead + sum(s for n, s in seconds.items() if any(_covers(i, n, root) for i in items))) + 30, 1)


class Runner:
    """Runs the test sets on the original and on mutants, in a private directory for the caches."""

    def __init__(self, cfg: Config):
        if cfg.lines and importlib.util.find_spec("coverage") is None:
            raise ValueError("line coverage needs coverage.py (make setup installs it); or run with --whole-sets")
        self.cfg = cfg
        self.root = (Path(cfg.root) if Path(cfg.root).is_dir() else ROOT).resolve()   # a dask worker's own checkout
        self.sources = {rel: (self.root / rel).read_text() for rel in check_targets(self.root, cfg.targets)}
        self.tests = {k: t for rel in self.sources for k, t in test_sets(self.root, cfg.tests, rel).items()}
        self.dir = Path(tempfile.mkdtemp(prefix="tensore-mutate-"))
        (self.dir / "site").mkdir()
        (self.dir / "site" / "sitecustomize.py").write_text(_SITECUSTOMIZE)
        (self.dir / "site" / f"{TIMES_PLUGIN}.py").write_text(_TIMES_PLUGIN)
        self.timeout = cfg.timeout                  # the largest of the units' (given: all units')
        self.timeouts: dict = {}                    # {test-set key: seconds}, from the baseline
        self.took: dict = {}                        # {test: seconds} in the baseline
        self.cover: dict = {}                       # {unit: {line: {tests}}} in the baseline (cfg.lines)
        self.members: dict = {}                     # {test-set key: {tests}} of the baseline
        self.trees: dict = {}                       # {unit: its unmutated syntax tree}

    def close(self):
        shutil.rmtree(self.dir, ignore_errors=True)

    def _env(self, mutant_spec: str | None = None, private: str | None = None, cache: str = "base") -> dict:
        """The environment of a run: the overlay, and the caches in the private directory (`private`:
        Hypothesis's and numba's of this run alone; `cache`: the directory of Verilog exports and builds)."""
        env = {k: v for k, v in os.environ.items() if k != MUTANT_ENV}
        env["PYTHONPATH"] = os.pathsep.join([str(self.dir / "site"), *filter(None, [env.get("PYTHONPATH")])])
        env["PYTHONPYCACHEPREFIX"] = str(self.dir / "pycache")
        env["HYPOTHESIS_STORAGE_DIRECTORY"] = str(self.dir / (private or "") / "hypothesis")
        env["NUMBA_CACHE_DIR"] = str(self.dir / (private or "") / "numba")
        env["TENSORE_CACHE"] = str(self.dir / cache / "cache")
        env.setdefault("OPENBLAS_NUM_THREADS", "1")
        env.setdefault("TENSORE_OPT", "-O0")        # a writer's Verilator builds, as make test's
        if mutant_spec:
            env[MUTANT_ENV] = mutant_spec
        return env

    def _pytest(self, env: dict, timeout: float | None, tests: list, extra: tuple = (), marks: str | None = None) -> tuple:
        """(status, seconds, first failing test or crash line, pytest's exit code; None: timed out)."""
        cmd = [sys.executable, "-m", "pytest", "-x", "-q", "-p", "no:cacheprovider",
               "-m", marks or self.cfg.marks, "-o", "addopts=", "-rfE", *extra, *tests]
        t0 = time.perf_counter()
        proc = subprocess.Popen(cmd, cwd=self.root, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                text=True, start_new_session=True)
        try:
            out, _ = proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.communicate()
            return TIMEOUT, time.perf_counter() - t0, f"no result in {timeout:.0f} s", None
        seconds = time.perf_counter() - t0
        lines = out.splitlines()
        first = next((ln for ln in lines if ln.startswith(("FAILED ", "ERROR "))), "")
        if proc.returncode == 0:
            return SURVIVED, seconds, "", 0
        if proc.returncode == 1:
            return KILLED, seconds, first[:300], 1
        why = first or next((ln for ln in reversed(lines) if ln.strip()), f"exit {proc.returncode}")
        return CRASHED, seconds, f"pytest exit {proc.returncode}: {why}"[:300], proc.returncode

    def baseline(self, keys=None) -> float:
        """The test sets of `keys` (Mutant.key; default: every one of the targets) on the unmutated
        sources, their files split over --jobs runs side by side (a writer's under WRITER_MARKS): the
        seconds it takes, and each key's timeout (unless given) from its tests' share; ValueError if a
        run does not pass or a set selects no test."""
        keys = [k for k in self.tests if keys is None or k in keys]
        if not keys:
            return 0.0
        groups = []
        for marks in dict.fromkeys(marks_of(k, self.cfg.marks) for k in keys):
            tests = list(dict.fromkeys(t for k in keys if marks_of(k, self.cfg.marks) == marks for t in self.tests[k]))
            groups += [(marks, tests[j::self.cfg.jobs]) for j in range(min(max(1, self.cfg.jobs), len(tests)))]

        cover = self.dir / "cover"
        lines = {COVER_ENV: str(cover / "cover"), INCLUDE_ENV: os.pathsep.join(str(_file(self.root, rel))
                                                                               for rel in self.sources)}

        def one(j: int) -> tuple:
            times = self.dir / f"baseline-times-{j}.json"
            marks, tests = groups[j]
            env = {**self._env(), TIMES_ENV: str(times), **(lines if self.cfg.lines else {})}
            status, seconds, why, _ = self._pytest(env, None, tests, ("-p", TIMES_PLUGIN), marks)
            if status != SURVIVED:
                raise ValueError(f"the test set does not pass on the unmutated sources ({why or status})")
            return seconds, json.loads(times.read_text())
        t0 = time.perf_counter()
        with ThreadPoolExecutor(max_workers=max(1, min(self.cfg.jobs, len(groups)))) as pool:
            runs = list(pool.map(one, range(len(groups))))
        seconds = time.perf_counter() - t0
        took = {n: s for _, part in runs for n, s in part.items()}
        self.took.update(took)
        self.members.update({k: {n for n in took if any(_covers(i, n, self.root) for i in self.tests[k])} for k in keys})
        if self.cfg.lines:
            files = {rel: _file(self.root, rel) for rel in self.sources}
            for rel, by_line in read_cover(cover, files).items():
                for line, names in by_line.items():
                    self.cover.setdefault(rel, {}).setdefault(line, set()).update(names)
            shutil.rmtree(cover, ignore_errors=True)
        for k in keys:
            if not self.members[k]:
                raise ValueError(f"{k}: its tests select no test under -m '{marks_of(k, self.cfg.marks)}'")
        overhead = max(0.0, *(sec - sum(part.values()) for sec, part in runs))   # one run's start-up
        if self.cfg.timeout is None:
            self.timeouts.update({k: unit_timeout(self.tests[k], took, overhead, self.root) for k in keys})
            self.timeout = max(self.timeouts.values())
        else:
            self.timeouts.update({k: self.cfg.timeout for k in keys})
        return seconds

    def saved(self) -> dict:
        """The baseline's tests, their seconds, each key's tests and the line coverage, for a shard
        file (tests by their index in `tests`); `restore` reads it back."""
        names = sorted(self.took)
        at = {n: k for k, n in enumerate(names)}
        return {"tests": names, "seconds": [round(self.took[n], 3) for n in names],
                "members": {k: sorted(at[n] for n in v) for k, v in self.members.items()},
                "cover": {rel: {str(line): sorted(at.get(n, -1) for n in v) for line, v in by_line.items()}
                          for rel, by_line in self.cover.items()}}

    def restore(self, saved: dict) -> None:
        """A saved run's baseline (`saved`'s form): its seconds, key members and line coverage."""
        names = saved.get("tests", [])

        def name(k):
            return names[k] if k >= 0 else ""
        self.took.update(zip(names, saved.get("seconds", [])))
        self.members.update({k: {names[i] for i in v} for k, v in saved.get("members", {}).items()})
        for rel, by_line in saved.get("cover", {}).items():
            self.cover[rel] = {int(line): {name(k) for k in v} for line, v in by_line.items()}

    def first(self, mutant: Mutant) -> list | None:
        """The tests of its set that run a mutant's lines in the unmutated run, fastest first: they run
        alone (D-T106), the whole set after them with `confirm`; None if none of its lines ran
        there at all (a line no test runs cannot fail one); [] (the whole set at once) for code run
        at import (`in_a_call`, or a line run outside a test) and without line coverage of its unit
        (`--whole-sets`, a unit the run did not measure; numba's compiled functions, which coverage
        does not see)."""
        by_line = self.cover.get(mutant.file)
        if not by_line:
            return []
        if mutant.file not in self.trees:
            self.trees[mutant.file] = _parse(self.sources[mutant.file])
        if not in_a_call(self.trees[mutant.file], mutant.node):
            return []
        span = run_lines(self.trees[mutant.file], mutant.node)
        names = set().union(*(by_line.get(line, ()) for line in span))
        if not any(line in by_line for line in span):
            return [] if "numba" in self.sources[mutant.file] else None
        if "" in names:                             # run by an import (a function called by module code)
            return []
        return sorted(names & self.members.get(mutant.key, set()), key=lambda n: (self.took.get(n, 0.0), n))

    def run(self, mutant: Mutant, equivalent: dict) -> dict:
        """One mutant's result: its fields with status, seconds and detail (a survivor: and its diff)."""
        res = asdict(mutant)
        src = self.sources.get(mutant.file)
        if mutant.id in equivalent:
            return {**res, "status": EQUIVALENT, "seconds": 0.0, "detail": f"listed: {equivalent[mutant.id]}"}
        try:
            tree = mutated_tree(self.root, mutant, src)
        except ValueError as exc:
            return {**res, "status": CRASHED, "seconds": 0.0, "detail": str(exc)}
        origin = str(self.root / mutant.file)
        code = _compile(tree, origin)
        if _shape(code) == _shape(_compile(src, origin)):
            return {**res, "status": EQUIVALENT, "seconds": 0.0, "detail": "same bytecode as the original"}
        tag = hashlib.sha1(mutant.id.encode()).hexdigest()[:12]
        env = self._env(f"{module_name(mutant.file)}={origin}=" + str(self.dir / f"{tag}.code"),
                        tag if "numba" in src else None, tag)    # numba's cache knows a function by its file
        first = self.first(mutant)
        if first is None:
            return {**res, "status": SURVIVED, "seconds": 0.0, "diff": diff(mutant, src),
                    "detail": "no test of its set runs its line in the unmutated run (not run)"}
        (self.dir / f"{tag}.code").write_bytes(marshal.dumps(code))
        cap, marks = self.timeouts.get(mutant.key, self.timeout), marks_of(mutant.key, self.cfg.marks)
        status, seconds, detail, code = self._pytest(env, cap, first, marks=marks) if first else (None, 0.0, "", None)
        # the whole set where they name a test the mutant's collection lacks (pytest's usage error, exit 4)
        # and, with --confirm, where they pass (a cached value can carry a line's effect to a test not running it)
        if not first or code == USAGE_ERROR or (status == SURVIVED and self.cfg.confirm):
            status, rest, detail, _ = self._pytest(env, cap and max(1.0, cap - seconds), self.tests[mutant.key],
                                                   marks=marks)
            seconds += rest
        elif status == SURVIVED:
            detail = f"the {len(first)} test(s) of its set that run its line pass (--confirm: then the whole set)"
        (self.dir / f"{tag}.code").unlink(missing_ok=True)
        shutil.rmtree(self.dir / tag, ignore_errors=True)
        out = {**res, "status": status, "seconds": round(seconds, 2), "detail": detail}
        return {**out, "diff": diff(mutant, src)} if status == SURVIVED else out


# --- shards ---------------------------------------------------------------------------------------

def selection(cfg: Config, sources: dict | None = None) -> list:
    """The mutants a configuration runs: enumerated, then sampled."""
    mutants = enumerate_mutants(cfg.root, cfg.targets, sources)
    if cfg.ids:
        known = {m.id for m in mutants}
        unknown = [i for i in cfg.ids if i not in known]
        if unknown:
            raise ValueError(f"--mutant {unknown[0]}: no such mutant of the targets (--list names them)")
        mutants = [m for m in mutants if m.id in set(cfg.ids)]
    return select(mutants, cfg.sample, cfg.seed)


def shard_of(items: list, i: int, n: int) -> list:
    """Shard i of n: every n-th item from the i-th (each shard a spread over the files)."""
    return items[i::n]


def run_key(config: dict) -> str:
    """What makes two runs' results comparable: the configuration but the jobs and the checkout."""
    return json.dumps({k: v for k, v in config.items() if k not in ("jobs", "root")}, sort_keys=True)


def kept(previous: dict | None, cfg: Config, i: int, n: int, sources: dict) -> dict:
    """The results of an earlier run of this shard a resumed run keeps ({id: result}); ValueError if
    that run had another configuration, split or sources of the targets."""
    if not previous:
        return {}
    if run_key(previous.get("config", {})) != run_key(asdict(cfg)) or previous.get("shard") != [i, n]:
        raise ValueError(f"--resume: the saved shard {i}/{n} ran other options; run without --resume to start anew")
    changed = sorted(f for f in sources if previous.get("sources", {}).get(f) != sources[f])
    if changed:
        raise ValueError(f"--resume: {changed[0]} changed since the saved run; run without --resume to start anew")
    return {r["id"]: r for r in previous.get("mutants", [])}


def run_shard(cfg: Config | dict, i: int = 0, n: int = 1, log=lambda *a: None, checkpoint=None,
              previous: dict | None = None) -> dict:
    """Shard i of n of the configuration's mutants: {"config", "shard", "mutants", "baseline_seconds",
    "seconds", "complete", "sources"}; `checkpoint(result)` after every mutant.  `previous`: this
    shard's result of an earlier, stopped run (`kept`): its mutants' results and unit timeouts are
    kept and only the others run (the baseline only for units it has no timeout of)."""
    cfg = Config.from_json(cfg) if isinstance(cfg, dict) else cfg
    t0 = time.perf_counter()
    runner = Runner(cfg)
    try:
        equivalent = read_equivalent(Path(cfg.root) / cfg.equivalent)
        mutants = shard_of(selection(cfg, runner.sources), i, n)
        sources = {rel: hashlib.sha256(s.encode()).hexdigest()[:16] for rel, s in runner.sources.items()}
        done = kept(previous, cfg, i, n, sources)
        results: list = [done[m.id] for m in mutants if m.id in done]
        todo = [m for m in mutants if m.id not in done]
        before = base = 0.0                       # seconds of the saved run, and of its baseline
        if done:
            runner.restore(previous.get("lines") or {})
            runner.timeouts.update(previous.get("timeouts") or {})
            runner.timeout = previous.get("timeout", runner.timeout)
            before, base = previous.get("seconds", 0.0), previous.get("baseline_seconds", 0.0)

        def result(complete: bool) -> dict:
            return {"config": asdict(cfg), "shard": [i, n], "mutants": sorted(results, key=lambda r: r["id"]),
                    "baseline_seconds": round(base, 2), "timeout": runner.timeout, "timeouts": runner.timeouts,
                    "complete": complete, "lines": lines,
                    "seconds": round(before + time.perf_counter() - t0, 1), "sources": sources}
        keys = {m.key for m in todo if m.id not in equivalent}
        base += runner.baseline({k for k in keys if k not in runner.timeouts})
        lines = runner.saved()                    # fixed from here on: every checkpoint writes the same
        caps = sorted(runner.timeouts.values()) or [runner.timeout or 0]
        log(f"shard {i}/{n}: {len(mutants)} mutants" + (f", {len(done)} kept from the saved run" if done else "")
            + f"; the test sets take {base:.1f} s unmutated (timeout {caps[0]:.0f}-{caps[-1]:.0f} s per mutant, by unit)")

        def one(m):
            r = runner.run(m, equivalent)
            results.append(r)
            log(f"  [{len(results)}/{len(mutants)}] {r['status']:<10} {r['seconds']:>6.1f} s  {m.desc}")
            if checkpoint is not None:
                checkpoint(result(False))
            return r
        with ThreadPoolExecutor(max_workers=max(1, cfg.jobs)) as pool:
            list(pool.map(one, todo))
        return result(True)
    finally:
        runner.close()


# --- the report -----------------------------------------------------------------------------------

def counts(results: list) -> dict:
    c = {s: sum(1 for r in results if r["status"] == s) for s in STATUSES}
    run = len(results) - c[EQUIVALENT]
    c["mutants"] = len(results)
    c["score"] = round(100.0 * (c[KILLED] + c[CRASHED] + c[TIMEOUT]) / run, 1) if run else None
    return c


def per_unit(shards: list, mutants: list) -> dict:
    """Per unit (target file) with mutants: its counts and score, the tests its mutants ran first
    (UNIT_TESTS) and its time cap (the largest of the shards')."""
    out = {}
    for f in [t for t in shards[0]["config"]["targets"] if any(m["file"] == t for m in mutants)]:
        caps = [r.get("timeouts", {}).get(f) or r.get("timeout") for r in shards]
        out[f] = {**counts([m for m in mutants if m["file"] == f]), "tests": UNIT_TESTS.get(f, []),
                  "timeout_seconds": max((c for c in caps if c is not None), default=None)}
    return out


def merge(results: list, out_dir, name: str) -> dict:
    """Shard results joined: out_dir/<name>.json (summary, per file, survivors, every mutant) and
    out_dir/<name>.html; returns the JSON."""
    cfgs = {run_key(r["config"]) for r in results}
    if len(cfgs) != 1:
        raise ValueError("the shards ran different configurations; clear the shard directory first")
    if len({json.dumps(r.get("sources"), sort_keys=True) for r in results}) != 1:
        raise ValueError("the shards saw different sources of the target files; run them again")
    shards = sorted(results, key=lambda r: r["shard"])
    mutants = sorted((m for r in shards for m in r["mutants"]), key=lambda m: (m["file"], m["line"], m["col"], m["id"]))
    ran = [m for m in mutants if m["status"] != EQUIVALENT]
    summary = {**counts(mutants), "shards": len(shards),
               "incomplete": [r["shard"] for r in shards if not r.get("complete", True)],
               "seconds": round(sum(r["seconds"] for r in shards), 1),
               "seconds_per_mutant": round(sum(m["seconds"] for m in ran) / len(ran), 2) if ran else None,
               "baseline_seconds": [r["baseline_seconds"] for r in shards],
               "timeout_seconds": [r["timeout"] for r in shards]}
    files = sorted({m["file"] for m in mutants})
    report = {"config": shards[0]["config"], "summary": summary,
              "files": {f: counts([m for m in mutants if m["file"] == f]) for f in files},
              "units": per_unit(shards, mutants),
              "survivors": [m for m in mutants if m["status"] == SURVIVED], "mutants": mutants}
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    (out / f"{name}.json").write_text(json.dumps(report, indent=1))
    (out / f"{name}.html").write_text(to_html(report, name))
    return report


def _unit_rows(report: dict) -> list:
    """The HTML rows of the per-unit table (a report before the units: its files)."""
    rows = []
    for f, c in (report.get("units") or report["files"]).items():
        tests = " ".join(c.get("tests", []))
        rows.append(f"<tr><td><code>{html.escape(f)}</code></td><td>{c['mutants']}</td><td>{c[KILLED]}</td>"
                    f"<td>{c[SURVIVED]}</td><td>{c[TIMEOUT]}</td><td>{c[CRASHED]}</td><td>{c[EQUIVALENT]}</td>"
                    f"<td>{'-' if c['score'] is None else c['score']}</td><td>{html.escape(tests)}</td></tr>")
    return rows


def _survivor_diffs(report: dict) -> list:
    """Each survivor's diff as a <pre> block (its one-line change where the result has no diff)."""
    out = []
    for m in report["survivors"]:
        text = m.get("diff") or f"- {m['original'].strip()}\n+ {m['mutated'].strip()}"
        out.append(f"<h3><code>{html.escape(m['id'])}</code></h3><pre>{html.escape(text)}</pre>")
    return out


def to_html(report: dict, name: str) -> str:
    """One static page: the summary, the per-unit table, the survivors' diffs and one table of the
    mutants, survivors first."""
    order = {s: k for k, s in enumerate(STATUSES)}
    rows = []
    for m in sorted(report["mutants"], key=lambda m: (order[m["status"]], m["file"], m["line"], m["col"])):
        rows.append(f'<tr class="{m["status"]}"><td>{m["status"]}</td><td><code>{html.escape(m["id"])}</code></td>'
                    f'<td>{html.escape(m["desc"].split(" ", 1)[1])}</td>'
                    f'<td><pre>- {html.escape(m["original"].strip())}\n+ {html.escape(m["mutated"].strip())}</pre></td>'
                    f'<td>{m["seconds"]:.1f}</td><td>{html.escape(m.get("detail") or "")}</td></tr>')
    s = report["summary"]
    head = (f"{s['mutants']} mutants: {s[KILLED]} killed, {s[CRASHED]} crashed (stillborn), {s[TIMEOUT]} timed out, "
            f"{s[SURVIVED]} survived, {s[EQUIVALENT]} equivalent; score {_pct(s['score'])}")
    tests = " ".join(report["config"]["tests"])
    return f"""<!DOCTYPE html>
<html><head><meta charset="utf-8"><title>tensore mutate: {html.escape(name)}</title>
<style>body{{font-family:sans-serif}} table{{border-collapse:collapse}} td,th{{border:1px solid #ccc;padding:2px 6px;
vertical-align:top}} pre{{margin:0}} tr.survived{{background:#fdd}} tr.equivalent{{background:#eee}}</style></head>
<body><h1>tensore mutate: {html.escape(name)}</h1>
<p>{html.escape(head)}</p><p>targets: {html.escape(" ".join(report["config"]["targets"]))}; tests: {html.escape(tests)};
sample {report["config"]["sample"]} seed {report["config"]["seed"]}; {s["seconds_per_mutant"]} s per mutant run</p>
<h2>Units</h2>
<table><tr><th>unit</th><th>mutants</th><th>killed</th><th>survived</th><th>timeout</th><th>stillborn</th>
<th>equivalent</th><th>score %</th><th>tests run first</th></tr>
{chr(10).join(_unit_rows(report))}
</table>
<h2>Survivors</h2>
{chr(10).join(_survivor_diffs(report)) or "<p>none</p>"}
<h2>Mutants</h2>
<table><tr><th>status</th><th>id</th><th>mutation</th><th>line</th><th>s</th><th>detail</th></tr>
{chr(10).join(rows)}
</table></body></html>
"""


def _pct(score) -> str:
    """A score as text: `-` where every mutant is equivalent (nothing was run)."""
    return "-" if score is None else f"{score}%"


def format_report(report: dict) -> str:
    s = report["summary"]
    lines = [f"mutate: {s['mutants']} mutants: {s[KILLED]} killed, {s[CRASHED]} crashed, {s[TIMEOUT]} timed out, "
             f"{s[SURVIVED]} survived, {s[EQUIVALENT]} equivalent; score {_pct(s['score'])} "
             f"({s['seconds_per_mutant']} s per mutant run, {s['seconds']} s in {s['shards']} shard(s))"]
    if s["incomplete"]:
        lines.append(f"  incomplete shards (stopped before their last mutant): {s['incomplete']}")
    lines.append(f"  {'unit':<24} {'mutants':>7} {'killed':>6} {'survived':>8} {'timeout':>7} {'stillborn':>9} "
                 f"{'equivalent':>10}  score")
    for f, c in (report.get("units") or report["files"]).items():
        lines.append(f"  {f:<24} {c['mutants']:>7} {c[KILLED]:>6} {c[SURVIVED]:>8} {c[TIMEOUT]:>7} {c[CRASHED]:>9} "
                     f"{c[EQUIVALENT]:>10}  {_pct(c['score'])}")
    for m in report["survivors"]:
        lines.append(f"  SURVIVED {m['id']}: {m['desc'].split(' ', 1)[1]}")
    return "\n".join(lines)


def report_name(targets: list, root=ROOT) -> str:
    """The report's name: a group's (`model`, `rtl`, `all`) for its units, else the targets' stems
    joined by `+` (rtl files with their folder: `rtl_pe`)."""
    for name, units in GROUPS.items():
        if list(targets) == units(root):
            return name
    return "+".join(Path(t).with_suffix("").as_posix().removeprefix("model/").replace("/", "_") for t in targets)
