"""Specialised builds (D-T62): an engine whose PEs carry only some dtypes runs the programs that use
them like the universal engine, refuses other programs before building, and its RTL raises
`unsupported` on a weight load or matmul of another dtype."""
import pytest

from tensore.cosim import hdl
from tensore.cosim import programs as P
from tensore.cosim.lockstep import Lockstep
from tensore.rtl.fp.pe_mac import PeMac, element_dtypes, parse_dtypes
from tensore.rtl.loopform import yosys_netlist
from tensore.rtl.pe import PE


def test_parse_dtypes():
    assert parse_dtypes("maverick", None) is None
    assert [d.name for d in parse_dtypes("maverick", ["bf16", "fp8_e4m3", "bf16"])] == ["BFLOAT16", "FP8_EXP4"]
    with pytest.raises(ValueError, match="not a PE operand dtype"):
        parse_dtypes("cayman", ["int4"])
    with pytest.raises(ValueError, match="unknown dtype"):
        parse_dtypes("maverick", ["bf17"])
    with pytest.raises(ValueError, match="8-bit or 4-bit"):
        PeMac("maverick", 4, dtypes=parse_dtypes("maverick", ["bf16"]))


def test_specialised_pe_is_smaller():
    full = len(yosys_netlist(PE("maverick", 1), "pe")["cells"])
    bf16 = len(yosys_netlist(PE("maverick", 1, dtypes=parse_dtypes("maverick", ["bf16"])), "pe")["cells"])
    assert bf16 < 0.8 * full
    assert len(element_dtypes("maverick", parse_dtypes("maverick", ["bf16"]))) == 1


# minutes on 2 cores: make cosim (make test keeps one Verilator library run per generation)
@pytest.mark.slow
@pytest.mark.cosim
@pytest.mark.verilator
@pytest.mark.xdist_group("cayman")
def test_specialised_engine_runs_and_refuses():
    bf16 = parse_dtypes("cayman", ["bf16"])
    prog = P.accumulate_group("cayman", rows=4, cols=4, n=8)
    res = hdl.run(prog, dtypes=bf16, pack=1, opt="-O0")
    assert res.mismatch is None and res.checks > res.cycles
    other = P.single("cayman", "fp16", rows=4, cols=4, n=4)
    with pytest.raises(ValueError, match="does not carry"):
        hdl.run(other, dtypes=bf16, pack=1)
    # the RTL's own refusal: skip the Python check and run the fp16 program on the bf16 build
    lk = Lockstep(other, pack=1)
    cfg = hdl.Config.of(other, pack=1, dtypes=bf16)
    from tensore.cosim import harness
    built = harness.build(hdl.export_cached(cfg, log=lambda *a: None), opt="-O0", log=lambda *a: None)
    bad = harness.simulate_many([lk], built)[0].mismatch
    assert bad is not None and "unsupported" in bad.where
