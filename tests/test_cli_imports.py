"""The command line has no import cycle: only tensore/cli.py imports tensore.cli, the subcommand
modules take what they share from tensore/args.py and tensore/rtl_run.py, and no module of tensore/
imports another's private name.  Read from the sources' import statements, functions included."""
import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent.parent / "tensore"


def _script_entry(node) -> bool:
    """An `if __name__ == "__main__":` block: it runs only when the file is the script."""
    test = getattr(node, "test", None)
    return isinstance(node, ast.If) and isinstance(test, ast.Compare) and \
        isinstance(test.left, ast.Name) and test.left.id == "__name__"


def imports(path: Path) -> list:
    """(module, name or None, line) of every import in `path` outside a script entry block; relative
    imports resolved against the tensore package."""
    tree = ast.parse(path.read_text())
    entry = {id(n) for node in ast.walk(tree) if _script_entry(node) for n in ast.walk(node)}
    package = ".".join(("tensore", *path.parent.relative_to(PACKAGE).parts))
    found = []
    for node in ast.walk(tree):
        if id(node) in entry:
            continue
        if isinstance(node, ast.Import):
            found += [(a.name, None, node.lineno) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = package.rsplit(".", node.level - 1)[0] if node.level else ""
            module = ".".join(p for p in (base, node.module) if p)
            found += [(module, a.name, node.lineno) for a in node.names]
    return found


def test_only_cli_imports_tensore_cli():
    bad = {f"{path.relative_to(PACKAGE.parent)}:{line} imports tensore.cli"
           for path in sorted(PACKAGE.rglob("*.py")) if path != PACKAGE / "cli.py"
           for module, name, line in imports(path)
           if module == "tensore.cli" or module.startswith("tensore.cli.") or (module, name) == ("tensore", "cli")}
    assert not bad, sorted(bad)


def test_no_module_imports_a_private_name():
    bad = [f"{path.relative_to(PACKAGE.parent)}:{line} imports {name} from {module}"
           for path in sorted(PACKAGE.rglob("*.py"))
           for module, name, line in imports(path)
           if name and name.startswith("_") and not name.startswith("__")]
    assert not bad, bad
