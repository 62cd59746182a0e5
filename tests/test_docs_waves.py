"""The waveforms, as the pages name them: a 4 x 4 MARIANA run on each simulator writes its FST with
`tensore cosim --waves`, then every hierarchical path of docs/first_program.md's "The waveform" is
one the waveform holds: the table's column of that simulator exactly (a scope, or a signal less its
` [msb:lsb]`), a path in the prose (no column) in every simulator's waveform, ending a path of it.

Amaranth and Icarus run in `make test`; Verilator needs a traced build of its own (minutes: make cosim)."""
import re
from pathlib import Path

import pytest

from tensore.cosim.wave_request import variables
from tests.test_docs import ROOT

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

