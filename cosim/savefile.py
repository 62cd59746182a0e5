"""A GTKWave save file for a `--waves` waveform (D-T66): the key signals, grouped, beside the file.

    write(waves, dest=None) -> Path       (`w.fst` -> `w.gtkw`; `gtkwave w.gtkw` opens both)
    groups(waves)           -> [(group, [(gtkwave name, width)])]

Every name comes from the waveform itself (`wave_request.typed_variables`, read through GTKWave's
own fstapi), written as GTKWave lists it (`gtkwave_name`: the scopes, the name and `[msb:lsb]` for a
bus; no range for an integer, a parameter, a real or a string), so the file names only signals that
exist and GTKWave opens each: it finds a save file's entry by that name alone (`desc_data` without
its `[511:0]`, or `pe_pending[0][0] [0:0]` as the FST stores it, shows nothing;
tests/test_docs_waves.py checks in GTKWave).  The groups: the descriptor stream, the SBUF requests
and responses (moving, stationary, scalar), the PSUM write monitors, the sequencer, and PE (0, 0)'s
registers: the structural array's PE instance (Icarus `...row[0].u.pe[0].u`, Amaranth
`...array.row0.pe0`) or the loop form's state arrays `pe_<register>[0][0]` (Verilator,
rtl/array_loop.py, D-T60).  A group the waveform has nothing of (a waveform cut to a depth) is left
out, and a waveform without the engine's descriptor stream gets a file with no groups.  Buses are
shown in hex, single bits in binary."""
from __future__ import annotations

import re
from pathlib import Path

from tensore.cosim.wave_request import typed_variables

HEX, BIN = "@22", "@28"                       # GTKWave trace flags: hex / binary, right-justified
GROUP_BEGIN, GROUP_END = "@800200", "@1000200"
DESCRIPTORS = ("clk", "rst", "desc_valid", "desc_ready", "desc_data")
SBUF = tuple(f"{side}_{f}" for side in ("mv", "st", "sc")
             for f in ("req_valid", "req_part", "req_off", "req_off0", "req_addr", "req_count", "resp_data"))
MONITOR_FIELDS = ("valid", "offset", "bits", "bf16")
SEQUENCER = ("issue_valid", "held", "busy", "issue_uop", "now", "level", "done", "error", "unsupported")
# the structural PE's registers (rtl/pe.py), by the names Amaranth gives them
PE_SIGNALS = ("wl_valid", "shadow", "active", "pending", "act", "acc", "tag", "psum_out", "psum_valid_out")
_RANGE = re.compile(r"\[(-?\d+)(?::(-?\d+))?\]$")
# the kinds GTKWave reads as numbers, not bits: listed without a bit range (the stored one dropped)
NUMBERS = {"integer", "parameter", "int", "shortint", "longint", "real", "real_parameter", "realtime", "shortreal",
           "string"}


def gtkwave_name(scope: tuple, name: str, width: int, kind: str = "wire") -> str:
    """The name GTKWave gives a signal: its scopes and name joined by dots, spaces dropped, and the
    bit range of a bus (`[msb:lsb]`: the stored one, else `[width-1:0]`), `[k]` for a bit stored
    with one; a number (`NUMBERS`: integer, parameter, real, ...) has none."""
    base = name.replace(" ", "")
    m = _RANGE.search(base)
    if kind in NUMBERS:
        stored = re.search(r" \[-?\d+:-?\d+\]$", name)
        return ".".join([*scope, (name[:stored.start()] if stored else name).replace(" ", "")])
    if m and m.group(2) is not None:              # a stored range: [msb:lsb]
        base, msb, lsb = base[:m.start()], int(m.group(1)), int(m.group(2))
        rng = f"[{msb}:{lsb}]" if width > 1 else f"[{msb}]"
    else:
        rng = f"[{width - 1}:0]" if width > 1 else ""
    return ".".join([*scope, base + rng])


def _norm(name: str) -> str:
    return re.sub(r"[._]+", "_", name)


def _base(name: str) -> str:
    return re.sub(r"\s*\[[^\]]*\]$", "", name)


class _Scopes:
    """The waveform's signals by scope: {scope: {normalised base name: (name, width)}}, the flat
    name (`desc_valid`) preferred over a sub-signature's (`desc__valid`)."""

    def __init__(self, path):
        self.vars: dict[tuple, dict] = {}
        for scope, name, width, kind in typed_variables(path):
            base = _base(name)
            if "$" in base or "\\" in base:           # Amaranth's and Yosys's unnamed temporaries
                continue
            held = self.vars.setdefault(scope, {})
            key = _norm(base)
            if key not in held or base == key:
                held[key] = (name, width, kind)

    def find(self, want) -> tuple | None:
        """The outermost scope holding every name in `want`."""
        found = [s for s, held in self.vars.items() if all(n in held for n in want)]
        return min(found, key=len) if found else None

    def under(self, top: tuple, pattern: str) -> list:
        """The scopes under `top` whose dotted path below it matches `pattern`, outermost first."""
        return sorted((s for s in self.vars if s[:len(top)] == top and re.search(pattern, ".".join(s[len(top):]))),
                      key=len)

    def pick(self, scopes: list, names) -> list:
        """(GTKWave name, width) of each of `names` found, in the first of `scopes` holding it."""
        out = []
        for n in names:
            scope = next((s for s in scopes if n in self.vars.get(s, {})), None)
            if scope is not None:
                raw, width, kind = self.vars[scope][n]
                out.append((gtkwave_name(scope, raw, width, kind), width))
        return out


def groups(waves) -> list:
    """The save file's groups of a waveform: [(title, [(GTKWave name, width)])], empty groups left out."""
    sc = _Scopes(waves)
    top = sc.find(DESCRIPTORS)
    if top is None:                               # not the engine's waveform: nothing to group
        return []
    ports = sc.vars[top]
    mons = sorted(k[:-len("_valid")] for k in ports if re.fullmatch(r"mon\d*_valid", k))
    seq = sc.under(top, r"(^|\.)seq$")[:1]
    seq += [s for s in sc.under(top, r"(^|\.)seq\.inst$") if seq and s[:len(seq[0])] == seq[0]]
    out = [("descriptors", sc.pick([top], DESCRIPTORS)), ("SBUF requests and responses", sc.pick([top], SBUF)),
           ("PSUM writes", sc.pick([top], [f"{m}_{f}" for m in mons for f in MONITOR_FIELDS])),
           ("sequencer", sc.pick(seq, SEQUENCER) + sc.pick([top], ("done", "error")))]
    out.append(("PE (0, 0)", _pe00(sc, top)))
    return [(title, sigs) for title, sigs in out if sigs]


def _pe00(sc: _Scopes, top: tuple) -> list:
    """PE (0, 0)'s registers: the structural PE instance's, or the loop form's `pe_<register>[0][0]`."""
    pe = [s for s in sc.under(top, r"(^|\.)row(\[0\]\.u\.pe\[0\]\.u|0\.pe0)$")]
    if pe:
        return sc.pick(pe[:1], PE_SIGNALS)
    loop = []
    for scope in sc.under(top, r"(^|\.)array(\.inst)?(\.|$)"):
        for raw, width, kind in sc.vars[scope].values():
            if re.fullmatch(r"pe_\w+\[0\]\[0\]", _base(raw)):
                loop.append((gtkwave_name(scope, raw, width, kind), width))
    return loop


def text(waves) -> str:
    """The save file of a waveform, as text."""
    waves = Path(waves).resolve()
    lines = [f"[*] key signals of {waves.name} (tensore, cosim/savefile.py)", f'[dumpfile] "{waves}"']
    for title, sigs in groups(waves):
        lines += [GROUP_BEGIN, f"-{title}"]
        for name, width in sigs:
            lines += [HEX if width > 1 else BIN, name]
        lines += [GROUP_END, f"-{title}"]
    return "\n".join(lines) + "\n"


def write(waves, dest=None) -> Path:
    """Write the save file of a waveform beside it (`w.fst` -> `w.gtkw`) or to `dest`."""
    dest = Path(dest) if dest else Path(waves).with_suffix(".gtkw")
    dest.write_text(text(waves))
    return dest
