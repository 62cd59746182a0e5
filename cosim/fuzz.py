"""Descriptor fuzz for the regression (issue #18 item 6, D-T74).

    mutants(gen, start, stop, seed)      descriptors start..stop-1 of a deterministic stream
    decoder_parity(gen, descs)           the RTL decoder (Verilated, cosim/vectors.py) names the same
                                         error code as the golden engine's checks for every descriptor
    engine_programs(gen, descs)          the same descriptors as programs for the golden engine (and
                                         the RTL lockstep), each checked against the watchdog bound

The stream mixes random bytes (1 in 4), valid descriptors of the library and of random programs
unchanged (1 in 8), and those with 1-3 random bytes changed (the rest).  Descriptor i depends only on
(gen, seed, i // CHUNK), so shards of whole chunks give the same descriptors on any machine."""
from __future__ import annotations

import functools

import numpy as np

from tensore.model.dtypes import Gen
from tensore.model.isa import DESCRIPTOR_BYTES, ErrorCode, check, decode, error_code

CHUNK = 1000
SEED = 20261130
WAIT_BYTE = 4                       # EVENTS.wait_event (D-20)


def full_size(gen) -> tuple:
    gen = Gen.parse(gen)
    return 128, 256 if gen.layout == Gen.MAVERICK else 128


@functools.cache
def _valid(gen) -> tuple:
    """Valid descriptors to mutate: the library's and those of a few random programs."""
    from tensore.cosim import programs, random_programs
    from tensore.model.isa.asm import assemble
    gen = Gen.parse(gen)
    out = []
    progs = programs.library(gen) + [random_programs.generate(gen, s, extras=4) for s in range(8)]
    for p in progs:
        code = assemble(p.text, gen)
        for i in range(0, len(code), DESCRIPTOR_BYTES):
            d = code[i:i + DESCRIPTOR_BYTES]
            if error_code(check(d, gen)) == ErrorCode.NONE:
                out.append(d)
    return tuple(dict.fromkeys(out))


def _chunk(gen, seed: int, k: int) -> list:
    gen = Gen.parse(gen)
    rng = np.random.default_rng([seed, int(gen), k])
    valid = _valid(gen)
    out = []
    for _ in range(CHUNK):
        kind = rng.random()
        if kind < 0.25:
            out.append(rng.integers(0, 256, DESCRIPTOR_BYTES, dtype=np.uint8).tobytes())
            continue
        d = bytearray(valid[int(rng.integers(0, len(valid)))])
        if kind >= 0.375:
            for _ in range(int(rng.integers(1, 4))):
                d[int(rng.integers(0, DESCRIPTOR_BYTES))] = int(rng.integers(0, 256))
        out.append(bytes(d))
    return out


def mutants(gen, start: int, stop: int, seed: int = SEED) -> list:
    """Descriptors start .. stop - 1 of the generation's fuzz stream."""
    out = []
    for k in range(start // CHUNK, (stop + CHUNK - 1) // CHUNK):
        chunk = _chunk(gen, seed, k)
        lo, hi = max(start - k * CHUNK, 0), min(stop - k * CHUNK, CHUNK)
        out += chunk[lo:hi]
    return out


def model_codes(gen, descs, rows: int, cols: int) -> list:
    """The golden engine's verdict per descriptor: the ISA checks, then the array-size rules."""
    from tensore.model.engine import Engine
    eng = Engine(gen, rows=rows, cols=cols)
    out = []
    for b in descs:
        d = decode(b, gen)
        v = check(d, array_cols=cols)
        if not v and d.layout is not None:
            v = eng.fits(d)
        out.append(int(error_code(v)))
    return out


def decoder_parity(gen, descs, rows: int | None = None, cols: int | None = None) -> dict:
    """The RTL decoder against the model for `descs` (its other inputs, the state of loaded weights,
    at 0 like the model's fresh engine): {"count", "codes" (histogram), "mismatches" [(index, hex,
    model, rtl)] (the first 20), "mismatch_count"}."""
    from tensore.cosim.vectors import VectorRunner
    from tensore.rtl.config import Config
    from tensore.rtl.decoder import Decoder
    gen = Gen.parse(gen)
    rows, cols = (rows, cols) if rows else full_size(gen)
    want = model_codes(gen, descs, rows, cols)
    run = VectorRunner(Decoder(Config(gen, rows, cols)), f"decoder_{gen.name.lower()}_{rows}x{cols}")
    idle = {name: np.zeros(len(descs), np.uint64) for name, _, is_in in run.ports if is_in and name != "desc"}
    got = [int(x) for x in run(desc=np.array([int.from_bytes(b, "little") for b in descs], object), **idle)["error"]]
    bad = [(i, descs[i].hex(), w, g) for i, (w, g) in enumerate(zip(want, got)) if w != g]
    hist: dict = {}
    for w in want:
        name = ErrorCode(w).name.lower() if w in ErrorCode._value2member_map_ else f"0x{w:02x}"
        hist[name] = hist.get(name, 0) + 1
    return {"count": len(descs), "codes": hist, "mismatches": bad[:20], "mismatch_count": len(bad)}


def _runs_alone(gen, d: bytes, rows: int, cols: int, sbuf) -> bool:
    from tensore.model.engine import Engine
    try:
        Engine(gen, rows=rows, cols=cols, sbuf=sbuf.copy_model()).run(d)
    except Exception:       # noqa: BLE001  (an SBUF window outside the image, a pattern too large)
        return False
    return True


class _Image:
    def __init__(self, data):
        self.data = data

    def copy_model(self):
        from tensore.model.sbuf import Sbuf
        return Sbuf(self.data.copy())


def engine_programs(gen, descs, *, rows: int = 8, cols: int | None = None, per_program: int = 100,
                    seed: int = SEED, name: str = "fuzz") -> list:
    """Programs of `per_program` fuzz descriptors for the golden engine on a small array, over a
    random SBUF image: a valid descriptor that cannot run alone on this image (an SBUF window outside
    it) is left out, and its wait for an event is cleared (no host sets events here)."""
    from tensore.cosim.programs import SBUF_BYTES, Program
    from tensore.model.isa.asm import disassemble
    gen = Gen.parse(gen)
    cols = cols or (2 * rows if gen.layout == Gen.MAVERICK else rows)
    rng = np.random.default_rng([seed, int(gen)])
    image = rng.integers(0, 256, (128, SBUF_BYTES), dtype=np.uint8)
    img = _Image(image)
    kept = []
    for b in descs:
        d = decode(b, gen)
        if d.layout is not None and not check(d, array_cols=cols):
            b = b[:WAIT_BYTE] + b"\xff" + b[WAIT_BYTE + 1:]
            if not _runs_alone(gen, b, rows, cols, img):
                continue
        kept.append(b)
    progs = []
    for k in range(0, len(kept), per_program):
        text = "".join(disassemble(b, gen, annotate=False) for b in kept[k:k + per_program])
        progs.append(Program(f"{name}_{gen.name.lower()}_{k // per_program}", gen, rows, cols, text, image.copy()))
    return progs
