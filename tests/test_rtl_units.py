"""The engine's units alone in Amaranth's simulator (D-T68): one row port against the rules of
docs/timing.md and D-T40, the PSUM write crossbar against its selection rule (the sequencer alone:
tests/test_rtl_seq.py).  A failure here names its unit."""
import numpy as np
import pytest
from amaranth.sim import Simulator

from tensore.model.isa.enums import SeedMode
from tensore.rtl.psum_xbar import PsumWriteXbar
from tensore.rtl.rowport import REC_LAYOUT, WREC_FIELDS, XIT_LAYOUT, RowPort

SEED = 20261130


def _run(dut, bench):
    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(bench)
    sim.run()


# -- one row port ----------------------------------------------------------------------------------------

def _pattern_step(x):
    """One TENSOR3D element step (docs/isa.md): the innermost dimension first, offsets in bytes."""
    i, o = list(x["i"]), list(x["o"])
    for d in range(3):
        if i[d] + 1 < x["num"][d]:
            i[d] += 1
            o[d] += x["step"][d] * x["esize"]
            break
        i[d], o[d] = 0, 0
    return dict(x, i=i, o=o)


def _random_record(rng, r):
    row0 = int(rng.integers(0, r + 2))
    mx, xpose = bool(rng.random() < 0.3), bool(rng.random() < 0.2)
    rec = {f: 0 for f, _ in REC_LAYOUT}
    rec.update(valid=int(rng.random() < 0.7), swap=int(rng.integers(0, 2)), row0=row0,
               rows=int(rng.integers(1, 8)), col0=int(rng.integers(0, 8)), cols=int(rng.integers(1, 8)),
               dtype=int(rng.integers(0, 256)), fp32_mode=int(rng.integers(0, 4)), part=int(rng.integers(0, 100)),
               off0=int(rng.integers(0, 1 << 17)), off1=int(rng.integers(0, 1 << 17)), esize=int(rng.integers(1, 5)),
               fmaps=int(rng.choice([0, 0, 2, 3, 4])), fstride=int(rng.integers(-300, 300)), mx=int(mx),
               pack=int(rng.choice([4, 8] if mx else [1, 2])), maddr=int(rng.integers(0, 1 << 18)),
               mstride=int(rng.integers(-500, 500)), nib=int(rng.integers(0, 2)), scv=int(rng.integers(0, 2)),
               spart=int(rng.integers(0, 64)), soff=int(rng.integers(0, 1 << 17)), xpose=int(xpose),
               seed=int(rng.choice([0, 0, 0, SeedMode.LOAD_SEED, SeedMode.SAVE_SEED])), lut=int(rng.integers(0, 2)),
               dst_part=int(rng.integers(0, 128)), dst_off=int(rng.integers(0, 1 << 14)), vidx=int(rng.integers(0, 32)))
    return rec


def _row_port_model(r, lm, steps):
    """What row port `r` shows in each cycle of `steps` (its inputs), from docs/timing.md and D-T40:
    the answer to a request arrives `lm` cycles after it."""
    rec, x, held, down = {f: 0 for f, _ in REC_LAYOUT}, None, 0, {f: 0 for f in WREC_FIELDS}
    pipe = [dict(rec, par=0) for _ in range(lm)]
    out = []
    for s in steps:
        act = pipe[-1]
        word = s["resp"] if act["fresh"] else held
        in_block = rec["valid"] and rec["row0"] <= r < rec["row0"] + rec["rows"]
        rel, fs = r - rec["row0"], rec["fstride"]
        xs = sum(x["o"]) if x else 0                           # 4-bit transposed codes: nibble offsets
        xo = (x["base"] + (xs >> 1 if rec["nib"] else xs)) if x else 0
        want = {"req_valid": int(in_block and rec["fresh"] and rec["seed"] in (0, SeedMode.LOAD_SEED)),
                "req_part": (rec["part"] if rec["xpose"] else rec["part"] + rel) % 128,
                "req_off0": (xo if rec["xpose"] else rec["off0"]) % (1 << 18),
                "req_off1": (rec["off0"] + fs if rec["fmaps"] else rec["off1"]) % (1 << 18),
                "req_off3": (rec["off0"] + 3 * fs) % (1 << 18),
                "req_spart": (rec["spart"] + (rel & (~3 if rec["pack"] == 8 else ~7))) % 128,   # the scale block
                "row_valid": int(act["valid"] and act["row0"] <= r < act["row0"] + act["rows"]),
                "row_first": int(r == act["row0"]),
                "row_cols": (r, r + 1) if act["xpose"] else (act["col0"], act["col0"] + act["cols"]),
                "row_s0": word & 0xFF if act["mx"] else word >> 4 * act["par"] & 0xF if act["xpose"] and act["nib"]
                else word & 0xFFFFFFFF,
                "row_sa": ((word >> 64 & 0xFF) - 127) if act["scv"] else 0,
                "down": dict(down)}
        out.append(want)
        held = word
        if s["advance"]:
            down = {f: act[f] for f in WREC_FIELDS} if r == 0 else dict(s["down"])
        pipe = [dict(rec, par=rec["nib"] & xs & 1)] + pipe[:-1]
        if s["shift"]:
            x = dict(s["xit"]) if r == 0 else _pattern_step(s["xit"])
            rec = dict(s["rec"], fresh=s["rec"]["valid"])
        else:
            rec = dict(rec, fresh=0)
    return out


@pytest.mark.parametrize("r,pack,latency", [(0, 2, 2), (3, 8, 3)])
def test_row_port_alone(r, pack, latency):
    """Random request records, iterator states, answers and write records through row port `r`:
    its moving request (partition, offsets, MX scale partition), the row's moving value the answer
    becomes `latency - 1` cycles later (or the held word), and the write record one row down per
    array stage."""
    rng = np.random.default_rng(SEED + r)
    steps = []
    for _ in range(300):
        xit = {"base": int(rng.integers(0, 1 << 16)), "i": [int(v) for v in rng.integers(0, 3, 3)],
               "o": [int(v) for v in rng.integers(0, 64, 3)], "num": [int(v) for v in rng.integers(1, 4, 3)],
               "step": [int(v) for v in rng.integers(-3, 4, 3)], "esize": int(rng.integers(1, 5))}
        steps.append({"rec": _random_record(rng, r), "xit": xit, "shift": bool(rng.random() < 0.6),
                      "advance": bool(rng.random() < 0.7),
                      "resp": int.from_bytes(rng.bytes(16), "little"),
                      "down": {f: int(rng.integers(0, 2)) for f in WREC_FIELDS}})
    want = _row_port_model(r, latency - 1, steps)
    dut = RowPort("mariana", pack, latency)
    got = []

    async def bench(ctx):
        ctx.set(dut.index, r)
        for s in steps:
            ctx.set(dut.req_in, REC_LAYOUT.const(s["rec"]))
            ctx.set(dut.xit_in, XIT_LAYOUT.const(s["xit"]))
            ctx.set(dut.down_in, dut.down_in.shape().const(s["down"]))
            ctx.set(dut.req_shift, s["shift"])
            ctx.set(dut.advance, s["advance"])
            ctx.set(dut.mv_resp, s["resp"])
            q, a, d = ctx.get(dut.mv_req), ctx.get(dut.row_in), ctx.get(dut.down_out)
            got.append({"req_valid": q.valid, "req_part": q.part, "req_off0": q.off0, "req_off1": q.off1,
                        "req_off3": q.off3, "req_spart": q.spart, "row_valid": a.valid, "row_first": a.first,
                        "row_cols": (a.col_lo, a.col_hi), "row_s0": a.code.s0, "row_sa": a.sa,
                        "down": {f: getattr(d, f) for f in WREC_FIELDS}})
            await ctx.tick()

    _run(dut, bench)
    for t, (w, g) in enumerate(zip(want, got)):
        if not w["req_valid"]:                        # the request's fields matter only when it is made
            g = dict(g, **{k: w[k] for k in ("req_part", "req_off0", "req_off1", "req_off3", "req_spart")})
        if not w["row_valid"]:
            g = dict(g, **{k: w[k] for k in ("row_first", "row_cols", "row_s0", "row_sa")})
        assert g == w, f"cycle {t}"
    assert sum(w["req_valid"] for w in want) > 20 and sum(w["row_valid"] for w in want) > 20


# -- the PSUM write crossbar -----------------------------------------------------------------------------

def _xbar_model(parts, cols, ports, half, v):
    """The writes of each partition in the model's order (D-T40 (6)): the columns from the last to
    the first (older micro-ops first), a pair's slot-1 column (x + half) moved to just after its
    slot-0 column x; port k takes the k-th.  More writes than ports, or a partition past the last,
    is `unsupported`; a LoadSeed column takes no port; the SR state port follows the seed column
    naming the partition (the first of them, counting from the first column)."""
    writes = {p: [] for p in range(parts)}
    state = [None] * parts
    bad = {"partition": 0, "ports": 0}
    for c in reversed(range(cols)):
        p = v["part"][c]
        if not v["strobe"][c]:
            continue
        if p >= parts:
            bad["partition"] = 1
            continue
        if v["seed"][c]:
            state[p] = (v["state"][c], int(v["seed"][c] == SeedMode.LOAD_SEED), v["loaded"][c])
        if v["seed"][c] != SeedMode.LOAD_SEED:
            writes[p].append(c)
    wr = [[None] * parts for _ in range(ports)]
    for p, cs in writes.items():
        for x in [c for c in cs if c < cols - half and v["pair"][c]]:
            cs.remove(x + half)
            cs.insert(cs.index(x) + 1, x + half)
        bad["ports"] |= len(cs) > ports
        for k, c in enumerate(cs[:ports]):
            wr[k][p] = {"valid": 1, "offset": v["offset"][c], "value": v["value"][c],
                        "save": int(v["seed"][c] == SeedMode.SAVE_SEED), "bf16": v["bf16"][c],
                        "accumulate": v["accumulate"][c], "raw": v["raw"][c], "sr": v["sr"]}
    return wr, state, bad


def _xbar_vector(rng, parts, cols, half):
    """Random column writes: collisions, partitions out of range, seeds, and c256 pairs (x, x + half)
    where they can be: both writes to one partition, no column between writing it."""
    def ints(hi):
        return [int(x) for x in rng.integers(0, hi, cols)]
    v = {"strobe": [int(x) for x in rng.random(cols) < 0.5], "part": ints(parts + 1 if rng.random() < 0.3 else parts),
         "offset": ints(1 << 14), "value": ints(1 << 32), "seed": [int(x) for x in rng.choice(3, cols, p=[.8, .1, .1])],
         "bf16": ints(2), "accumulate": ints(2), "raw": ints(2), "sr": int(rng.integers(0, 2)), "state": ints(16),
         "loaded": ints(1 << 32), "pair": [0] * cols}
    for x in range(cols - half):
        y = x + half
        if rng.random() < 0.5:
            v["part"][y] = v["part"][x]
        takes = [c for c in range(cols) if v["strobe"][c] and v["seed"][c] != SeedMode.LOAD_SEED]
        same = [c for c in takes if v["part"][c] == v["part"][x]]
        if {x, y} <= set(same) and not [c for c in same if x < c < y] and v["part"][x] < parts:
            v["pair"][x] = int(rng.random() < 0.7)
    return v


@pytest.mark.parametrize("parts,cols,ports,half", [(8, 8, 1, 8), (6, 8, 2, 4), (3, 8, 3, 4), (4, 6, 2, 6)])
def test_psum_xbar_alone(parts, cols, ports, half):
    """Random column writes: every port's write record, the SR state port and `unsupported` are the
    selection rule's."""
    rng = np.random.default_rng(SEED + parts + ports)
    dut = PsumWriteXbar(parts, cols, ports, half)
    vectors = [_xbar_vector(rng, parts, cols, half) for _ in range(300)]
    outcomes = []

    async def bench(ctx):
        for v in vectors:
            for name in ("offset", "value", "seed", "state", "loaded", "part"):
                for c in range(cols):
                    ctx.set(getattr(dut, name)[c], v[name][c])
            for name in ("strobe", "bf16", "accumulate", "raw") + (("pair",) if half < cols else ()):
                ctx.set(getattr(dut, name), sum(b << c for c, b in enumerate(v[name][:len(getattr(dut, name))])))
            ctx.set(dut.sr, v["sr"])
            wr_want, state_want, bad_want = _xbar_model(parts, cols, ports, half, v)
            got_bad = ctx.get(dut.unsupported)
            assert {"partition": got_bad.partition, "ports": got_bad.ports} == bad_want
            outcomes.append((bad_want["ports"], sum(v["pair"])))
            for p in range(parts):
                for k in range(ports):
                    got = ctx.get(dut.wr[k][p])
                    want = wr_want[k][p]
                    if want is None:
                        assert got.valid == 0 and got.save == 0, (k, p)
                    else:
                        assert {f: getattr(got, f) for f in want} == want, (k, p)
                if state_want[p] is not None:
                    assert (ctx.get(dut.state_index[p]), (ctx.get(dut.state_wr) >> p) & 1,
                            ctx.get(dut.state_wr_value[p])) == state_want[p], p
                else:
                    assert (ctx.get(dut.state_wr) >> p) & 1 == 0, p
            await ctx.delay(1e-9)

    sim = Simulator(dut)
    sim.add_testbench(bench)
    sim.run()
    full = [f for f, _ in outcomes]
    assert 0 < sum(full) < len(vectors)                 # both outcomes occur
    assert (half == cols) == (sum(n for _, n in outcomes) == 0)      # pairs occur where there are halves


def test_record_cuts_and_extends_fields_in_layout_order():
    """wires.record: a layout's record from field values, each cut or extended as `eq` would."""
    from amaranth.hdl import Module, Signal, signed
    from amaranth.lib import data
    from amaranth.sim import Simulator
    from tensore.rtl.wires import record
    layout = data.StructLayout({"a": 4, "b": signed(6), "c": 3})
    a, b, c = Signal(8), Signal(signed(3)), Signal(2)
    out = Signal(layout)
    m = Module()
    m.d.comb += out.eq(record(layout, a=a, b=b, c=c))
    seen = []

    async def bench(ctx):
        for va, vb, vc in ((0xAB, -3, 2), (0x0F, 3, 1)):
            ctx.set(a, va)
            ctx.set(b, vb)
            ctx.set(c, vc)
            seen.append((ctx.get(out.a), ctx.get(out.b), ctx.get(out.c)))
    sim = Simulator(m)
    sim.add_testbench(bench)
    sim.run()
    assert seen == [(0xB, -3, 2), (0xF, 3, 1)]


def test_bus_signals_keep_one_name():
    """A Bus (D-T81) indexes like an ArrayLayout, but its signal has no debug wire per element or
    field in the Verilog; a plain ArrayLayout's has."""
    from amaranth.back import verilog
    from amaranth.hdl import Module, Signal
    from amaranth.lib import data, wiring
    from amaranth.lib.wiring import In, Out
    from tensore.rtl.interfaces import Bus
    rec = data.StructLayout({"x": 3, "y": 5})

    class Pass(wiring.Component):
        def __init__(self, kind):
            super().__init__({"i": In(kind(rec, 4)), "o": Out(kind(rec, 4))})

        def elaborate(self, platform):
            m = Module()
            inner = Signal(self.i.shape(), name="inner")
            m.d.comb += [inner.eq(self.i), self.o.eq(inner)]
            m.d.comb += self.o[2].y.eq(inner[1].x)               # indexed as an ArrayLayout
            return m
    bus, plain = (verilog.convert(Pass(k), name="p", emit_src=False) for k in (Bus, data.ArrayLayout))
    assert "inner[2].y" not in bus and "inner[2].y" in plain


def test_row_port_module_names_tell_circuits_apart():
    """rtl/export.py writes a block once per module name (blocks_of) and Verilator builds one
    hierarchical block per name, so two row ports that elaborate to different circuits (their RTLIL
    under one top name) must not share a name: transpose rounds, sparse32 and row tiles included."""
    from tensore.cosim.formal import amaranth_rtlil
    ports = [RowPort("mariana", 2, 2, rows=8, rounds=r) for r in (1, 2, 4)] + \
        [RowPort("mariana", 2, 2, rows=8, rounds=2, sparse32=True), RowPort("mariana", 2, 2, rows=8, rounds=2, tile=4)]
    texts = [amaranth_rtlil(p) for p in ports]
    assert len(set(texts)) == len(ports)            # the parameters do change the circuit
    assert len({p.module_name for p in ports}) == len(ports), [p.module_name for p in ports]
