"""The layers depend one way: the golden model imports
neither Amaranth, the RTL, the cosimulation nor the command-line layer above it; the RTL never
imports the cosimulation or the CLI.  Read from the sources' import statements, functions included."""
import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
CLI_LAYER = ("tensore.cli", "tensore.args", "tensore.rtl_run", "tensore.inputs", "tensore.outputs", "tensore.kernels",
             "tensore.plot", "tensore.bench", "tensore.kernel_cli", "tensore.random_cli", "tensore.verify_cli",
             "tensore.mutate_cli", "tensore.regs")
FORBIDDEN = {"model": ("amaranth", "tensore.rtl", "tensore.cosim", *CLI_LAYER),
             "rtl": ("tensore.cosim", *CLI_LAYER)}


def imports(path: Path) -> set:
    """Every module a file imports, at any depth of its code."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            found |= {node.module} | {f"{node.module}.{a.name}" for a in node.names}
    return found


@pytest.mark.parametrize("layer", sorted(FORBIDDEN))
def test_layer_imports_only_below_it(layer):
    bad = [f"{path.relative_to(ROOT)} imports {name}" for path in sorted((ROOT / layer).rglob("*.py"))
           for name in sorted(imports(path))
           if any(name == f or name.startswith(f + ".") for f in FORBIDDEN[layer])]
    assert not bad, bad
