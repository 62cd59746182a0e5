"""The exported Verilog (one PE definition, row blocks, structural top) is the same circuit as
the Amaranth array, and the full-size configurations export."""
import numpy as np
import pytest

from tensore.cosim.vectors import VectorRunner
from tensore.rtl.array import Array
from tensore.rtl.export import export_array

pytestmark = pytest.mark.verilator
SEED = 20261130


@pytest.mark.parametrize("gen,rows,cols,pack", [("mariana", 2, 4, 2)])
def test_exported_hierarchy_equals_flat_amaranth(tmp_path, gen, rows, cols, pack):
    res = export_array(gen, rows, cols, pack, tmp_path)
    hier = VectorRunner(Array(gen, rows, cols, pack), "tensore_array", clocked=True, cflags="-O0",
                        sources={f.name: f.read_text() for f in res["files"]})
    flat = VectorRunner(Array(gen, rows, cols, pack), "tensore_array_flat", clocked=True, cflags="-O0")
    rng = np.random.default_rng(SEED + rows + cols)
    n = 400
    inputs = {}
    for name, width, is_in in flat.ports:
        if not is_in:
            continue
        if width <= 63:
            inputs[name] = rng.integers(0, 1 << width, n, dtype=np.int64)
        else:
            inputs[name] = np.array([int.from_bytes(rng.bytes((width + 7) // 8), "little") % (1 << width)
                                     for _ in range(n)], object)
    # mostly-plausible moving values: keep valid rows with sensible dtypes part of the time
    inputs["advance"] = (rng.random(n) < 0.8).astype(np.int64)
    a = flat(**inputs)
    b = hier(**inputs)
    for name in a:
        assert np.array_equal(np.asarray(a[name], object), np.asarray(b[name], object)), name
    assert any(int(v) for v in a["out_valid"])


@pytest.mark.parametrize("gen,rows,cols", [("mariana", 128, 128), ("maverick", 128, 256)])
def test_full_size_exports(tmp_path, gen, rows, cols):
    res = export_array(gen, rows, cols, 8, tmp_path)
    top = res["files"][-1].read_text()
    assert f"for (r = 0; r < {rows};" in top
    row = res["files"][1].read_text()
    assert f"for (c = 0; c < {cols};" in row
    pe = res["files"][0].read_text()
    assert pe.count("module tensore_pe_") == 1


@pytest.mark.parametrize("gen,rows,cols", [("mariana", 128, 128),
                                           pytest.param("maverick", 128, 256, marks=pytest.mark.cosim)])   # ~70 s
def test_full_size_array_elaborates(gen, rows, cols):
    from amaranth.hdl import Fragment
    array = Array(gen, rows, cols, 8, black_box=True)
    frag = Fragment.get(array, None)
    assert len(array.row_blocks) == rows and array.row_blocks[0].cols == cols
    assert frag is not None


@pytest.mark.parametrize("parts,cols,ports,half", [(4, 6, 2, 6), (6, 8, 2, 4), (5, 8, 3, 4)])
def test_psum_xbar_verilog_equals_amaranth(parts, cols, ports, half):
    """The exported crossbar (behavioural Verilog, D-T42) computes what the Amaranth one does,
    including collisions (several columns naming one partition, more than it has ports), c256 pairs
    and partitions out of range."""
    from tensore.rtl.blackbox import prototype
    from tensore.rtl.psum_xbar import PsumWriteXbar
    xbar = prototype(PsumWriteXbar(parts, cols, ports, half))
    name = xbar.module_name
    amaranth = VectorRunner(PsumWriteXbar(parts, cols, ports, half), f"{name}_amaranth", cflags="-O0")
    behavioural = VectorRunner(xbar, name, cflags="-O0", sources={f"{name}.v": xbar.verilog()})
    rng = np.random.default_rng(SEED + parts + ports)
    n = 3000

    def wide(bits, lane, hi=None):
        lanes = rng.integers(0, hi if hi is not None else 1 << lane, (n, cols))
        return np.array([sum(int(v) << (lane * j) for j, v in enumerate(row)) for row in lanes], object) \
            if bits > 63 else (lanes << (lane * np.arange(cols))).sum(axis=1)
    inputs = {
        "strobe": (rng.random((n, cols)) < 0.6).astype(np.int64) @ (1 << np.arange(cols)),
        "part": wide(16 * cols, 16, hi=parts + 2),          # a few past the last partition
        "offset": wide(14 * cols, 14), "value": wide(32 * cols, 32), "seed": wide(2 * cols, 2, hi=3),
        "bf16": rng.integers(0, 1 << cols, n), "accumulate": rng.integers(0, 1 << cols, n),
        "raw": rng.integers(0, 1 << cols, n), "sr": rng.integers(0, 2, n),
        "state": wide(4 * cols, 4), "loaded": wide(32 * cols, 32),
    }
    if half < cols:
        inputs["pair"] = rng.integers(0, 1 << (cols - half), n)
    a, b = amaranth(**inputs), behavioural(**inputs)
    for port in a:
        assert np.array_equal(np.asarray(a[port], object), np.asarray(b[port], object)), port
    causes = np.asarray(a["unsupported"], np.int64)
    for bit in (0, 1):                            # a partition past the last; more writes than ports
        assert 0 < (causes >> bit & 1).sum() < n


def _top_cells(gen, rows, cols, parts, pack):
    """Cells of the exported engine top's netlist (the blocks it instantiates not included)."""
    from amaranth.hdl import Fragment, _ast, _ir
    from amaranth.lib import wiring

    from tensore.rtl.top import Engine
    eng = Engine(gen, rows, cols, pack=pack, psum_partitions=parts, black_box=True)
    ports = {}
    for path, member, value in eng.signature.flatten(eng):
        value = value.as_value() if isinstance(value, _ast.ValueCastable) else value
        ports["__".join(map(str, path))] = (value, _ir.PortDirection.Input if member.flow == wiring.In
                                            else _ir.PortDirection.Output)
    return len(_ir.build_netlist(Fragment.get(eng, None), ports, name="top").cells)


def test_exported_top_grows_linearly():
    """D-T42: the top's own netlist grows with rows + columns + partitions, not with their products
    (the weight lanes copied once per shifter stage, the P x C write crossbar)."""
    small, large = _top_cells("mariana", 8, 8, 8, 2), _top_cells("mariana", 32, 32, 32, 2)
    assert large < 2.5 * small, (small, large)            # 4x the rows, columns and partitions
