"""The exported Verilog (one PE definition, row blocks, structural top) is the same circuit as
the Amaranth array, and the full-size configurations export."""
import numpy as np
import pytest

from tensore.cosim.vectors import VectorRunner
from tensore.rtl.array import Array
from tensore.rtl.config import Config
from tensore.rtl.export import export_array

pytestmark = pytest.mark.verilator
SEED = 20261130


@pytest.mark.parametrize("gen,rows,cols,pack,column_loads,timing", [
    ("mariana", 2, 4, 2, False, "contract"), ("mariana", 4, 2, 2, False, "public"),
    pytest.param("mariana", 2, 4, 2, True, "contract", marks=pytest.mark.cosim)])
def test_exported_hierarchy_equals_flat_amaranth(tmp_path, gen, rows, cols, pack, column_loads, timing):
    """The structural writers (rtl/array.py `verilog()`), with the column-serial writes too, and with
    the sums' taps of row tiles (D-T100: four tiles of one row)."""
    res = export_array(gen, rows, cols, pack, tmp_path, column_loads=column_loads, timing=timing)
    arr = lambda: Array(Config(gen, rows, cols, pack, timing=timing), column_loads=column_loads)      # noqa: E731
    hier = VectorRunner(arr(), "tensore_array", clocked=True, cflags="-O0",
                        sources={f.name: f.read_text() for f in res["files"]})
    flat = VectorRunner(arr(), "tensore_array_flat", clocked=True, cflags="-O0")
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
    if column_loads:                    # plausible moving values and weights, mostly column writes
        from tests.test_rtl_loopform import _column_stimulus, _stimulus
        inputs = _stimulus(rng, rows, cols, pack, n) | _column_stimulus(rng, rows, cols, pack, n)
        inputs["wl_valid"] = inputs["wl_valid"] & (rng.random(n) < 0.3)
    a = flat(**inputs)
    b = hier(**inputs)
    for name in a:
        assert np.array_equal(np.asarray(a[name], object), np.asarray(b[name], object)), name
    for port in ["out_valid", *(f"tap{k}_valid" for k in range(arr().taps - 1))]:
        assert any(int(v) for v in a[port]), port


def test_export_jobs_from_the_environment(monkeypatch):
    from tensore.rtl.export import JOBS_ENV, _jobs
    monkeypatch.setenv(JOBS_ENV, "1")
    assert _jobs() == 1
    for bad in ("0", "two", "-1"):
        monkeypatch.setenv(JOBS_ENV, bad)
        with pytest.raises(ValueError, match="positive whole number"):
            _jobs()


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
    array = Array(Config(gen, rows, cols, 8), black_box=True, column_loads=False)
    frag = Fragment.get(array, None)
    assert len(array.row_blocks) == rows and array.row_blocks[0].cols == cols
    assert frag is not None


@pytest.mark.parametrize("parts,cols,ports,half", [(4, 6, 2, 6), (4, 8, 2, 2), pytest.param(6, 8, 2, 4, marks=pytest.mark.cosim),
                                                    pytest.param(5, 8, 3, 4, marks=pytest.mark.cosim)])
def test_psum_xbar_verilog_equals_amaranth(parts, cols, ports, half):
    """The exported crossbar (behavioural Verilog, D-T42) computes what the Amaranth one does,
    including collisions (several columns naming one partition, more than it has ports), c256 pairs
    (also two row tiles' taps of 4 columns, half 2: a column both a pair's second and the next's
    first) and partitions out of range."""
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
    """Cells of the exported engine top's netlist and of the units it instantiates once (sequencer,
    load, launch and write-back units); the repeated blocks and those with a Verilog writer not
    included."""
    from amaranth.hdl import Fragment, _ast, _ir
    from amaranth.lib import wiring

    from tensore.rtl.blackbox import prototype
    from tensore.rtl.top import Engine
    eng = Engine(gen, rows, cols, pack=pack, psum_partitions=parts, black_box=True)
    total = 0
    for unit in (eng, eng._seq(), eng._load(), eng._launch(), eng._write()):
        ports = {}
        for path, member, value in prototype(unit).signature.flatten(unit):
            value = value.as_value() if isinstance(value, _ast.ValueCastable) else value
            ports["__".join(map(str, path))] = (value, _ir.PortDirection.Input if member.flow == wiring.In
                                                else _ir.PortDirection.Output)
        total += len(_ir.build_netlist(Fragment.get(unit, None), ports, name="top").cells)
    return total


def test_exported_top_grows_linearly():
    """D-T42: the top's own netlist grows with rows + columns + partitions, not with their products
    (the weight lanes copied once per shifter stage, the P x C write crossbar)."""
    small, large = _top_cells("mariana", 8, 8, 8, 2), _top_cells("mariana", 32, 32, 32, 2)
    assert large < 2.5 * small, (small, large)            # 4x the rows, columns and partitions


def _pair(block, name: str, sources: dict) -> VectorRunner:
    """One Verilator build running two modules of `block`'s interface side by side on the same
    inputs, clocked with a reset input: `<name>_amaranth` (outputs `a_<port>`) and `<name>` (`b_<port>`)."""
    from amaranth.lib import wiring

    from tensore.rtl.blackbox import ports
    pins = ports(block)
    ins = [(n, len(v)) for n, (v, f) in pins.items() if f == wiring.In]
    outs = [(n, len(v)) for n, (v, f) in pins.items() if f != wiring.In]
    sig = wiring.Signature({**{n: wiring.In(w) for n, w in ins},
                            **{f"{x}_{n}": wiring.Out(w) for x in "ab" for n, w in outs}})
    names = ["clk", "rst", *(n for n, _ in ins), *(f"{x}_{n}" for x in "ab" for n, _ in outs)]
    text = [f"module {name}_pair({', '.join(names)});", "  input clk, rst;",
            *(f"  input [{w - 1}:0] {n};" for n, w in ins),
            *(f"  output [{w - 1}:0] {x}_{n};" for x in "ab" for n, w in outs)]
    for x, module in (("a", f"{name}_amaranth"), ("b", name)):
        conns = [".clk(clk)", ".rst(rst)", *(f".{n}({n})" for n, _ in ins), *(f".{n}({x}_{n})" for n, _ in outs)]
        text.append(f"  {module} {x}({', '.join(conns)});")
    sources = {**sources, f"{name}_pair.v": "\n".join(text + ["endmodule", ""])}
    return VectorRunner(sig.create(), f"{name}_pair", clocked=True, reset=True, cflags="-O0", sources=sources)


@pytest.mark.parametrize("gen,rows,cols,pack,timing", [
    ("mariana", 4, 8, 2, "contract"), ("mariana", 8, 16, 1, "public"),
    pytest.param("maverick", 4, 16, 4, "contract", marks=pytest.mark.cosim),
    pytest.param("maverick", 4, 8, 1, "public", marks=pytest.mark.cosim)])
def test_rows_verilog_equals_amaranth(gen, rows, cols, pack, timing):
    """The exported row ports (rtl/rows.py `verilog()`, D-T42 (2)) are the Amaranth Rows, each with
    the exported row port inside, cycle by cycle: the request, iterator and write-record chains
    across the rows, LUT substitution, first marks, the transpose delay lines and the reset; under
    row tiles (D-T100) also each tile's launch record entering at its first row and the taps."""
    from amaranth.back import verilog

    from tensore.rtl.blackbox import convert_ports, prototype
    from tensore.rtl.export import block_verilog
    from tensore.rtl.rows import Rows

    cfg = Config(gen, rows, cols, pack, timing=timing)
    writer = prototype(Rows(cfg, black_box=True))
    name, port = writer.module_name, writer.blocks()[0]
    port_v = {f"{port.module_name}.v": block_verilog(port)}
    form = Rows(cfg, black_box=True)
    form_v = verilog.convert(form, name=f"{name}_amaranth", ports=convert_ports(form), emit_src=False)
    pair = _pair(writer, name, {**port_v, f"{name}_amaranth.v": form_v, f"{name}.v": writer.verilog()})
    rng = np.random.default_rng(SEED + rows + cols)
    n = 3000
    inputs = {nm: np.array([int.from_bytes(rng.bytes((w + 7) // 8), "little") % (1 << w) for _ in range(n)], object)
              for nm, w in pair.ins}
    rec, xit = writer.feed.rec.shape(), writer.feed.xit.shape()
    feeds = ["feed", *(f"feed{i}" for i in range(1, writer.taps))]
    span = [("row0", rows if writer.tile else 2), ("rows", cols + 1)]
    for feed in feeds:
        for f, hi in [("valid", 2), ("xpose", 2), ("lut", 2), ("seed", 1), ("fresh", 2), ("mx", 2), ("esize", 3),
                      *span]:
            field = rec[f]
            mask = ((1 << field.width) - 1) << field.offset
            vals = rng.integers(0, hi, n)
            if writer.tile and f == "valid":          # a tile's launch now and then
                vals = rng.random(n) < 0.25
            elif writer.tile and f == "rows":         # half of them within a tile, so they leave at its tap
                vals = np.where(rng.random(n) < 0.5, rng.integers(1, writer.tile + 1, n), vals)
            inputs[f"{feed}_rec"] = np.array([(int(v) & ~mask) | int(x) << field.offset
                                              for v, x in zip(inputs[f"{feed}_rec"], vals)], object)
        num = xit["num"]                                  # iterator extents of 1-4, so they wrap
        inputs[f"{feed}_xit"] = np.array([(int(v) & ~(((1 << num.width) - 1) << num.offset)) |
                                          sum(int(rng.integers(1, 5)) << (num.offset + 16 * d) for d in range(3))
                                          for v in inputs[f"{feed}_xit"]], object)
    inputs["feed_req_shift"] = (rng.random(n) < 0.7).astype(np.int64)
    inputs["advance"] = (rng.random(n) < 0.8).astype(np.int64)
    inputs["rst"] = (rng.random(n) < 0.02).astype(np.int64)
    out = pair(**inputs)
    a = {p.removeprefix("a_"): v for p, v in out.items() if p.startswith("a_")}
    for p in a:
        assert np.array_equal(np.asarray(a[p], object), np.asarray(out[f"b_{p}"], object)), p
    down_first = np.array([int(v) >> (len(writer.down.as_value()) - 1) for v in a["down"]])
    assert 0 < down_first.sum() < n
    assert any(int(v) for v in a["top_valid"])
    for k in range(writer.taps - 1):                  # records leave at each tap, some first vectors
        assert 0 < sum(int(v) >> (len(writer.down.as_value()) - 1) for v in a[f"down{k}"]) < n


def test_psum_bank_verilog_equals_amaranth():
    """The exported PSUM bank (rtl/psum_bank.py `verilog()`, D-T79) is the Amaranth bank, both with
    the exported partition inside, cycle by cycle: writes of both ports (fp32 and bf16 halves,
    accumulate, SR, raw), seed states, zeroing of a partition range, host reads of one partition and
    of every partition's lanes, the monitors and the reset."""
    from amaranth.back import verilog

    from tensore.rtl.blackbox import convert_ports, prototype
    from tensore.rtl.export import block_verilog
    from tensore.rtl.psum import PSUM_WRITE
    from tensore.rtl.psum_bank import ZERO_LAYOUT, PsumBank

    parts, ports_, n = 6, 2, 3000
    writer = prototype(PsumBank(parts, ports_, True, zeros=2))
    name, part = writer.module_name, writer.blocks()[0]
    form = PsumBank(parts, ports_, True, zeros=2)
    form_v = verilog.convert(form, name=f"{name}_amaranth", ports=convert_ports(form), emit_src=False)
    pair = _pair(writer, name, {f"{part.module_name}.v": block_verilog(part), f"{name}_amaranth.v": form_v,
                                f"{name}.v": writer.verilog()})
    rng = np.random.default_rng(SEED + 77)

    def write():                                      # one port's write: a few cells of banks 0 and 5
        w = {"valid": int(rng.random() < 0.7), "offset": int(rng.choice([0, 2, 4, 6, 5 * 2048, 5 * 2048 + 2])),
             "value": int(rng.integers(0, 1 << 32)), "bf16": int(rng.integers(0, 2)),
             "accumulate": int(rng.integers(0, 2)), "raw": int(rng.random() < 0.2), "sr": int(rng.integers(0, 2)),
             "save": int(rng.random() < 0.05)}
        return sum(v << PSUM_WRITE[f].offset for f, v in w.items())

    def zero():                                       # two zeroings of a cycle, overlapping at times
        out = 0
        for g in range(2):
            z = {"valid": int(rng.random() < 0.05), "lo": int(rng.integers(0, parts)),
                 "hi": int(rng.integers(0, parts + 1)), "bank": int(rng.choice([0, 5, 7])), "log2": int(rng.integers(0, 4))}
            out |= sum(v << ZERO_LAYOUT[f].offset for f, v in z.items()) << (g * ZERO_LAYOUT.size)
        return out

    W = PSUM_WRITE.size
    inputs = {
        "wr": np.array([sum(write() << (W * i) for i in range(parts * ports_)) for _ in range(n)], object),
        "state_index": np.array([int(rng.integers(0, 1 << (4 * parts))) for _ in range(n)], object),
        "state_wr": rng.integers(0, 1 << parts, n) * (rng.random(n) < 0.1),
        "state_wr_value": np.array([int.from_bytes(rng.bytes(4 * parts), "little") for _ in range(n)], object),
        "zero": np.array([zero() for _ in range(n)], object),
        "host_part": rng.integers(0, parts, n), "host_word": rng.choice([0, 1, 5 * 512, 5 * 512 + 1], n),
        "host_we": (rng.random(n) < 0.05).astype(np.int64),
        "host_wdata": rng.integers(0, 1 << 32, n), "rst": (rng.random(n) < 0.01).astype(np.int64),
    }
    assert set(inputs) == {nm for nm, _ in pair.ins}
    out = pair(**inputs)
    a = {p.removeprefix("a_"): v for p, v in out.items() if p.startswith("a_")}
    for p in a:
        assert np.array_equal(np.asarray(a[p], object), np.asarray(out[f"b_{p}"], object)), p
    assert any(int(v) for v in a["mon2_valid"]) and len({int(v) for v in a["host_lanes"]}) > 10
