"""The public Tensor Engine cost model beside the engine's clock (tensore/kernels/public_cost.py,
D-T93): the formula of nki.isa.nc_matmul, tiles in parallel, and the gap table of docs/timing.md
measured on 8 back-to-back weight load + matmul pairs (K = 128, 128 columns)."""
import pytest

from tensore.cli import main
from tensore.kernels.public_cost import compare, matmul_cost, transpose_cost
from tensore.model.dtypes import Gen
from tensore.model.engine import Engine
from tensore.model.isa.asm import assemble

PAIRS = 8


def program(gen: str, n: int, *, dtype="bf16", fp32_mode="", tiles=False, reuse=False) -> str:
    """8 weight load + matmul pairs: n moving vectors each, into banks 0..7; `tiles`: alternate
    64-row tiles (row_grp 0 and 2); `reuse`: one load for all 8 matmuls."""
    order = "load_order=first_col_first" if gen == "cayman" else "flags=(load_order=first_col_first)"
    mode = f" fp32_mode={fp32_mode}" if fp32_mode else ""
    lines = []
    for i in range(PAIRS):
        rows, grp = (64, f" row_grp={2 * (i % 2)}") if tiles else (128, "")
        if not reuse or i == 0:
            lines.append(f"ldweights in_dtype={dtype} rows={rows} cols=128{grp}{mode} {order} "
                         "src=(start_addr=sbuf(0,0x000), step_elem=[1,0,0], num_elem=[128,1,1])")
        lines.append(f"matmul in_dtype={dtype} out_dtype=fp32 rows={rows} cols=128{grp}{mode} acc=single "
                     f"src=(start_addr=sbuf(0,0x400), step_elem=[1,0,0], num_elem=[{n},1,1]) "
                     f"dst=(start_addr=psum(0,{i},0), step_elem=[1,0,0], num_elem=[{n},1,1])")
    return "\n".join(lines) + "\n"


def run(gen: str, text: str, timing: str = "contract"):
    g = Gen.parse(gen)
    trace = Engine(g, rows=128, cols=128, timing=timing).run(assemble(text, g))
    assert not any(o.error for o in trace.ops), [o.violations for o in trace.ops if o.error]
    return compare(trace, timing)


# (case, program options, the engine's steady interval between matmul issues under `contract`,
#  the public cost per matmul): the table of docs/timing.md "Against the public cost model" (its
#  `public` column: tests/test_background_loads.py)
TABLE = [
    ("bf16 N=1", dict(n=1), 258, 64),
    ("bf16 N=16", dict(n=16), 258, 64),
    ("bf16 N=64", dict(n=64), 258, 64),
    ("bf16 N=128", dict(n=128), 258, 128),
    ("bf16 N=256", dict(n=256), 258, 256),
    ("bf16 N=512", dict(n=512), 512, 512),
    ("fp32 N=128", dict(n=128, dtype="fp32", fp32_mode="high"), 1028, 512),
    ("reuse N=1", dict(n=1, reuse=True), 2, 64),
]


@pytest.mark.parametrize("gen", ["cayman", "mariana"])
@pytest.mark.parametrize("case,opts,ours,public", TABLE, ids=[t[0] for t in TABLE])
def test_gap_table(gen, case, opts, ours, public):
    cmp = run(gen, program(gen, **opts))
    rows = cmp["rows"]
    assert len(rows) == PAIRS
    assert {r.ours for r in rows[1:-1]} == {ours}, case          # the steady state, both ends aside
    assert {r.public for r in rows} == {public}, case
    assert cmp["public"] == PAIRS * public                       # one array: the costs add up
    assert [r.public_start for r in rows] == [i * public for i in range(PAIRS)]


@pytest.mark.parametrize("gen", ["cayman", "mariana"])
def test_row_tiles_run_side_by_side(gen):
    """Two 64-row tiles, N = 256 each: the engine takes 516 cycles per pair of tiles under `contract`
    (one after another), 256 under `public` (side by side, D-T100), the public model's figure (the
    tiles' matmuls overlap)."""
    cmp = run(gen, program(gen, 256, tiles=True))
    rows = cmp["rows"]
    assert [r.block[:2] for r in rows] == [(0, 64), (64, 64)] * (PAIRS // 2)
    assert {rows[i].ours + rows[i + 1].ours for i in range(1, PAIRS - 2, 2)} == {516}
    assert [r.public_start for r in rows] == [256 * (i // 2) for i in range(PAIRS)]
    assert cmp["public"] == 256 * PAIRS // 2
    rows = run(gen, program(gen, 256, tiles=True), timing="public")["rows"]
    assert {rows[i].ours + rows[i + 1].ours for i in range(1, PAIRS - 2, 2)} == {256}


def test_formulas():
    assert matmul_cost(128, 1) == 64 and matmul_cost(32, 1) == 32 and matmul_cost(128, 300) == 300
    assert matmul_cost(128, 128, fp32=True) == 512
    assert transpose_cost(128, 16) == 128 and transpose_cost(16, 200) == 64 and transpose_cost(16, 20) == 20


def test_cost_command(tmp_path, capsys):
    src = tmp_path / "pairs.s"
    src.write_text(program("mariana", 64))
    assert main(["cost", str(src), "--gen", "mariana"]) == 0
    out = capsys.readouterr().out
    assert "tensore 528 cycles" in out and "public 512, 1.03x the public model" in out
    assert main(["cost", str(src), "--gen", "mariana", "--timing", "contract"]) == 0
    assert "public 512, 3.66x the public model" in capsys.readouterr().out
    assert out.count(" matmul\n") == PAIRS
    assert main(["cost", str(src), "--gen", "mariana", "--rows", "64"]) == 1      # refused: a 128-row load
    assert "refused" in capsys.readouterr().out
    assert main(["cost", str(tmp_path / "none.s"), "--gen", "mariana"]) == 2


def _small(text: str) -> str:
    """The program on an 8 x 8 block of the array."""
    return text.replace("rows=128 cols=128", "rows=8 cols=8").replace("num_elem=[128,1,1]", "num_elem=[8,1,1]")


@pytest.mark.parametrize("gen", ["cayman", "mariana"])
def test_reasons_name_the_rules(gen):
    """Each gap comes with the profile's rule behind it: the swap front before a load, over the whole
    array (contract, with the engine's size when the program uses less of it) or the column-serial
    load behind it (public); weights reused with no 64-cycle floor, tiles one after another; equal
    clocks give no reason."""
    why = run(gen, program(gen, 64))["reasons"]
    assert len(why) == 1 and why[0].startswith("7 of 7 matmul intervals hold a weight load") and "256 cycles" in why[0]
    assert "front is shorter" not in why[0]
    why = run(gen, _small(program(gen, 64)))["reasons"]
    assert "PEs up to row 8 and column 8 of 128 x 128" in why[0]
    why = run(gen, program(gen, 1, reuse=True))["reasons"]
    assert len(why) == 1 and why[0].startswith("7 matmuls reuse the loaded weights and issue 2+ cycles apart")
    assert any(w.startswith("4 matmuls run beside the one before") for w in run(gen, program(gen, 256, tiles=True))["reasons"])
    assert run(gen, program(gen, 512))["reasons"] == []
    why = run(gen, program(gen, 64), timing="public")["reasons"]
    assert len(why) == 1 and "2 columns at a time, a group each `passes` cycles" in why[0]
    assert "front is shorter" not in why[0]
    assert run(gen, _small(program(gen, 64)), timing="public")["reasons"] == []          # 64 cycles: the stream
    assert run(gen, program(gen, 1, reuse=True), timing="public")["reasons"] == []


def test_cost_prints_the_reasons(tmp_path, capsys):
    (tmp_path / "p.s").write_text(_small(program("mariana", 64)))
    assert main(["cost", str(tmp_path / "p.s"), "--gen", "mariana", "--timing", "contract"]) == 0
    out = capsys.readouterr().out
    assert "why they differ" in out and "on an engine of that size (--rows / --cols)" in out
