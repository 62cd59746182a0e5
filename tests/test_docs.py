"""The docs do what they say: README.md is a front door (under 12 kB, `make demo` and `make test`
first, its example prints what the README quotes), every relative link of README.md and docs/ reaches
a file and heading, the python blocks of README.md, docs/layout.md and docs/isa.md run, and
docs/first_program.md runs as a user would follow it: its `sh` blocks as commands in a scratch
directory (`tensore run`, `tensore cosim` on an 8 x 8 engine in Amaranth's simulator), its `python`
blocks there, each checking the engine's numbers against numpy.  Blocks fenced `sh slow` (Verilator
builds, full-size RTL, a waveform viewer) are shown, not run."""
import contextlib
import io
import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "docs" / "examples" / "first_program"
FENCE = re.compile(r"^```([^\n]*)\n(.*?)^```$", re.S | re.M)


def blocks(doc: str) -> list:
    """(info string, text) of every fenced block of a markdown file under the repository, in order."""
    return [(m.group(1).strip(), m.group(2)) for m in FENCE.finditer((ROOT / doc).read_text())]


def run_python(text: str, where: str) -> dict:
    namespace = {"__name__": f"docs:{where}"}
    exec(compile(text, where, "exec"), namespace)
    return namespace


def test_readme_is_a_front_door():
    """What it is, the two commands first, an example of about ten lines, under 12 kB."""
    readme = (ROOT / "README.md").read_text()
    assert len(readme.encode()) < 12_000
    commands = next(text for info, text in blocks("README.md") if info == "sh")
    assert [line.split()[:2] for line in commands.splitlines() if line.startswith("make")] == \
        [["make", "demo"], ["make", "test"]]
    example = [text for info, text in blocks("README.md") if info == "python"]
    assert len(example) == 1 and len(example[0].splitlines()) <= 12


def test_readme_example_prints_what_the_readme_quotes():
    """The README's python block runs, and its output is the `text` block after it (quoted_output_pattern)."""
    found = blocks("README.md")
    i = next(i for i, (info, _) in enumerate(found) if info == "python")
    assert found[i + 1][0] == "text", "the README quotes its example's output after it"
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        run_python(found[i][1], "README.md python block")
    assert re.fullmatch(quoted_output_pattern(found[i + 1][1]), out.getvalue()), \
        f"README.md quotes the example's output as\n{found[i + 1][1]}\nbut it prints\n{out.getvalue()}"


def test_layout_python_blocks_run():
    code = [text for info, text in blocks("docs/layout.md") if info == "python"]
    assert code and "from_fp32" in code[0]                      # the datatypes example
    for i, text in enumerate(code):
        run_python(text, f"docs/layout.md python block {i}")


def _slug(heading: str) -> str:
    """A heading's anchor as GitHub makes it: lower case, punctuation dropped, spaces as hyphens."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def _prose(path: Path) -> str:
    return re.sub(r"^```.*?^```", "", path.read_text(), flags=re.S | re.M)


def test_relative_links_reach_a_file_and_heading():
    """Every relative link of README.md and docs/ (outside code blocks) names a file that exists and,
    with `#anchor`, a heading of that page: moving a section cannot leave a link behind."""
    broken = []
    for page in [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]:
        for target in re.findall(r"\]\(([^)\s]+)\)", _prose(page)):
            if re.match(r"[a-z]+:", target):
                continue
            path, _, anchor = target.partition("#")
            dest = (page.parent / path).resolve() if path else page
            headings = {_slug(h) for h in re.findall(r"^#+ (.*)$", _prose(dest), re.M)} \
                if dest.suffix == ".md" and dest.is_file() else set()
            if not dest.exists() or (anchor and anchor not in headings):
                broken.append(f"{page.relative_to(ROOT)}: {target}")
    assert not broken, broken


def test_isa_operand_layout_example_runs():
    code = [text for info, text in blocks("docs/isa.md") if info == "python"]
    assert code and "load_order" in code[0]
    for i, text in enumerate(code):
        run_python(text, f"docs/isa.md python block {i}")


def _program_lines(path: Path) -> list:
    return [line for line in path.read_text().splitlines() if line.strip() and not line.startswith("#")]


def test_first_program_files_match_the_page_and_are_valid():
    from tensore.model.isa import check
    from tensore.model.isa.asm import assemble
    page = (ROOT / "docs" / "first_program.md").read_text()
    for name, gen in (("gemm.s", "mariana"), ("gemm_128.s", "mariana"), ("gemm_maverick.s", "maverick")):
        data = assemble((EXAMPLES / name).read_text(), gen)
        assert len(data) == 128 and check(data[:64], gen) == [] and check(data[64:], gen) == [], name
        if name != "gemm_maverick.s":                             # the page shows these two in full
            assert all(line in page for line in _program_lines(EXAMPLES / name)), name
    assert all(f.stat().st_size < 16_000 for f in EXAMPLES.iterdir())          # sources, no binaries


def _shims(bin_dir: Path):
    """`tensore` and `python` as the page uses them, from this interpreter and this checkout."""
    bin_dir.mkdir()
    for name, cmd in (("tensore", f'"{sys.executable}" -m tensore.cli'), ("python", f'"{sys.executable}"')):
        (bin_dir / name).write_text(f'#!/bin/sh\nexec {cmd} "$@"\n')
        (bin_dir / name).chmod(0o755)


def quoted_output_pattern(quoted: str) -> str:
    """A regular expression for a command's whole stdout as a page quotes it in a `text` block: each
    line as printed, `...` within a line any text, a line of `...` alone any number of lines."""
    parts = []
    for line in quoted.splitlines():
        if line.strip() == "...":
            parts.append(r"(?:[^\n]*\n)*")
        else:
            parts.append(r"[^\n]*".join(re.escape(piece) for piece in line.split("...")) + r"\n")
    return "".join(parts)


def test_quoted_output_pattern():
    pattern = quoted_output_pattern("A: 3 cycles\n  ...\n  B: 4 checks (every write, ...)\n")
    assert re.fullmatch(pattern, "A: 3 cycles\nx\ny\n  B: 4 checks (every write, and more)\n")
    assert not re.fullmatch(pattern, "A: 3 cycles\n  B: 5 checks (every write, and more)\n")
    assert not re.fullmatch(pattern, "A: 3 cycles\n  B: 4 checks (every write, and more)\nC\n")


# Figures the page's prose quotes from a command's output: (the prose, its number; the command's
# start; the output line, the same number)
PROSE_FIGURES = [
    (r"the last of the 8 x 16 results is written in cycle\s+(\d+)", "tensore run docs/examples/first_program/gemm.s",
     r"#1 matmul: issue \d+, complete (\d+),"),
    (r"an 8 x 8 engine over these (\d+) cycles", "tensore cosim", r"RTL on amaranth: \d+ micro-ops, (\d+) cycles"),
    (r"The golden engine takes a fraction of a second for its (\d+) cycles",
     "tensore run docs/examples/first_program/gemm_128.s", r"MARIANA 128x128: .* (\d+) cycles"),
]


def test_first_program_walkthrough(tmp_path, monkeypatch):
    """Every `sh` command and `python` block of docs/first_program.md in order, from a scratch
    directory that sees the repository's docs/ (the commands' paths are relative to the root).  A
    `text` block after a `sh` block is the output of its last command, matched line by line
    (quoted_output_pattern), and the figures the prose quotes from the output are the output's
    (PROSE_FIGURES), so that the page's counts cannot drift from what the commands print."""
    (tmp_path / "docs").symlink_to(ROOT / "docs")
    _shims(tmp_path / "bin")
    env = dict(os.environ, PATH=f"{tmp_path / 'bin'}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.chdir(tmp_path)
    outputs, namespaces, kinds, last, quoted = {}, [], set(), None, 0
    for i, (info, text) in enumerate(blocks("docs/first_program.md")):
        kinds.add(info)
        if info == "text":
            assert last is not None, f"docs/first_program.md block {i}: output quoted after no command"
            assert re.fullmatch(quoted_output_pattern(text), outputs[last]), \
                f"docs/first_program.md block {i} quotes the output of `{last}` as\n{text}\nbut it prints\n{outputs[last]}"
            quoted += 1
        last = None
        if info == "python":
            namespaces.append(run_python(text, f"docs/first_program.md block {i}"))
        elif info == "sh":
            for line in (ln.strip() for ln in text.splitlines()):
                if not line or line.startswith("#"):
                    continue
                res = subprocess.run(["sh", "-c", line], cwd=tmp_path, env=env, capture_output=True,
                                     text=True, timeout=600)
                assert res.returncode == 0 and "Traceback" not in res.stderr, f"{line}\n{res.stdout}\n{res.stderr}"
                outputs[line], last = res.stdout, line
    assert {"python", "sh", "sh slow", "text"} <= kinds and quoted >= 3
    page = " ".join((ROOT / "docs" / "first_program.md").read_text().split())
    for prose, command, printed in PROSE_FIGURES:
        said = re.search(prose, page)
        out = next(out for cmd, out in outputs.items() if cmd.startswith(command))
        real = re.search(printed, out)
        assert said and real and said.group(1) == real.group(1), (prose, said and said.group(1), real and real.group(0))
    run = next(out for cmd, out in outputs.items() if cmd.startswith("tensore run docs/examples/first_program/gemm.s"))
    assert "2 executed, 0 refused" in run
    cosim = next(out for cmd, out in outputs.items() if cmd.startswith("tensore cosim"))
    assert "RTL on amaranth" in cosim and "lockstep vs golden engine: OK" in cosim
    image = np.load(tmp_path / "build" / "first" / "sbuf.npz")     # step 1's numpy operands are the image's
    assert np.array_equal(namespaces[0]["A"].astype(np.float32), image["a"])
    assert np.array_equal(namespaces[0]["B"].astype(np.float32), image["b"])


def test_first_program_exit_codes_as_the_page_says(tmp_path):
    """Step 4: a refused micro-op (the 8 x 8 program on a 4 x 4 engine) exits 1 with the reason on
    stderr, 0 with --allow-refused."""
    sbuf = tmp_path / "sbuf.npz"
    subprocess.run([sys.executable, str(EXAMPLES / "make_sbuf.py"), "-o", str(sbuf)], check=True,
                   capture_output=True)
    cmd = [sys.executable, "-m", "tensore.cli", "run", str(EXAMPLES / "gemm.s"), "--gen", "mariana",
           "--rows", "4", "--cols", "4", "--sbuf", str(sbuf)]
    res = subprocess.run(cmd, capture_output=True, text=True)
    assert res.returncode == 1 and "refused" in res.stderr and "Traceback" not in res.stderr
    assert subprocess.run(cmd + ["--allow-refused"], capture_output=True).returncode == 0
