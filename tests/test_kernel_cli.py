"""`tensore gemm / conv / plot`: output, exit codes, one-line errors."""
import pytest

from tensore.cli import main


def test_gemm_prints_estimate_and_numerics(capsys, tmp_path):
    rc = main(["gemm", "--m", "20", "--k", "12", "--n", "10", "--gen", "mariana", "--rows", "8", "--cols", "8",
               "--asm", str(tmp_path / "g.s"), "--plot", str(tmp_path / "g.png")])
    out = capsys.readouterr().out
    assert rc == 0
    assert "PE utilisation" in out and "bit-exact" in out and "picture:" in out
    assert (tmp_path / "g.png").stat().st_size > 10_000
    assert (tmp_path / "g.s").read_text().startswith("ldweights")


@pytest.mark.parametrize("extra", [["--mx", "oct_row", "--dtype", "fp8_e5m2"], ["--sparse", "--dtype", "fp16"]])
def test_gemm_mx_and_sparse(capsys, extra):
    assert main(["gemm", "--m", "9", "--k", "40", "--n", "5", "--gen", "mariana", "--rows", "8", "--cols", "8"]
                + extra) == 0
    out = capsys.readouterr().out
    assert ("MX oct_row" in out or "2:4 sparse" in out) and "bit-exact" in out


def test_conv_and_plot(capsys, tmp_path):
    assert main(["conv", "--gen", "cayman", "--rows", "8", "--cols", "8", "--cin", "8", "--cout", "4",
                 "--height", "5", "--width", "6", "--stride", "2"]) == 0
    assert "(direct)" in capsys.readouterr().out
    assert main(["plot", "timeline", "--gen", "cayman", "--rows", "8", "--cols", "8", "--m", "9", "--k", "9",
                 "--n", "9", "-o", str(tmp_path / "t.png")]) == 0
    assert main(["plot", "sweep", "--gen", "cayman", "--rows", "8", "--cols", "8", "--sizes", "4,8",
                 "--dtypes", "bf16,fp32", "-o", str(tmp_path / "s.png")]) == 0
    assert (tmp_path / "s.png").exists()


@pytest.mark.parametrize("argv,msg", [
    (["gemm", "--m", "0"], "--m must be >= 1"),
    (["gemm", "--dtype", "int8", "--gen", "cayman"], "not a matmul input"),
    (["gemm", "--gen", "cayman", "--out-dtype", "bf16"], "BFLOAT16 from MARIANA"),
    (["gemm", "--dtype", "fp32"], "fp32-mode"),
    (["gemm", "--rows", "6"], "--rows 6"),
    (["gemm", "--gen", "nosuch"], "unknown generation"),
    (["conv", "--kh", "40", "--height", "8"], "no output"),
    (["conv", "--method", "direct", "--dtype", "fp8_e4m3", "--double-row", "--gen", "cayman"], "cannot express"),
    (["conv", "--sparse"], "gemm only"),
    (["gemm", "--mx", "quad_row", "--gen", "maverick", "--dtype", "fp8_e4m3"], "MX kernels"),
])
def test_bad_input_is_one_line_exit_2(capsys, argv, msg):
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert msg in err and err.count("\n") == 1 and "Traceback" not in err
