"""The arguments the `tensore` subcommands share: argparse types (integers in range, array sizes, files
to read and to write, C++ optimisation levels), their help texts and the checks main() makes once
the arguments are parsed."""
from __future__ import annotations

import argparse
import os
from pathlib import Path

from tensore.cosim.toolchain import OPT_ENV
from tensore.model import dtypes as dt
from tensore.model.addrmap import PARTITIONS
from tensore.model.isa.microop import ARRAY_ROWS, GROUPS

GEN_HELP = "chip generation (its ISA layouts, dtypes and array size)"
PROG_HELP = ("the program: assembly text (docs/isa.md) or binary 64-byte descriptors, told apart by content; "
             "- for stdin")
GENS = [g.name.lower() for g in dt.Gen]


def int_at_least(lo: int, what: str = "", hi: int | None = None, size: bool = False):
    """An argparse type: an integer (decimal or 0x hex) from `lo` (to `hi`), else a one-line usage
    error (SPEC section 9, D-T90).  `lo`, `hi` and `size` (an array dimension, checked again against
    the generation by check_array_args) are kept on it for tests/test_cli_bad_input.py's sweep."""
    def parse(text: str) -> int:
        try:
            value = int(text, 0)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not an integer") from None
        if value < lo:
            raise argparse.ArgumentTypeError(f"{value} is below {lo}{f' ({what})' if what else ''}")
        if hi is not None and value > hi:
            raise argparse.ArgumentTypeError(f"{value} is above {hi}{f' ({what})' if what else ''}")
        return value
    parse.__name__ = "integer"
    parse.lo, parse.hi, parse.size = lo, hi, size
    return parse


def array_dim(what: str):
    """An argparse type for --rows / --cols: an integer of at least GROUPS; main() then checks the
    whole array against the generation by model.engine.check_array, the one size rule."""
    return int_at_least(GROUPS, what, size=True)


ROWS_TYPE = array_dim(f"a multiple of {GROUPS} up to {ARRAY_ROWS}")
COLS_TYPE = array_dim(f"a multiple of {GROUPS} (MAVERICK: {2 * GROUPS}) up to the generation's full width")
COUNT_TYPE = int_at_least(1)                 # a number of things to do
SEED_TYPE = int_at_least(0, "numpy seeds are non-negative")
RTL_SBUF_LATENCY = int_at_least(2, "the RTL: a request register and the memory")
PSUM_PARTITIONS_TYPE = int_at_least(1, "PSUM partitions", hi=PARTITIONS)


class InputFile(str):
    """A file argument (input_file, input_path): checked by file_error once the arguments are
    parsed, so that a missing file is an exit 2 from main() like every other refused input."""
    dirs = False                 # a directory is accepted too

    def problem(self) -> str | None:
        """Why the file cannot be read, or None: `-` is stdin; `FILE.npz:NAME` names an array of
        FILE.npz."""
        if self == "-" or (self.dirs and os.path.isdir(self)):
            return None
        path = str(self) if os.path.exists(self) or ":" not in self else self.rsplit(":", 1)[0]
        if not os.path.exists(path):
            return f"{path}: no such file"
        if os.path.isdir(path):
            return f"{path}: a directory, not a file"
        try:
            with open(path, "rb"):
                pass
        except OSError as exc:
            return f"{path}: cannot be read ({exc.strerror})"
        return None


def input_file(text: str) -> InputFile:
    """An argparse type: a file to read, which must exist, be a file and be readable (file_error)."""
    return InputFile(text)


def input_path(text: str) -> InputFile:
    """An argparse type: a file to read as input_file, or a directory (tensore check-waves --engine)."""
    path = InputFile(text)
    path.dirs = True
    return path


def file_error(args, kind: type) -> str | None:
    """The first file argument of `args` of `kind` (InputFile: cannot be read; OutputFile: could not
    be written), as a one-line reason; else None."""
    for name, value in vars(args).items():
        for v in value if isinstance(value, list) else [value]:
            why = v.problem() if isinstance(v, kind) else None
            if why:
                return f"argument {name}: {why}"
    return None


class OutputFile(str):
    """A file or directory argument to write (output_file, output_dir, plot_file, npz_file): checked
    by file_error once the arguments are parsed, before any work, so that a name the command could
    not write is an exit 2 from main() like every other refused input, not an error after the run."""
    suffixes: tuple | None = None    # the suffixes the writer takes (None: any); "" is a name without one
    what = "file"                    # the words of the message: "a plot", "a waveform", ...
    directory = False                # a directory to write files into, not a file
    parents = False                  # the command creates missing parent directories

    def problem(self) -> str | None:
        """Why the command could not write here, or None: `-` is stdout."""
        if self == "-":
            return None
        path = Path(self)
        suffixes = self.allowed()
        if suffixes is not None and path.suffix.lower() not in suffixes:
            shown = ", ".join(s or "none" for s in suffixes)
            return f"{self}: unsupported suffix {path.suffix or '(none)'} for {self.what} (one of: {shown})"
        if path.is_dir() and not self.directory:
            return f"{self}: a directory, not a file"
        if path.exists() and not path.is_dir() and self.directory:
            return f"{self}: a file, not a directory"
        if path.exists():
            return None if os.access(path, os.W_OK) else f"{self}: not writable"
        parent = path.absolute().parent
        if self.parents or self.directory:            # created with its parents: the first that exists
            while not parent.exists():
                parent = parent.parent
        if not parent.exists():
            return f"{self}: directory {parent} does not exist"
        if not parent.is_dir():
            return f"{self}: {parent} is not a directory"
        if not os.access(parent, os.W_OK | os.X_OK):
            return f"{self}: directory {parent} is not writable"
        return None

    def allowed(self) -> tuple | None:
        return self.suffixes


class PlotFile(OutputFile):
    """A picture: the formats matplotlib writes (FigureCanvasBase.get_supported_filetypes)."""
    what = "a picture"

    def allowed(self) -> tuple:
        from matplotlib.backend_bases import FigureCanvasBase
        return tuple("." + s for s in FigureCanvasBase.get_supported_filetypes())


def output_file(suffixes: tuple | None = None, what: str = "file", parents: bool = False, directory: bool = False):
    """An argparse type: a file (or `directory`) to write, with one of `suffixes` (None: any), in an
    existing writable directory (`parents`: the command creates missing ones); see OutputFile."""
    def parse(text: str) -> OutputFile:
        out = OutputFile(text)
        out.suffixes, out.what, out.parents, out.directory = suffixes, what, parents, directory
        return out
    parse.__name__ = "output file"
    parse.output, parse.suffixes, parse.parents = True, suffixes, parents or directory   # for the bad-input sweep
    return parse


def output_dir(text: str) -> OutputFile:
    """An argparse type: a directory to write into, created with its parents when missing."""
    return output_file(directory=True)(text)


def plot_file(text: str) -> OutputFile:
    """An argparse type: a picture to write, its suffix one of matplotlib's formats."""
    return PlotFile(text)


output_dir.output, output_dir.suffixes, output_dir.parents = True, None, True
plot_file.output, plot_file.suffixes, plot_file.parents = True, (".png", ".pdf", ".svg"), False   # a few of them
NPZ_FILE = output_file(("", ".npz"), "an npz result file (.npz added when missing)")
WAVES_FILE = output_file((".fst", ".vcd"), "a waveform", parents=True)


def check_array_args(args) -> str | None:
    """The size rule (model.engine.check_array) on a subcommand's --rows / --cols for every
    generation it names; the one-line reason, or None.  `array_cols(gen, rows, cols)` (the
    subcommand's default, set_defaults) gives the array's columns from the options; --rows
    defaults to the full ARRAY_ROWS where the option has no default."""
    from tensore.model.engine import check_array
    if not hasattr(args, "rows") or not hasattr(args, "gen"):
        return None
    cols_of = getattr(args, "array_cols", array_cols)
    rows = args.rows or ARRAY_ROWS
    for gen in args.gen if isinstance(args.gen, list) else [args.gen]:
        try:
            check_array(gen, rows, cols_of(gen, rows, getattr(args, "cols", None)))
        except ValueError as exc:
            given = f"--rows {rows}" + (f" --cols {args.cols}" if getattr(args, "cols", None) else "")
            return f"{given} on {dt.Gen.parse(gen).name}: {exc}"
    return None


def array_cols(gen, rows: int, cols: int | None) -> int:
    """The array's columns when --cols is not given: `rows`, or 2 x `rows` on MAVERICK (whose full
    array is 128 x 256); the rule of `run` and `cosim` alike."""
    return cols or (2 * rows if dt.Gen.parse(gen).layout == dt.Gen.MAVERICK else rows)


def timing_arg(p) -> None:
    """--timing: the engine's profile of issue rules (model/timing.py PROFILES, D-T98), golden and RTL alike."""
    from tensore.model.timing import DEFAULT_PROFILE, PROFILES
    p.add_argument("--timing", default=DEFAULT_PROFILE, choices=list(PROFILES), type=str.lower,
                   help="the engine's timing profile (docs/timing.md, 'Timing profiles'): public, the rules of AWS's "
                   "public Tensor Engine cost model with weights loaded in the background (D-T99), or contract, "
                   f"the row-serial issue rules of docs/timing.md (default: {DEFAULT_PROFILE})")


OPT_HELP = ("C++ optimisation of the Verilator build: 0 (builds about twice as fast as 1), 1, 2 or 3 "
            "(also O1, or --opt=-O1)")
WAVES_DEPTH_HELP = ("levels of hierarchy in the waveform, the cosim wrapper (Amaranth: the engine) being 1; "
                    "0 (default): everything, every PE's registers by name (Verilator: the loop form's arrays "
                    "pe_<register>[row][col] with every block inlined, slower to build; Icarus, Amaranth: each "
                    "PE's scope); N: the quick build, N levels (D-T66)")


# `cosim --opt auto`: engines of at least this many PEs build at -O1 (docs/decisions.md, "cosim's C++
# optimisation follows the engine's size")
AUTO_OPT_PES = 64 * 64


def cosim_opt(opt: str, rows: int, cols: int) -> str | None:
    """The C++ optimisation `cosim` builds with: an explicit --opt; for `auto`, $TENSORE_OPT when set
    (None: cosim/toolchain.cxx_opt reads it), else -O1 for an engine of AUTO_OPT_PES PEs or more, -O0
    below (a small engine's build outweighs its run; a large one runs about 12x faster at -O1)."""
    if opt != "auto":
        return opt
    if os.environ.get(OPT_ENV):
        return None
    return "-O1" if rows * cols >= AUTO_OPT_PES else "-O0"


def opt_or_auto(text: str) -> str:
    """An argparse type: `auto` or a C++ optimisation level (opt_level)."""
    return "auto" if text.strip().lower() == "auto" else opt_level(text)


def opt_level(text: str) -> str:
    """An argparse type: a C++ optimisation level 0-3 (`1`, `O1`, `-O1`) as the flag `-O1`."""
    level = text.strip().lstrip("-").lstrip("Oo")
    if level not in ("0", "1", "2", "3"):
        raise argparse.ArgumentTypeError(f"{text!r}: a C++ optimisation level, 0, 1, 2 or 3")
    return f"-O{level}"


def waves_depth(text: str) -> int:
    """An argparse type: a waveform depth, 0 (everything) or a number of levels."""
    if not text.isdigit():
        raise argparse.ArgumentTypeError(f"{text!r}: a number of hierarchy levels, or 0 for everything")
    return int(text)
