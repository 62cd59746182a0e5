"""`tensore gemm`, `tensore conv`, `tensore plot`: kernels on the golden engine (docs/kernels.md)."""
from __future__ import annotations

import argparse
import time

import numpy as np

from tensore.model.dtypes import Gen

GENS = [g.name.lower() for g in Gen]
DTYPE_HELP = ("input dtype, a name or alias: bf16, fp16, fp32, fp8_e4m3, fp8_e5m2, fp8_e3m4, fp8_e2m5 (MAVERICK); "
              "the generation's matmul inputs (`tensore dtypes --gen G`)")
CONV_HELP = {"batch": "images N", "cin": "input channels C_in", "height": "input height H",
             "width": "input width W", "cout": "output channels C_out (the array columns)",
             "kh": "filter height", "kw": "filter width", "stride": "stride (both axes)",
             "pad": "zero padding on every side", "dil": "dilation (both axes)"}


def _engine_args(p, fp32_mode=None):
    from tensore.cli import GEN_HELP
    p.add_argument("--dtype", default="bf16", help=DTYPE_HELP)
    p.add_argument("--gen", default="maverick", choices=GENS, type=str.lower, help=GEN_HELP)
    p.add_argument("--rows", type=int, default=None, help="array rows, a multiple of 4 up to 128 (default: 128)")
    p.add_argument("--cols", type=int, default=None, help="array columns, a multiple of 4 (MAVERICK: 8) up to the "
                   "generation's full width (default: the full width, 128; MAVERICK 256)")
    p.add_argument("--out-dtype", default="fp32", choices=["fp32", "bf16"], type=str.lower,
                   help="PSUM cells: fp32, or bf16 (MARIANA and later)")
    p.add_argument("--rounding", default="rne", choices=["rne", "sr"], type=str.lower,
                   help="bf16 PSUM rounding: round to nearest even or stochastic (D-18)")
    p.add_argument("--fp32-mode", default=fp32_mode, choices=["low", "high", "low_high"], type=str.lower,
                   help="passes of fp32 inputs (D-12)" + ("" if fp32_mode else "; default: none, fp32 input needs one"))
    p.add_argument("--double-row", action="store_true", help="FP8 double row (CAYMAN / MARIANA)")
    p.add_argument("--mx", default=None, choices=["quad_row", "oct_row"], type=str.lower,
                   help="gemm: MX blocks of 32 along K with E8M0 scales (MARIANA, FP8 elements; default: no MX)")
    p.add_argument("--sparse", action="store_true", help="gemm: prune B to 2:4 along K, run MatmulSparse")
    p.add_argument("--psum-banks", type=int, default=4, help="PSUM banks one chunk of output tiles uses (1-8)")
    p.add_argument("--seed", type=int, default=0, help="seed of the random N(0, 1) operands")


def _run_args(p):
    p.add_argument("--rtl", action="store_true", help="also run the program on the engine RTL in lockstep "
                   "(Amaranth simulator: small arrays, e.g. --rows 8 --cols 8)")
    p.add_argument("--asm", metavar="FILE", help="write the program's assembly text here (default: not written)")
    p.add_argument("--plot", metavar="PNG", help="write a PNG: timeline, PE utilisation, PSUM banks, error "
                   "heatmap (default: no picture)")


def _positive(args, names):
    for n in names:
        if getattr(args, n) < 1:
            raise ValueError(f"--{n.replace('_', '-')} must be >= 1, got {getattr(args, n)}")


def _kw(args) -> dict:
    from tensore.model.dtypes import Dtype
    fp32 = Dtype.parse(args.dtype) == Dtype.FP32
    return dict(dtype=args.dtype, gen=args.gen, rows=args.rows, cols=args.cols, out_dtype=args.out_dtype,
                rounding=args.rounding, fp32_mode=args.fp32_mode if fp32 else None, double_row=args.double_row,
                psum_banks=args.psum_banks)


def build_gemm(args):
    from tensore.kernels.gemm import check_size, gemm
    _positive(args, ("m", "k", "n"))
    kw = _kw(args)
    check_size(args.m, args.k, args.n, mx=args.mx, sparse=args.sparse,
               **{k: kw[k] for k in ("dtype", "out_dtype", "gen", "rows", "cols", "double_row")})
    rng = np.random.default_rng(args.seed)
    return gemm(rng.standard_normal((args.m, args.k)), rng.standard_normal((args.k, args.n)), mx=args.mx,
                sparse=args.sparse, **kw)


def build_conv(args):
    from tensore.kernels.conv import conv2d, plan
    if args.mx or args.sparse:
        raise ValueError("--mx and --sparse: gemm only")
    _positive(args, ("batch", "cin", "height", "width", "cout", "kh", "kw", "stride", "dil"))
    shape = (args.batch, args.cin, args.height, args.width)
    x_shape = shape if args.layout == "nchw" else (shape[0], shape[2], shape[3], shape[1])
    w_shape = (args.cout, args.cin, args.kh, args.kw)
    kw = _kw(args)
    plan(x_shape, w_shape, stride=args.stride, pad=args.pad, dil=args.dil, layout=args.layout, method=args.method,
         **{k: kw[k] for k in ("dtype", "out_dtype", "gen", "rows", "cols", "double_row")})
    rng = np.random.default_rng(args.seed)
    x = rng.standard_normal(x_shape)
    w = rng.standard_normal(w_shape)
    return conv2d(x, w, stride=args.stride, pad=args.pad, dil=args.dil, layout=args.layout, method=args.method,
                  **kw)


def _run_and_report(prog, args) -> int:
    from tensore.kernels import gemm as G
    from tensore.kernels.estimate import estimate, format_estimate
    from tensore.kernels.numerics import format_report, report
    if args.asm:
        with open(args.asm, "w") as f:
            f.write(prog.text)
    t0 = time.perf_counter()
    C, trace, _ = G.run(prog, trace="aggregate")         # PSUM writes as arrays: fast on big GEMMs
    secs = time.perf_counter() - t0
    print(f"{prog.name}: {prog.note}; {prog.gen.name} {prog.rows} x {prog.cols}; golden engine {secs:.2f} s")
    print(format_estimate(estimate(prog, trace)))
    rep = report(prog, C)
    print(format_report(rep))
    status = 0 if rep["bit_exact"] else 1
    if args.rtl:
        from tensore.cosim import lockstep
        bad = lockstep.run(prog, psum_partitions=max(16, prog.half))
        print("RTL lockstep (Amaranth): " + ("every PSUM write matches" if bad is None else f"MISMATCH {bad}"))
        status |= bad is not None
    if args.plot:
        from tensore import plot
        print(f"picture: {plot.dashboard(prog, trace, C, args.plot)}")
    return status


def cmd_gemm(args) -> int:
    return _run_and_report(build_gemm(args), args)


def cmd_conv(args) -> int:
    return _run_and_report(build_conv(args), args)


def cmd_plot(args) -> int:
    from tensore import plot
    from tensore.kernels import gemm as G
    if args.kind == "sweep":
        return _sweep(args)
    prog = build_gemm(args)
    C, trace, _ = G.run(prog, trace="aggregate")
    out = plot.dashboard(prog, trace, C, args.output) if args.kind == "all" else \
        plot.single(args.kind, prog, trace, C, args.output)
    print(f"picture: {out}")
    return 0


def _sweep(args) -> int:
    from tensore import plot
    from tensore.kernels import gemm as G
    from tensore.kernels.estimate import estimate
    sizes = [int(s) for s in args.sizes.split(",")]
    if any(s < 1 for s in sizes):
        raise ValueError("--sizes are positive integers")
    results = {}
    for dtype in args.dtypes.split(","):
        pts = []
        for s in sizes:
            rng = np.random.default_rng(args.seed)
            args.dtype = dtype
            kw = _kw(args)
            prog = G.gemm(rng.standard_normal((s, s)), rng.standard_normal((s, s)), **kw)
            _, trace, _ = G.run(prog, trace="aggregate")
            pts.append((s, estimate(prog, trace)["utilisation"]))
            print(f"{dtype} {s}^3: utilisation {100 * pts[-1][1]:.1f}%")
        results[dtype] = pts
    rows = prog.rows
    title = (f"PE utilisation vs GEMM size, {prog.gen.name} {rows} x {prog.cols} PEs\n"
             f"(ideal cycles / cycles; ideal = MACs x passes / PEs: each dtype at its own peak)")
    print(f"picture: {plot.sweep(results, args.output, title)}")
    return 0


def _gemm_sizes(p):
    p.add_argument("--m", type=int, default=256, help="rows of A and C (the moving vectors)")
    p.add_argument("--k", type=int, default=256, help="the contraction: columns of A, rows of B")
    p.add_argument("--n", type=int, default=128, help="columns of B and C (the array columns)")


def register(sub) -> None:
    """Add the kernel subcommands to tensore's subparsers (tensore.cli's help formatter: every
    option's help names its default)."""
    p = sub.add_parser("gemm", help="C = A @ B (random operands) as a micro-op program on the golden engine: "
                       "cycle estimate and numerics")
    _gemm_sizes(p)
    _engine_args(p)
    _run_args(p)
    p.set_defaults(func=cmd_gemm)
    p = sub.add_parser("conv", help="2-D convolution (groups 1) as a micro-op program on the golden engine")
    for name, default in (("batch", 1), ("cin", 16), ("height", 16), ("width", 16), ("cout", 32), ("kh", 3),
                          ("kw", 3), ("stride", 1), ("pad", 1), ("dil", 1)):
        p.add_argument(f"--{name}", type=int, default=default, help=CONV_HELP[name])
    p.add_argument("--layout", default="nchw", choices=["nchw", "nhwc"], type=str.lower,
                   help="memory layout of the input and output images")
    p.add_argument("--method", default="auto", choices=["auto", "direct", "im2col"], type=str.lower,
                   help="direct (strided 3-D patterns), im2col (patch matrix GEMM) or auto: direct when it "
                   "streams no more matmuls (D-T51)")
    _engine_args(p)
    _run_args(p)
    p.set_defaults(func=cmd_conv)
    p = sub.add_parser("plot", help="pictures of a GEMM run, or a utilisation sweep")
    p.add_argument("kind", choices=["all", "timeline", "pe", "psum", "error", "sweep"], type=str.lower,
                   help="all: the four views in one PNG; timeline, pe (PE utilisation), psum (bank occupancy), "
                   "error (heatmap against float64); sweep: utilisation against GEMM size")
    p.add_argument("-o", "--output", default="tensore.png", help="the PNG to write")
    p.add_argument("--sizes", default="16,32,64,128,256", help="sweep: M = K = N values")
    p.add_argument("--dtypes", default="bf16,fp32", help="sweep: input dtypes (fp32 with --fp32-mode)")
    _gemm_sizes(p)
    _engine_args(p, fp32_mode="high")
    p.set_defaults(func=cmd_plot)
