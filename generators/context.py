"""What every generator module shares: the `Context` of a case being drawn, the `OMIT` and
`VARARGS` markers, and `Untestable`. A module of its own so that `schema` (which drives a draw)
and the argument strategies and family builders (which it calls) import it, not each other.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from generators.strategies import DEFAULT_MAX_NUMEL


class Untestable(Exception):
    """No case can be generated for this op; `str(exc)` is the reason shown to users."""


# sentinel: leave the argument out of the call so the schema default applies
OMIT = object()
# key of ctx.fixed for the values a vararg schema ("...") takes after its declared arguments
VARARGS = "..."


@dataclass
class Context:
    """What has been drawn so far for one case; argument strategies read it."""

    op: Any  # OpSpec
    dtype: str  # the cell dtype for tensors; "float32" stands in for the "none" cell
    cell: str  # the cell as requested ("none" for ops without tensor inputs)
    max_numel: int
    draw: Callable
    values: str = "real"  # the op's input domain (OpRules.domain)
    shape: tuple[int, ...] = ()  # the main tensor's shape
    list_shapes: list[tuple[int, ...]] = field(default_factory=list)  # shapes for Tensor[] args
    per_tensor: int = DEFAULT_MAX_NUMEL
    fixed: dict[str, Any] = field(default_factory=dict)  # pre-drawn by a family builder
    drawn: dict[str, Any] = field(default_factory=dict)
    hints: dict[str, Any] = field(default_factory=dict)

    @property
    def rank(self) -> int:
        return len(self.shape)

    def size(self, dim: int) -> int:
        if not self.shape:
            return 1
        return self.shape[dim % self.rank]
