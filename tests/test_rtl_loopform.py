"""The loop-form array (rtl/array_loop.py, D-T60) is the same circuit as the Amaranth array: random
input vectors, cycle by cycle, through Verilator, against the Amaranth array exported by Amaranth's
own Verilog backend; and a block whose registers read each other runs the same in loop form."""
import numpy as np
import pytest
from amaranth.hdl import Cat, Module, Mux, Signal
from amaranth.lib import wiring

from tensore.cosim.vectors import VectorRunner
from tensore.model.dtypes import Dtype
from tensore.rtl.array import Array
from tensore.rtl.array_loop import loop_array_verilog
from tensore.rtl.config import Config
from tensore.rtl.fp.pe_mac import parse_dtypes
from tensore.rtl.loopform import Netlist, yosys_netlist
from tensore.rtl.pe import act_layout, weight_layout

pytestmark = pytest.mark.verilator
SEED = 20261201
DTYPES = [int(d) for d in (Dtype.BFLOAT16, Dtype.FP16, Dtype.FP32, Dtype.FP8_EXP4, Dtype.FP8_EXP5,
                           Dtype.FP8_EXP3, Dtype.INT4)]


def _wide(rng, width, n):
    return np.array([int.from_bytes(rng.bytes((width + 7) // 8), "little") % (1 << width) for _ in range(n)],
                    object)


def _set(words, layout, field, values):
    """Overwrite `field` of each packed struct in `words` (object ints)."""
    f = layout[field]
    mask = ((1 << f.width) - 1) << f.offset
    return np.array([(int(x) & ~mask) | ((int(v) << f.offset) & mask) for x, v in zip(words, values)], object)


def _stimulus(rng, rows, cols, pack, n, sparse32=False, dtypes=None):
    """Random array inputs; moving values and weights of `dtypes` (a specialised build's) or any."""
    act, wl = act_layout(pack, sparse32), weight_layout(pack)
    kinds = [int(d) for d in dtypes] if dtypes else DTYPES
    lanes = []
    for r in range(rows):                               # plausible moving values: mostly valid, real dtypes
        x = _wide(rng, act.size, n)
        x = _set(x, act, "valid", rng.random(n) < 0.85)
        x = _set(x, act, "dtype", rng.choice(kinds, n))
        x = _set(x, act, "col_lo", rng.integers(0, 2, n))
        x = _set(x, act, "col_hi", rng.integers(cols - 1, cols + 1, n))
        x = _set(x, act, "fmaps", np.where(rng.random(n) < 0.8, 0, rng.integers(2, 5, n)))
        x = _set(x, act, "xpose", rng.random(n) < 0.05)
        x = _set(x, act, "multi", rng.random(n) < 0.3)
        x = _set(x, act, "sa", rng.integers(-3, 4, n))
        lanes.append(x)
    row_in = np.array([sum(int(lanes[r][i]) << (act.size * r) for r in range(rows)) for i in range(n)], object)
    words = []
    for c in range(cols):
        x = _set(_wide(rng, wl.size, n), wl, "dtype", rng.choice(kinds, n))
        words.append(_set(x, wl, "scale", rng.integers(-3, 4, n)))
    wl_data = np.array([sum(int(words[c][i]) << (wl.size * c) for c in range(cols)) for i in range(n)], object)
    return {"row_in": row_in, "wl_data": wl_data, "advance": (rng.random(n) < 0.8).astype(np.int64),
            "phase": rng.integers(0, 4, n), "wl_valid": (rng.random(n) < 0.3).astype(np.int64),
            "wl_row": rng.integers(0, rows, n), "wl_cols": rng.integers(0, 1 << cols, n),
            "tag_valid": (rng.random(n) < 0.1).astype(np.int64), "tag_row": rng.integers(0, rows, n),
            "tag_cols": rng.integers(0, 1 << cols, n), "tag_data": rng.integers(0, 1 << (4 * cols), n),
            "top_psum": _wide(rng, 32 * cols, n), "top_valid": rng.integers(0, 1 << cols, n)}


def _column_stimulus(rng, rows, cols, pack, n, dtypes=None):
    """Random column-serial writes (rtl/column_load.py): per row a 2-bit mask, mostly a first column
    inside the array, two weight records of real dtypes."""
    wl, kinds = weight_layout(pack), [int(d) for d in dtypes] if dtypes else DTYPES
    per_row = [(np.where(rng.random(n) < 0.3, rng.integers(1, 4, n), 0), rng.integers(0, cols + 1, n),
                [_set(_set(_wide(rng, wl.size, n), wl, "dtype", rng.choice(kinds, n)), wl, "scale",
                      rng.integers(-3, 4, n)) for _ in range(2)]) for _ in range(rows)]
    pack_rows = lambda vals, w: np.array([sum(int(v[i]) << (w * r) for r, v in enumerate(vals))    # noqa: E731
                                          for i in range(n)], object)
    recs = [np.array([int(a[i]) | int(b[i]) << wl.size for i in range(n)], object) for _, _, (a, b) in per_row]
    return {"cw_valid": pack_rows([v for v, _, _ in per_row], 2), "cw_col": pack_rows([c for _, c, _ in per_row], 9),
            "cw_data": pack_rows(recs, 2 * wl.size)}


@pytest.mark.parametrize("gen,rows,cols,pack,sparse32,dtypes,column_loads", [
    ("mariana", 2, 4, 2, False, None, False), ("mariana", 2, 4, 2, False, None, True),
    ("mariana", 4, 2, 2, False, None, "tiles"),
    pytest.param("maverick", 2, 3, 4, False, None, False, marks=pytest.mark.cosim),
    pytest.param("cayman", 2, 2, 1, False, None, False, marks=pytest.mark.cosim),
    pytest.param("mariana", 2, 2, 1, True, None, False, marks=pytest.mark.cosim),
    pytest.param("maverick", 2, 3, 1, False, ("bf16",), False, marks=pytest.mark.cosim)])
# MAVERICK (~80 s), one element per PE, the sparse32 and a bf16-only build (D-T83; Yosys splits its
# active weights, D-T60) in make cosim; make test's Verilator runs of the library use the loop form
# of every generation; with the column-serial writes (column_loads) too; "tiles": `public`'s row
# tiles' sums' taps (D-T100, four tiles of one row), the others one tap (`contract`)
def test_loop_array_equals_amaranth_array(gen, rows, cols, pack, sparse32, dtypes, column_loads):
    tiles, column_loads = column_loads == "tiles", bool(column_loads) and column_loads != "tiles"
    name = f"tensore_array_{gen}{'_' + '_'.join(dtypes) if dtypes else ''}{'_cw' if column_loads else ''}" \
        f"{'_tiles' if tiles else ''}"
    dtypes = parse_dtypes(gen, dtypes)
    cfg = Config(gen, rows, cols, pack, dtypes=dtypes, sparse32=sparse32, timing="public" if tiles else "contract")
    arr = Array(cfg, column_loads=column_loads)
    src = loop_array_verilog(gen, rows, cols, pack, name, sparse32=sparse32, dtypes=dtypes, column_loads=column_loads,
                             tile=arr.tile)
    assert "act_line" in src and "pe_act_out" not in src        # the moving value as a delay line per row
    loop = VectorRunner(arr, name, clocked=True, reset=True, cflags="-O0", sources={f"{name}.sv": src})
    ref = VectorRunner(arr, "tensore_array_flat", clocked=True, reset=True, cflags="-O0")
    rng = np.random.default_rng(SEED + rows * cols + pack)
    inputs = _stimulus(rng, rows, cols, pack, 3000, sparse32, dtypes)
    if column_loads:
        inputs |= _column_stimulus(rng, rows, cols, pack, 3000, dtypes)
        inputs["wl_valid"] = inputs["wl_valid"] & (rng.random(3000) < 0.3)       # mostly the column writes
    inputs["rst"] = (rng.random(3000) < 0.005).astype(np.int64)     # resets among the moves
    a, b = ref(**inputs), loop(**inputs)
    for port in a:
        same = np.asarray(a[port], object) == np.asarray(b[port], object)
        assert same.all(), f"{port} differs first at cycle {int(np.argmin(same))}"
    for port in ["out_valid", *(f"tap{k}_valid" for k in range(arr.taps - 1))]:
        assert np.count_nonzero(np.asarray(a[port], np.int64)) > 100, port


class _Rotate(wiring.Component):
    """Two registers that load each other (a <-> b), one whose next value is a mux holding it, shared
    with another register's logic (as the PE's active weights are), one holding on the mux's other arm
    (an enable of low polarity), and two that load the halves of one such mux (a register Yosys split
    out of a wider signal)."""

    def __init__(self):
        super().__init__({"en": wiring.In(1), "x": wiring.In(8), "a": wiring.Out(8), "b": wiring.Out(8),
                          "c": wiring.Out(8), "d": wiring.Out(8), "f": wiring.Out(8), "g": wiring.Out(8),
                          "s": wiring.Out(8), "k": wiring.Out(8)})

    def elaborate(self, platform):
        m = Module()
        a, b, c = Signal(8, init=1), Signal(8, init=2), Signal(8, init=3)
        d, f = Signal(8), Signal(8)
        with m.If(self.en):
            m.d.sync += [a.eq(b), b.eq(a), c.eq(a ^ self.x)]
        e = Mux(self.x[0], a + 1, d)
        m.d.sync += [d.eq(e), f.eq(e + c)]
        lo, hi = Signal(4), Signal(4)
        h = Signal(8)
        g = Mux(self.x[1], a, Cat(lo, hi))
        m.d.sync += [lo.eq(g[:4]), hi.eq(g[4:]), h.eq(g ^ self.x)]
        k = Signal(8)
        m.d.sync += k.eq(Mux(self.x[2], k, self.x ^ a))          # holds while x[2]: loads on its low level
        m.d.comb += [self.a.eq(a), self.b.eq(b), self.c.eq(c), self.d.eq(d), self.f.eq(f), self.g.eq(h),
                     self.s.eq(Cat(lo, hi)), self.k.eq(k)]
        return m


def test_loop_form_writes_in_place_through_read_cycles():
    """rtl/loopform.py updates registers in place: a register read by another's load is written after
    it, a read cycle goes through a temporary, a hold mux becomes an enable (of either polarity); the
    block in loop form runs as the Amaranth block does, cycle by cycle, through reset."""
    from tensore.rtl.blackbox import prototype
    net = Netlist(yosys_netlist(_Rotate(), "rot"), "n_")
    order, staged = net.writes, net.staged
    assert staged and sorted(order + staged) == list(range(len(net.regs)))
    assert any(r.en and "EN" not in r.cell["connections"] for r in net.regs)     # the hold mux, an enable
    halves = [r for r in net.regs if r.width == 4]                                 # lo and hi
    assert len(halves) == 2 and all(r.en and "EN" not in r.cell["connections"] for r in halves)
    assert any(r.en and r.en[1] == 0 for r in net.regs)                           # k: loads when x[2] is 0
    ins = ["en", "x"]
    state = [f"q{k}" for k in range(len(net.regs))]
    outs = ["a", "b", "c", "d", "f", "g", "s", "k"]
    text = ["module rot_loop(clk, rst, en, x, a, b, c, d, f, g, s, k);", "  input clk, rst, en;", "  input [7:0] x;",
            "  output [7:0] a, b, c, d, f, g, s, k;",
            *(f"  logic [{r.width - 1}:0] {q};" for r, q in zip(net.regs, state)), *net.declarations(),
            "  always_ff @(posedge clk) begin", *net.step({n: n for n in ins}, state, "rst", "    "), "  end",
            *(f"  assign {o} = {net.output(o, state)};" for o in outs), "endmodule", ""]
    loop = VectorRunner(prototype(_Rotate()), "rot_loop", clocked=True, reset=True, cflags="-O0",
                        sources={"rot_loop.sv": "\n".join(text)})
    ref = VectorRunner(_Rotate(), "rot_ref", clocked=True, reset=True, cflags="-O0")
    rng = np.random.default_rng(SEED)
    n = 500
    rst = (rng.random(n) < 0.03).astype(np.int64)
    rst[0] = 1                                  # the loop form's registers have no power-on value
    inputs = {"en": rng.integers(0, 2, n), "x": rng.integers(0, 256, n), "rst": rst}
    a, b = ref(**inputs), loop(**inputs)
    for port in outs:
        assert np.array_equal(np.asarray(a[port], np.int64), np.asarray(b[port], np.int64)), port


@pytest.mark.parametrize("gen,pack,sparse32,dtypes", [
    ("mariana", 2, False, None), ("cayman", 1, False, None), ("maverick", 4, False, None), ("mariana", 1, True, None),
    ("maverick", 1, False, ("bf16",))])
def test_every_pe_register_is_named_after_its_signal(gen, pack, sparse32, dtypes):
    """Every register of every PE flavour (generations, sparse32, a bf16-only build) is named after
    the PE signal it holds, so the loop form's state arrays `pe_<register>` say what they are; the
    shadow weights too, which Amaranth leaves unnamed (`$signal`: all but the last element of a tuple
    assignment), named through their source line (rtl/loopform.py `anonymous_names`)."""
    import re
    from tensore.rtl.pe import PE
    net = Netlist(yosys_netlist(PE(gen, pack, dtypes=parse_dtypes(gen, dtypes), sparse32=sparse32), "pe"), "n_")
    assert not [n for n in net.reg_names if re.fullmatch(r"q\d+", n)], net.reg_names
    signals = {re.sub(r"_\d+$", "", n) for n in net.reg_names}          # shadow_0: the part Yosys kept
    assert signals == {"shadow", "active", "pending", "acc", "tag", "act_out", "psum_out", "psum_valid_out"}
