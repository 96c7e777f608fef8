"""Which timings changed beyond the noise: the one rule for the gate and the site.

`is_change`: a time moved only when it moved by more than `pct` (PCT) of the old time *and* the
two timings' intervals do not overlap, since a change inside the measured spread is noise,
however large its percentage. A timing's interval (`interval`) is what conform.timing.timer's
`measure_stable` measured it in, widened to its median +- IQR (rows stored before intervals
were: median +- IQR alone). An unstable timing has no median and never changes.
The site's speedups follow the same rule (a device time against the CPU's): within the noise,
no speedup or slowdown is shown; its JavaScript gets the rule from `change_js` when the site is built.

Pure functions over timing rows (conform.store.queries.timings_of), so two runs compare the same
way whether they live in one database or two. `conform gate` fails on slowdowns.
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


PCT = 0.10


def interval(
    median_s: float | None, iqr_s: float | None = None, low_s: float | None = None, high_s: float | None = None
) -> tuple[float, float] | None:
    """Where a timing lies: median +- IQR, widened to its measured interval; None without a median."""
    if not median_s or median_s <= 0:
        return None
    spread = iqr_s or 0.0
    lo, hi = median_s - spread, median_s + spread
    return (min(lo, low_s) if low_s is not None else lo, max(hi, high_s) if high_s is not None else hi)


def is_change(
    old_s: float | None,
    old_iqr_s: float | None,
    new_s: float | None,
    new_iqr_s: float | None,
    *,
    pct: float = PCT,
    old_range: tuple[float | None, float | None] = (None, None),
    new_range: tuple[float | None, float | None] = (None, None),
) -> bool:
    """Whether old -> new is a real change: by more than `pct` of the old time, and with the two
    intervals apart (`*_range`: the measured (low, high), where stored)."""
    a, b = interval(old_s, old_iqr_s, *old_range), interval(new_s, new_iqr_s, *new_range)
    if a is None or b is None:
        return False
    return abs(new_s - old_s) > pct * old_s and (b[0] > a[1] or a[0] > b[1])


def row_change(old: dict[str, Any], new: dict[str, Any], *, side: str = "device", pct: float = PCT) -> bool:
    """`is_change` between two timing rows' `side` ("device" or "ref")."""
    return is_change(
        old.get(f"{side}_median_s"),
        old.get(f"{side}_iqr_s"),
        new.get(f"{side}_median_s"),
        new.get(f"{side}_iqr_s"),
        pct=pct,
        old_range=(old.get(f"{side}_low_s"), old.get(f"{side}_high_s")),
        new_range=(new.get(f"{side}_low_s"), new.get(f"{side}_high_s")),
    )


def speedup_is_real(row: dict[str, Any], *, pct: float = PCT) -> bool:
    """Whether a row's device time differs from its CPU time beyond the noise (`is_change` from
    the CPU's to the device's): only then is its speedup (or slowdown) one to show."""
    return is_change(
        row.get("ref_median_s"),
        row.get("ref_iqr_s"),
        row.get("device_median_s"),
        row.get("device_iqr_s"),
        pct=pct,
        old_range=(row.get("ref_low_s"), row.get("ref_high_s")),
        new_range=(row.get("device_low_s"), row.get("device_high_s")),
    )


# `is_change` for the site's diff of any two columns the reader picks (site/static/conform.js calls
# it with [median, low, high] of each side, as `interval` makes them); tests/test_site.py runs it
# with node against `is_change`.
_CHANGE_JS = """function (a, b) {
  if (!a || !b || !(a[0] > 0) || !(b[0] > 0)) return false;
  var apart = b[1] > a[2] || a[1] > b[2];
  return apart && Math.abs(b[0] - a[0]) > PCT * a[0];
}"""


def change_js(pct: float = PCT) -> str:
    """`is_change` as a JavaScript function expression over two [median, low, high], `pct` filled in."""
    return _CHANGE_JS.replace("PCT", repr(float(pct)))


def describe_rule(pct: float = PCT) -> str:
    """The rule in words, for the pages that list changes."""
    return f"by more than {pct:.0%}, outside both intervals"


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
        if row_change(b, r, side=side, pct=pct):
            changes.append(
                TimingChange(r["op"], r["dtype"], r["size_label"], tuple(r["shape"]), old, new, old_iqr, new_iqr)
            )
    return sorted(changes, key=lambda c: -abs(math.log(c.ratio)))


def slowdowns(
    old_rows: list[dict[str, Any]], new_rows: list[dict[str, Any]], *, pct: float = PCT, side: str = "device"
) -> list[TimingChange]:
    """The significant slowdowns among `timing_changes`, largest first."""
    return [c for c in timing_changes(old_rows, new_rows, pct=pct, side=side) if c.kind == "regression"]
