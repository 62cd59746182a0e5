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
    print(dtype_table(args.gen))
    return 0


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
