"""Writing the timing pass's rows (conform.timing.bench): one `Timing` per (op, dtype, size) of a run."""

from __future__ import annotations

from typing import Any

from sqlalchemy import delete

from conform.errors import ConformError
from conform.store.models import Timing
from conform.store.queries import TIMING_FIELDS


def record_timings(store, run_id: int, rows: list[dict[str, Any]]) -> None:
    """Store timing rows (dicts as `conform.timing.bench.time_cell` makes them), replacing earlier
    timings of the same (op, dtype, size) in this run, in one transaction."""
    if not rows:
        return
    ids = {r["op"]: store.op_id(r["op"]) for r in rows}
    missing = [q for q, i in ids.items() if i is None]
    if missing:
        raise ConformError(f"timings for ops not in the store: {', '.join(missing)}")

    def go(s):
        for r in rows:
            s.execute(
                delete(Timing).where(
                    Timing.run_id == run_id,
                    Timing.op_id == ids[r["op"]],
                    Timing.dtype == r["dtype"],
                    Timing.size_label == r["size_label"],
                )
            )
            s.add(
                Timing(
                    run_id=run_id,
                    op_id=ids[r["op"]],
                    dtype=r["dtype"],
                    size_label=r["size_label"],
                    **{k: r.get(k) for k in TIMING_FIELDS},
                )
            )

    store.write(go)
