"""The Python API with numpy / ml_dtypes arrays (D-T65): matmul operands, SBUF images, the engine's
SBUF argument, the input loader, and a docstring on every public name."""
import inspect

import ml_dtypes
import numpy as np
import pytest

from tensore.cosim import oracle, programs
from tensore.inputs import InputError, load_sbuf, read_program
from tensore.model import dtypes as dt
from tensore.model.array import matmul
from tensore.model.engine import Engine
from tensore.model.isa.asm import assemble
from tensore.model.sbuf import Sbuf, image_bytes

from tests.fixtures import fp32_bits


def test_matmul_takes_ml_dtypes_and_float_arrays():
    """bfloat16 arrays, float32 / float64 arrays of bf16 values and the codes all give the bits of
    cosim.oracle's exact chain (which decodes through ml_dtypes, not model.dtypes)."""
    rng = np.random.default_rng(7)
    w = rng.standard_normal((16, 5)).astype(ml_dtypes.bfloat16)
    a = (rng.standard_normal((16, 9)) * 100).astype(ml_dtypes.bfloat16)
    want = oracle.matmul(w.view(np.uint16), a.view(np.uint16), in_dtype="bf16", gen="mariana")
    for sw, sa in ((w, a), (w.astype(np.float32), a.astype(np.float64)), (w.view(np.uint16), a.view(np.uint16))):
        got = matmul(sw, sa, in_dtype="bf16", gen="mariana")
        assert np.array_equal(fp32_bits(got), fp32_bits(want)), (sw.dtype, sa.dtype)


def test_matmul_fp8_by_format_and_values():
    rng = np.random.default_rng(8)
    w = rng.uniform(-8, 8, (8, 4)).astype(ml_dtypes.float8_e4m3fn)
    a = rng.uniform(-8, 8, (8, 6)).astype(ml_dtypes.float8_e4m3fn)
    want = oracle.matmul(w.view(np.uint8), a.view(np.uint8), in_dtype="fp8_e4m3", gen="mariana")
    got = matmul(w, a, in_dtype="fp8_e4m3", gen="mariana")
    assert np.array_equal(fp32_bits(got), fp32_bits(want))
    # on CAYMAN FP8_EXP4 is the IEEE-style E4M3 (max 240): an e4m3fn array is values there
    ok = matmul(w, a, in_dtype="fp8_e4m3", gen="cayman")
    assert np.array_equal(fp32_bits(ok), fp32_bits(want))
    with pytest.raises(ValueError, match=r"stationary: 1 of 32 values are not e4m3 values \(the first is 448.0"):
        matmul(np.where(np.arange(32).reshape(8, 4) == 3, ml_dtypes.float8_e4m3fn(448), w).astype(
            ml_dtypes.float8_e4m3fn), a, in_dtype="fp8_e4m3", gen="cayman")


def test_matmul_refuses_inexact_and_unknown():
    ones = np.ones((4, 4), np.float32)
    with pytest.raises(ValueError, match=r"moving: 16 of 16 values are not bf16 values \(the first is "
                       r"1.100000023841858, which rounds to 1.1015625\); round explicitly, e.g. from_fp32"):
        matmul(ones, ones * np.float32(1.1), in_dtype="bf16", gen="mariana")
    with pytest.raises(ValueError, match=r"not bf16 values \(the first is 0.1\)"):
        matmul(ones, np.full((4, 4), 0.1), in_dtype="bf16", gen="mariana")
    with pytest.raises(TypeError, match="stationary: bool elements are neither codes"):
        matmul(ones > 0, ones, in_dtype="bf16", gen="mariana")
    with pytest.raises(TypeError, match="moving: complex64 elements"):
        matmul(ones, ones + 1j, in_dtype="bf16", gen="mariana")
    # the explicit rounding the message names
    r = matmul(ones, dt.from_fp32(ones * np.float32(1.1), "bf16", "mariana"), in_dtype="bf16", gen="mariana")
    assert r[0, 0] == np.float32(4 * 1.1015625)


def test_codes_of_keeps_bits_of_own_format():
    x = np.array([np.nan, -0.0, 1.0], np.float32)
    x.view(np.uint32)[0] = 0x7FC00123                           # a NaN payload survives bit for bit
    assert np.array_equal(dt.codes_of(x, "fp32", "mariana"), x.view(np.uint32))
    assert dt.codes_of(np.array([-0.0], ml_dtypes.bfloat16), "bf16", "mariana")[0] == 0x8000
    assert dt.codes_of(np.array([-1], np.int8), "int8", "mariana")[0] == 0xFF


def test_sbuf_from_arrays():
    img = np.arange(64, dtype=np.uint8).reshape(2, 32)
    assert Sbuf(img).data is img                                  # bytes are shared, not copied
    bf = np.array([[1.5, -2.0], [3.0, 0.25]], ml_dtypes.bfloat16)
    assert np.array_equal(Sbuf(bf).data, bf.view(np.uint8))
    f32 = np.array([[1.0]], ">f4")                                # big-endian storage: little-endian bytes
    assert image_bytes(f32).tolist() == [[0, 0, 0x80, 0x3F]]
    assert image_bytes(np.zeros((3, 4, 2), np.uint16)).shape == (3, 16)
    void = bf.view("V2")                                          # what np.save makes of bfloat16
    assert np.array_equal(image_bytes(void), bf.view(np.uint8))
    for bad, msg in ((np.array([[300]]), r"int64 elements have no exact SBUF form \(values 300..300 are not bytes\)"),
                     (np.array([[1]]), r"values 0..255 that mean bytes: x.astype\(np.uint8\)"),
                     (np.ones((2, 2)), "float64 elements have no exact SBUF form"),
                     (np.ones((2, 2), bool), "bool elements"),
                     (np.ones((2, 2), ml_dtypes.int4), "4-bit codes; SBUF holds two per byte"),
                     (np.ones((2, 2), ml_dtypes.float8_e4m3fnuz), "float8_e4m3fnuz elements"),
                     (np.ones(4, np.uint8), r"expected \[partitions, ...\], got shape \(4,\)"),
                     (np.zeros((129, 4), np.uint8), "129 partitions")):
        with pytest.raises(ValueError, match=msg):
            Sbuf(bad)


def test_engine_takes_an_ndarray():
    """Engine(sbuf=ndarray) with the library's bytes, and with the same bytes as a bfloat16 array:
    PSUM meets the library's independent expectation."""
    p = programs.accumulate_group("mariana")
    data = assemble(p.text, "mariana")
    for image in (p.sbuf.copy(), p.sbuf.copy().view(ml_dtypes.bfloat16)):
        eng = Engine("mariana", rows=p.rows, cols=p.cols, sbuf=image)
        trace = eng.run(data)
        assert not trace.stalled and all(o.error == 0 for o in trace.ops)
        for (part, bank), (off, bits) in p.expect_fp32.items():
            start = (bank * 2048 + off) // 4
            assert np.array_equal(eng.psum.cells(4)[part, start:start + bits.size], bits)


def test_refusal_reason_matches_its_code():
    """The error code is the smallest among a descriptor's violations; the reason shown first is that one."""
    text = ("matmul in_dtype=bf16 out_dtype=fp32 rows=8 cols=8 wait=94 src=(start_addr=sbuf(0,0), "
            "step_elem=[1,0,0], num_elem=[4,57089,1]) dst=(start_addr=psum(0,0,0), step_elem=[1,0,0], num_elem=[4,1,1])")
    trace = Engine("mariana", rows=8, cols=8).run(assemble(text, "mariana"))
    op = trace.ops[0]
    assert len(op.violations) >= 2 and {v.code for v in op.violations} >= {op.error}
    assert op.violations[0].code == op.error == min(v.code for v in op.violations)
    assert f"refused {op.error.name} ({op.error.value:#04x}) at cycle" in trace.summary()
    assert f": {op.violations[0].detail}" in trace.summary() and trace.summary().count(op.error.name) == 1


def test_loader_tells_text_from_binary_by_content(tmp_path):
    p = programs.accumulate_group("mariana")
    data = assemble(p.text, "mariana")
    (tmp_path / "prog.bin").write_text(p.text)                    # text under a .bin name
    (tmp_path / "prog.txt").write_bytes(data)                     # descriptors under a .txt name
    text_file, bin_file = read_program(tmp_path / "prog.bin", "mariana"), read_program(tmp_path / "prog.txt", "mariana")
    assert text_file.data == bin_file.data == data and not text_file.binary and bin_file.binary
    assert assemble(bin_file.source_text("mariana"), "mariana") == data and text_file.name == "prog"
    (tmp_path / "cut.bin").write_bytes(data[:100])
    with pytest.raises(InputError, match=r"cut.bin: neither assembly text \(byte 0x.. at offset \d+ is not UTF-8\) "
                       r"nor binary descriptors \(100 bytes is not a multiple of 64\)"):
        read_program(tmp_path / "cut.bin", "mariana")


def test_loader_sbuf_files(tmp_path):
    img = np.arange(256, dtype=np.uint8).reshape(2, 128)
    np.savez(tmp_path / "a.npz", weights=img, other=np.zeros(3))
    np.save(tmp_path / "b.npy", img.view(ml_dtypes.bfloat16))
    assert np.array_equal(load_sbuf(f"{tmp_path / 'a.npz'}:weights"), img)
    assert np.array_equal(load_sbuf(tmp_path / "b.npy"), img)     # saved as void: the bytes
    assert np.array_equal(Sbuf(load_sbuf(tmp_path / "a.npz", "weights")).data, img)
    with pytest.raises(InputError, match=r"a.npz: no array 'sbuf' \(the SBUF image\); the file holds 'weights' "
                       r"\(uint8 \[2, 128\]\), 'other' \(float64 \[3\]\)"):
        load_sbuf(tmp_path / "a.npz")
    (tmp_path / "c.npz").write_bytes(b"not numpy")
    with pytest.raises(InputError, match="c.npz: not a numpy .npy or .npz file"):
        load_sbuf(tmp_path / "c.npz")
    with pytest.raises(InputError, match="cannot read"):
        load_sbuf(tmp_path / "missing.npz")


MODULES = ["tensore.model.array", "tensore.model.sbuf", "tensore.model.psum", "tensore.model.dtypes",
           "tensore.inputs"]


def _undocumented(module) -> list:
    """Public functions, classes and their public methods / properties without a docstring of their own."""
    out = []
    for name, obj in vars(module).items():
        if name.startswith("_") or getattr(obj, "__module__", None) != module.__name__:
            continue
        if not (inspect.isfunction(obj) or inspect.isclass(obj)):
            continue
        if not obj.__doc__ or (inspect.isclass(obj) and obj.__doc__.startswith(f"{name}(")):   # dataclass default
            out.append(name)
        if inspect.isclass(obj) and not issubclass(obj, Exception):
            for attr, member in vars(obj).items():
                f = member.fget if isinstance(member, property) else getattr(member, "__func__", member)
                if not attr.startswith("_") and inspect.isfunction(f) and not f.__doc__:
                    out.append(f"{name}.{attr}")
    return out


@pytest.mark.parametrize("name", MODULES)
def test_every_public_name_has_a_docstring(name):
    import importlib
    module = importlib.import_module(name)
    assert module.__doc__ and _undocumented(module) == []
