"""Bulk test vectors through Verilator: a combinational Amaranth component, exported to Verilog,
compiled with a generated C++ main that reads input records from stdin and writes output records.
Millions of vectors a second instead of Amaranth's hundreds — used by the datapath tests.
Builds are cached under <cache>/vectors/ (toolchain.cache_root) by a hash of the Verilog and the harness."""
from __future__ import annotations

import fcntl
import hashlib
import os
import subprocess

import numpy as np
from amaranth.back import verilog
from amaranth.lib import wiring

from tensore.cosim import toolchain
from tensore.rtl.blackbox import convert_ports, ports


def _ports(component: wiring.Component):
    """[(name, width, is_input)] of the signature, flattened and named as rtl/blackbox.py names an
    exported block's ports (a nested member's path joined by "_"; no clock)."""
    return [(name, len(value), flow == wiring.In) for name, (value, flow) in ports(component).items()]


def _words(width: int) -> int:
    return (width + 63) // 64


def _cpp(top: str, ports, clocked: bool = False, reset: bool = False) -> str:
    ins = [(n, w) for n, w, i in ports if i] + ([("rst", 1)] if reset else [])
    outs = [(n, w) for n, w, i in ports if not i]
    rec_in = sum(_words(w) for _, w in ins)
    rec_out = sum(_words(w) for _, w in outs)
    lines = [f'#include "V{top}.h"', "#include <cstdio>", "#include <cstdint>", "#include <vector>",
             "int main() {", f"  V{top} top;", f"  std::vector<uint64_t> in({rec_in}), out({rec_out});",
             f"  while (fread(in.data(), 8, {rec_in}, stdin) == {rec_in}) {{"]
    k = 0
    for name, w in ins:
        if w <= 64:
            lines.append(f"    top.{name} = in[{k}];")
        else:
            for j in range((w + 31) // 32):
                lines.append(f"    top.{name}[{j}] = (uint32_t)(in[{k + j // 2}] >> {32 * (j % 2)});")
        k += _words(w)
    if clocked:                                   # one record per cycle: inputs, then a rising edge
        lines += [*([] if reset else ["    top.rst = 0;"]),
                  "    top.clk = 0;", "    top.eval();", "    top.clk = 1;", "    top.eval();"]
    else:
        lines.append("    top.eval();")
    k = 0
    for name, w in outs:
        if w <= 64:
            lines.append(f"    out[{k}] = (uint64_t)top.{name};")
        else:
            for j in range(_words(w)):
                lines.append(f"    out[{k + j}] = 0;")
            for j in range((w + 31) // 32):
                lines.append(f"    out[{k + j // 2}] |= (uint64_t)top.{name}[{j}] << {32 * (j % 2)};")
        k += _words(w)
    lines += [f"    fwrite(out.data(), 8, {rec_out}, stdout);", "  }", "  return 0;", "}"]
    return "\n".join(lines) + "\n"


class VectorRunner:
    """Run numpy vectors through the Verilated `component`: runner(**inputs) -> {output: array}."""

    def __init__(self, component: wiring.Component, name: str, *, sources: dict | None = None,
                 clocked: bool = False, reset: bool = False, cflags: str = "-O1"):
        """`sources` ({file name: Verilog}) replaces the component's own export, for checking
        other Verilog of the same interface (a component with nested signature members needs them);
        `clocked` runs one record per rising clock edge and reads the outputs after it, `reset` with
        the synchronous reset `rst` an input of each record."""
        self.name, self.cflags = name, cflags
        self.ports = _ports(component)
        if sources is None:
            sources = {f"{name}.v": verilog.convert(component, name=name, ports=convert_ports(component),
                                                     emit_src=False)}
        self.sources = sources
        self.ins = [(n, w) for n, w, i in self.ports if i] + ([("rst", 1)] if reset else [])
        cpp = _cpp(name, self.ports, clocked, reset)
        src = "".join(sources.values()) + cflags
        digest = hashlib.sha256((src + cpp).encode()).hexdigest()[:16]
        self.dir = toolchain.cache_root() / "vectors" / f"{name}-{digest}"
        self.exe = self.dir / "obj" / f"V{name}"
        self.dir.mkdir(parents=True, exist_ok=True)
        with open(self.dir / ".lock", "w") as lock:        # parallel test workers build once
            fcntl.flock(lock, fcntl.LOCK_EX)
            if not self.exe.exists():
                self._build(cpp)

    def _build(self, cpp: str):
        self.dir.mkdir(parents=True, exist_ok=True)
        for fname, text in self.sources.items():
            (self.dir / fname).write_text(text)
        (self.dir / "main.cpp").write_text(cpp)
        env = toolchain.verilator_env()
        cmd = ["verilator", "--cc", "--exe", "--build", "-O2", "-Wno-fatal", "-Wno-lint", "-Wno-style",
               "--top-module", self.name, "-Mdir", str(self.dir / "obj"), "-j", str(os.cpu_count() or 2),
               "-CFLAGS", self.cflags, *self.sources, "main.cpp"]
        res = subprocess.run(cmd, cwd=self.dir, env=env, capture_output=True, text=True)
        toolchain.drop_pch(self.dir / "obj")
        if res.returncode != 0:
            raise RuntimeError(f"verilator build of {self.name} failed:\n{res.stdout[-3000:]}\n{res.stderr[-3000:]}")

    def __call__(self, **inputs) -> dict:
        ins = self.ins
        outs = [(n, w) for n, w, i in self.ports if not i]
        missing = {n for n, _ in ins} - set(inputs)
        if missing:
            raise ValueError(f"missing inputs: {', '.join(sorted(missing))}")
        count = len(np.atleast_1d(next(iter(inputs.values()))))
        cols = []
        for name, w in ins:
            v = np.atleast_1d(inputs[name])
            if w <= 64 and v.dtype == object:         # Python ints, possibly >= 2^63
                cols.append(np.array([int(x) & ((1 << w) - 1) for x in v], np.uint64).reshape(count, 1))
            elif w <= 64:
                col = v.astype(np.int64).astype(np.uint64) & np.uint64((1 << w) - 1 if w < 64 else 2 ** 64 - 1)
                cols.append(col.reshape(count, 1))
            else:                                   # Python ints (object arrays) for wide ports
                words = np.array([[(int(x) >> (64 * j)) & (2 ** 64 - 1) for j in range(_words(w))] for x in v],
                                 np.uint64)
                cols.append(words)
        data = np.concatenate(cols, axis=1).astype("<u8").tobytes()
        res = subprocess.run([str(self.exe)], input=data, capture_output=True, check=True)
        raw = np.frombuffer(res.stdout, "<u8").reshape(count, -1)
        result, k = {}, 0
        for name, w in outs:
            if w <= 64:
                result[name] = raw[:, k].copy()
            else:
                result[name] = np.array([sum(int(raw[i, k + j]) << (64 * j) for j in range(_words(w)))
                                         for i in range(count)], object)
            k += _words(w)
        return result
