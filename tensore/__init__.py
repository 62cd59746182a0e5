"""tensore: an executable hardware model of the NeuronCore PE engine (TensorE).

The golden model, the RTL and the co-simulation live in the repository's `model/`, `rtl/` and
`cosim/` folders and import as `tensore.model`, `tensore.rtl` and `tensore.cosim` (docs/layout.md):
an installed wheel holds them inside this package; in a source checkout this package's path also
covers the repository root, so that the folders stay where they are.
"""
import os as _os

__version__ = "0.1.0"

_here = _os.path.dirname(_os.path.abspath(__file__))
_root = _os.path.dirname(_here)
if not _os.path.isdir(_os.path.join(_here, "model")) and \
        _os.path.isfile(_os.path.join(_root, "model", "engine", "core.py")):
    __path__.append(_root)
