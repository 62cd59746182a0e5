"""2-D convolution (groups = 1) as a GEMM program (docs/kernels.md).

out[b, co, y, x] = sum_{ci, i, j} X[b, ci, y*s + i*d - p, x*s + j*d - p] * W[co, ci, i, j].
Output channels are the array columns (PSUM partitions), output pixels the moving vectors.
Two forms: `direct` keeps one zero-padded image per input channel in its SBUF partition and reads
each filter tap as a strided 3-D access pattern (x, y, batch), one matmul per (tap, channel tile)
in one accumulate group, so nothing is duplicated; `im2col` builds the [pixels, ci*kh*kw] patch
matrix in SBUF and runs gemm().  `auto` takes direct when its patterns can express the problem
(one element per PE step, an output row fits a PSUM bank, steps fit int16, the images fit SBUF)
and it streams no more vectors than im2col (ceil(C_in / R) * kh * kw <= ceil(C_in * kh * kw / R)
K tiles: C_in a multiple of R, or one tap), else im2col."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from tensore.model import addrmap
from tensore.model.dtypes import Dtype, Gen
from tensore.kernels import gemm as G

STEP_MAX = 0x7FFF                   # TENSOR3D step_elem is int16 (D-20)


@dataclass
class ConvProgram(G.KernelProgram):
    out_nchw: tuple = (0, 0, 0, 0)
    method: str = "im2col"
    layout: str = "nchw"

    def to_image(self, C: np.ndarray) -> np.ndarray:
        """C [pixels, C_out] -> the output in the input's layout (NCHW or NHWC)."""
        b, co, h, w = self.out_nchw
        img = C.reshape(b, h, w, co)
        return img.transpose(0, 3, 1, 2).copy() if self.layout == "nchw" else img.copy()


@dataclass(frozen=True)
class ConvShape:
    batch: int
    cin: int
    h: int
    w: int
    cout: int
    kh: int
    kw: int
    stride: int
    pad: int
    dil: int

    @property
    def out_hw(self) -> tuple:
        ho = (self.h + 2 * self.pad - self.dil * (self.kh - 1) - 1) // self.stride + 1
        wo = (self.w + 2 * self.pad - self.dil * (self.kw - 1) - 1) // self.stride + 1
        return ho, wo


def _shape(x_shape, w_shape, stride, pad, dil, layout) -> ConvShape:
    x_shape, w_shape = tuple(x_shape), tuple(w_shape)
    if layout not in ("nchw", "nhwc"):
        raise ValueError(f"layout {layout!r}: nchw or nhwc")
    if len(x_shape) != 4 or len(w_shape) != 4:
        raise ValueError(f"X is [N, C, H, W] ({layout}) and W [C_out, C_in, kh, kw]; got {x_shape} and {w_shape}")
    b, ci, h, w = x_shape if layout == "nchw" else (x_shape[0], x_shape[3], x_shape[1], x_shape[2])
    if w_shape[1] != ci:
        raise ValueError(f"W has {w_shape[1]} input channels, X has {ci} (groups = 1)")
    if stride < 1 or dil < 1 or pad < 0:
        raise ValueError("stride and dilation >= 1, padding >= 0")
    s = ConvShape(b, ci, h, w, w_shape[0], w_shape[2], w_shape[3], stride, pad, dil)
    if min(s.out_hw) < 1 or 0 in x_shape + w_shape:
        raise ValueError(f"no output: input {h}x{w}, kernel {s.kh}x{s.kw}, stride {stride}, pad {pad}, dilation {dil}")
    return s


def plan(x_shape, w_shape, *, stride=1, pad=0, dil=1, layout="nchw", method="auto", dtype="bf16",
         out_dtype="fp32", gen="maverick", rows=None, cols=None, double_row=False) -> tuple:
    """(ConvShape, method used) of a convolution from the shapes alone, its SBUF need checked
    (direct: the padded images; im2col: gemm.check_size of the patch GEMM), so a problem too big
    is refused before any operand exists."""
    gen, dtype = Gen.parse(gen), Dtype.parse(dtype)
    s = _shape(x_shape, w_shape, stride, pad, dil, layout)
    G._check_dtype(dtype, gen)
    g = G.geometry(gen, rows, cols, dtype=dtype, out_dtype=out_dtype, double_row=double_row)
    if method not in ("auto", "direct", "im2col"):
        raise ValueError(f"method {method!r}: auto, direct or im2col")
    why = _direct_refusal(s, g, G.dt.format_of(dtype, gen).width // 8)
    if method == "direct" and why:
        raise ValueError(f"direct convolution cannot express this: {why}")
    if method == "auto" and -(-s.cin // g.rows) * s.kh * s.kw > -(-s.cin * s.kh * s.kw // g.k_tile):
        why = "more K tiles than im2col"
    if method == "im2col" or why:
        ho, wo = s.out_hw
        G.check_size(s.batch * ho * wo, s.cin * s.kh * s.kw, s.cout, dtype=dtype, out_dtype=out_dtype, gen=gen,
                     rows=rows, cols=cols, double_row=double_row)
        return s, "im2col"
    return s, "direct"


def im2col(xc: np.ndarray, s: ConvShape, tap_major=False) -> np.ndarray:
    """[N, C, H, W] codes -> [N*Ho*Wo, C*kh*kw] (k = c*kh*kw + i*kw + j; tap_major: (i*kw + j)*C + c),
    padding as code 0 (+0.0 in every format)."""
    ho, wo = s.out_hw
    xp = np.zeros((s.batch, s.cin, s.h + 2 * s.pad, s.w + 2 * s.pad), xc.dtype)
    xp[:, :, s.pad:s.pad + s.h, s.pad:s.pad + s.w] = xc
    taps = [xp[:, :, i * s.dil:i * s.dil + s.stride * (ho - 1) + 1:s.stride,
               j * s.dil:j * s.dil + s.stride * (wo - 1) + 1:s.stride] for i in range(s.kh) for j in range(s.kw)]
    t = np.stack(taps, axis=2 if not tap_major else 1)       # [N, C, T, Ho, Wo] or [N, T, C, Ho, Wo]
    return t.transpose(0, 3, 4, 1, 2).reshape(s.batch * ho * wo, -1)


def conv2d(X, W, *, stride=1, pad=0, dil=1, layout="nchw", method="auto", dtype="bf16", out_dtype="fp32",
           gen="maverick", rows=None, cols=None, fp32_mode=None, double_row=False, rounding="rne",
           psum_banks=4) -> ConvProgram:
    """The convolution of float X by W as a program; read with prog.read(trace) -> [pixels, C_out]
    and prog.to_image()."""
    gen, dtype = Gen.parse(gen), Dtype.parse(dtype)
    X, W = np.asarray(X), np.asarray(W)
    s, used = plan(X.shape, W.shape, stride=stride, pad=pad, dil=dil, layout=layout, method=method, dtype=dtype,
                   out_dtype=out_dtype, gen=gen, rows=rows, cols=cols, double_row=double_row)
    xc = G.quantise(X if layout == "nchw" else X.transpose(0, 3, 1, 2), dtype, gen)
    wc = G.quantise(W, dtype, gen)
    g = G.geometry(gen, rows, cols, dtype=dtype, out_dtype=out_dtype, double_row=double_row)
    kw = dict(dtype=dtype, out_dtype=out_dtype, gen=gen, rows=rows, cols=cols, fp32_mode=fp32_mode,
              double_row=double_row, rounding=rounding, psum_banks=psum_banks)
    ho, wo = s.out_hw
    if used == "im2col":
        base = G.gemm_codes(im2col(xc, s), wc.reshape(s.cout, -1).T.copy(), name="conv_im2col", **kw)
    else:
        base = _direct(xc, wc, s, g, **kw)
    prog = ConvProgram(**{f: getattr(base, f) for f in base.__dataclass_fields__},
                       out_nchw=(s.batch, s.cout, ho, wo), method=used, layout=layout)
    prog.note = (f"conv {s.batch}x{s.cin}x{s.h}x{s.w} * {s.cout}x{s.cin}x{s.kh}x{s.kw} stride {s.stride} "
                 f"pad {s.pad} dil {s.dil} ({used}): {base.note}")
    return prog


def _direct_refusal(s: ConvShape, g, es: int) -> str:
    hp, wp = s.h + 2 * s.pad, s.w + 2 * s.pad
    if g.pack != 1:
        return "double row packs two channels per PE step (im2col)"
    if s.out_hw[1] > g.m_tile:
        return f"an output row of {s.out_hw[1]} pixels is more than a PSUM bank ({g.m_tile})"
    if s.stride * wp > STEP_MAX:
        return f"the row step {s.stride * wp} does not fit int16"
    if -(-s.cin // g.rows) * s.batch * hp * wp * es + s.kh * s.kw * s.cout * es > addrmap.sbuf_bytes(g.gen) - 0x100:
        return "the padded images do not fit one SBUF partition"
    return ""


def _m_tiles(s: ConvShape, g, hp: int, wp: int) -> list:
    """(m0, m, b0, nb, y0, ny): whole images per tile when they fit a bank, else runs of rows."""
    ho, wo = s.out_hw
    per_img = ho * wo
    out = []
    if per_img <= g.m_tile and hp * wp <= STEP_MAX:
        nb = g.m_tile // per_img
        for b0 in range(0, s.batch, nb):
            k = min(nb, s.batch - b0)
            out.append((b0 * per_img, k * per_img, b0, k, 0, ho))
        return out
    ny = max(1, min(ho, g.m_tile // wo))
    for b in range(s.batch):
        for y0 in range(0, ho, ny):
            k = min(ny, ho - y0)
            out.append((b * per_img + y0 * wo, k * wo, b, 1, y0, k))
    return out


def _direct(xc, wc, s: ConvShape, g, *, dtype, out_dtype, gen, rows, cols, fp32_mode, double_row, rounding,
            psum_banks) -> G.KernelProgram:
    es = G.dt.format_of(dtype, gen).width // 8
    hp, wp = s.h + 2 * s.pad, s.w + 2 * s.pad
    ct = -(-s.cin // g.rows)
    taps = s.kh * s.kw
    x_blk = np.zeros((ct, g.rows, s.batch * hp * wp), xc.dtype)             # partition = channel in tile
    w_blk = np.zeros((ct, g.rows, taps * s.cout), wc.dtype)                 # element (tap, cout)
    xp = np.zeros((s.batch, s.cin, hp, wp), xc.dtype)
    xp[:, :, s.pad:s.pad + s.h, s.pad:s.pad + s.w] = xc
    xs = xp.transpose(1, 0, 2, 3).reshape(s.cin, -1)
    ws = wc.transpose(1, 2, 3, 0).reshape(s.cin, taps * s.cout)
    for t in range(ct):
        x_blk[t, :min(g.rows, s.cin - t * g.rows)] = xs[t * g.rows:(t + 1) * g.rows]
        w_blk[t, :min(g.rows, s.cin - t * g.rows)] = ws[t * g.rows:(t + 1) * g.rows]
    blocks = [np.ascontiguousarray(b.astype(G._UINT[es])).view(np.uint8) for b in (w_blk, x_blk)]
    sbuf, (w_off, x_off) = G._sbuf_image(blocks, gen)
    mode = G._fp32_mode(dtype, fp32_mode)
    out = Dtype.parse(out_dtype)
    txt = G._Text(g, dtype, mode, out)
    if rounding == "sr":
        G.sr_setup(sbuf, txt)
    tiles = _direct_schedule(txt, g, s, es, w_off, x_off, hp, wp, psum_banks)
    a_codes = im2col(xc, s, tap_major=True)
    b_codes = wc.transpose(2, 3, 1, 0).reshape(taps * s.cin, s.cout).copy()
    slices = [(tap * s.cin + t * g.rows, tap * s.cin + min(s.cin, (t + 1) * g.rows)) for t in range(ct)
              for tap in range(taps)]
    m = a_codes.shape[0]
    prog = G.KernelProgram("conv_direct", gen, g.rows, g.cols, "\n".join(txt.lines) + "\n", sbuf,
                           out_shape=(m, s.cout), out_dtype=out, tiles=tiles, half=g.half,
                           macs=m * s.cout * taps * s.cin, passes=G.FP32_PASSES[mode], pe_pack=1,
                           a_codes=a_codes, b_codes=b_codes, dtype=dtype, fp32_mode=mode, rounding=rounding,
                           k_slices=slices)
    prog.note = f"{m}x{taps * s.cin}x{s.cout} {dtype.name.lower()} -> {out.name.lower()}, {G.plural(len(txt.lines), 'micro-op')}"
    return prog


def _direct_schedule(txt, g, s: ConvShape, es, w_off, x_off, hp, wp, psum_banks) -> list:
    """Per N tile, per chunk of M tiles, per channel tile and tap: one Ldweights, one matmul per M
    tile whose source is the tap's strided 3-D window of the padded images."""
    tiles, bank = [], 0
    m_tiles = _m_tiles(s, g, hp, wp)
    taps = [(i, j) for i in range(s.kh) for j in range(s.kw)]
    for n0, nw, c256 in g.n_tiles(s.cout):
        nb = 2 if c256 else 1
        per_chunk = max(1, psum_banks // nb)
        for c in range(0, len(m_tiles), per_chunk):
            chunk, banks = m_tiles[c:c + per_chunk], []
            for _ in chunk:
                bank += bank % nb
                banks.append(bank % addrmap.PSUM_BANKS)
                bank = (bank + nb) % addrmap.PSUM_BANKS
            ops, last = {}, len(w_off) * len(taps) - 1
            step = 0
            for t in range(len(w_off)):
                k_rows = min(g.rows, s.cin - t * g.rows)
                for ti, (i, j) in enumerate(taps):
                    txt.ldweights(k_rows, nw, c256, w_off[t] + (ti * s.cout + n0) * es, nw)
                    for (m0, mw, b0, nbat, y0, ny), b in zip(chunk, banks):
                        start = x_off[t] + ((b0 * hp + y0 * s.stride + i * s.dil) * wp + j * s.dil) * es
                        img = hp * wp if nbat > 1 else 0
                        src = (f"(start_addr=sbuf(0,{start:#x}), step_elem=[{s.stride},{s.stride * wp},{img}], "
                               f"num_elem=[{s.out_hw[1]},{ny},{nbat}])")
                        k = txt.matmul(k_rows, nw, c256, 0, mw, b, step == 0, step == last, src=src)
                        ops.setdefault(m0, []).append(k)
                        if step == last:
                            tiles.append(G.Tile(m0, mw, n0, nw, b, nb, k, ops[m0][0], tuple(ops[m0])))
                    step += 1
    return tiles
