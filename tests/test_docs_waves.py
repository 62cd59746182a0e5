"""The waveforms, as the pages and the save files name them: a 4 x 4 MARIANA run on each simulator
writes its FST with `tensore cosim --waves` (and the GTKWave save file beside it), then

- every hierarchical path of docs/first_program.md's "The waveform" is one the waveform holds: the
  table's column of that simulator exactly (a scope, or a signal less its ` [msb:lsb]`), a path in
  the prose (no column) in every simulator's waveform, ending a path of it;
- GTKWave opens every entry of the save file (cosim/savefile.py), and lists every signal of the
  waveform by the name `savefile.gtkwave_name` gives it, checked in GTKWave itself, batch mode under
  a virtual X server (skipped without `gtkwave` and `xvfb-run`, Debian's `gtkwave` and `xvfb`); the
  waveform's own names, without GTKWave's bit range, it does not open.

Amaranth and Icarus run in `make test`; Verilator needs a traced build of its own (minutes: make cosim)."""
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from tensore.cosim.wave_request import typed_variables, variables
from tests.test_docs import ROOT
from tests.test_savefile import saved

pytestmark = pytest.mark.xdist_group("docs_waves")            # one worker: each simulator's run made once
PAGE = "docs/first_program.md"
SIMS = [pytest.param("amaranth", marks=pytest.mark.slow), pytest.param("icarus", marks=pytest.mark.slow),
        pytest.param("verilator", marks=[pytest.mark.cosim, pytest.mark.verilator])]
COLUMN = {"verilator": "Verilator", "icarus": "Icarus", "amaranth": "Amaranth"}
# a backticked hierarchical path: dotted words (a leading `...` for "under some scope"), not a file name
PATH = re.compile(r"^(\.\.\.)?[A-Za-z_][\w\[\]]*(\.[\w\[\]]+)+$")
FILES = re.compile(r"\.(md|fst|vcd|gtkw|s|npz|py)$")
_WAVES: dict = {}


def waves(sim: str, tmp_path_factory) -> Path:
    """The FST of a 4 x 4 MARIANA accumulate group on `sim` (once per session), its save file beside it."""
    if sim not in _WAVES:
        from tensore.cli import main
        from tensore.cosim import hdl
        from tensore.cosim import programs as P
        if sim == "icarus":
            hdl.ensure_icarus()
        out = tmp_path_factory.mktemp(f"waves_{sim}")
        src = out / "prog.s"
        src.write_text(P.accumulate_group("mariana", rows=4, cols=4, n=4).text)
        path = out / f"{sim}.fst"
        assert main(["cosim", str(src), "--gen", "mariana", "--rows", "4", "--cols", "4", "--sim", sim,
                     "--waves", str(path)]) == 0
        assert path.exists() and path.with_suffix(".gtkw").exists()
        _WAVES[sim] = path
    return _WAVES[sim]


def held(path) -> set:
    """The waveform's scopes and signals as dotted paths, a signal less its stored ` [msb:lsb]`."""
    out = set()
    for scope, name, _ in variables(path):
        out.update(".".join(scope[:i]) for i in range(1, len(scope) + 1))
        out.add(".".join([*scope, re.sub(r" \[-?\d+:-?\d+\]$", "", name)]))
    return out


def page_paths() -> tuple:
    """({simulator column: [paths]} of the section's table, [paths] of its prose) of "The waveform"."""
    text = (ROOT / PAGE).read_text()
    section = text[text.index("### The waveform"):]
    section = section[:section.index("\n## ")]
    section = re.sub(r"```.*?```", "", section, flags=re.S)              # the commands are not paths
    table, prose, header = {}, [], None
    for line in section.splitlines():
        if line.startswith("|"):
            cells = [c.strip() for c in line.strip().strip("|").split("|")]
            if header is None:
                header = cells
            elif not set("".join(cells)) <= set("-: "):
                for col, cell in zip(header[1:], cells[1:]):
                    table.setdefault(col, []).extend(re.findall(r"`([^`]+)`", cell))
        else:
            prose.extend(re.findall(r"`([^`]+)`", line))
    return table, [p for p in prose if PATH.match(p) and not FILES.search(p)]


def test_page_quotes_paths_per_simulator():
    """The section's table gives each simulator's column the same rows of paths."""
    table, prose = page_paths()
    assert set(table) == set(COLUMN.values()) and all(len(v) >= 6 for v in table.values()), table
    assert len({len(v) for v in table.values()}) == 1


@pytest.mark.parametrize("sim", SIMS)
def test_first_program_waveform_paths_exist(sim, tmp_path_factory):
    names = held(waves(sim, tmp_path_factory))
    table, prose = page_paths()
    ends = {n.split(".", k)[-1] for n in names for k in range(n.count(".") + 1)}
    missing = [p for p in prose if p.removeprefix("...") not in ends]
    assert not missing, f"{PAGE}: paths of the prose (every simulator's) not in the {sim} waveform: {missing}"
    missing = [p for p in table.get(COLUMN[sim], []) if p not in names]
    assert COLUMN[sim] in table and not missing, f"{PAGE}: the table's {COLUMN[sim]} paths not in its waveform: {missing}"


# -- the save file, in GTKWave --------------------------------------------------------------------------
SHOWN = "foreach s [gtkwave::getDisplayedSignals] { puts $f $s }"
FACILITIES = "for {set i 0} {$i < [gtkwave::getNumFacs]} {incr i} { puts $f [gtkwave::getFacName $i] }"


def gtkwave(waves_path, listing: str, gtkw: Path | None, out: Path) -> list:
    """GTKWave's answer (one line each) to the Tcl `listing` (SHOWN: the signals it shows, in order;
    FACILITIES: every signal's name) after it opens `waves_path` with the save file `gtkw` (batch
    mode under xvfb-run)."""
    if not (shutil.which("gtkwave") and shutil.which("xvfb-run")):
        pytest.skip("needs gtkwave and xvfb-run (Debian packages gtkwave, xvfb)")
    listed, script = out.with_suffix(".list"), out.with_suffix(".tcl")
    listed.unlink(missing_ok=True)
    script.write_text(f'set f [open "{listed}" w]\n{listing}\nclose $f\ngtkwave::/File/Quit\n')
    res = subprocess.run(["xvfb-run", "-a", "gtkwave", "-S", str(script), str(waves_path), *([str(gtkw)] if gtkw else [])],
                         capture_output=True, text=True, timeout=300)
    assert listed.exists(), res.stdout[-2000:] + res.stderr[-2000:]
    return listed.read_text().splitlines()


def gtkwave_opens(waves_path, gtkw: Path) -> list:
    """The signals GTKWave shows when it opens `waves_path` with the save file `gtkw`: the entries it
    resolved, in order."""
    return gtkwave(waves_path, SHOWN, gtkw, gtkw.with_suffix(".shown"))


@pytest.mark.parametrize("sim", SIMS)
def test_gtkwave_opens_every_save_file_entry(sim, tmp_path_factory):
    """The save file `tensore cosim --waves` writes: GTKWave shows every entry, in order.  A save file
    of the waveform's own names (no bit range on a bus, Icarus's and Verilator's ` [msb:lsb]` kept)
    shows only the single-bit signals stored without a range: the save file needs GTKWave's names."""
    path = waves(sim, tmp_path_factory)
    gtkw = path.with_suffix(".gtkw")
    entries = saved(gtkw.read_text())
    assert len(entries) > 30
    assert gtkwave_opens(path, gtkw) == entries
    raw = [".".join([*s, n]) for s, n, w in variables(path)]
    by_name = {re.sub(r"\[-?\d+(:-?\d+)?\]$", "", e): e for e in entries}
    stored = [r for r in raw if re.sub(r" \[-?\d+:-?\d+\]$", "", r) in by_name]
    assert len(stored) == len(entries)
    plain = gtkw.with_name("raw.gtkw")
    plain.write_text("".join(f"@22\n{r}\n" for r in stored))
    opened = gtkwave_opens(path, plain)
    assert opened == [r for r in stored if r in entries] and len(opened) < len(entries)


@pytest.mark.parametrize("sim", SIMS)
def test_gtkwave_lists_every_signal_by_savefile_names(sim, tmp_path_factory):
    """GTKWave's own list of the waveform's signals is `savefile.gtkwave_name` of each, every one
    (Icarus's integers and Verilator's parameters included, listed without a bit range)."""
    from tensore.cosim import savefile
    path = waves(sim, tmp_path_factory)
    listed = gtkwave(path, FACILITIES, None, path.with_name("facilities"))
    assert sorted(listed) == sorted(savefile.gtkwave_name(*v) for v in typed_variables(path))
