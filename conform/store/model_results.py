"""Writing and reading per-model verdicts (`conform model`): `model_results` and `model_ops`."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from sqlalchemy import func, select

import opdb
from conform.store.models import Environment, ModelOp, ModelResult, Op


def record_model(
    store,
    env: dict[str, Any],
    report: dict[str, Any],
    *,
    repros: dict[str, str],
    divergence_repro: str = "",
    conform_version: str = "",
) -> int:
    """Store one model verdict (`conform.model.verdict.ModelReport.to_dict()`) on `env` (an
    environment as conform.environment.capture makes it); `repros` maps an op to the repro script
    of its failing case. Returns the new row's id."""

    env_id = store.environment_id(env)
    specs = []
    for o in report["ops"]:
        try:
            specs.append(opdb.lookup(o["op"]))
        except opdb.UnknownOpError:
            continue
    ids = store.op_ids(specs)

    def go(s):
        row = ModelResult(
            environment_id=env_id,
            spec=report["model"],
            dtype=report["dtype"],
            train=bool(report["train"]),
            verdict=report["verdict"],
            fails_at=report["fails_at"],
            divergence=report["divergence"],
            whole=report["whole"],
            times=report["times"],
            traced=report["traced"],
            divergence_repro=divergence_repro,
            conform_version=conform_version,
        )
        for o in report["ops"]:
            if o["op"] not in ids:
                continue
            row.ops.append(
                ModelOp(
                    op_id=ids[o["op"]],
                    outcome=o["outcome"],
                    calls=o["calls"],
                    cases=o["cases"],
                    module=o["module"][:300],
                    message=o["message"],
                    device_s=o["device_s"],
                    cpu_s=o["cpu_s"],
                    repro=repros.get(o["op"], ""),
                )
            )
        s.add(row)
        s.flush()
        return row.id

    return store.write(go)


@dataclass(frozen=True)
class ModelRow:
    id: int
    environment_id: int
    spec: str
    dtype: str
    train: bool
    verdict: str
    fails_at: dict | None
    divergence: dict | None
    whole: dict | None
    times: dict
    traced: dict
    divergence_repro: str
    created_at: Any


@dataclass(frozen=True)
class ModelOpRow:
    op: str
    outcome: str
    calls: int
    cases: list
    module: str
    message: str
    device_s: float | None
    cpu_s: float | None
    repro: str


def _row(r: ModelResult) -> ModelRow:
    return ModelRow(
        r.id,
        r.environment_id,
        r.spec,
        r.dtype,
        r.train,
        r.verdict,
        r.fails_at,
        r.divergence,
        r.whole,
        r.times or {},
        r.traced or {},
        r.divergence_repro or "",
        r.created_at,
    )


def latest_models(store, *, spec: str | None = None) -> list[ModelRow]:
    """The newest verdict of each (model, environment, dtype, train), optionally of one SPEC."""
    with store.session() as s:
        newest = select(func.max(ModelResult.id)).group_by(
            ModelResult.spec, ModelResult.environment_id, ModelResult.dtype, ModelResult.train
        )
        if spec is not None:
            newest = newest.where(ModelResult.spec == spec)
        rows = s.scalars(select(ModelResult).where(ModelResult.id.in_(newest)).order_by(ModelResult.spec)).all()
        return [_row(r) for r in rows]


def model_ops(store, model_result_id: int) -> list[ModelOpRow]:
    with store.session() as s:
        rows = s.execute(
            select(ModelOp, Op.qualname)
            .join(Op, ModelOp.op_id == Op.id)
            .where(ModelOp.model_result_id == model_result_id)
        ).all()
        return [
            ModelOpRow(q, m.outcome, m.calls, m.cases or [], m.module, m.message, m.device_s, m.cpu_s, m.repro)
            for m, q in rows
        ]


def models_using(store) -> dict[str, list[tuple[str, str, int]]]:
    """op qualname -> [(model SPEC, the op's outcome in it, environment id)] over the newest verdicts."""
    latest = {r.id: r for r in latest_models(store)}
    if not latest:
        return {}
    with store.session() as s:
        rows = s.execute(
            select(Op.qualname, ModelOp.outcome, ModelOp.model_result_id)
            .join(Op, ModelOp.op_id == Op.id)
            .where(ModelOp.model_result_id.in_(list(latest)))
        ).all()
    out: dict[str, list[tuple[str, str, int]]] = {}
    for q, outcome, rid in rows:
        out.setdefault(q, []).append((latest[rid].spec, outcome, latest[rid].environment_id))
    return out


def environment_names(store) -> dict[int, str]:
    with store.session() as s:
        rows = s.execute(
            select(Environment.id, Environment.backend, Environment.device_name, Environment.torch_version)
        ).all()
    return {i: f"{b} · {d} · torch {t}" for i, b, d, t in rows}


def model_history(store, spec: str) -> list[ModelRow]:
    """Every stored verdict of one model SPEC, newest first."""
    with store.session() as s:
        rows = s.scalars(select(ModelResult).where(ModelResult.spec == spec).order_by(ModelResult.id.desc())).all()
        return [_row(r) for r in rows]
