"""The register map: generated artefacts are fresh, and the seed's fields are where it says."""

from tensore.model.arr_seq_regs import REGISTERS
from tensore.model.timing import PERF_BANKS, PERF_COUNTERS
from tensore import regs


def test_generated_files_are_fresh(tmp_path):
    for path in regs.generate(tmp_path):
        committed = regs.ROOT / path.relative_to(tmp_path)
        assert committed.exists(), f"{committed} missing: run `tensore regs --in-tree`"
        assert committed.read_text() == path.read_text(), f"{committed} is stale: run `tensore regs --in-tree`"


def test_seed_fields():
    cfg = REGISTERS["arr_cluster_cfg"]
    assert cfg["offset"] == 0x0
    f = cfg["fields"]
    assert (f["matmul_done_last"]["lsb"], f["matmul_done_last"]["width"]) == (8, 1)
    assert (f["en_inter_instr_dly"]["lsb"], f["en_inter_instr_dly"]["width"]) == (12, 1)
    assert (f["inter_instr_dly_cnt"]["lsb"], f["inter_instr_dly_cnt"]["width"]) == (16, 6)
    assert f["inter_instr_dly_cnt"]["reset"] == 0x8
    for name in ("p2fifo_af", "enable_wl_last_active_col", "flush_p2f_fifos",
                 "array_stagger_rg0", "array_stagger_rg1", "array_stagger_rg2", "array_stagger_rg3"):
        assert name in f
    assert set(REGISTERS["queue_cfg"]["fields"]) == {"fifo_size_sel", "bypass_peregwrite_instr",
                                                     "disable_dependency_check"}
    assert set(REGISTERS["perf_cntr_cfg"]["fields"]) == {"cntr_en", "cntr_rst"}
    assert REGISTERS["err_status"]["fields"]["err"]["access"] == "rw1c"


def test_perf_banks_are_49_counter_pairs():
    assert PERF_BANKS == ("weight_load", "matmul", "pe_regwrite") and PERF_COUNTERS == 49
    for bank in PERF_BANKS:
        names = [n for n in REGISTERS if n.startswith(bank + "[")]
        assert len(names) == 98
        offsets = sorted(REGISTERS[n]["offset"] for n in names)
        assert offsets == list(range(offsets[0], offsets[0] + 98 * 4, 4))
    assert len({r["offset"] for r in REGISTERS.values()}) == len(REGISTERS)       # no overlap


def test_c_header_is_plain_c(tmp_path):
    import subprocess
    header = regs.ROOT / "rtl" / "regs" / "arr_seq.h"
    src = tmp_path / "t.c"
    src.write_text(f'#include "{header}"\nint main(void) {{ return ARR_SEQ__ARR_CLUSTER_CFG__INTER_INSTR_DLY_CNT_bp - 16; }}\n')
    subprocess.run(["gcc", "-std=c11", "-Wall", "-Werror", "-o", str(tmp_path / "t"), str(src)], check=True)
    assert subprocess.run([str(tmp_path / "t")]).returncode == 0
