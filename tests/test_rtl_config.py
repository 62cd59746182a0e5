"""rtl/config.py: the build's parameters, resolved once and taken by every unit."""
import pickle

import pytest

from tensore.model.dtypes import Dtype
from tensore.rtl.blackbox import prototype
from tensore.rtl.config import Config, default_pack
from tensore.rtl.top import Engine


def test_defaults_resolve_once():
    """0 columns is the generation's full width, pack 0 its default elements per PE (D-T34)."""
    assert (Config("maverick").cols, Config("maverick").pack) == (256, 1)
    assert (Config("mariana", 8).cols, Config("mariana", 8).pack) == (128, 2)
    assert default_pack("cayman") == 2 and Config("cayman", 4, 4, 8).pack == 8
    assert Config("Mariana").gen == "MARIANA" and Config("mariana", timing="CONTRACT").timing == "contract"


def test_plain_values_cross_processes():
    """A Config is its plain fields: JSON-able through plain(), equal after a round trip and a pickle."""
    cfg = Config("mariana", 4, 8, 8, 3, 8, [int(Dtype.BFLOAT16)], 3, True, "contract")
    assert cfg.dtypes == (Dtype.BFLOAT16,) and cfg.plain()["dtypes"] == [int(Dtype.BFLOAT16)]
    assert Config(**cfg.plain()) == cfg and pickle.loads(pickle.dumps(cfg)) == cfg
    assert cfg.label == "mariana_4x8_p8_l3_ps8_w3_s32_bfloat16_tcontract"


def test_engine_and_units_take_one_config():
    """Engine.of(cfg) builds the same engine as its keyword form, and each unit reads the one record."""
    cfg = Config("maverick", 4, 8, 4, psum_partitions=8, psum_ports=3, timing="contract")
    eng = prototype(Engine.of(cfg))
    assert eng.cfg == cfg == prototype(Engine("maverick", 4, 8, pack=4, psum_partitions=8, psum_ports=3,
                                              timing="contract")).cfg
    seq, load, launch, rows, array, write = (prototype(make()) for make in (eng._seq, eng._load, eng._launch,
                                                                             eng._rows, eng._array, eng._write))
    assert (write.ports, write.parts, load.pack, rows.cols, launch.L) == (3, 8, 4, 8, 2)
    assert seq.timing.name == "contract" and array.column_loads is False
    assert prototype(Engine.of(Config("maverick", 4, 8, 4))._array()).column_loads is True     # public: column loads

@pytest.mark.parametrize("kw, says", [(dict(sbuf_latency=1), "sbuf_latency >= 2"), (dict(pack=3), "elements per PE"),
                                      (dict(timing="fast"), "one of")])
def test_bad_builds_refused_in_one_line(kw, says):
    """Refused by the Config, before the export and `tensore verilog` do any work."""
    with pytest.raises(ValueError, match=says) as e:
        Config("mariana", 4, 4, **kw)
    assert "\n" not in str(e.value)
    assert Config("mariana", 4, 4).tile == 1 and Config("mariana", 8, 8, timing="contract").tile == 8


def test_links_keep_the_exported_port_names():
    """The links of rtl/links.py flatten to the per-field ports the Verilog writers and testbenches
    name (a sub-signature's path joined by "_"), and each sink's link is its source's, flipped."""
    from tensore.rtl.blackbox import ports
    eng = prototype(Engine.of(Config("mariana", 4, 4, 2)))
    seq, load, launch, rows, array = (prototype(make()) for make in (eng._seq, eng._load, eng._launch, eng._rows,
                                                                      eng._array))
    names = {unit: set(ports(unit)) for unit in (seq, load, launch, rows, array)}
    assert {"desc_valid", "desc_ready", "desc_data", "bus_addr", "bus_rdata", "reg_apply", "issue_uop"} <= names[seq]
    assert {"wl_valid", "wl_row", "wl_cols", "wl_data", "tag_data", "lut_index", "lut_entry", "issue_valid"} <= names[load]
    assert {"wl_row", "tag_cols", "cw_valid", "cw_col", "cw_data", "advance", "phase"} <= names[array]
    assert {"feed_rec", "feed_xit", "feed_req_shift", "lut_dtype"} <= names[rows] and "feed_rec" in names[launch]
    for src, sink in ((seq.issue, load.issue), (load.wl, array.wl), (rows.lut, load.lut), (launch.feed, rows.feed)):
        assert sink.signature == src.signature.flip()


def test_config_of_a_program_takes_the_plain_defaults():
    """Config.of (the build a program runs on, cosim/hdl.py) with nothing but the program is the
    dataclass's plain build: its generation, array and profile, every other field Config's default
    (no 32-bit MatmulSparse fmaps, D-T40 (3), unless asked)."""
    from tensore.cosim import programs as P
    prog = P.single("mariana", "bf16", rows=4, cols=4, n=4)
    cfg = Config.of(prog)
    assert cfg == Config(prog.gen.name, prog.rows, prog.cols, prog.pack or 0, psum_partitions=16,
                         timing=prog.timing)
    assert cfg.sparse32 is False and "_s32" not in cfg.label
