"""The `tensore` command line: asm / disasm round trip, clear errors, exit codes."""
from pathlib import Path

import pytest

from tensore.model.dtypes import Gen
from tensore.cli import dtype_table, main

PROG = """\
# Load bf16 weights, then one single-shot matmul into PSUM bank 1
ldweights in_dtype=bf16 rows=128 cols=128 tile_size=(row_size_log2=r128, col_size_log2=c128) src=(start_addr=sbuf(0,0), step_elem=[1,0,0], num_elem=[128,1,1])
matmul in_dtype=bf16 out_dtype=fp32 rows=128 cols=128 tile_size=(row_size_log2=r128, col_size_log2=c128) src=(start_addr=sbuf(0,0x100), step_elem=[1,0,0], num_elem=[64,1,1]) dst=(start_addr=psum(0,1,0), step_elem=[1,0,0], num_elem=[64,1,1])
"""


def test_asm_disasm_round_trip(tmp_path, capsys):
    src = tmp_path / "prog.s"
    src.write_text(PROG)
    assert main(["asm", str(src), "-o", str(tmp_path / "prog.bin"), "--gen", "maverick"]) == 0
    assert (tmp_path / "prog.bin").stat().st_size == 128
    capsys.readouterr()
    assert main(["disasm", str(tmp_path / "prog.bin"), "--gen", "maverick"]) == 0
    text = capsys.readouterr().out
    assert text.startswith("ldweights ") and "in_dtype=bfloat16" in text
    (tmp_path / "again.s").write_text(text)
    assert main(["asm", str(tmp_path / "again.s"), "-o", str(tmp_path / "again.bin"), "--gen", "maverick"]) == 0
    assert (tmp_path / "again.bin").read_bytes() == (tmp_path / "prog.bin").read_bytes()


def test_disasm_reports_violations(tmp_path, capsys):
    (tmp_path / "bad.bin").write_bytes(bytes([0x02]) + bytes(63))
    assert main(["disasm", str(tmp_path / "bad.bin"), "--gen", "maverick"]) == 1
    out = capsys.readouterr().out
    assert "BAD_ACTIVE_RANGE" in out and "num_active_rows" in out


def test_asm_error_has_line_and_column(tmp_path, capsys):
    (tmp_path / "bad.s").write_text("\n\nmatmul rows=1000\n")
    assert main(["asm", str(tmp_path / "bad.s"), "--gen", "cayman"]) == 2
    assert "bad.s:3:8: num_active_rows: 1000 does not fit" in capsys.readouterr().err


def test_dtype_table_lists_every_code():
    for gen in Gen:
        table = dtype_table(gen)
        assert table.count("\n0x") == {0: 16, 1: 16, 2: 24, 3: 24, 4: 30}[int(gen)]


def test_docs_examples_assemble_and_are_valid():
    import re
    from pathlib import Path

    from tensore.model.isa import check
    from tensore.model.isa.asm import assemble
    text = (Path(__file__).resolve().parent.parent / "docs" / "isa.md").read_text()
    blocks = re.findall(r"```\n(.*?)```", text, re.S)
    for gen, block in (("maverick", blocks[0]), ("mariana", blocks[1])):
        data = assemble(block, gen)
        assert len(data) // 64 == len(block.strip().splitlines())
        for i in range(0, len(data), 64):
            assert check(data[i:i + 64], gen) == []


def test_run_prints_summary_and_writes_psum(tmp_path, capsys):
    import numpy as np

    from tensore.cosim import programs
    p = programs.accumulate_group("mariana")
    (tmp_path / "acc.s").write_text(p.text)
    np.savez(tmp_path / "in.npz", sbuf=p.sbuf)
    assert main(["run", str(tmp_path / "acc.s"), "--gen", "mariana", "--sbuf", str(tmp_path / "in.npz"),
                 "--rows", "8", "--cols", "8", "-o", str(tmp_path / "out.npz")]) == 0
    out = capsys.readouterr().out
    assert "6 executed, 0 refused" in out and "perf matmul" in out and "8x8:3" in out
    z = np.load(tmp_path / "out.npz")
    assert z["psum"].shape == (128, 16384) and z["psum_writes"].shape[1] == 4
    bank3 = z["psum"][0].view(np.uint32)[3 * 512:3 * 512 + 12]
    assert np.array_equal(bank3, p.expect_fp32[(0, 3)][1])


@pytest.mark.slow
def test_demo_checks_its_programs(capsys):
    """The demo's path and summary, with the engine in Amaranth's simulator (4 x 4): the Verilator path
    it takes by default is hdl.run, which tests/test_cosim_hdl.py runs on the 8 x 8 build."""
    assert main(["demo", "--gen", "mariana", "--rows", "4", "-n", "4", "--sim", "amaranth", "--no-waves"]) == 0
    out = capsys.readouterr().out
    assert out.count("PSUM vs independent expectation: OK") == 2
    assert out.count("lockstep vs golden engine: OK") == 2 and "PE utilisation" in out


def test_full_size_programs_have_independent_expectations():
    """make cosim-full's programs: full-array engines, the 128 x 128 bf16 accumulate group and SR
    drain, MX on every generation, FP8 double row where the generation has it; each with PSUM
    expectations computed without the engine, which the golden engine meets (here with 128 moving
    vectors; make cosim-full runs 512 and checks the same expectations)."""
    from tensore.cosim.lockstep import golden
    from tensore.cli import FULL_SIZE, full_size_programs
    from tensore.rtl_run import check_expectations
    for gen, (rows, cols) in FULL_SIZE.items():
        progs = full_size_programs(gen, 128, 32)
        names = [p.name for p in progs]
        assert names[:2] == ["accumulate_group", "bf16_drain_sr"] and names[2].startswith("mx_")
        assert ("double_row" in names) == (gen != "maverick")
        for p in progs:
            assert (p.rows, p.cols) == (rows, cols) and (p.expect_fp32 or p.expect_bf16), p.name
            eng, trace, _ = golden(p)
            assert not trace.stalled and check_expectations(p, eng) == 0, p.name


def test_bench_sizes():
    from tensore.bench import parse_size
    assert parse_size("64") == ("mariana", 64, 64) and parse_size("128x256") == ("maverick", 128, 256)
    with pytest.raises(ValueError, match="R x 2R"):
        parse_size("128x200")


def _tensore(*args, cwd=None, input=None):
    """The real command in a subprocess: (exit code, stdout bytes, stderr text)."""
    import subprocess
    import sys
    res = subprocess.run([sys.executable, "-m", "tensore.cli", *map(str, args)], cwd=cwd, input=input,
                         capture_output=True)
    return res.returncode, res.stdout, res.stderr.decode()


NO_TILE = PROG.replace("tile_size=(row_size_log2=r128, col_size_log2=c128)", "tile_size=0")   # D-T64


def test_refused_micro_ops_fail_the_run(tmp_path):
    (tmp_path / "p.s").write_text(NO_TILE)
    rc, out, err = _tensore("run", tmp_path / "p.s", "--gen", "maverick")
    assert rc == 1 and "2 refused" in out.decode()
    assert "error: 2 micro-ops refused; the first is #0 ldweights" in err and "--allow-refused" in err
    assert "Traceback" not in err
    rc, _, err = _tensore("run", tmp_path / "p.s", "--gen", "maverick", "--allow-refused")
    assert rc == 0 and err == ""


def test_an_error_reported_in_execution_fails_the_run(tmp_path):
    """A PeRegWrite whose fetched value is not a PSUM_ROUND value issues and reports BAD_REGISTER at
    t + L (D-T38 (6)): the run exits 1 unless --allow-refused."""
    import numpy as np
    repro = Path(__file__).parent / "repro" / "pe_reg_write_value_maverick"
    (tmp_path / "p.s").write_text(repro.with_suffix(".s").read_text())
    np.savez(tmp_path / "sb.npz", sbuf=np.load(repro.with_suffix(".npz"))["sbuf"])
    args = ("run", tmp_path / "p.s", "--gen", "maverick", "--rows", "8", "--cols", "16", "--sbuf", tmp_path / "sb.npz")
    rc, _, err = _tensore(*args)
    assert rc == 1 and "#0 pe_reg_write (BAD_REGISTER)" in err and "Traceback" not in err
    rc, _, err = _tensore(*args, "--allow-refused")
    assert rc == 0 and err == ""


def test_asm_names_line_and_reason_of_refused_descriptors(tmp_path):
    (tmp_path / "p.s").write_text(NO_TILE)
    rc, _, err = _tensore("asm", tmp_path / "p.s", "--gen", "maverick")
    assert rc == 0
    assert f"{tmp_path / 'p.s'}:2: warning: descriptor 0 is refused:" in err
    assert f"{tmp_path / 'p.s'}:3: warning: descriptor 1 is refused:" in err
    rc, _, err = _tensore("asm", tmp_path / "p.s", "--gen", "maverick", "--strict")
    assert rc == 1 and ": error: descriptor 0 is refused:" in err


def test_cli_conventions(tmp_path):
    (tmp_path / "p.s").write_text(PROG)
    rc, out, _ = _tensore("asm", tmp_path / "p.s", "--gen", "maverick", "-o", "-", cwd=tmp_path)
    assert rc == 0 and len(out) == 128 and not (tmp_path / "-").exists()
    rc, out, _ = _tensore("--version")
    assert rc == 0 and out.decode().startswith("tensore ")
    rc, _, err = _tensore("run", tmp_path / "p.s", "--gen", "trn9")
    assert rc == 2 and "invalid choice: 'trn9' (choose from" in err and "maverick" in err
    rc, out, _ = _tensore("run", tmp_path / "p.s", "--gen", "maverick", "-o", tmp_path / "out2")
    assert rc == 0 and f"wrote {tmp_path / 'out2.npz'}" in out.decode() and (tmp_path / "out2.npz").exists()


def test_broken_pipe_is_quiet(tmp_path):
    import subprocess
    import sys
    cmd = f"'{sys.executable}' -m tensore.cli dtypes --gen maverick | head -1"
    res = subprocess.run(["sh", "-c", cmd], capture_output=True, text=True)
    assert res.stdout.startswith("NEURON_ISA_TPB_DTYPE") and "Broken pipe" not in res.stderr and res.stderr == ""


def test_own_model_py_does_not_shadow_the_package(tmp_path):
    """The packages import as tensore.model / tensore.rtl / tensore.cosim: a user's own model.py,
    rtl.py or cosim.py in the working directory is not picked up."""
    import subprocess
    import sys
    for name in ("model", "rtl", "cosim"):
        (tmp_path / f"{name}.py").write_text("raise SystemExit('shadowed by the user file')\n")
    code = "import tensore.model.engine, tensore.rtl.top, tensore.cosim.hdl, tensore.cli; print('ok')"
    res = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True)
    assert res.returncode == 0 and res.stdout == "ok\n", res.stderr
    rc, out, _ = _tensore("--version", cwd=tmp_path)
    assert rc == 0 and out.decode().startswith("tensore ")


def _acc_files(tmp_path):
    """The library's MARIANA accumulate group: its text, descriptors and SBUF image under tmp_path."""
    import numpy as np

    from tensore.cosim import programs
    from tensore.model.isa.asm import assemble
    p = programs.accumulate_group("mariana")
    (tmp_path / "acc.bin").write_text(p.text)                    # text under a .bin name
    (tmp_path / "acc.txt").write_bytes(assemble(p.text, "mariana"))   # descriptors under a .txt name
    np.savez(tmp_path / "img.npz", image=p.sbuf, other=np.zeros(3))
    np.save(tmp_path / "img.npy", p.sbuf.view("<u2"))             # 2-byte elements: the same bytes
    return p


def test_programs_are_read_by_content(tmp_path):
    _acc_files(tmp_path)
    for prog in ("acc.bin", "acc.txt"):
        rc, out, err = _tensore("run", tmp_path / prog, "--gen", "mariana", "--rows", "8", "--sbuf", tmp_path / "img.npy")
        assert rc == 0 and "MARIANA 8x8: 6 descriptors, 6 executed, 0 refused" in out.decode(), err
    rc, out, _ = _tensore("disasm", tmp_path / "acc.bin", "--gen", "mariana")
    assert rc == 0 and out.decode().startswith("ldweights ")
    rc, _, err = _tensore("asm", tmp_path / "acc.txt", "--gen", "mariana")
    assert rc == 2 and "acc.txt: binary descriptors, not assembly text" in err
    rc, _, err = _tensore("asm", tmp_path / "acc.bin", "--gen", "mariana")
    assert rc == 2 and "the output would overwrite the source" in err
    (tmp_path / "cut.dat").write_bytes((tmp_path / "acc.txt").read_bytes()[:100])
    for cmd in ("run", "disasm", "cosim"):
        rc, _, err = _tensore(cmd, tmp_path / "cut.dat", "--gen", "mariana")
        assert rc == 2 and err.count("\n") == 1 and "Traceback" not in err, (cmd, err)
        assert "cut.dat: neither assembly text (byte 0x" in err and "(100 bytes is not a multiple of 64)" in err
    rc, out, _ = _tensore("asm", "-", "--gen", "mariana", input=(tmp_path / "acc.bin").read_bytes())
    assert rc == 0 and out == (tmp_path / "acc.txt").read_bytes()


def test_sbuf_images_are_exact_or_refused(tmp_path):
    import ml_dtypes
    import numpy as np
    p = _acc_files(tmp_path)
    rc, out, _ = _tensore("run", tmp_path / "acc.bin", "--gen", "mariana", "--rows", "8",
                          "--sbuf", f"{tmp_path / 'img.npz'}:image", "-o", tmp_path / "out")
    assert rc == 0
    bank3 = np.load(tmp_path / "out.npz")["psum"][0].view(np.uint32)[3 * 512:3 * 512 + 12]
    assert np.array_equal(bank3, p.expect_fp32[(0, 3)][1])
    np.save(tmp_path / "bf16.npy", p.sbuf.view(ml_dtypes.bfloat16))      # np.save keeps the bytes (void)
    np.save(tmp_path / "wide.npy", np.full((4, 4), 300))
    np.save(tmp_path / "f64.npy", np.ones((4, 4)))
    cases = [("img.npz", ("img.npz: no array 'sbuf' (the SBUF image); the file holds 'image' (uint8 [128, 16384]), "
                          "'other' (float64 [3]); save the image as 'sbuf' or pick an array as")),
             ("img.npy:x", "img.npy: a .npy file holds one array"),
             ("wide.npy", "wide.npy: int64 elements have no exact SBUF form (values 300..300 are not bytes)"),
             ("f64.npy", "f64.npy: float64 elements have no exact SBUF form"),
             ("acc.bin", "acc.bin: not a numpy .npy or .npz file")]
    for cmd, name, msg in [("run", *c) for c in cases] + [("cosim", *c) for c in cases[::2]]:
        rc, _, err = _tensore(cmd, tmp_path / "acc.bin", "--gen", "mariana", "--rows", "8", "--sbuf", f"{tmp_path}/{name}")
        assert rc == 2 and msg in err and err.count("\n") == 1, (cmd, name, err)
    rc, out, err = _tensore("run", tmp_path / "acc.bin", "--gen", "mariana", "--rows", "8", "--sbuf", tmp_path / "bf16.npy")
    assert rc == 0 and "6 executed, 0 refused" in out.decode(), err


def test_run_array_shape_follows_cosim(tmp_path):
    (tmp_path / "p.s").write_text(PROG.replace("rows=128 cols=128 tile_size=(row_size_log2=r128, col_size_log2=c128)",
                                               "rows=8 cols=8 tile_size=(row_size_log2=r128, col_size_log2=c128)"))
    rc, out, err = _tensore("run", tmp_path / "p.s", "--gen", "maverick", "--rows", "8", "--allow-refused")
    assert rc == 0 and out.decode().startswith("MAVERICK 8x16:"), err
    rc, out, _ = _tensore("run", tmp_path / "p.s", "--gen", "maverick", "--rows", "8", "--cols", "8", "--allow-refused")
    assert rc == 0 and out.decode().startswith("MAVERICK 8x8:")
    rc, out, _ = _tensore("run", "--help")
    assert rc == 0 and b"2 x rows on MAVERICK), the same rule as `tensore cosim`" in b" ".join(out.split())


def test_nonsense_numbers_are_refused(tmp_path):
    (tmp_path / "p.s").write_text(PROG)
    for opt, value, msg in (("--sbuf-latency", "-1", "argument --sbuf-latency: -1 is below 1"),
                            ("--sbuf-latency", "0", "argument --sbuf-latency: 0 is below 1"),
                            ("--rows", "4.5", "argument --rows: '4.5' is not an integer"),
                            ("--rows", "0", "argument --rows: 0 is below 4"),
                            ("--cols", "-8", "argument --cols: -8 is below 4"),
                            ("--rows", "6", "array 6x12: rows must be a multiple of 4 up to 128")):
        rc, _, err = _tensore("run", tmp_path / "p.s", "--gen", "maverick", opt, value)
        assert rc == 2 and msg in err and "Traceback" not in err, (opt, value, err)


def test_every_option_has_help():
    """Every option and argument of dtypes, asm, disasm, run and regs says what it is in --help."""
    import re
    for cmd in ("dtypes", "asm", "disasm", "run", "regs"):
        rc, out, _ = _tensore(cmd, "--help")
        assert rc == 0
        lines = out.decode().splitlines()
        start = next(i for i, line in enumerate(lines) if line.endswith("arguments:") or line == "options:")
        entries = [i for i in range(start, len(lines)) if re.match(r"  \S", lines[i])]
        for i in entries:
            helped = re.match(r"  \S.*?\s{2,}\S", lines[i]) or (i + 1 < len(lines) and re.match(r"\s{8,}\S", lines[i + 1]))
            assert helped, (cmd, lines[i])


def test_assembler_messages(tmp_path):
    from tensore.model.isa.asm import AsmError, assemble
    cases = [("matmul rows=4.5 cols=8", "mariana", "1:13: '4.5' is not a value: numbers are integers"),
             ("matmul in_dtype=bf16 bogus=3 rows=4", "mariana", "1:22: matmul on MARIANA: unknown field(s) bogus"),
             ("matmul in_dtype=bf16 src=(num_elem=[4,1,1], bogus=3)", "mariana",
              "1:45: src_mem_pattern: unknown field(s) bogus; TENSOR3D has"),
             ("matmul in_dtype=bf16 rows=4 acc=multi_start", "maverick",
              "1:29: matmul on MAVERICK: unknown field(s) psum_accumulate_flags;")]
    for text, gen, msg in cases:
        with pytest.raises(AsmError) as exc:
            assemble(text, gen, source="p.s")
        assert f"p.s:{msg}" in str(exc.value), str(exc.value)
    assert "flags=(accumulate_flag=accumulate)" in str(exc.value)
    (tmp_path / "p.s").write_text(cases[0][0] + "\n")
    rc, _, err = _tensore("asm", tmp_path / "p.s", "--gen", "mariana")
    assert rc == 2 and err == f"tensore: error: {tmp_path / 'p.s'}:{cases[0][2]} (decimal or 0x hex)\n"


def test_run_summary_code_matches_reason(tmp_path):
    """A descriptor breaking two rules: the summary's code and the reason beside it are the same rule,
    the code printed once (name and number), the reason its field and message."""
    import re
    (tmp_path / "p.s").write_text(
        "matmul in_dtype=bf16 out_dtype=fp32 rows=8 cols=8 wait=94 src=(start_addr=sbuf(0,0), step_elem=[1,0,0], "
        "num_elem=[4,57089,1]) dst=(start_addr=psum(0,0,0), step_elem=[1,0,0], num_elem=[4,1,1])\n")
    rc, out, err = _tensore("run", tmp_path / "p.s", "--gen", "mariana", "--rows", "8")
    assert rc == 1
    line = re.search(r"#0 matmul: refused (\w+) \((0x\w+)\) at cycle \d+: (.*)", out.decode())
    assert line and line.group(1) == "BAD_PATTERN" and line.group(2) == "0x0c", out.decode()
    assert "BAD_PATTERN" not in line.group(3) and "0x0c" not in line.group(3) and line.group(3), out.decode()
    assert "(BAD_PATTERN (0x0c): " in err and err.count("BAD_PATTERN") == 1, err
