"""Which timings changed between two runs beyond the noise: a change counts only when the time
moved by more than `pct` *and* by more than the two measurements' interquartile ranges added,
since a change inside the measured spread is noise, however large its percentage.

The one rule for `conform gate` (which fails on slowdowns) and the site's diffs, whose JavaScript
gets it from `significant_js` when the site is built. Pure functions over timing rows
(conform.store.queries.timings_of), so two runs compare the same way whether they live in one
database or two.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class TimingChange:
    """A timing that changed beyond the noise between two runs."""

    op: str
    dtype: str
    size_label: str
    shape: tuple[int, ...]
    old_s: float
    new_s: float
    old_iqr_s: float
    new_iqr_s: float

    @property
    def ratio(self) -> float:
        """new / old: 1.25 is 25% slower."""
        return self.new_s / self.old_s

    @property
    def kind(self) -> str:
        return "regression" if self.new_s > self.old_s else "improvement"

    def to_dict(self) -> dict[str, Any]:
        d = dataclasses.asdict(self)
        d["shape"] = list(self.shape)
        d["ratio"] = self.ratio
        d["kind"] = self.kind
        return d

    def describe(self) -> str:
        return (
            f"{self.op} {self.dtype} {self.size_label} {list(self.shape)}: {self.old_s * 1e6:.1f} us -> {self.new_s * 1e6:.1f} us "
            f"({(self.ratio - 1) * 100:+.0f}%, spread {(self.old_iqr_s + self.new_iqr_s) * 1e6:.1f} us)"
        )


PCT = 0.10  # the default share of the old time a change must exceed (`conform gate --timing-pct`)


def is_significant(old_s: float, old_iqr_s: float, new_s: float, new_iqr_s: float, *, pct: float = PCT) -> bool:
    """Whether old -> new is a real change: larger than `pct` of the old time *and* than the two
    measurements' interquartile ranges added together."""
    if not (old_s and old_s > 0 and new_s and new_s > 0):
        return False
    diff = abs(new_s - old_s)
    return diff > pct * old_s and diff > (old_iqr_s or 0.0) + (new_iqr_s or 0.0)


# `is_significant` for the site's diff of any two columns the reader picks (site/static/conform.js
# calls it); tests/test_site.py runs it with node against the function above.
_SIGNIFICANT_JS = """function (oldS, oldIqrS, newS, newIqrS) {
  if (!(oldS > 0 && newS > 0)) return false;
  var diff = Math.abs(newS - oldS);
  return diff > PCT * oldS && diff > (oldIqrS || 0) + (newIqrS || 0);
}"""


def significant_js(pct: float = PCT) -> str:
    """`is_significant` as a JavaScript function expression, `pct` filled in."""
    return _SIGNIFICANT_JS.replace("PCT", repr(float(pct)))


def describe_rule(pct: float = PCT) -> str:
    """The rule in words, for the pages that list changes."""
    return f"by more than {pct:.0%} and more than both interquartile ranges added"


def timing_changes(
    old_rows: list[dict[str, Any]], new_rows: list[dict[str, Any]], *, pct: float = PCT, side: str = "device"
) -> list[TimingChange]:
    """Significant changes (both directions) of `side` ("device" or "ref") times from one run's
    timing rows (conform.store.queries.timings_of) to another's, over the (op, dtype, size) timed
    in both with the same shape; largest ratio first."""
    if side not in ("device", "ref"):
        raise ValueError("side is 'device' or 'ref'")
    base = {(r["op"], r["dtype"], r["size_label"]): r for r in old_rows}
    changes = []
    for r in new_rows:
        b = base.get((r["op"], r["dtype"], r["size_label"]))
        if b is None or list(b["shape"]) != list(r["shape"]):
            continue  # not timed in both, or a different case: not comparable
        old, new = b[f"{side}_median_s"], r[f"{side}_median_s"]
        old_iqr, new_iqr = b[f"{side}_iqr_s"] or 0.0, r[f"{side}_iqr_s"] or 0.0
        if is_significant(old, old_iqr, new, new_iqr, pct=pct):
            changes.append(
                TimingChange(r["op"], r["dtype"], r["size_label"], tuple(r["shape"]), old, new, old_iqr, new_iqr)
            )
    return sorted(changes, key=lambda c: -abs(math.log(c.ratio)))


def slowdowns(
    old_rows: list[dict[str, Any]], new_rows: list[dict[str, Any]], *, pct: float = PCT, side: str = "device"
) -> list[TimingChange]:
    """The significant slowdowns among `timing_changes`, largest first."""
    return [c for c in timing_changes(old_rows, new_rows, pct=pct, side=side) if c.kind == "regression"]
