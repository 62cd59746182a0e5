"""The first-mismatch report of every lockstep, and the re-run that gives it a waveform.

`Mismatch` is what the engine lockstep (cosim/lockstep.py, on every harness), the array lockstep
(cosim/array_lockstep.py) and the waveform check (cosim/waves.py) report: the cycle, where
(a PSUM partition's writes, a register, a PE's signal), the expected and actual values, and the
waveform that shows it.  `first_with_waveform(run, path)` runs a lockstep and, on a mismatch, runs
it again with a VCD up to just past the mismatch."""
from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np


@dataclass
class Mismatch:
    """`expected` / `actual`: bits (an int), {(offset, bits, bytes)} PSUM writes, or text;
    `fp32`: the ints are fp32 bit patterns, shown with their value."""

    cycle: int
    where: str
    expected: object
    actual: object
    vcd: str | None = None
    fp32: bool = False

    def __str__(self):
        show = _fp32 if self.fp32 else _show
        text = (f"first mismatch at cycle {self.cycle}, {self.where}: expected {show(self.expected)}, "
                f"got {show(self.actual)}")
        return text + (f"; waveform: {self.vcd}" if self.vcd else "")

    def to_json(self) -> dict:
        d = asdict(self)
        for k in ("expected", "actual"):
            if isinstance(d[k], (set, frozenset)):
                d[k] = sorted(d[k])
        return d

    @classmethod
    def from_json(cls, d: dict) -> Mismatch:
        d = dict(d)
        for k in ("expected", "actual"):
            if isinstance(d[k], list):
                d[k] = {tuple(x) for x in d[k]}
        return cls(**d)

    @classmethod
    def at_pe(cls, cycle: int, row: int, col: int, signal: str, expected: int, actual: int) -> Mismatch:
        """A PE's signal (the array lockstep), whose bits are fp32 bit patterns."""
        return cls(cycle, f"PE (row {row}, col {col}), {signal}", expected, actual, fp32=True)


def _show(x) -> str:
    if isinstance(x, (set, frozenset)):
        return "{" + ", ".join(f"(offset {o:#x}, {b:#010x} = {_value(b, n)})" for o, b, n in sorted(x)) + "}"
    if isinstance(x, int):
        return f"{x:#010x}"
    return str(x)


def _fp32(bits) -> str:
    return f"{bits:#010x} ({_value(bits, 4)})" if isinstance(bits, int) else _show(bits)


def _value(bits: int, nbytes: int) -> str:
    """The float a stored PSUM word holds: fp32, or (2 bytes) bf16, as a plain number (the shortest
    text that reads back as that fp32: `-2.224636`, `1e+30`, `nan`)."""
    return str(np.array([bits << 16 if nbytes == 2 else bits], np.uint32).view(np.float32)[0])


def first_with_waveform(run, path) -> Mismatch | None:
    """`run(vcd=None, stop_at=None)` runs a lockstep (None, or the first Mismatch); on a mismatch,
    run it again writing a VCD to `path` up to two cycles past it, and return the report naming it."""
    bad = run()
    if bad is not None:
        run(vcd=str(path), stop_at=bad.cycle + 2)
        bad.vcd = str(path)
    return bad
