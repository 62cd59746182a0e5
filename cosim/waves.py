"""Check a waveform that any simulator wrote while running the exported engine (issue 18, D-T71).

    check_file(waves, program, exported, ...) -> WaveResult   (the first Mismatch, or None)

The waveform (VCD or FST, read by pywellen) is searched for the scope that holds the clock, the reset
and the exported top's ports, named as the export's metadata (engine.json) names them.  Every signal
is sampled just before each rising clock edge, which is what the engine's registers capture there.
Cycle 0 is the first edge after reset at which the descriptor stream is valid; from there on the
golden engine's run is compared cycle by cycle with the lockstep's own checks (`Lockstep.check_cycle`
on the PSUM write monitors, the error and unsupported outputs; `check_reg` on the registers read over
the bus after the run), so the report is the cosim report.  Any output with X or Z bits after reset
is a mismatch too."""
from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from tensore.cosim.lockstep import Lockstep, fit_ports
from tensore.cosim.mismatch import Mismatch
from tensore.rtl.config import PSUM_PORTS


def domain_ports() -> tuple[str, str]:
    """The clock and reset port names of the exported top (Amaranth's `sync` domain)."""
    from amaranth.hdl import ClockDomain
    cd = ClockDomain("sync")
    return cd.clk.name, cd.rst.name


def _norm(name: str) -> str:
    return re.sub(r"[._]+", "_", name)


class Ports:
    """The exported top's ports (engine.json `ports`), looked up by the names the lockstep testbench
    (cosim/lockstep.py `bench`) uses; a port of a sub-signature (`st__req__valid`, `st.req.valid`)
    answers to the flat name."""

    def __init__(self, exported: dict):
        self.info = exported["ports"]
        self.top = exported["top"]
        self._by_norm = {_norm(n): n for n in self.info}
        self.clk, self.rst = domain_ports()

    def has(self, role: str) -> bool:
        return role in self.info or _norm(role) in self._by_norm

    def name(self, role: str) -> str:
        if role in (self.clk, self.rst) or role in self.info:
            return role
        n = self._by_norm.get(_norm(role))
        if n is None:
            raise ValueError(f"the exported engine {self.top} has no port {role!r} (its ports: {', '.join(self.info)})")
        return n

    def width(self, role: str) -> int:
        return 1 if role in (self.clk, self.rst) else self.info[self.name(role)]["width"]

    def outputs(self) -> list[str]:
        return [n for n, p in self.info.items() if p["dir"] == "out"]


class WaveError(ValueError):
    """A waveform that cannot be checked (bad input, exit 2)."""


@dataclass
class WaveResult:
    mismatch: Mismatch | None
    cycles: int             # cycles compared
    checks: int
    scope: str              # where the engine's ports were found
    edges: int              # rising clock edges in the waveform
    regs_read: int          # registers found read over the bus after the run


class Dump:
    """The engine's ports in a waveform, sampled just before every rising edge of the clock."""

    def __init__(self, path, ports: Ports, needed: list[str]):
        import pywellen
        path = Path(path)
        if not path.is_file():
            raise WaveError(f"{path}: no such waveform file")
        try:
            self.wave = pywellen.Waveform(str(path))
        except (KeyboardInterrupt, SystemExit):
            raise
        except BaseException as exc:            # the reader's parse errors are Rust panics (BaseException)
            raise WaveError(f"{path}: not a readable VCD / FST waveform ({str(exc).splitlines()[0][:200]})") from None
        self.path, self.ports = path, ports
        names = [ports.clk, ports.rst, *(ports.name(r) for r in needed)]
        self.scope, self.vars = self._find(names)
        clk_t, clk_v = self._changes(ports.clk)
        prev = np.concatenate([[None], clk_v[:-1]])
        rise = np.array([v == 1 and p == 0 for v, p in zip(clk_v, prev)], bool)
        self.edges = clk_t[rise]
        if len(self.edges) < 2:
            raise WaveError(f"{path}: the clock {self.scope}.{ports.clk} has fewer than two rising edges")
        self._cache: dict[str, list] = {}

    def _find(self, names: list[str]):
        """The first scope (outermost first) that holds every name in `names`.  A name is found as
        itself or as the signal its normalised name names (Amaranth's simulator writes the port
        `host_word` of the signature member `host.word` as `host__word`)."""
        best = None
        for scope in self.wave.all_scopes():
            have = {v.name: v for v in scope.vars()}
            for name, v in list(have.items()):
                have.setdefault(_norm(name), v)
            if all(n in have or _norm(n) in have for n in names):
                have.update({n: have[_norm(n)] for n in names if n not in have})
                depth = scope.full_name.count(".")
                if best is None or depth < best[0]:
                    best = (depth, scope.full_name, have)
        if best is None:
            raise WaveError(f"{self.path}: no scope holds the clock, reset and ports of {self.ports.top} "
                            f"({', '.join(names[:6])}, ...)")
        return best[1], best[2]

    def _changes(self, name: str):
        tv = self.vars[name].tv
        return np.array([t for t, _ in tv], np.int64), np.array([v for _, v in tv], object)

    def samples(self, role: str) -> list:
        """The value of a port just before each rising edge (int, or a str with X / Z bits; None
        before its first value)."""
        name = self.ports.name(role)
        if name not in self._cache:
            if name not in self.vars:
                raise WaveError(f"{self.path}: scope {self.scope} has no {name}")
            times, values = self._changes(name)
            idx = np.searchsorted(times, self.edges, side="left") - 1
            self._cache[name] = [values[i] if i >= 0 else None for i in idx]
        return self._cache[name]


def _known(v) -> bool:
    return isinstance(v, int)


def _field(packed: int, i: int, width: int) -> int:
    return (packed >> (width * i)) & ((1 << width) - 1)


def start_edge(dump: Dump, ports: Ports) -> tuple[int, int]:
    """(first edge after reset, cycle 0's edge): cycle 0 is the first edge after reset with the
    descriptor stream valid."""
    rst, valid = dump.samples(ports.rst), dump.samples("desc_valid")
    seen_reset = False
    after = None
    for k, (r, v) in enumerate(zip(rst, valid)):
        if r == 1:
            seen_reset, after = True, None
        elif r == 0 and seen_reset:
            after = k if after is None else after
            if v == 1:
                return after, k
    what = "reset is never asserted" if not seen_reset else "no descriptor is presented after reset"
    raise WaveError(f"{dump.path}: {what} ({dump.scope}.{ports.rst}, {dump.scope}.{ports.name('desc_valid')})")


def first_unknown(dump: Dump, ports: Ports, after: int, k0: int) -> Mismatch | None:
    """The first output with X or Z bits at an edge from `after` (the first edge out of reset) on."""
    first = None
    for name in ports.outputs():
        if name not in dump.vars:
            continue
        for k, v in enumerate(dump.samples(name)[after:], after):
            if not _known(v):
                if first is None or k < first[0]:
                    first = (k, name, v)
                break
    if first is None:
        return None
    k, name, v = first
    return Mismatch(k - k0, f"output {name} (unknown bits after reset)", "0 / 1 bits", str(v))


def _cycle_writes(dump: Dump, lk: Lockstep, ports: Ports, k: int) -> set:
    got = set()
    for prefix in lk.monitors:
        valid = dump.samples(f"{prefix}_valid")[k]
        if not valid:
            continue
        offs, bits, bf16 = (dump.samples(f"{prefix}_{f}")[k] for f in ("offset", "bits", "bf16"))
        ow, bw = ports.width(f"{prefix}_offset") // lk.parts, ports.width(f"{prefix}_bits") // lk.parts
        got |= {(p, _field(offs, p, ow), _field(bits, p, bw), 2 if bf16 >> p & 1 else 4)
                for p in range(lk.parts) if valid >> p & 1}
    return got


def _registers(dump: Dump, lk: Lockstep, k_end: int) -> tuple[Mismatch | None, int, int]:
    """The registers read over the bus after the run, in the lockstep's order: each at the first
    edge from the previous one on where the bus address is its offset and no write is under way."""
    addr, we, rdata = dump.samples("bus_addr"), dump.samples("bus_we"), dump.samples("bus_rdata")
    k = k_end
    for i, (name, off, want) in enumerate(lk.regs):
        while k < len(dump.edges) and not (addr[k] == off and we[k] == 0):
            k += 1
        if k >= len(dump.edges):
            return Mismatch(lk.end, f"register {name}", want, "no read of it in the waveform"), i, k
        if not _known(rdata[k]):
            return Mismatch(lk.end, f"register {name}", want, str(rdata[k])), i, k
        bad = lk.check_reg(name, want, rdata[k])
        if bad is not None:
            return bad, i, k
        k += 1
    return None, len(lk.regs), k


def _final_psum(dump: Dump, lk: Lockstep, k: int) -> Mismatch | None:
    """The PSUM words read back through the host port after the registers (from edge k on), in the
    lockstep's order: word w's lanes at the edge after the first one whose host_word is w."""
    word, lanes = dump.samples("host_word"), dump.samples("host_lanes")
    for i, w in enumerate(lk.final_words):
        while k < len(dump.edges) - 1 and word[k] != w:
            k += 1
        if k >= len(dump.edges) - 1:
            return Mismatch(lk.end, f"final PSUM word at offset {4 * w:#x}", "a read of it", "none in the waveform")
        if not _known(lanes[k + 1]):
            return Mismatch(lk.end, f"final PSUM word at offset {4 * w:#x}", "0 / 1 bits", str(lanes[k + 1]))
        bad = lk.check_psum(i, [_field(lanes[k + 1], p, 32) for p in range(lk.parts)])
        if bad is not None:
            return bad
        k += 1
    return None


def check_dump(dump: Dump, lk: Lockstep, ports: Ports) -> WaveResult:
    """The lockstep's checks over a sampled waveform: the first mismatch (or None)."""
    after, k0 = start_edge(dump, ports)
    xbad = first_unknown(dump, ports, after, k0)
    stop = lk.end if xbad is None else min(lk.end, max(0, xbad.cycle))
    err, uns = dump.samples("error"), dump.samples("unsupported")
    bad, cycles, regs = None, 0, 0
    for cycle in range(stop):
        k = k0 + cycle
        if k >= len(dump.edges):
            bad = Mismatch(cycle, "the waveform", "the engine's outputs of this cycle",
                           "the end of the waveform (the simulation stopped early)")
            break
        bad = lk.check_cycle(cycle, _cycle_writes(dump, lk, ports, k), err[k], uns[k])
        cycles += 1
        if bad is not None:
            break
    if bad is None and xbad is not None:
        bad = xbad
    if bad is None and lk.final:
        bad = lk.check_idle(dump.samples("done")[k0 + lk.end - 1])
    if bad is None and lk.final:
        bad, regs, k = _registers(dump, lk, k0 + lk.end)
        if bad is None:
            bad = _final_psum(dump, lk, k)
    if bad is not None:
        bad.vcd = str(dump.path)
    return WaveResult(bad, cycles, lk.checks, dump.scope, len(dump.edges), regs)


def needed_roles(lk: Lockstep) -> list[str]:
    """The ports a check reads (the names of cosim/lockstep.py's `bench`)."""
    mons = [f"{p}_{f}" for p in lk.monitors for f in ("valid", "offset", "bits", "bf16")]
    return ["desc_valid", "error", "unsupported", "done", "bus_addr", "bus_we", "bus_rdata", "host_word",
            "host_lanes", *mons]


def check_lockstep(waves, lk: Lockstep, exported: dict) -> WaveResult:
    """Check a waveform against a lockstep's golden run (the export's metadata names the ports)."""
    if not lk.descs:
        raise WaveError("the program has no descriptors; nothing marks cycle 0 in a waveform")
    fit_ports([lk], exported.get("psum_ports", PSUM_PORTS))
    ports = Ports(exported)
    return check_dump(Dump(waves, ports, needed_roles(lk)), lk, ports)


def check_file(waves, program, exported: dict, *, sbuf_latency: int = 2, psum_partitions: int = 16,
               pack: int | None = None) -> WaveResult:
    """Replay `program` (cosim.programs.Program) on the golden engine and check the waveform."""
    lk = Lockstep(program, sbuf_latency=sbuf_latency, pack=pack, psum_partitions=psum_partitions)
    return check_lockstep(waves, lk, exported)
