"""A block's logic as SystemVerilog statements, for arrays written as one loop (D-T60).

The array a simulator runs fastest is one module that loops over its PEs' state arrays: the PE's
logic is compiled once and evaluated once per PE per cycle, with no per-instance code and no block
boundary (docs/decisions.md D-T60).  That module is generated, not written by hand: the Amaranth
PE goes through Yosys (`proc; flatten; opt`) to a netlist of word-level cells, and `Netlist` turns
it into statements -- one per cell, in dependency order -- over names the caller chooses for the
block's inputs, its registers and the next values of its registers.  Each cell is written as the
expression of its definition in Yosys's simulation library, so the statements compute what the
Amaranth PE computes; tests/test_rtl_loopform.py checks the loop array against the Amaranth array.
"""
from __future__ import annotations

import ast
import functools
import json
import re
from dataclasses import dataclass
from pathlib import Path

from amaranth.back import rtlil

_BINARY = {"$and": "&", "$or": "|", "$xor": "^", "$xnor": "~^", "$add": "+", "$sub": "-", "$mul": "*",
           "$eq": "==", "$ne": "!=", "$eqx": "===", "$nex": "!==", "$lt": "<", "$le": "<=", "$gt": ">",
           "$ge": ">=", "$logic_and": "&&", "$logic_or": "||", "$div": "/", "$mod": "%"}
_SHIFT = {"$shl": "<<", "$sshl": "<<<", "$shr": ">>", "$sshr": ">>>"}
_UNARY = {"$not": "~", "$neg": "-", "$pos": "", "$logic_not": "!", "$reduce_and": "&", "$reduce_or": "|",
          "$reduce_bool": "|", "$reduce_xor": "^", "$reduce_xnor": "~^"}
_FF = ("$dff", "$sdff", "$sdffe", "$dffe", "$sdffce")
YOSYS_SCRIPT = "proc\nflatten\nopt -full\nwreduce\nopt_clean\n"


def yosys_netlist(component, name: str) -> dict:
    """The component's flattened word-level netlist (Yosys JSON module)."""
    from amaranth._toolchain.yosys import find_yosys
    il = rtlil.convert(component, name=name)             # src attributes: `Netlist` names registers by them
    yosys = find_yosys(lambda ver: ver >= (0, 40))
    script = f"read_rtlil <<rtlil\n{il}\nrtlil\nhierarchy -top {name}\n{YOSYS_SCRIPT}write_json\n"
    return json.loads(yosys.run(["-q", "-"], script))["modules"][name]


_ANONYMOUS = re.compile(r"\\\$signal(\$\d+)?")       # Amaranth's name for a signal its tracer could not name


def anonymous_names(module: dict, taken: set) -> dict:
    """{netname: variable} for the signals Amaranth named `$signal`: its tracer names a signal after
    the variable the constructor's result is stored in, which misses all but the last element of a
    tuple assignment (`shadow, active = Signal(wl), Signal(wl)`).  Such a signal is named after the
    target of its source line's tuple assignment (the netname's `src` attribute) that no other
    signal is named after (`taken`), when exactly one is left."""
    out = {}
    for n, v in module["netnames"].items():
        src = v.get("attributes", {}).get("src", "").split("|")[0]
        path, _, line = src.rpartition(":")
        if not _ANONYMOUS.fullmatch(n) or not line.isdigit():
            continue
        left = [t for t in _tuple_targets(path, int(line)) if t not in taken and t not in out.values()]
        if len(left) == 1:
            out[n] = left[0]
    return out


@functools.lru_cache(maxsize=None)
def _assignments(path: str) -> tuple:
    """(line, target) of every element of the tuple assignments of a source file."""
    try:
        tree = ast.parse(Path(path).read_text(), path)
    except (OSError, SyntaxError, ValueError):
        return ()
    return tuple((v.lineno, t.id) for node in ast.walk(tree) if isinstance(node, ast.Assign)
                 for target in node.targets if isinstance(target, ast.Tuple) and isinstance(node.value, ast.Tuple)
                 and len(target.elts) == len(node.value.elts)
                 for t, v in zip(target.elts, node.value.elts) if isinstance(t, ast.Name))


def _tuple_targets(path: str, line: int) -> list:
    return [t for at, t in _assignments(path) if at == line]


def _int(p) -> int:
    return int(p, 2) if isinstance(p, str) else int(p)


@dataclass
class Register:
    """A flip-flop of the block: `width` bits, reset value (synchronous reset), `index` in `Netlist.regs`;
    `d` the bits it loads and `en` (bits, polarity) when it loads (None: every cycle)."""
    index: int
    width: int
    reset: int
    cell: dict
    d: list | None = None
    en: tuple | None = None


class Netlist:
    """The statements of one block.  Names: `inputs[port]` and `state[k]` are SV expressions the
    caller supplies for the block's input ports and register k; `Netlist.step` returns statements
    that update each register in place, and `Netlist.output` an output port's
    expression (outputs must be functions of registers only: the loop reads a neighbour's outputs
    before any PE of the cycle has run)."""

    def __init__(self, module: dict, prefix: str):
        self.prefix = prefix
        self.ports = {n: p for n, p in module["ports"].items() if n not in ("clk", "rst")}
        self.widths = {n: len(p["bits"]) for n, p in module["ports"].items()}
        self.driver: dict[int, tuple] = {}
        for name, p in module["ports"].items():
            if p["direction"] == "input":
                for i, b in enumerate(p["bits"]):
                    self.driver[b] = ("in", name, i)
        self.regs: list[Register] = []
        self.cells: dict[str, dict] = {}
        for cname, cell in module["cells"].items():
            t = cell["type"]
            if t == "$scopeinfo":
                continue
            if t in _FF:
                if t not in ("$dff", "$sdff", "$sdffe") or _int(cell["parameters"]["CLK_POLARITY"]) != 1:
                    raise ValueError(f"{cname}: flip-flop {t} is not supported in loop form")
                reg = Register(len(self.regs), _int(cell["parameters"]["WIDTH"]),
                               _int(cell["parameters"].get("SRST_VALUE", "0")), cell)
                self.regs.append(reg)
                for i, b in enumerate(cell["connections"]["Q"]):
                    self.driver[b] = ("q", reg.index, i)
                continue
            self.cells[cname] = cell
        self.reg_names = self._reg_names(module)
        self.names = {c: f"{prefix}{k}" for k, c in enumerate(self.cells)}
        for cname, cell in self.cells.items():
            for i, b in enumerate(cell["connections"]["Y"]):
                self.driver[b] = ("cell", cname, i)
        for reg in self.regs:
            self._load_rule(reg)
        self.writes, self.staged = self._write_order()
        self.order = self._order()
        self.position = {c: k for k, c in enumerate(self.order)}
        self.block_of = self._blocks()

    def _load_rule(self, reg: Register) -> None:
        """The register's `d` and `en`: a D input whose bits are bits of one $mux holding the
        register's own value on one side is an enable (the simulator then writes the register only
        when it loads)."""
        con, par = reg.cell["connections"], reg.cell["parameters"]
        reg.d = list(con["D"])
        if "EN" in con:
            reg.en = (tuple(con["EN"]), _int(par["EN_POLARITY"]))
            return
        src = [self.driver.get(b, (None, None, None)) if not isinstance(b, str) else (None, None, None)
               for b in reg.d]
        if {s[:2] for s in src} != {("cell", src[0][1])}:
            return
        mux = self.cells[src[0][1]]
        if mux["type"] != "$mux":
            return
        mcon, pick = mux["connections"], [s[2] for s in src]
        for hold, load, pol in (("A", "B", 1), ("B", "A", 0)):
            if [mcon[hold][k] for k in pick] == list(con["Q"]):
                reg.d, reg.en = [mcon[load][k] for k in pick], (tuple(mcon["S"]), pol)
                return

    def _reg_names(self, module: dict) -> list:
        """A source name per register (an output port's name first); a register Yosys split out of
        a signal is `<signal>_<offset of its lowest bit>`, and `q<k>` where no signal holds it: the
        loop form's state arrays carry them, so a waveform shows every PE register by name.  A
        signal Amaranth left unnamed (`$signal`) answers to the variable its source line assigns
        it to (`anonymous_names`)."""
        out, used = [], set()
        public = {n: v["bits"] for n, v in module["netnames"].items() if n[0] not in "\\$" and n.isidentifier()}
        public |= {name: module["netnames"][n]["bits"] for n, name in anonymous_names(module, set(public)).items()}
        for reg in self.regs:
            q = reg.cell["connections"]["Q"]
            names = [n for n, bits in public.items() if bits == q]
            names.sort(key=lambda n: (n not in self.ports, len(n)))
            if not names:                      # part of a signal: named after it and its lowest bit
                whole = sorted((n for n, bits in public.items() if set(q) <= set(bits)), key=len)
                names = [f"{n}_{min(public[n].index(b) for b in q)}" for n in whole]
            name = next((n for n in names if n not in used), f"q{reg.index}")
            used.add(name)
            out.append(name)
        return out

    def _order(self) -> list:
        """The cells in dependency order (a combinational loop is an error)."""
        deps = {}
        for cname, cell in self.cells.items():
            deps[cname] = {self.driver[b][1] for p, bits in cell["connections"].items() if p != "Y"
                           for b in bits if not isinstance(b, str) and self.driver[b][0] == "cell"}
        order, state = [], {}

        def visit(c):
            stack = [(c, iter(sorted(deps[c])))]
            state[c] = 1
            while stack:
                node, it = stack[-1]
                nxt = next(it, None)
                if nxt is None:
                    stack.pop()
                    state[node] = 2
                    order.append(node)
                elif state.get(nxt) == 1:
                    raise ValueError(f"combinational loop through {nxt}")
                elif nxt not in state:
                    state[nxt] = 1
                    stack.append((nxt, iter(sorted(deps[nxt]))))
        for c in self.cells:
            if c not in state:
                visit(c)
        return order

    # expressions ------------------------------------------------------------------------------
    def bits(self, bits: list, inputs: dict, state: list) -> str:
        """The SV expression of a list of bits (lsb first): runs of one source as part selects."""
        if not bits:                               # a zero-width operand is 0
            return "1'b0"
        runs = []                                  # [source key, lo, hi] or ["const", str]
        for b in bits:
            if isinstance(b, str):
                v = "1" if b == "1" else "0"
                if runs and runs[-1][0] == "const":
                    runs[-1][1] = v + runs[-1][1]
                else:
                    runs.append(["const", v])
                continue
            src = self.driver[b]
            key = src[:2]
            if runs and runs[-1][0] == key and runs[-1][2] + 1 == src[2]:
                runs[-1][2] = src[2]
            else:
                runs.append([key, src[2], src[2]])
        parts = []
        for run in reversed(runs):
            if run[0] == "const":
                parts.append(f"{len(run[1])}'b{run[1]}")
                continue
            (kind, ref), lo, hi = run
            if kind == "in":
                base, width = inputs[ref], self.widths[ref]
            elif kind == "q":
                base, width = state[ref], self.regs[ref].width
            else:
                base, width = self.names[ref], len(self.cells[ref]["connections"]["Y"])
            if lo == 0 and hi == width - 1:
                parts.append(base)
            else:
                parts.append(f"{base}[{hi}:{lo}]" if hi != lo else f"{base}[{lo}]")
        return parts[0] if len(parts) == 1 else "{" + ", ".join(parts) + "}"

    def _cell(self, cell: dict, inputs: dict, state: list) -> str:
        t, par, con = cell["type"], cell["parameters"], cell["connections"]

        def arg(port):
            e = self.bits(con[port], inputs, state)
            return f"$signed({e})" if _int(par.get(f"{port}_SIGNED", "0")) else e
        if t in _BINARY:
            return f"{arg('A')} {_BINARY[t]} {arg('B')}"
        if t in _SHIFT:
            return f"{arg('A')} {_SHIFT[t]} {self.bits(con['B'], inputs, state)}"
        if t in ("$shift", "$shiftx"):
            b = arg("B")
            return f"{arg('A')} >> {b}" if not _int(par["B_SIGNED"]) else \
                f"(({b}) < 0 ? {arg('A')} << -({b}) : {arg('A')} >> ({b}))"
        if t in _UNARY:
            return f"{_UNARY[t]}{arg('A')}"
        if t == "$mux":
            return f"{self.bits(con['S'], inputs, state)} ? {arg('B')} : {arg('A')}"
        if t == "$pmux":
            w = _int(par["WIDTH"])
            out = arg("A")
            for i in reversed(range(_int(par["S_WIDTH"]))):
                b = self.bits(con["B"][w * i:w * (i + 1)], inputs, state)
                out = f"{self.bits([con['S'][i]], inputs, state)} ? {b} : ({out})"
            return out
        raise ValueError(f"cell type {t} is not supported in loop form")

    def declarations(self, indent: str = "  ") -> list:
        """One variable per cell (module scope, or automatic in the clocked block): a cell in a
        branch not taken holds a value no statement reads."""
        return [f"{indent}logic [{len(self.cells[c]['connections']['Y']) - 1}:0] {self.names[c]};"
                for c in self.order if c not in self.dead] + \
            [f"{indent}logic [{self.regs[k].width - 1}:0] {self.prefix}next_{k};" for k in self.staged]

    # placement: each cell in the innermost branch holding all its uses ---------------------------
    def _blocks(self) -> dict:
        """cell -> its block: a tuple of (mux, side) steps from the root.  A cell read only through
        one data input of a $mux / $pmux (or only by the D input of registers with one enable) sits
        in that input's branch, so it is computed only when that input is selected."""
        uses: dict[str, list] = {c: [] for c in self.cells}
        for uname, cell in self.cells.items():
            for port, bits in cell["connections"].items():
                for i, b in enumerate(bits):
                    if port != "Y" and not isinstance(b, str) and self.driver[b][0] == "cell":
                        uses[self.driver[b][1]].append((uname, port, i))
        for reg in self.regs:
            reads = [(reg.d, ("en", reg.en) if reg.en else None), (reg.en[0] if reg.en else (), None),
                     (reg.cell["connections"].get("SRST", ()), None)]
            for bits, key in reads:
                for b in bits:
                    if not isinstance(b, str) and self.driver[b][0] == "cell":
                        uses[self.driver[b][1]].append((key, "D", 0))
        for p in self.ports.values():
            for b in p["bits"]:
                if p["direction"] == "output" and not isinstance(b, str) and self.driver[b][0] == "cell":
                    uses[self.driver[b][1]].append((None, "out", 0))
        block: dict[str, tuple] = {}
        self.dead = set()                          # cells nothing reads (a hold mux turned enable)
        for c in reversed(self.order):
            paths = []
            for user, port, i in uses[c]:
                if user in self.dead:
                    continue
                if user is None:
                    paths.append(())
                elif isinstance(user, tuple):
                    paths.append((user,))
                else:
                    t, base = self.cells[user]["type"], block[user]
                    if t == "$mux" and port in ("A", "B"):
                        paths.append(base + ((user, port),))
                    elif t == "$pmux" and port == "A":
                        paths.append(base + ((user, "A"),))
                    elif t == "$pmux" and port == "B":
                        paths.append(base + ((user, i // _int(self.cells[user]["parameters"]["WIDTH"])),))
                    else:
                        paths.append(base)
            if not paths:
                self.dead.add(c)
                continue
            common = paths[0]
            for path in paths[1:]:
                n = 0
                while n < min(len(common), len(path)) and common[n] == path[n]:
                    n += 1
                common = common[:n]
            block[c] = common
        return block

    def _emit(self, path: tuple, members: dict, inputs: dict, state: list, indent: str) -> list:
        """The statements of one block: its cells in order, each mux's branches just before it."""
        lines = []
        for c in members.get(path, []):
            cell = self.cells[c]
            sides = [k for k in members if len(k) == len(path) + 1 and k[:len(path)] == path and k[-1][0] == c]
            if sides:
                if cell["type"] == "$mux":
                    sel = self.bits(cell["connections"]["S"], inputs, state)
                    lines.append(f"{indent}if ({sel}) begin")
                    lines += self._emit(path + ((c, "B"),), members, inputs, state, indent + "  ")
                    lines.append(f"{indent}end else begin")
                    lines += self._emit(path + ((c, "A"),), members, inputs, state, indent + "  ")
                    lines.append(f"{indent}end")
                else:
                    sel = cell["connections"]["S"]
                    for j, b in enumerate(sel):
                        head = "if" if j == 0 else "end else if"
                        lines.append(f"{indent}{head} ({self.bits([b], inputs, state)}) begin")
                        lines += self._emit(path + ((c, j),), members, inputs, state, indent + "  ")
                    lines.append(f"{indent}end else begin")
                    lines += self._emit(path + ((c, "A"),), members, inputs, state, indent + "  ")
                    lines.append(f"{indent}end")
            lines.append(f"{indent}{self.names[c]} = {self._cell(cell, inputs, state)};")
        return lines

    def step(self, inputs: dict, state: list, rst: str, indent: str, skip: frozenset = frozenset()) -> list:
        """Statements: the cells (each computed only when its value is used), then each register
        updated in place -- when it loads, in an order where no register is written before another's
        load reads it (`writes`; the `staged` registers of a read cycle go through `next_<k>`).  The
        registers in `skip` are the caller's to update."""
        inputs = dict(inputs, rst=rst)
        members: dict[tuple, list] = {}
        for c, path in self.block_of.items():
            members.setdefault(path, []).append(c)
        for path in members:
            members[path].sort(key=self.position.__getitem__)
        lines = self._emit((), members, inputs, state, indent)
        for key in dict.fromkeys(p[0] for p in members if p and p[0][0] == "en"):
            bits, pol = key[1]
            en = self.bits(list(bits), inputs, state)
            lines.append(f"{indent}if ({'' if pol else '!'}({en})) begin")
            lines += self._emit((key,), members, inputs, state, indent + "  ")
            lines.append(f"{indent}end")
        for k in self.staged:
            lines.append(f"{indent}{self.prefix}next_{k} = {self._next(self.regs[k], inputs, state, rst)};")
        for k in (k for k in self.writes if k not in skip):
            reg = self.regs[k]
            d, cond = self.bits(reg.d, inputs, state), self._condition(reg, inputs, state)
            load = f"if ({cond}) {state[k]} = {d};" if cond else f"{state[k]} = {d};"
            if self._reset(reg, inputs, state, rst):
                load = f"if ({rst}) {state[k]} = {reg.width}'d{reg.reset}; else {load}"
            lines.append(indent + load)
        lines += [f"{indent}{state[k]} = {self.prefix}next_{k};" for k in self.staged]
        return lines

    def _condition(self, reg: Register, inputs: dict, state: list) -> str | None:
        """When the register loads, as an SV condition (None: every cycle)."""
        if not reg.en:
            return None
        return f"{'' if reg.en[1] else '!'}({self.bits(list(reg.en[0]), inputs, state)})"

    def _reset(self, reg: Register, inputs: dict, state: list, rst: str) -> bool:
        con = reg.cell["connections"]
        if "SRST" in con and self.bits(con["SRST"], inputs, state) != rst:
            raise ValueError("a synchronous reset other than the block's rst")
        return "SRST" in con

    def _next(self, reg: Register, inputs: dict, state: list, rst: str) -> str:
        d, cond = self.bits(reg.d, inputs, state), self._condition(reg, inputs, state)
        if cond:
            d = f"{cond} ? {d} : {state[reg.index]}"
        return f"{rst} ? {reg.width}'d{reg.reset} : {d}" if self._reset(reg, inputs, state, rst) else d

    def _write_order(self) -> tuple[list, list]:
        """(registers written in place, in order; registers staged through a temporary): a register
        is written once no register still to be written reads it directly in its load."""
        reads = {}
        for reg in self.regs:
            bits = [*reg.d, *(reg.en[0] if reg.en else ())]
            reads[reg.index] = {self.driver[b][1] for b in bits
                                if not isinstance(b, str) and self.driver[b][0] == "q"} - {reg.index}
        left, order, staged = [r.index for r in self.regs], [], []
        while left:
            free = [k for k in left if not any(k in reads[j] for j in left if j != k)]
            if not free:                           # a read cycle: stage one register of it
                k = next(k for k in left if reads[k])
                staged.append(k)
                left.remove(k)
                continue
            order += free
            left = [k for k in left if k not in free]
        return order, staged

    def pass_through(self, port_in: str, port_out: str, enable: str) -> Register | None:
        """The register that output `port_out` is, whole, when it loads input `port_in` whole
        whenever input `enable` is high (reset to 0 by the block's rst) and nothing else in the block
        reads it."""
        out, d_in = self.ports[port_out]["bits"], self.ports[port_in]["bits"]
        src = [None if isinstance(b, str) else self.driver[b] for b in out]
        if not src or any(s is None or s[0] != "q" for s in src) or len({s[1] for s in src}) != 1:
            return None
        reg = self.regs[src[0][1]]
        en = tuple(self.ports[enable]["bits"]), 1
        if ([s[2] for s in src] != list(range(reg.width)) or reg.d != list(d_in) or reg.en != en or reg.reset
                or "SRST" not in reg.cell["connections"]):
            return None
        q = set(reg.cell["connections"]["Q"])
        readers = [b for c in self.cells.values() for p, bits in c["connections"].items() if p != "Y" for b in bits]
        readers += [b for r in self.regs if r is not reg for b in [*r.d, *(r.en[0] if r.en else ())]]
        return None if q & {b for b in readers if not isinstance(b, str)} else reg

    def output(self, port: str, state: list) -> str:
        bits = self.ports[port]["bits"]
        for b in bits:
            if not isinstance(b, str) and self.driver[b][0] not in ("q",):
                raise ValueError(f"output {port} is not a function of registers only")
        return self.bits(bits, {}, state)
