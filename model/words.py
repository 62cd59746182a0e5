"""Words of printed messages: `plural(n, "matmul")` -> "1 matmul", "2 matmuls"; every count a
`tensore` command prints goes through it."""
from __future__ import annotations


def plural(n: int, word: str, many: str | None = None, fmt: str = "") -> str:
    """`n` and `word`, in the plural (`many`, else `word` + "s") unless `n` is 1; `fmt` formats `n`
    (e.g. "," for thousands)."""
    return f"{n:{fmt}} {word if n == 1 else many or word + 's'}"
