"""Run test_gemm.py (cocotb) on the exported engine in Icarus Verilog (docs/cocotb.md).

    python run.py PROGRAM.s --sbuf SBUF.npz [--gen mariana] [--rows 4] [--cols 4] [--psum-partitions 4]
                  [--work build/cocotb] [--bench]

The engine's Verilog and its Icarus build come from the project's caches (cosim/hdl.py: exported
and built once per configuration and source version, under $TENSORE_CACHE or ./build); the
simulator runs in --work (its log, results.xml).  Exit 0 when the test passes, 1 when it fails."""
import argparse
import os
import sys
from pathlib import Path

from cocotb_tools.runner import get_results, get_runner

from tensore.cosim import hdl
from tensore.cosim.lockstep import Lockstep
from tensore.cosim.programs import Program
from tensore.inputs import load_sbuf, read_program
from tensore.model.dtypes import Gen

HERE = Path(__file__).resolve().parent


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("program")
    ap.add_argument("--sbuf", required=True)
    ap.add_argument("--gen", default="mariana")
    ap.add_argument("--rows", type=int, default=4)
    ap.add_argument("--cols", type=int, default=4)
    ap.add_argument("--psum-partitions", type=int, default=4)
    ap.add_argument("--work", default="build/cocotb", help="the simulator's directory (default build/cocotb)")
    ap.add_argument("--bench", action="store_true", help="run the project's testbench (cosim.lockstep.bench)")
    args = ap.parse_args(argv)
    gen = Gen.parse(args.gen)
    program = Program(Path(args.program).stem, gen, args.rows, args.cols, read_program(args.program, gen).source_text(gen),
                      load_sbuf(args.sbuf))
    # the engine to build: what the program needs (elements per PE, PSUM write ports, sparse fmaps)
    lk = Lockstep(program, psum_partitions=args.psum_partitions)
    cfg = hdl.Config.of(program, pack=hdl.fit_pack([lk]), psum_partitions=args.psum_partitions,
                        psum_ports=hdl.fit_ports([lk]), sparse32=hdl.fit_sparse32([lk]))
    built = hdl.build_cached(hdl.export_cached(cfg, log=print), "icarus", log=print)
    env = {"TENSORE_PROGRAM": str(Path(args.program).resolve()), "TENSORE_SBUF": str(Path(args.sbuf).resolve()),
           "TENSORE_GEN": gen.name, "TENSORE_ROWS": str(args.rows), "TENSORE_COLS": str(args.cols),
           "TENSORE_PSUM_PARTITIONS": str(args.psum_partitions), "TENSORE_BENCH": str(int(args.bench)),
           "PYTHONPATH": os.pathsep.join([str(HERE), *sys.path])}
    results = get_runner("icarus").test(test_module="test_gemm", hdl_toplevel=built["top"], hdl_toplevel_lang="verilog",
                                        build_dir=Path(built["dir"]) / "obj", test_dir=Path(args.work).resolve(),
                                        extra_env=env, timescale=("1ns", "1ps"))
    tests, failed = get_results(results)
    print(f"test_gemm on Icarus: {tests - failed} of {tests} passed")
    return 1 if failed or not tests else 0


if __name__ == "__main__":
    sys.exit(main())
