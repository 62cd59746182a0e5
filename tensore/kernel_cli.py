"""`tensore gemm`, `tensore conv`, `tensore plot`: kernels on the golden engine, of random operands or
of the user's own (D-T88), optionally on the RTL in lockstep (D-T89; docs/kernels.md)."""
from __future__ import annotations

import argparse
import time

import numpy as np

from tensore import rtl_run
from tensore.args import (COLS_TYPE, GEN_HELP, GENS, NPZ_FILE, ROWS_TYPE, SEED_TYPE, array_cols, cosim_opt, input_file,
                          int_at_least, output_file, plot_file, timing_arg)
from tensore.model.dtypes import Dtype
from tensore.model.words import plural

DTYPE_HELP = ("input dtype, a name or alias: bf16, fp16, fp32, fp8_e4m3, fp8_e5m2, fp8_e3m4, fp8_e2m5 (MAVERICK); "
              "the generation's matmul inputs (`tensore dtypes --gen G`)")
CONV_HELP = {"batch": "images N", "cin": "input channels C_in", "height": "input height H",
             "width": "input width W", "cout": "output channels C_out (the array columns)",
             "kh": "filter height", "kw": "filter width", "stride": "stride (both axes)",
             "pad": "zero padding on every side", "dil": "dilation (both axes)"}
GEMM_SIZES = {"m": 256, "k": 256, "n": 128}             # random operands' sizes without flags
CONV_SIZES = {"batch": 1, "cin": 16, "height": 16, "width": 16, "cout": 32, "kh": 3, "kw": 3}
OPERAND_HELP = ("a .npy, or a .npz of one array (or FILE.npz:NAME), of float values (raw void elements, np.save of "
                "an ml_dtypes array, only with --raw-bits); every value must be one of --dtype's unless --quantise "
                "(default: random N(0, 1))")


def _engine_args(p, fp32_mode=None):
    p.add_argument("--dtype", default="bf16", help=DTYPE_HELP)
    p.add_argument("--gen", default="maverick", choices=GENS, type=str.lower, help=GEN_HELP)
    p.add_argument("--rows", type=ROWS_TYPE, default=None, help="array rows, a multiple of 4 up to 128 (default: 128)")
    p.add_argument("--cols", type=COLS_TYPE, default=None, help="array columns, a multiple of 4 (MAVERICK: 8) up to the "
                   "generation's full width (default: --rows, 2 x --rows on MAVERICK, as `tensore run` and `cosim`; "
                   "so without either option the full 128 x 128, MAVERICK 128 x 256)")
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
    p.add_argument("--psum-banks", type=int_at_least(1, hi=8), default=4, help="PSUM banks one chunk of output tiles uses (1-8)")
    p.add_argument("--seed", type=SEED_TYPE, default=0, help="seed of the random N(0, 1) operands")
    timing_arg(p)


def _run_args(p):
    from tensore.outputs import LAYOUT_HELP
    p.add_argument("--rtl", action="store_true", help="also run the program on the engine RTL in lockstep, every "
                   "cycle checked against the golden engine, as `tensore cosim` runs it (--sim)")
    p.add_argument("--sim", default="verilator", choices=["verilator", "icarus", "amaranth"], type=str.lower,
                   help="--rtl's simulator: verilator (the compiled harness; builds once per engine, any size), "
                   "icarus or amaranth (Amaranth's own, slow: small arrays)")
    p.add_argument("--asm", metavar="FILE", type=output_file(), help="write the program's assembly text here (default: not written)")
    p.add_argument("--sbuf-out", metavar="FILE", type=output_file(("", ".npz", ".npy"), "an SBUF image"), help="write the program's SBUF image here (.npz, array 'sbuf'; "
                   ".npy if so named): with --asm, `tensore cosim` / `tensore run` rerun the program (the line "
                   "printed names the command; default: not written)")
    p.add_argument("-o", "--output", metavar="NPZ", type=NPZ_FILE, help=LAYOUT_HELP + "; c, c_bits (C and its bit patterns), "
                   "rtl_c, rtl_c_bits with --rtl, y (conv: the output image) (docs/kernels.md; default: not written)")
    p.add_argument("-v", "--verbose", action="store_true",
                   help="--rtl: a line per executed micro-op in the lockstep summary")
    p.add_argument("--plot", metavar="PNG", type=plot_file, help="write a picture (PNG, or another format "
                   "matplotlib writes, by the suffix): timeline, PE utilisation, PSUM banks, error heatmap "
                   "(default: no picture)")


def _positive(args, names):
    for n in names:
        if getattr(args, n) < 1:
            raise ValueError(f"--{n.replace('_', '-')} must be >= 1, got {getattr(args, n)}")


def engine_size(args) -> tuple[int, int]:
    """(rows, cols) of the engine from --rows / --cols: rows default 128, cols by tensore.args.array_cols
    (--rows R alone is R x R, MAVERICK R x 2R), the rule of `run`, `cosim` and `cost`."""
    from tensore.model.isa.microop import ARRAY_ROWS
    rows = args.rows or ARRAY_ROWS
    return rows, array_cols(args.gen, rows, args.cols)


def _kw(args) -> dict:
    from tensore.model.dtypes import Dtype
    fp32 = Dtype.parse(args.dtype) == Dtype.FP32
    rows, cols = engine_size(args)
    return dict(dtype=args.dtype, gen=args.gen, rows=rows, cols=cols, out_dtype=args.out_dtype,
                rounding=args.rounding, fp32_mode=args.fp32_mode if fp32 else None, double_row=args.double_row,
                psum_banks=args.psum_banks)


def _pair(args, flags: tuple) -> bool:
    """True when the operands come from files: both of `flags` given (one alone is an error)."""
    given = [getattr(args, f) is not None for f in flags]
    if any(given) and not all(given):
        raise ValueError(f"--{flags[0]} and --{flags[1]}: both operands from files, or neither (random operands)")
    return all(given)


def _sizes_from(args, sizes: dict, shapes: dict) -> None:
    """Set each size option from the operands' shapes (`shapes`: option -> (value, operand file,
    its shape)); an explicit option that disagrees is an error."""
    for name, (value, spec, shape) in shapes.items():
        given = getattr(args, name)
        if given is not None and given != value:
            raise ValueError(f"--{name} {given} disagrees with {spec} (shape {list(shape)}: {name} = {value}); "
                             f"leave --{name} out, the operands give it")
        setattr(args, name, value)


def _load(args, spec: str, role: str, ndim: int):
    """One operand through tensore.inputs (D-T88): exact values of --dtype, or (--quantise, MX) finite
    values to round."""
    from tensore.inputs import load_operand
    return load_operand(spec, role=role, ndim=ndim, dtype=args.dtype, gen=args.gen,
                        exact=not (args.quantise or getattr(args, "mx", None)), raw_bits=args.raw_bits)


def _mx_back(args, x: np.ndarray, axis: int) -> np.ndarray:
    """x through its MX blocks' OCP quantisation along `axis` (D-21) and back to values, x's shape."""
    from tensore.kernels import mx as mxq
    codes, scales = mxq.quantise(x, args.dtype, args.gen, axis=axis)
    return np.moveaxis(np.moveaxis(mxq.values(codes, scales, args.dtype, args.gen, axis=axis), axis, 0)
                       [:x.shape[axis]], 0, axis)


def _exact_mx(args, spec: str, role: str, x: np.ndarray, axis: int) -> None:
    """MX operands: every value must be element x 2^scale of its block's OCP quantisation (D-21)."""
    from tensore.inputs import InputError
    back = _mx_back(args, x, axis)
    bad = back != x
    if bad.any():
        i = tuple(int(v) for v in np.argwhere(bad)[0])
        raise InputError(f"{spec}: operand {role}: {int(bad.sum())} of {x.size} values are not MX {args.mx} "
                         f"{args.dtype} values (blocks of 32 along K, one power-of-two scale each; the first is "
                         f"{float(x[i])!r} at {list(i)}, which quantises to {float(back[i])!r}); give exact values, "
                         "or --quantise to quantise them")


def _exact_2of4(spec: str, b: np.ndarray) -> None:
    """--sparse: B must keep at most 2 nonzeros in each group of 4 along K (nothing to prune)."""
    from tensore.inputs import InputError
    from tensore.kernels import sparse as sp
    k = -(-b.shape[0] // sp.GROUP) * sp.GROUP
    pad = np.zeros((k, b.shape[1]))
    pad[:b.shape[0]] = b
    nz = (pad.reshape(k // sp.GROUP, sp.GROUP, -1) != 0).sum(axis=1)
    if (nz > sp.KEEP).any():
        g, n = (int(v) for v in np.argwhere(nz > sp.KEEP)[0])
        raise InputError(f"{spec}: operand B is not 2:4 sparse along K: {plural(int((nz > sp.KEEP).sum()), 'group')} of 4 "
                         f"hold more than 2 nonzeros, the first rows {4 * g}..{4 * g + 3} of column {n}; prune it, "
                         "or --quantise to keep the 2 largest of each group")


def _rounded(args, what: str, x: np.ndarray, axis: int = 0) -> str:
    """--quantise: how many of an operand's values the kernel's rounding changes."""
    from tensore.kernels import gemm as G
    if getattr(args, "mx", None):
        back = _mx_back(args, x, axis)
    else:
        back = G.values(G.quantise(x, args.dtype, args.gen), args.dtype, args.gen)
    return f"{what} {int((back != x).sum())} of {x.size}"


def build_gemm(args):
    from tensore.kernels.gemm import check_size, gemm
    own = _pair(args, ("a", "b"))
    if own:
        A, B = _load(args, args.a, "A", 2), _load(args, args.b, "B", 2)
        if A.shape[1] != B.shape[0]:
            raise ValueError(f"A ({args.a}, shape {list(A.shape)}) and B ({args.b}, shape {list(B.shape)}) do not "
                             f"agree: A [M, K] @ B [K, N] needs A's columns = B's rows")
        _sizes_from(args, GEMM_SIZES, {"m": (A.shape[0], args.a, A.shape), "k": (A.shape[1], args.a, A.shape),
                                       "n": (B.shape[1], args.b, B.shape)})
    for name, default in GEMM_SIZES.items():
        setattr(args, name, default if getattr(args, name) is None else getattr(args, name))
    _positive(args, ("m", "k", "n"))
    kw = _kw(args)
    check_size(args.m, args.k, args.n, mx=args.mx, sparse=args.sparse,
               **{k: kw[k] for k in ("dtype", "out_dtype", "gen", "rows", "cols", "double_row")})
    if own:
        _check_exact_gemm(args, A, B)
    else:
        rng = np.random.default_rng(args.seed)
        A, B = rng.standard_normal((args.m, args.k)), rng.standard_normal((args.k, args.n))
    prog = gemm(A, B, mx=args.mx, sparse=args.sparse, **kw)
    prog.timing = args.timing
    if own:
        prog.operands = _operands_line(args, (("A", args.a, A, 1), ("B", args.b, B, 0)))
    prog.split = (A, B, dict(mx=args.mx, sparse=args.sparse, **kw))       # --rtl --jobs: split_gemm's inputs
    return prog


def _check_exact_gemm(args, A, B) -> None:
    if args.quantise:
        return
    if args.mx:
        _exact_mx(args, args.a, "A", A, 1)
        _exact_mx(args, args.b, "B", B, 0)
    if args.sparse:
        _exact_2of4(args.b, B)


def _operands_line(args, ops) -> str:
    """The printed line naming a run's own operands and, with --quantise, what rounding changed."""
    from tensore.model.dtypes import Dtype
    kind = f"MX {args.mx} {Dtype.parse(args.dtype).name.lower()}" if getattr(args, "mx", None) else \
        Dtype.parse(args.dtype).name.lower()
    names = ", ".join(f"{role} {list(x.shape)} from {spec}" for role, spec, x, _ in ops)
    if not args.quantise:
        return f"operands: {names}; every value exact in {kind}"
    changed = ", ".join(_rounded(args, role, x, axis) for role, _, x, axis in ops)
    pruned = " (B then pruned to 2:4)" if getattr(args, "sparse", False) else ""
    return f"operands: {names}; --quantise rounded to {kind}: {changed} values changed{pruned}"


def build_conv(args):
    from tensore.kernels.conv import conv2d, plan
    if args.mx or args.sparse:
        raise ValueError("--mx and --sparse: gemm only")
    own = _pair(args, ("x", "w"))
    if own:
        X, W = _load(args, args.x, "X", 4), _load(args, args.w, "W", 4)
        n, c, h, w = X.shape if args.layout == "nchw" else (X.shape[0], X.shape[3], X.shape[1], X.shape[2])
        if W.shape[1] != c:
            raise ValueError(f"X ({args.x}, shape {list(X.shape)}, {args.layout}) has {c} input channels, W "
                             f"({args.w}, shape {list(W.shape)}: [C_out, C_in, kh, kw]) has {W.shape[1]}")
        xs, ws = (args.x, X.shape), (args.w, W.shape)
        _sizes_from(args, CONV_SIZES, {"batch": (n, *xs), "cin": (c, *xs), "height": (h, *xs), "width": (w, *xs),
                                       "cout": (W.shape[0], *ws), "kh": (W.shape[2], *ws), "kw": (W.shape[3], *ws)})
    for name, default in CONV_SIZES.items():
        setattr(args, name, default if getattr(args, name) is None else getattr(args, name))
    _positive(args, ("batch", "cin", "height", "width", "cout", "kh", "kw", "stride", "dil"))
    shape = (args.batch, args.cin, args.height, args.width)
    x_shape = shape if args.layout == "nchw" else (shape[0], shape[2], shape[3], shape[1])
    w_shape = (args.cout, args.cin, args.kh, args.kw)
    kw = _kw(args)
    plan(x_shape, w_shape, stride=args.stride, pad=args.pad, dil=args.dil, layout=args.layout, method=args.method,
         **{k: kw[k] for k in ("dtype", "out_dtype", "gen", "rows", "cols", "double_row")})
    if not own:
        rng = np.random.default_rng(args.seed)
        X = rng.standard_normal(x_shape)
        W = rng.standard_normal(w_shape)
    prog = conv2d(X, W, stride=args.stride, pad=args.pad, dil=args.dil, layout=args.layout, method=args.method,
                  **kw)
    prog.timing = args.timing
    if own:
        prog.operands = _operands_line(args, (("X", args.x, X, 0), ("W", args.w, W, 0)))
    return prog


def _run_and_report(prog, args) -> int:
    from tensore.kernels import gemm as G
    from tensore.kernels.estimate import estimate, format_estimate
    from tensore.kernels.numerics import format_report, report
    _write_program(prog, args)
    t0 = time.perf_counter()
    C, trace, eng = G.run(prog, trace="aggregate")      # PSUM writes as arrays: fast on big GEMMs
    secs = time.perf_counter() - t0
    print(f"{prog.name}: {prog.note}; {prog.gen.name} {prog.rows} x {prog.cols}, timing {prog.timing}; "
          f"golden engine {secs:.2f} s")
    if prog.operands:
        print(prog.operands)
    print(format_estimate(estimate(prog, trace)))
    from tensore.kernels.public_cost import compare
    pub = compare(trace, prog.timing)
    if pub["public"]:
        print(f"  public cost model (nki.isa.nc_matmul, tiles in parallel): {pub['public']:,} cycles for the "
              f"{plural(len(pub['rows']), 'matmul')}; tensore {pub['ours']:,} ({pub['ratio']:.2f}x; `tensore cost` per matmul)")
    rep = report(prog, C)
    print(format_report(rep))
    status = 0 if rep["bit_exact"] else 1
    result: dict = {}
    jobs = _jobs(prog, args, trace.cycles)
    if args.rtl and jobs > 1:               # independent programs side by side (D-T94)
        status |= _rtl_split(prog, args, jobs, C, result)
    elif args.rtl:                          # tensore cosim's path (D-T89): the same engines, summary, checks
        status |= rtl_run.run_rtl(prog, args.sim, None, psum_partitions=max(16, prog.half), verbose=args.verbose,
                                  opt=cosim_opt("auto", prog.rows, prog.cols), result=result)
    if args.output:
        _write_output(prog, args.output, C, trace, eng, result.get("rtl_writes"), result.get("rtl_c"))
    if args.plot:
        from tensore import plot
        print(f"picture: {plot.dashboard(prog, trace, C, args.plot)}")
    return status


SPLIT_CYCLES = 20_000     # --jobs auto: a GEMM whose golden run is at least this long splits over the cores


def _jobs_arg(text: str):
    """An argparse type for --jobs: auto, or an integer >= 1."""
    if text.lower() == "auto":
        return "auto"
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is neither auto nor an integer") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"{value} is below 1")
    return value


def _jobs(prog, args, cycles: int) -> int:
    """How many programs --rtl runs side by side: --jobs, or (auto) the cores (at most 2) for a gemm
    on Verilator of at least SPLIT_CYCLES cycles and 2 rows of A; 1 otherwise."""
    import os
    jobs = getattr(args, "jobs", 1)
    if not args.rtl or not hasattr(prog, "split"):
        return 1
    if jobs == "auto":
        if args.dask:
            return 2
        big = cycles >= SPLIT_CYCLES and prog.out_shape[0] >= 2 and args.sim == "verilator"
        return min(2, os.cpu_count() or 1) if big else 1
    if int(jobs) > 1 and args.sim != "verilator":
        raise ValueError(f"--jobs {jobs}: the split runs on Verilator's compiled harness; --sim {args.sim} runs "
                         "one program (--jobs 1)")
    return int(jobs)


def _rtl_split(prog, args, jobs: int, C: np.ndarray, result: dict) -> int:
    """--rtl as `jobs` independent programs, blocks of C (tensore/kernels/split.py): one build, the parts at
    once, each checked every cycle; their C merged from the RTL's writes and compared with the
    whole GEMM's golden C (bit for bit unless stochastic rounding, whose state follows PSUM places)."""
    from tensore.kernels.split import merge, run_parts, split_gemm
    A, B, kw = prog.split
    parts = split_gemm(A, B, jobs, **kw)
    for part in parts:
        part.prog.timing = prog.timing
    where = f"dask {args.dask}" if args.dask else f"{min(jobs, len(parts))} worker processes"
    print(f"RTL on verilator: {plural(len(parts), 'program')} (" + "; ".join(p.where for p in parts)
          + f" of C) on {where}, one engine build, every cycle checked")
    res, wall, cfg = run_parts(parts, jobs=jobs, opt=cosim_opt("auto", prog.rows, prog.cols),
                               psum_partitions=max(16, prog.half), dask=args.dask,
                               log=lambda m: print(f"  {m}", flush=True))
    for part, r in zip(parts, res):
        print(f"  {part.where}: {plural(r['cycles'], 'cycle', fmt=',')}, {plural(r['checks'], 'check', fmt=',')}, "
              f"{r['seconds']:.2f} s, "
              f"lockstep vs golden engine: {'OK' if r['mismatch'] is None else r['mismatch']}")
    cycles = sum(r["cycles"] for r in res)
    print(f"  engine {cfg.label}; wall {wall:.2f} s for {cycles:,} cycles: {cycles / wall:,.0f} cycles/s, "
          f"{prog.rows * prog.cols * cycles / wall:,.0f} PE-cycles/s over the parts")
    rtl_c = merge(parts, res, C.shape)
    result["rtl_c"] = rtl_c
    same = np.array_equal(_bits(rtl_c, prog.out_dtype), _bits(C, prog.out_dtype))
    sr = prog.rounding == "sr" and prog.out_dtype != Dtype.FP32
    if sr:
        print(f"  C merged from the RTL's writes: {'the same as' if same else 'differs from'} the whole GEMM's "
              "golden C (stochastic rounding: each part draws from its own PSUM places)")
    else:
        print(f"  C merged from the RTL's writes: {'bit-exact to' if same else 'DIFFERS from'} the whole GEMM's golden C")
    return int(any(r["mismatch"] is not None for r in res) or not (same or sr))


def _bits(C: np.ndarray, out_dtype) -> np.ndarray:
    """C's bit patterns as the PSUM cells hold them: uint32 of fp32, uint16 of bf16."""
    from tensore.model.dtypes import Dtype
    raw = np.ascontiguousarray(C, np.float32).view(np.uint32)
    return (raw >> 16).astype(np.uint16) if Dtype.parse(out_dtype) == Dtype.BFLOAT16 else raw


def _write_output(prog, path, C, trace, eng, rtl_writes, rtl_c=None) -> None:
    """-o: the result file of tensore/outputs.py, plus C (golden and, when the RTL ran, its own)."""
    from tensore.outputs import save_results
    arrays = {"c": C, "c_bits": _bits(C, prog.out_dtype)}
    if hasattr(prog, "to_image"):
        arrays["y"] = prog.to_image(C)
    if rtl_writes is not None or rtl_c is not None:
        rc = rtl_c if rtl_c is not None else prog.read(trace, rtl_writes=rtl_writes)
        arrays |= {"rtl_c": rc, "rtl_c_bits": _bits(rc, prog.out_dtype)}
    out = save_results(path, eng, trace, rtl_writes=rtl_writes, **arrays)
    print(f"wrote {out} ({', '.join(['psum', 'sr_state', 'psum_writes'] + (['rtl_psum_writes'] if rtl_writes is not None else []) + list(arrays))})")


def _write_program(prog, args) -> None:
    """--asm and --sbuf-out: the program's text and SBUF image, as `tensore cosim` / `run` read them."""
    from tensore.inputs import SBUF_ARRAY
    from tensore.outputs import npz_path
    if args.asm:
        with open(args.asm, "w") as f:
            f.write(prog.text)
    if args.sbuf_out:
        if str(args.sbuf_out).endswith(".npy"):
            out = args.sbuf_out
            np.save(out, prog.sbuf)
        else:
            out = npz_path(args.sbuf_out)
            np.savez_compressed(out, **{SBUF_ARRAY: prog.sbuf})
        asm = args.asm or "PROG.s"
        print(f"wrote {out} (SBUF image [{prog.sbuf.shape[0]}, {prog.sbuf.shape[1]:,}] bytes); rerun: tensore cosim "
              f"{asm} --gen {prog.gen.name.lower()} --rows {prog.rows} --cols {prog.cols} --sbuf {out} "
              f"--psum-partitions {max(16, prog.half)}")


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
            prog.timing = args.timing
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
    for name, what in (("m", "rows of A and C (the moving vectors)"), ("k", "the contraction: columns of A, rows of B"),
                       ("n", "columns of B and C (the array columns)")):
        p.add_argument(f"--{name}", type=int, default=None,
                       help=f"{what} (default: {GEMM_SIZES[name]}, or the operands' shape)")
    p.add_argument("--a", metavar="FILE", type=input_file, help="operand A [M, K]: " + OPERAND_HELP)
    p.add_argument("--b", metavar="FILE", type=input_file, help="operand B [K, N]: " + OPERAND_HELP)
    _quantise_arg(p)


def _quantise_arg(p):
    """The options of how own operands are read: --quantise, --raw-bits."""
    p.add_argument("--raw-bits", action="store_true", help="operand files of raw void elements (np.save of an "
                   "ml_dtypes array) hold bit patterns of --dtype; without it such files are refused")
    p.add_argument("--quantise", action="store_true", help="own operands: round them to --dtype (RNE; MX: the OCP "
                   "block quantisation; --sparse: B pruned to 2:4) instead of refusing a value it cannot hold; "
                   "the run says how many values changed")


def register(sub) -> None:
    """Add the kernel subcommands to tensore's subparsers (tensore.cli's help formatter: every
    option's help names its default)."""
    p = sub.add_parser("gemm", help="C = A @ B (random operands) as a micro-op program on the golden engine: "
                       "cycle estimate and numerics")
    _gemm_sizes(p)
    _engine_args(p)
    _run_args(p)
    p.add_argument("--jobs", default="auto", type=_jobs_arg, metavar="N|auto",
                   help="--rtl on Verilator: run the GEMM as N independent programs side by side, C split in whole column "
                   "tiles (else in rows of A; one engine "
                   f"build; C merged and checked as one); auto: both cores for a golden run of {SPLIT_CYCLES:,} "
                   "cycles or more, else 1")
    p.add_argument("--dask", metavar="ADDRESS", help="--rtl: run the parts as tasks on a dask.distributed scheduler "
                   "(tcp://host:8786; workers with tensore installed and, to share the build, the same build "
                   "directory), or 'local' for a LocalCluster of --jobs workers (default: not used)")
    p.set_defaults(func=cmd_gemm)
    p = sub.add_parser("conv", help="2-D convolution (groups 1) as a micro-op program on the golden engine")
    for name, default in CONV_SIZES.items():
        p.add_argument(f"--{name}", type=int, default=None,
                       help=f"{CONV_HELP[name]} (default: {default}, or the operands' shape)")
    for name, default in (("stride", 1), ("pad", 1), ("dil", 1)):
        p.add_argument(f"--{name}", type=int, default=default, help=CONV_HELP[name])
    p.add_argument("--x", metavar="FILE", type=input_file, help="input images X [N, C_in, H, W] (--layout nhwc: [N, H, W, C_in]): "
                   + OPERAND_HELP)
    p.add_argument("--w", metavar="FILE", type=input_file, help="filters W [C_out, C_in, kh, kw]: " + OPERAND_HELP)
    _quantise_arg(p)
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
    p.add_argument("-o", "--output", default="tensore.png", type=plot_file,
                   help="the picture to write (PNG, or another format matplotlib writes, by the suffix)")
    p.add_argument("--sizes", default="16,32,64,128,256", help="sweep: M = K = N values")
    p.add_argument("--dtypes", default="bf16,fp32", help="sweep: input dtypes (fp32 with --fp32-mode)")
    _gemm_sizes(p)
    _engine_args(p, fp32_mode="high")
    p.set_defaults(func=cmd_plot)
