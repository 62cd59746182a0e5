"""The workload benchmark (tensore/kernels/workload.py, D-T94): the TinyLlama-1.1B block's weight
GEMMs, and the whole path at 1/16 size on an 8 x 8 engine."""
import json

import pytest

from tensore.kernels import workload


def test_the_block_has_2688_weight_tiles():
    tiles = sum(-(-k // 128) * -(-n // 128) for _, _, k, n in workload.shapes())
    assert tiles == 2688
    assert [s[0] for s in workload.shapes()] == ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj",
                                                 "down_proj"]
    assert {s[1] for s in workload.shapes()} == {128} and workload.shapes()[1][3] == 4 * 64


@pytest.mark.slow
@pytest.mark.cosim                       # a bf16-only 8 x 8 build of its own (about 40 s)
@pytest.mark.verilator
def test_sixteenth_size_block_on_the_rtl(tmp_path):
    out = tmp_path / "w.json"
    assert workload.main(["--scale", "16", "--opt=-O0", "-o", str(out)]) == 0
    rep = json.loads(out.read_text())
    assert rep["ok"] and rep["programs"] == 36 and len(rep["gemms"]) == 7
    assert all(g["bit_exact_to_single_program"] and g["bit_exact_to_contract"] for g in rep["gemms"])


def test_golden_clock_per_profile():
    """The block at an eighth of its size (16 x 16 engine, 16 tokens) on the golden engine: the
    default `public` profile comes within 10% of the public cost model (the moving data binds: 16
    vectors per 16-column tile), under two thirds of the contract's cycles."""
    got = {p: workload.golden_cycles(8, p) for p in ("public", "contract")}
    total = {p: sum(c for c, _ in g.values()) for p, g in got.items()}
    public = sum(pc for _, pc in got["contract"].values())
    assert public == sum(pc for _, pc in got["public"].values())
    assert total["public"] < total["contract"] / 1.5
    assert total["public"] <= 1.1 * public, (total, public)


@pytest.mark.slow
@pytest.mark.cosim                       # the 8 x 8 build of its own under `contract`
@pytest.mark.verilator
def test_sixteenth_size_block_under_contract(tmp_path):
    out = tmp_path / "w.json"
    assert workload.main(["--scale", "16", "--opt=-O0", "--timing", "contract", "-o", str(out)]) == 0
    rep = json.loads(out.read_text())
    assert rep["ok"] and rep["timing"] == "contract" and len(rep["gemms"]) == 7
