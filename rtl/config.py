"""The engine's build parameters, one record taken by every unit (D-T103, as Gemmini's
GemminiArrayConfig): the generation, the array's rows and columns, elements per PE, the SBUF latency,
the PSUM partitions and their write ports, a specialised build's dtypes (D-T62), 32-bit MatmulSparse
fmaps (D-T40 (3)) and the timing profile (D-T98).

Its fields are plain values (a generation's and a profile's names, a tuple of dtypes), so a Config
crosses processes (rtl/export.py's second converter, a dask worker) and names a cached build
(`label`, cosim/hdl.py).  The defaults are resolved here once: 0 columns is the generation's full
width (256 on MAVERICK, else 128), pack 0 its default elements per PE (`default_pack`)."""
from __future__ import annotations

from dataclasses import dataclass

from tensore.model.addrmap import PARTITIONS
from tensore.model.dtypes import Dtype, Gen
from tensore.model.isa.microop import row_tile
from tensore.model.timing import DEFAULT_PROFILE, DEFAULT_SBUF_LATENCY
from tensore.model.timing import profile as timing_profile

PSUM_PORTS = 2          # the writes a PSUM partition takes in one cycle, as the engine is built by default
PACKS = (1, 2, 4, 8)    # elements per PE the RTL streams: 1, 2 (FP8 double row), 4 or 8 (MX pumps)


def default_pack(gen) -> int:
    """Code slots per PE of a build that does not name them: 1 on MAVERICK, 2 elsewhere (D-T34)."""
    return 1 if Gen.parse(gen).layout == Gen.MAVERICK else 2


@dataclass(frozen=True)
class Config:
    gen: str                            # the generation's name (Gen)
    rows: int = 128
    cols: int = 0                       # 0: the generation's full width
    pack: int = 0                       # elements per PE; 0: default_pack
    sbuf_latency: int = DEFAULT_SBUF_LATENCY
    psum_partitions: int = PARTITIONS
    dtypes: tuple | None = None         # a specialised build (D-T62): the PE's operand dtypes
    psum_ports: int = PSUM_PORTS        # the writes a PSUM partition takes in one cycle (D-T40 (6))
    sparse32: bool = False              # 32-bit MatmulSparse fmaps (D-T40 (3))
    timing: str = DEFAULT_PROFILE       # the sequencer's profile of issue rules (model/timing.py, D-T98)

    def __post_init__(self):
        g = Gen.parse(self.gen)
        set_ = object.__setattr__.__get__(self)
        set_("gen", g.name)
        set_("cols", self.cols or (256 if g.layout == Gen.MAVERICK else 128))
        set_("pack", self.pack or default_pack(g))
        set_("dtypes", None if self.dtypes is None else tuple(Dtype(d) for d in self.dtypes))
        set_("timing", timing_profile(self.timing).name)
        if self.sbuf_latency < 2:
            raise ValueError("the RTL engine needs sbuf_latency >= 2 (one request register + the memory)")
        if self.pack not in PACKS:
            raise ValueError("the engine RTL streams 1, 2 (FP8 double row), 4 or 8 (MX) elements per PE")

    @property
    def generation(self) -> Gen:
        return Gen[self.gen]

    @property
    def maverick(self) -> bool:
        return self.generation.layout == Gen.MAVERICK

    @property
    def profile(self):
        """The timing profile (model/timing.py Profile)."""
        return timing_profile(self.timing)

    @property
    def tile(self) -> int:
        """The rows of a row tile: side by side under the profile's `row_tiles` (D-T100), else the array."""
        return row_tile(self.generation, self.rows) if self.profile.row_tiles else self.rows

    @property
    def column_loads(self) -> bool:
        """Plain weight loads take the column-serial port (rtl/column_load.py, D-T99)."""
        return self.profile.column_loads

    @property
    def label(self) -> str:
        """The build's name in caches and reports."""
        from tensore.rtl.fp.pe_mac import dtypes_suffix
        ports = "" if self.psum_ports == PSUM_PORTS else f"_w{self.psum_ports}"
        tp = "" if self.timing == DEFAULT_PROFILE else f"_t{self.timing}"
        return (f"{self.gen.lower()}_{self.rows}x{self.cols}_p{self.pack}_l{self.sbuf_latency}"
                f"_ps{self.psum_partitions}{ports}{'_s32' if self.sparse32 else ''}{dtypes_suffix(self.dtypes)}{tp}")

    def plain(self) -> dict:
        """The fields as JSON values (dtypes as numbers): Config(**c.plain()) == c."""
        return {**self.__dict__, "dtypes": None if self.dtypes is None else [int(d) for d in self.dtypes]}

    @classmethod
    def of(cls, program, *, pack=None, sbuf_latency=DEFAULT_SBUF_LATENCY, psum_partitions=16, dtypes=None,
           psum_ports=PSUM_PORTS, sparse32=False) -> "Config":
        """The build a program runs on (cosim/hdl.py): its generation, array and timing profile."""
        return cls(program.gen.name, program.rows, program.cols, pack or program.pack or 0, sbuf_latency,
                   psum_partitions, dtypes, psum_ports, sparse32, program.timing)
