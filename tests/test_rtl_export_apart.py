"""The export's second process (rtl/export.py _Beside, D-T82): the blocks it converts are the text the
export's own process writes.  No Verilator: the check compares Verilog text."""
import pytest


def test_blocks_converted_apart_equal_those_converted_here(tmp_path):
    """D-T82: a block converted in the export's second process is the text this process writes."""
    from tensore.rtl.export import _Beside, _engine, block_verilog, blocks_of
    args = dict(gen="MARIANA", rows=2, cols=2, pack=2, sbuf_latency=2, psum_partitions=16, dtypes=None,
                sparse32=False, psum_ports=2, timing="contract")
    here = {f"{b.module_name}.v": b for b in blocks_of(_engine(args)) if not hasattr(b, "verilog")}
    files = sorted(here, key=lambda f: "lut_table" not in f)[:2]
    beside = _Beside(args, files, tmp_path / "apart")
    try:
        apart = beside.result()
    finally:
        beside.close()
    assert set(apart) == set(files) and not (tmp_path / "apart").exists()
    for f in files:
        assert apart[f][0] == block_verilog(here[f]), f
    with pytest.raises(RuntimeError, match="second process failed"):
        _Beside(args, ["no_such_block.v"], tmp_path / "bad").result()
