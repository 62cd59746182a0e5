"""The RTL array in lockstep with the golden cycle model: every PE register, every cycle."""
import numpy as np
import pytest

from tensore.cosim import array_lockstep, programs
from tensore.model.engine import Engine
from tensore.model.isa.asm import assemble

CASES = [
    ("cayman", lambda: programs.single("cayman", "bf16", rows=4, cols=4, n=6), 1),
    ("cayman", lambda: programs.single("cayman", "fp16", rows=4, cols=4, n=5, load_order="last_col_first"), 1),
    ("mariana", lambda: programs.single("mariana", "fp8_e4m3", rows=4, cols=4, n=5), 1),
    ("sunda", lambda: programs.single("sunda", "fp8_e5m2", rows=4, cols=4, n=4), 1),
    ("maverick", lambda: programs.single("maverick", "fp8_exp2", rows=4, cols=4, n=4), 1),
    ("mariana", lambda: programs.accumulate_group("mariana", rows=4, cols=4, n=5), 1),
    ("maverick", lambda: programs.single("maverick", "fp32", rows=4, cols=4, n=3, fp32_mode="low_high"), 1),
    ("cayman", lambda: programs.single("cayman", "fp32", rows=4, cols=4, n=3, fp32_mode="high"), 1),
    ("mariana", lambda: programs.single("mariana", "fp32", rows=4, cols=4, n=3, fp32_mode="low"), 1),
    ("cayman", lambda: programs.tiles("cayman", rows=8, cols=8, n=3), 1),
    ("maverick", lambda: programs.tiles("maverick", rows=8, cols=4, n=3), 1),
    ("cayman", lambda: programs.double_row("cayman", rows=4, cols=4, n=3), 2),
    ("mariana", lambda: programs.mx("mariana", "fp4_e2m1", "oct_row", rows=4, cols=4, n=3), 8),
    ("maverick", lambda: programs.mx("maverick", "fp8_e4m3", "quad_row", rows=8, cols=4, n=3), 4),
    ("mariana", lambda: programs.transpose("mariana", rows=4, cols=4, n=3), 1),
    ("maverick", lambda: programs.transpose("maverick", rows=4, cols=4, n=4), 1),
    ("mariana", lambda: programs.sparse("mariana", rows=4, cols=4, n=3, fmaps=3), 4),
    ("maverick", lambda: programs.sparse("maverick", rows=4, cols=4, n=3, fmaps=4), 4),
    ("cayman", lambda: programs.tag_weight("cayman", rows=4, cols=4, n=3), 2),
    ("maverick", lambda: programs.c256(rows=4, cols=8, n=3), 1),
    ("cayman", lambda: programs.single("cayman", "fp8_e3m4", rows=4, cols=4, n=4), 1),
]


def trace_of(prog):
    """The golden run under `contract`: the testbench drives the weights a row per cycle on the
    row-serial bus (the column-serial port's writes are checked by the engine's lockstep,
    tests/test_background_loads.py)."""
    eng = Engine(prog.gen, rows=prog.rows, cols=prog.cols, sbuf=prog.sbuf_model(), record_pe=True, timing="contract")
    return eng.run(assemble(prog.text, prog.gen))


@pytest.mark.slow
@pytest.mark.parametrize("gen,build,pack", CASES, ids=[f"{c[0]}-{i}" for i, c in enumerate(CASES)])
def test_array_lockstep(gen, build, pack):
    prog = build()
    trace = trace_of(prog)
    assert not [o for o in trace.ops if o.error]
    assert array_lockstep.check(trace, prog.gen, pack=pack, name=prog.name) is None


def test_mismatch_report_names_cycle_pe_signal_and_writes_vcd(tmp_path):
    prog = programs.single("cayman", "bf16", rows=4, cols=4, n=6)
    trace = trace_of(prog)
    rec = [r for r in trace.pe_log if r["kind"] == "mm"][0]
    rec["steps"][2] = rec["steps"][2].copy()
    rec["steps"][2].view(np.uint32)[1, 3] ^= 1                 # the model now expects a wrong bit
    bad = array_lockstep.check(trace, prog.gen, vcd_dir=str(tmp_path), name="faulty")
    assert bad is not None
    assert bad.where == "PE (row 2, col 1), psum"
    assert bad.cycle == rec["timing"].t_data + 3 + 2 + 1 + 1    # vector 3 in PE (2, 1), one cycle later
    assert bad.expected ^ bad.actual == 1
    text = str(bad)
    assert "cycle" in text and "row 2, col 1" in text and "0x" in text and "expected" in text
    assert (tmp_path / "faulty.vcd").stat().st_size > 1000
