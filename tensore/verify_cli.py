"""`tensore check-waves` and `tensore testbench`: another simulator's waveform checked by the
golden engine (cosim/waves.py, D-T71) and a self-contained SystemVerilog testbench that writes one
(cosim/sv_testbench.py, D-T72)."""
from __future__ import annotations

import json
import sys
from pathlib import Path

from tensore.args import (COLS_TYPE, COUNT_TYPE, GEN_HELP, GENS, OPT_HELP, PROG_HELP, PSUM_PARTITIONS_TYPE, ROWS_TYPE,
                          RTL_SBUF_LATENCY, WAVES_FILE, array_cols, input_file, input_path, opt_level, output_dir,
                          timing_arg)


def _engine_args(p):
    """The program and the engine configuration, as `tensore cosim` takes them."""
    p.add_argument("--gen", required=True, choices=GENS, type=str.lower, help=GEN_HELP)
    p.add_argument("--sbuf", type=input_file,
                   help="the SBUF image (.npz array 'sbuf' or .npy, [partitions, bytes]); default all zeros")
    p.add_argument("--rows", type=ROWS_TYPE, default=8, help="PE rows of the engine")
    p.add_argument("--cols", type=COLS_TYPE, default=None, help="array columns (default rows; 2 x rows on MAVERICK)")
    p.add_argument("--pack", type=int, default=None, choices=[1, 2, 4, 8],
                   help="elements per PE the engine is built with (default: what the program needs)")
    p.add_argument("--psum-partitions", type=PSUM_PARTITIONS_TYPE, default=16, help="PSUM partitions of the engine")
    p.add_argument("--sbuf-latency", type=RTL_SBUF_LATENCY, default=2, help="SBUF read latency in cycles")
    p.add_argument("--dtypes", nargs="+", default=None, metavar="DTYPE", help="a specialised build's dtypes")
    timing_arg(p)


def _lockstep(args, path):
    """The program's golden run (cosim.lockstep.Lockstep) and the engine configuration it runs on."""
    import numpy as np

    from tensore.cosim import hdl
    from tensore.cosim.lockstep import Lockstep
    from tensore.cosim.programs import Program
    from tensore.inputs import load_sbuf, read_program
    from tensore.model import addrmap
    from tensore.model.dtypes import Gen
    from tensore.rtl.fp.pe_mac import parse_dtypes
    gen = Gen.parse(args.gen)
    cols = array_cols(gen, args.rows, args.cols)
    src = read_program(path, gen)
    sbuf = load_sbuf(args.sbuf) if args.sbuf else np.zeros((addrmap.PARTITIONS, 0x4000), np.uint8)
    prog = Program(src.name, gen, args.rows, cols, src.source_text(gen), sbuf, timing=args.timing)
    lk = Lockstep(prog, sbuf_latency=args.sbuf_latency, pack=args.pack, psum_partitions=args.psum_partitions)
    cfg = hdl.Config.of(prog, pack=hdl.fit_pack([lk], args.pack), sbuf_latency=args.sbuf_latency,
                        psum_partitions=args.psum_partitions, dtypes=parse_dtypes(gen, args.dtypes),
                        psum_ports=hdl.fit_ports([lk]))
    hdl.check_dtypes([lk], cfg)
    return lk, cfg


def _say(msg):
    print(f"  {msg}", file=sys.stderr, flush=True)


def exported_engine(args, cfg) -> dict:
    """The export's metadata: --engine (a testbench or export directory, or its engine.json), checked
    against the options; else the export of the configuration (cached, as `tensore cosim` makes it)."""
    from tensore.cosim import hdl
    if not args.engine:
        return hdl.export_cached(cfg, log=_say)
    path = Path(args.engine)
    path = path / "engine.json" if path.is_dir() else path
    try:
        info = json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        raise ValueError(f"{path}: not an export's engine.json ({exc})") from None
    want = {"gen": cfg.gen, "rows": cfg.rows, "cols": cfg.cols, "sbuf_latency": cfg.sbuf_latency,
            "psum_partitions": cfg.psum_partitions, "timing": cfg.timing}
    info = {"timing": "contract"} | info                   # an export of before timing profiles (D-T98)
    diff = [f"{k} {info.get(k)} (options: {v})" for k, v in want.items() if info.get(k) != v]
    if diff or "ports" not in info:
        raise ValueError(f"{path} describes another engine: {', '.join(diff) or 'no ports'}")
    return info


def _report(path, res) -> int:
    """Print a check's outcome; the exit code (0 pass, 1 mismatch)."""
    if res.mismatch is not None:
        print(f"{path}: {res.mismatch}")
        return 1
    print(f"{path}: OK: {res.cycles} cycles and {res.regs_read} registers checked against the golden engine "
          f"({res.checks} checks; the engine's ports in scope {res.scope}, {res.edges} clock edges)")
    return 0


def cmd_check_waves(args) -> int:
    """Replay the program on the golden engine and check a waveform of the exported engine."""
    from tensore.cosim import waves
    lk, cfg = _lockstep(args, args.program)
    return _report(args.waves, waves.check_lockstep(args.waves, lk, exported_engine(args, cfg)))


def cmd_testbench(args) -> int:
    """Write the SystemVerilog testbench of a program (and, with --run, run it and check its waves)."""
    from tensore.cosim import hdl, sv_testbench, waves
    lk, cfg = _lockstep(args, args.program)
    exported = hdl.export_cached(cfg, log=_say)
    tb = sv_testbench.write(lk, exported, args.output, max_cycles=args.max_cycles)
    d, top = tb["dir"], sv_testbench.TB_TOP
    print(f"wrote {d}: {top}.sv, {len(lk.descs)} descriptors and the SBUF image as hex files, the engine's "
          "Verilog (rtl/: structural; rtl_sim/: loop form), files.f, files_verilator.f, engine.json")
    print(f"  Icarus:    iverilog -g2012 -s {top} -o tb.vvp -f files.f && vvp tb.vvp -fst +waves=waves.fst")
    print(f"  Verilator: verilator {' '.join(sv_testbench.verilator_flags())} -f files_verilator.f && "
          f"obj_dir/V{top} +waves=waves.vcd")
    print(f"  VCS / Xcelium / Questa: files.f as SystemVerilog, top {top}, +waves=FILE (+data=DIR from elsewhere)")
    print(f"  then: tensore check-waves WAVES --program {args.program} --gen {args.gen} --engine {d} (and the "
          "same options as here)")
    if not args.run:
        return 0
    wave = Path(args.waves or Path(d) / ("waves.fst" if args.run == "icarus" else "waves.vcd"))
    if wave.suffix not in (".vcd", ".fst"):
        raise ValueError(f"{wave}: a waveform is .vcd or .fst")
    try:
        out = sv_testbench.run(tb, args.run, wave, opt=args.opt, log=_say)
    except RuntimeError as exc:
        print(f"tensore: error: {str(exc).splitlines()[0]}", file=sys.stderr)
        return 1
    last = [ln for ln in out.splitlines() if ln.startswith("tensore_tb:")]
    print(f"  {args.run}: {last[-1] if last else 'no summary line'}")
    return _report(wave, waves.check_lockstep(wave, lk, exported))


def register(sub) -> None:
    p = sub.add_parser("check-waves", help="check a waveform of the exported engine (any simulator) against the "
                       "golden engine: exit 0 pass, 1 mismatch, 2 bad input")
    p.add_argument("waves", type=input_file, help="VCD or FST")
    p.add_argument("--program", required=True, type=input_file,
                   help="the program the simulation ran (assembly text or descriptors)")
    p.add_argument("--engine", type=input_path, help="the export's engine.json, or a directory holding it (a `tensore testbench` "
                   "directory); default: the export of the options' configuration")
    _engine_args(p)
    p.set_defaults(func=cmd_check_waves)
    p = sub.add_parser("testbench", help="write a self-contained SystemVerilog testbench of a program "
                       "(no Python needed to run it); --run icarus|verilator also runs and checks it")
    p.add_argument("program", type=input_file, help=PROG_HELP)
    p.add_argument("-o", "--output", default="build/testbench", type=output_dir, help="the testbench's directory")
    p.add_argument("--max-cycles", type=COUNT_TYPE, default=None, help="the watchdog (default 4 x the golden run + 1000)")
    p.add_argument("--run", choices=["icarus", "verilator"], help="run it here and check the waves")
    p.add_argument("--waves", type=WAVES_FILE, help="with --run: the waveform, .vcd or .fst (default DIR/waves.fst on Icarus, "
                   "DIR/waves.vcd on Verilator)")
    p.add_argument("--opt", type=opt_level, default="-O0", metavar="LEVEL", help=OPT_HELP + "; default 0")
    _engine_args(p)
    p.set_defaults(func=cmd_testbench)
