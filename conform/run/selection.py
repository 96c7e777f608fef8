"""What a run covers: ops (from opdb), dtypes, and the cells (op x dtype) they make."""

from __future__ import annotations

import difflib

import torch

import generators
import opdb
from conform.errors import ConformError


def select_ops(expr: str):
    return opdb.select(expr)


def parse_dtypes(expr: str) -> list[str]:
    names = [d.strip().removeprefix("torch.") for d in expr.split(",") if d.strip()]
    if not names:
        raise ConformError("no dtypes given")
    bad = [n for n in names if not isinstance(getattr(torch, n, None), torch.dtype)]
    if bad:
        known = sorted(n for n in dir(torch) if isinstance(getattr(torch, n, None), torch.dtype))
        hints = {b: difflib.get_close_matches(b, known, n=2) for b in bad}
        detail = "; ".join(f"{b!r}" + (f" (did you mean {', '.join(h)}?)" if h else "") for b, h in hints.items())
        raise ConformError(f"unknown dtype {detail}")
    # canonical names: "float" -> "float32", "half" -> "float16"
    return list(dict.fromkeys(str(getattr(torch, n)).removeprefix("torch.") for n in names))


def plan_cells(ops, dtypes: list[str]) -> list[tuple[str, str]]:
    """(qualname, dtype) for every cell, in catalog order."""
    cells = []
    for op in ops:
        for dt in generators.cell_dtypes(op, dtypes):
            cells.append((op.qualname, dt))
    return cells
