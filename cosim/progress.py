"""Progress of exports, simulator builds (D-T67) and simulations (D-T89): the stage, files compiled
(cycles simulated) of N and the elapsed time, as a bar redrawn in place on a terminal and as plain
lines in a log (not a tty, `CI` set, `TERM=dumb`).

    with Progress("build", log) as p:   # `log` silent: shows nothing
        p.update(stage="compiling C++", done=3, total=40)
    run_logged(cmd, logf, progress, meter)   # a subprocess's output to `logf`, each line to `meter`
    with simulation(log, "gemm on Verilator", cycles) as p:   # shown from SIM_AFTER seconds on
        p.update(done=cycle, seconds=loop_s)                  # cycles of cycles, cycles/s over loop_s

Output goes to a copy of stderr taken when the display starts, so a simulator whose output is
redirected into its log file meanwhile (cosim/hdl.py `_redirect`) does not swallow it."""
from __future__ import annotations

import os
import re
import subprocess
import sys
import threading
import time
from pathlib import Path

HEARTBEAT = 30.0        # seconds between plain lines while nothing changes
PLAIN_EVERY = 10.0      # at most one plain line per this many seconds for file counts
SIM_EVERY = 1.0         # ... for a simulation's cycles
SIM_AFTER_ENV = "TENSORE_PROGRESS_AFTER"    # seconds before a simulation shows progress (default 2)
BAR = 24


def silent(*_args) -> None:
    """The quiet `log`: library calls that pass it show no progress."""


def _stream():
    try:
        return os.fdopen(os.dup(sys.stderr.fileno()), "w", buffering=1)
    except (AttributeError, OSError, ValueError):
        return None


def _is_tty(stream) -> bool:
    return bool(stream is not None and stream.isatty() and not os.environ.get("CI")
                and os.environ.get("TERM") != "dumb")


class Progress:
    """One export or build: `update` the stage and file counts; a thread redraws the bar (terminal)
    or writes a heartbeat line (log) while the work runs in this thread."""

    def __init__(self, what: str, log=silent, *, stage: str = "", total: int = 0, unit: str = "files",
                 every: float = PLAIN_EVERY, after: float = 0.0):
        """`unit`: what `done` counts ("cycles" also shows the rate); `every`: seconds between plain
        lines while the count moves; `after`: nothing is shown before this many seconds (a short
        run stays quiet, its final line too)."""
        self.what, self.stage, self.done, self.total = what, stage, 0, total
        self.unit, self.every, self.after, self.shown = unit, every, after, False
        self.active = log is not silent
        self.t0 = time.perf_counter()
        self.clock = None                       # seconds of the simulation loop, when the simulator says
        self._said = (None, -1.0)               # (what a plain line last said, when)
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self.out = _stream() if self.active else None
        self.active = self.out is not None
        self.tty = _is_tty(self.out)
        self._thread = threading.Thread(target=self._tick, daemon=True) if self.active else None

    def __enter__(self) -> "Progress":
        if self._thread is not None:
            self._thread.start()
            self._show(force=True)
        return self

    def __exit__(self, kind, *_exc) -> None:
        if self._thread is None:
            return
        self._stop.set()
        self._thread.join()
        with self._lock:
            if not self.stage.startswith("failed"):
                self.stage = "failed" if kind else "done"
            if self.shown or self.elapsed >= self.after:
                self._write(self._text(), end="\n", force=True)
        self.out.close()

    @property
    def elapsed(self) -> float:
        return time.perf_counter() - self.t0

    def update(self, *, stage: str | None = None, done: int | None = None, total: int | None = None,
               seconds: float | None = None) -> None:
        """`seconds`: the simulation loop's own time for `done` (the simulator's clock); the rate and
        the time shown are then that clock's, the measure of the run's summary (`simulation loop`)."""
        with self._lock:
            self.clock = self.clock if seconds is None else seconds
            changed = stage is not None and stage != self.stage
            self.stage = self.stage if stage is None else stage
            self.done = self.done if done is None else done
            self.total = max(self.total if total is None else total, self.done)
        self._show(force=changed)

    def _text(self) -> str:
        files = f"{self.done:,}/{self.total:,} {self.unit}" if self.total else ""
        if self.tty and self.total:
            fill = round(BAR * self.done / self.total)
            files = f"[{'#' * fill}{'.' * (BAR - fill)}] {files}"
        secs = self.elapsed if self.clock is None else self.clock
        rate = f"{self.done / secs:,.0f} {self.unit}/s" if self.unit == "cycles" and secs > 0 else ""
        when = f"{secs:.2f} s of simulation loop" if self.clock is not None else f"{self.elapsed:.0f} s"
        parts = [p for p in (self.stage, files, rate, when) if p]
        return f"  {self.what}: " + ", ".join(parts)

    def _show(self, force: bool = False) -> None:
        if self.active and (self.shown or self.elapsed >= self.after):
            with self._lock:
                self._write(self._text(), force=force or not self.shown)
                self.shown = True

    def _write(self, text: str, *, end: str = "", force: bool = False) -> None:
        if self.tty:
            self.out.write(f"\r\x1b[K{text}{end}")
            self.out.flush()
            return
        key, last = self._said
        now = self.elapsed
        new = (self.stage, self.done)
        if force or end or (new != key and now - last >= self.every) or now - last >= HEARTBEAT:
            self.out.write(text + "\n")
            self._said = (new, now)

    def _tick(self) -> None:
        while not self._stop.wait(0.25 if self.tty else 1.0):
            self._show()


def sim_after() -> float:
    """Seconds a simulation runs before it shows progress: $TENSORE_PROGRESS_AFTER, else 2."""
    try:
        return max(0.0, float(os.environ.get(SIM_AFTER_ENV, "2")))
    except ValueError:
        return 2.0


def simulation(log, stage: str, cycles: int) -> Progress:
    """The progress of a simulation of `cycles` cycles (D-T89): cycles done of them and cycles/s, at
    most a plain line a second (a bar redrawn in place on a terminal), from sim_after() seconds on."""
    return Progress("simulation", log, stage=stage, total=cycles, unit="cycles", every=SIM_EVERY, after=sim_after())


_COMPILE = re.compile(r"^\s*(\S*/)?(ccache\s+)?(c\+\+|g\+\+|clang\+\+|gcc|cc)\s.*(\s-c\s|\.gch\b)")
_LIST = re.compile(r"^(VM_\w+)\s*\+?=\s*((?:.*\\\n)*.*)$", re.M)
_COUNTED = ("VM_CLASSES_FAST", "VM_CLASSES_SLOW", "VM_SUPPORT_FAST", "VM_SUPPORT_SLOW", "VM_GLOBAL_FAST",
            "VM_GLOBAL_SLOW")


def _planned(classes_mk: Path) -> int:
    """The compiler runs one Verilated model's make does: each class file (without parallel builds,
    the one __ALL file), the runtime files, the user files, a hierarchical block's own wrapper
    (the objects of its `lib<block>.a` rule) and, with parallel builds, two precompiled headers."""
    text = classes_mk.read_text()
    lists = {m.group(1): m.group(2).replace("\\", " ").split() for m in _LIST.finditer(text)}
    parallel = lists.get("VM_PARALLEL_BUILDS", ["1"])[0] != "0"
    classes = sum(len(lists.get(k, [])) for k in _COUNTED[:4])
    runtime = sum(len(lists.get(k, [])) for k in _COUNTED[4:])
    user = classes_mk.with_name(classes_mk.name.replace("_classes.mk", ".mk"))
    users = 0
    if user.exists():
        mk = user.read_text()
        m = re.search(r"^VM_USER_CLASSES\s*=\s*((?:.*\\\n)*.*)$", mk, re.M)
        users = len(m.group(1).replace("\\", " ").split()) if m else 0
        lib = re.search(r"^lib\S*\.a:(.*)$", mk, re.M)
        users += sum(1 for w in lib.group(1).split() if w.endswith(".o")) if lib else 0
    return (classes if parallel else min(classes, 1)) + runtime + users + (2 if parallel else 0)


_HIER_ARGS = "__hierMkArgs.f"
_MK_MARK = "# Verilated -*- Makefile -*-"


def _written(mk: Path) -> bool:
    """A makefile Verilator has finished writing (its files start and end with _MK_MARK), or absent."""
    if not mk.exists():
        return True
    text = mk.read_text()
    return not text.startswith(_MK_MARK) or text.rstrip().endswith(_MK_MARK)


class VerilatorMeter:
    """Reads a Verilator `--build` log line by line (D-T67): "Verilating" until every model is
    Verilated (a hierarchical build's blocks, named by their `*__hierMkArgs.f`, and the top, whose
    `*_classes.mk` files this build wrote), then "compiling C++" with the compiler runs done of
    those the makefiles plan, a total fixed once known (the blocks' compiles that ran meanwhile
    count as done), then "linking"."""

    def __init__(self, progress: Progress, obj: Path):
        self.progress, self.obj, self.done, self.total = progress, Path(obj), 0, 0
        self.t0 = time.time() - 1.0                 # files older than the build are a previous build's
        progress.update(stage="Verilating")

    def _fresh(self, path: Path) -> bool:
        try:
            return path.stat().st_mtime >= self.t0
        except OSError:
            return False

    def _planned_total(self) -> int:
        """The compiler runs of the whole build once every model's makefiles are written, else 0."""
        top = [mk for mk in self.obj.glob("*_classes.mk") if self._fresh(mk)]
        makefiles = set(top)
        for args in self.obj.glob(f"*{_HIER_ARGS}"):
            p = args.name[:-len(_HIER_ARGS)]
            mk = next((m for m in (self.obj / p / f"{p}_classes.mk", self.obj / f"{p}_classes.mk") if self._fresh(m)),
                      None)
            if mk is None:
                return 0
            makefiles.add(mk)
        try:
            if not top or not all(_written(f) for mk in makefiles
                                  for f in (mk, mk.with_name(mk.name.replace("_classes.mk", ".mk")))):
                return 0
            return sum(_planned(mk) for mk in makefiles)
        except OSError:
            return 0

    def __call__(self, line: str) -> None:
        compile_ = bool(_COMPILE.match(line))
        self.done += compile_
        if not self.total and (compile_ or line.startswith("- Verilator: Built from")):
            self.total = self._planned_total()
        if self.total and compile_:
            self.progress.update(stage="compiling C++", done=self.done, total=self.total)
        elif self.total and line.startswith("- Verilator: Built from") and self.progress.stage == "Verilating":
            self.progress.update(stage="compiling C++", done=self.done, total=self.total)
        elif re.match(r"^\s*(\S*/)?(c\+\+|g\+\+)\s.*\s-o\s+\S+\s*$", line) and " -c " not in line:
            self.progress.update(stage="linking")


def run_logged(cmd: list, logf, *, env=None, cwd=None, meter=None) -> int:
    """Run `cmd` with its output (stdout and stderr) written to `logf` and each line given to `meter`."""
    proc = subprocess.Popen(cmd, env=env, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            errors="replace", bufsize=1)
    for line in proc.stdout:
        logf.write(line)
        if meter is not None:
            meter(line)
    logf.flush()
    return proc.wait()
