"""The `tensore` command line."""
from __future__ import annotations

import argparse
import sys

import numpy as np

from model import dtypes as dt


def dtype_table(gen) -> str:
    """A table of a generation's dtype codes: format, roles, gates and sample conversions."""
    gen = dt.Gen.parse(gen)
    samples = np.array([1.0, -0.1, 3.14159, 1e-6, 70000.0], np.float32)
    head = f"{'code':>4}  {'name':<10} {'format':<8} {'roles':<28} {'valid':<5}  " + \
        "  ".join(f"{s:>9.6g}" for s in samples)
    lines = [f"NEURON_ISA_TPB_DTYPE on {gen.name} ({dt.enum_count(gen)} codes); "
             f"samples narrowed from fp32 (RNE) and widened back", head, "-" * len(head)]
    for d in sorted(dt.dtypes_of(gen)):
        roles = "|".join(r.name.lower() for r in dt.Role if r in dt.roles_of(d) and r.name)
        try:
            fmt = dt.format_of(d, gen)
            back = dt.to_fp32(dt.from_fp32(samples, d, gen), d, gen)
            vals = "  ".join(f"{v:>9.6g}" for v in back.tolist())
            name = fmt.name
        except ValueError:
            name, vals = (f"cptc{dt.cptc_bits(d)}" if dt.is_cptc(d) else "-"), "(no numeric value)"
        valid = "yes" if dt.is_valid_dtype(d, gen) else "no"
        lines.append(f"0x{int(d):02X}  {d.name:<10} {name:<8} {roles:<28} {valid:<5}  {vals}")
    return "\n".join(lines)


def cmd_dtypes(args) -> int:
    print(dtype_table(args.gen))
    return 0


def cmd_demo(args) -> int:
    """Run the library's accumulate-group and SR programs through the golden engine and check them."""
    import time

    from cosim import programs
    from model.engine import Engine
    from model.isa.asm import assemble
    print(dtype_table(args.gen))
    gen = dt.Gen.parse(args.gen)
    failures = 0
    for prog in [programs.accumulate_group(gen, rows=args.rows, cols=args.rows, n=64)] + \
            ([programs.bf16_drain(gen, rows=args.rows, cols=args.rows, n=64, sr=True)] if gen >= dt.Gen.MARIANA else []):
        print(f"\n== {prog.name} ({gen.name}, {prog.rows}x{prog.cols} array) ==")
        print(prog.text.strip())
        engine = Engine(gen, rows=prog.rows, cols=prog.cols, sbuf=prog.sbuf_model())
        engine.write_reg("perf_cntr_cfg", 1)
        t0 = time.perf_counter()
        trace = engine.run(assemble(prog.text, gen))
        elapsed = time.perf_counter() - t0
        print(run_summary(engine, trace))
        bad = _check_expectations(prog, engine)
        failures += bad
        print(f"  golden engine: {trace.cycles} cycles in {elapsed:.2f} s; PSUM vs independent expectation: "
              f"{'OK' if not bad else f'{bad} MISMATCHES'}")
    return 1 if failures else 0


def _check_expectations(prog, engine) -> int:
    from model import addrmap
    bad = 0
    for (part, bank), (off, bits) in prog.expect_fp32.items():
        start = (bank * addrmap.PSUM_BANK_BYTES + off) // 4
        bad += int((engine.psum.cells(4)[part, start:start + bits.size] != bits).sum())
    for (part, bank), (off, codes) in prog.expect_bf16.items():
        start = (bank * addrmap.PSUM_BANK_BYTES + off) // 2
        bad += int((engine.psum.cells(2)[part, start:start + codes.size] != codes).sum())
    return bad


def cmd_asm(args) -> int:
    from model.isa.asm import assemble
    from pathlib import Path
    src = Path(args.source)
    data = assemble(src.read_text(), args.gen, source=str(src))
    out = Path(args.output or src.with_suffix(".bin"))
    out.write_bytes(data)
    print(f"{src}: {len(data) // 64} descriptors -> {out}")
    from model.isa import check, error_code
    bad = [(i, error_code(check(data[i:i + 64], args.gen))) for i in range(0, len(data), 64)]
    bad = [(i // 64, c) for i, c in bad if c]
    for index, code in bad:
        print(f"warning: descriptor {index} is invalid ({code.name}); `tensore disasm` lists why",
              file=sys.stderr)
    return 0


def cmd_disasm(args) -> int:
    from model.isa.asm import disassemble
    from pathlib import Path
    data = Path(args.binary).read_bytes()
    text = disassemble(data, args.gen)
    sys.stdout.write(text)
    return 1 if "# ^ descriptor" in text else 0


def run_summary(engine, trace) -> str:
    """The summary `tensore run` prints: ops, cycles, errors, status registers and non-zero counters."""
    lines = [trace.summary()]
    regs = engine.regs
    lines.append(f"  status: err={regs.get('err_status', 'err')} err_code={regs.get('err_status', 'err_code'):#04x} "
                 f"err_opcode={regs.get('err_status', 'err_opcode'):#04x} err_count={regs.get('err_count', 'count')} "
                 f"done_count={regs.get('done_count', 'count')} matmul_done={regs.get('matmul_done_count', 'count')}")
    for bank in ("weight_load", "matmul", "pe_regwrite"):
        counts = {i: regs.counter64(bank, i) for i in range(49)}
        nz = [f"{2 << (i // 7)}x{2 << (i % 7)}:{v}" for i, v in counts.items() if v]
        if nz:
            lines.append(f"  perf {bank} (rows x cols bucket: count): {', '.join(nz)}")
    return "\n".join(lines)


def cmd_run(args) -> int:
    from pathlib import Path

    from model.engine import Engine
    from model.isa.asm import assemble
    from model.sbuf import Sbuf
    src = Path(args.program)
    data = src.read_bytes() if src.suffix == ".bin" else assemble(src.read_text(), args.gen, source=str(src))
    sbuf = Sbuf.from_npz(args.sbuf) if args.sbuf else Sbuf()
    engine = Engine(args.gen, rows=args.rows, cols=args.cols, sbuf=sbuf, sbuf_latency=args.sbuf_latency)
    engine.write_reg("perf_cntr_cfg", 1)
    trace = engine.run(data)
    print(run_summary(engine, trace))
    if args.output:
        np.savez_compressed(args.output, psum=engine.psum.mem, sr_state=engine.psum.sr_state,
                            psum_writes=np.array([(e.cycle, e.data["partition"], e.data["offset"], e.data["bits"])
                                                  for e in trace.of_kind("psum_write")], np.int64).reshape(-1, 4))
        print(f"wrote {args.output} (psum [128, 16384] bytes, sr_state, psum_writes [cycle, partition, offset, bits])")
    return 1 if trace.stalled else 0


def cmd_regs(args) -> int:
    from tensore.regs import ROOT, generate
    for p in generate():
        print(f"wrote {p.relative_to(ROOT)}")
    return 0


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="tensore", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("dtypes", help="print the dtype table of a generation")
    p.add_argument("--gen", default="maverick")
    p.set_defaults(func=cmd_dtypes)
    p = sub.add_parser("demo", help="the main job (see README)")
    p.add_argument("--gen", default="maverick")
    p.add_argument("--rows", type=int, default=16)
    p.set_defaults(func=cmd_demo)
    p = sub.add_parser("asm", help="assemble a micro-op program (docs/isa.md) to 64-byte descriptors")
    p.add_argument("source")
    p.add_argument("-o", "--output")
    p.add_argument("--gen", required=True)
    p.set_defaults(func=cmd_asm)
    p = sub.add_parser("disasm", help="disassemble descriptors; lists every violation (exit 1 if any)")
    p.add_argument("binary")
    p.add_argument("--gen", required=True)
    p.set_defaults(func=cmd_disasm)
    p = sub.add_parser("run", help="run a program (.s or .bin) in the golden engine and print a summary")
    p.add_argument("program")
    p.add_argument("--gen", required=True)
    p.add_argument("--sbuf", help="npz with an array 'sbuf' ([partitions, bytes] uint8)")
    p.add_argument("-o", "--output", help="npz to write PSUM, SR states and the PSUM write trace to")
    p.add_argument("--rows", type=int, default=128)
    p.add_argument("--cols", type=int, default=None)
    p.add_argument("--sbuf-latency", type=int, default=2)
    p.set_defaults(func=cmd_run)
    p = sub.add_parser("regs", help="regenerate the register artefacts from rtl/regs/arr_seq.rdl")
    p.set_defaults(func=cmd_regs)
    args = parser.parse_args(argv)
    try:
        return args.func(args)
    except (ValueError, TypeError, OSError) as exc:
        print(f"tensore: error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
