"""Signatures built from records (docs/decisions.md D-T68).

A unit's request / response pair is a sub-signature (`request_port`); a per-row or per-partition
interface of the engine is field-major (`record(arrays(layout, n))`: one array over the rows per
field, the Verilog ports `mv_req_valid`, `mv_req_part`, ... the testbenches read), and `scatter`
drives it from the rows' own records."""
from amaranth.hdl import Format, Value
from amaranth.lib import data, wiring
from amaranth.lib.wiring import In, Out


class Bus(data.ArrayLayout):
    """An array over the rows, columns, partitions or ports of a unit (D-T81): indexed as any
    ArrayLayout, but its signals keep one name in the Verilog and the waveforms, without a debug
    wire per element and field (Amaranth names every field of a layout's signal: on a 128 x 256
    engine such aliases were 60% of the top's Verilog)."""

    def format(self, value, format_spec):
        if format_spec != "":
            raise ValueError(f"Format specifier {format_spec!r} is not supported for buses")
        return Format("{}", Value.cast(value))


def record(fields: dict) -> wiring.Signature:
    """A signature of outputs, one per field: {name: shape}."""
    return wiring.Signature({name: Out(shape) for name, shape in fields.items()})


def request_port(request: dict, response) -> wiring.Signature:
    """`req` (the request's fields, out) and `resp.data` (the answer, in)."""
    return wiring.Signature({"req": Out(record(request)), "resp": In(record({"data": response}))})


def arrays(layout: data.StructLayout, count: int) -> dict:
    """`count` records of `layout` field-major: {field: an array of `count` of its shape}."""
    return {name: Bus(field.shape, count) for name, field in layout}


def scatter(m, records, port):
    """Drive `port` (a `record(arrays(layout, n))` interface) from `records` (views of `layout`):
    field f of record i goes to element i of member f."""
    members = list(port.signature.flatten(port))
    for i, rec in enumerate(records):
        layout = rec.shape()
        if [path for path, _, _ in members] != [(name,) for name, _ in layout]:
            raise ValueError("the port's members are not the records' fields")
        for (path, _, out), (name, _) in zip(members, layout):
            m.d.comb += out[i].eq(rec[name])
