"""The SQLAlchemy models of conform's store.

Bump `SCHEMA_VERSION` and add a step to `migrations.MIGRATIONS` for every change here, so that a
database written by an earlier conform still opens.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

from sqlalchemy import JSON, Float, ForeignKey, Index, Integer, String, Text, UniqueConstraint
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column, relationship

SCHEMA_VERSION = 6


def utcnow() -> dt.datetime:
    return dt.datetime.now(dt.timezone.utc).replace(tzinfo=None)


class Base(DeclarativeBase):
    type_annotation_map = {dict[str, Any]: JSON, list[Any]: JSON}


class SchemaMigration(Base):
    """One applied schema step; the highest version is the database's schema version."""

    __tablename__ = "conform_schema"
    version: Mapped[int] = mapped_column(Integer, primary_key=True)
    description: Mapped[str] = mapped_column(String(200))
    applied_at: Mapped[dt.datetime] = mapped_column(default=utcnow)


class Environment(Base):
    """Where results were measured (or, kind="declared", read from a wheel): a column of the site's matrix."""

    __tablename__ = "environments"
    id: Mapped[int] = mapped_column(primary_key=True)
    fingerprint: Mapped[str] = mapped_column(String(64), unique=True)  # hash of the identifying fields
    kind: Mapped[str] = mapped_column(String(16), default="measured")  # "measured" | "declared"
    torch_version: Mapped[str] = mapped_column(String(64))
    torch_git: Mapped[str] = mapped_column(String(64), default="")
    python_version: Mapped[str] = mapped_column(String(32), default="")
    os: Mapped[str] = mapped_column(String(32), default="")
    os_version: Mapped[str] = mapped_column(String(64), default="")
    backend: Mapped[str] = mapped_column(String(64))
    device_name: Mapped[str] = mapped_column(String(200), default="")
    hostname: Mapped[str] = mapped_column(String(200), default="")
    details: Mapped[dict[str, Any]] = mapped_column(default=dict)  # backend.describe() and more
    created_at: Mapped[dt.datetime] = mapped_column(default=utcnow)

    runs: Mapped[list[Run]] = relationship(back_populates="environment")


class Run(Base):
    __tablename__ = "runs"
    id: Mapped[int] = mapped_column(primary_key=True)
    uuid: Mapped[str] = mapped_column(String(36), unique=True)  # stable across merges
    environment_id: Mapped[int] = mapped_column(ForeignKey("environments.id"))
    state: Mapped[str] = mapped_column(String(16), default="running")  # running|finished|interrupted|failed
    seed: Mapped[int] = mapped_column(Integer, default=0)
    options: Mapped[dict[str, Any]] = mapped_column(default=dict)  # ops, dtypes, examples, grad, ...
    ops_total: Mapped[int] = mapped_column(Integer, default=0)  # size of the installed torch's catalog
    cells_planned: Mapped[int] = mapped_column(Integer, default=0)
    conform_version: Mapped[str] = mapped_column(String(32), default="")
    started_at: Mapped[dt.datetime] = mapped_column(default=utcnow)
    finished_at: Mapped[dt.datetime | None] = mapped_column(default=None)

    environment: Mapped[Environment] = relationship(back_populates="runs")
    results: Mapped[list[Result]] = relationship(back_populates="run", cascade="all, delete-orphan")


class Op(Base):
    """An operator overload, keyed by its qualified name ("aten::add.Tensor")."""

    __tablename__ = "ops"
    id: Mapped[int] = mapped_column(primary_key=True)
    qualname: Mapped[str] = mapped_column(String(200), unique=True)
    variant: Mapped[str] = mapped_column(String(16), default="functional")
    family: Mapped[str] = mapped_column(String(32), default="other")
    tags: Mapped[list[Any]] = mapped_column(default=list)
    schema: Mapped[str] = mapped_column(Text, default="")  # as of the newest torch that stored it


class CatalogEntry(Base):
    """That an op existed in a run's torch, with the kernels declared there: lets the site say
    'new in 2.14' and 'gone since', and count coverage against the catalog of that version."""

    __tablename__ = "catalog_entries"
    run_id: Mapped[int] = mapped_column(ForeignKey("runs.id", ondelete="CASCADE"), primary_key=True)
    op_id: Mapped[int] = mapped_column(ForeignKey("ops.id"), primary_key=True)
    kernels: Mapped[list[Any]] = mapped_column(default=list)
    coverage: Mapped[str] = mapped_column(String(300), default="")  # why not exercised, if known


class DeclaredKernel(Base):
    """What a torch release's native_functions.yaml declares for an op and one dispatch key: the
    "declared" side shown beside measured outcomes. Rows belong to a kind="declared" environment.

    dispatch_key is a backend key (CPU, CUDA, MPS, XPU, Meta, SparseCPU, ...) with how "kernel" (its
    own dispatch entry) or "structured_delegate" (the kernel of the out= op it delegates to); or a
    composite key (CompositeImplicitAutograd, CompositeExplicitAutograd, ...) with how
    "composite_implicit" / "composite_explicit": available on every backend through decomposition.
    An op the release declares with no kernel at all has one row with dispatch_key "" and how "none".
    """

    __tablename__ = "declared_kernels"
    environment_id: Mapped[int] = mapped_column(ForeignKey("environments.id", ondelete="CASCADE"), primary_key=True)
    op_id: Mapped[int] = mapped_column(ForeignKey("ops.id"), primary_key=True)
    dispatch_key: Mapped[str] = mapped_column(String(64), primary_key=True)
    how: Mapped[str] = mapped_column(String(24))


class Result(Base):
    """One cell: op x dtype in one run."""

    __tablename__ = "results"
    __table_args__ = (
        UniqueConstraint("run_id", "op_id", "dtype", name="uq_result_cell"),
        Index("ix_results_op", "op_id"),
    )
    id: Mapped[int] = mapped_column(primary_key=True)
    run_id: Mapped[int] = mapped_column(ForeignKey("runs.id", ondelete="CASCADE"))
    op_id: Mapped[int] = mapped_column(ForeignKey("ops.id"))
    dtype: Mapped[str] = mapped_column(String(16))  # "float32", ..., "none" for ops without tensors
    outcome: Mapped[str] = mapped_column(String(24))
    phase: Mapped[str] = mapped_column(String(16), default="")  # "forward" | "backward" | "" where it failed
    examples_run: Mapped[int] = mapped_column(Integer, default=0)
    examples_passed: Mapped[int] = mapped_column(Integer, default=0)
    max_abs_err: Mapped[float | None] = mapped_column(Float, default=None)
    max_rel_err: Mapped[float | None] = mapped_column(Float, default=None)
    max_ulp_err: Mapped[float | None] = mapped_column(Float, default=None)
    rtol: Mapped[float | None] = mapped_column(Float, default=None)
    atol: Mapped[float | None] = mapped_column(Float, default=None)
    device_golden_err: Mapped[float | None] = mapped_column(Float, default=None)  # device vs float64 golden
    ref_golden_err: Mapped[float | None] = mapped_column(Float, default=None)  # reference vs golden
    message: Mapped[str] = mapped_column(Text, default="")
    duration_s: Mapped[float] = mapped_column(Float, default=0.0)
    # facts about the cell that are not its verdict (conform.judge.verdict.Finding.to_dict()): the CPU
    # reference deviating from float64, the CPU wrong where the device is right, precision edges
    findings: Mapped[list[Any] | None] = mapped_column(JSON, default=None)
    # why a skipped cell ran nothing (conform.outcomes.SKIP_REASONS): "no_kernel", "no_valid_case", ...
    skip_reason: Mapped[str] = mapped_column(String(24), default="")
    created_at: Mapped[dt.datetime] = mapped_column(default=utcnow)

    run: Mapped[Run] = relationship(back_populates="results")
    op: Mapped[Op] = relationship()
    failure: Mapped[Failure | None] = relationship(back_populates="result", cascade="all, delete-orphan", uselist=False)


class Failure(Base):
    """The minimal failing case hypothesis found for a non-pass cell, and how to reproduce it."""

    __tablename__ = "failures"
    id: Mapped[int] = mapped_column(primary_key=True)
    result_id: Mapped[int] = mapped_column(ForeignKey("results.id", ondelete="CASCADE"), unique=True)
    case: Mapped[dict[str, Any] | None] = mapped_column(JSON, default=None)  # generators.Case.to_json()
    repro: Mapped[str] = mapped_column(Text, default="")  # standalone reproduction script
    traceback: Mapped[str] = mapped_column(Text, default="")
    # the cell's failures of other kinds, found after this one (CellResult.further_failures)
    further_failures: Mapped[list[Any] | None] = mapped_column(JSON, default=None)

    result: Mapped[Result] = relationship(back_populates="failure")


class Timing(Base):
    """One op timed at one size on both sides (the serial timing pass)."""

    __tablename__ = "timings"
    __table_args__ = (UniqueConstraint("run_id", "op_id", "dtype", "size_label", name="uq_timing"),)
    id: Mapped[int] = mapped_column(primary_key=True)
    run_id: Mapped[int] = mapped_column(ForeignKey("runs.id", ondelete="CASCADE"))
    op_id: Mapped[int] = mapped_column(ForeignKey("ops.id"))
    dtype: Mapped[str] = mapped_column(String(16))
    size_label: Mapped[str] = mapped_column(String(16))  # "small" | "medium" | "large"
    shape: Mapped[list[Any]] = mapped_column(default=list)
    layout: Mapped[str] = mapped_column(String(16), default="contiguous")
    numel: Mapped[int] = mapped_column(Integer, default=0)
    device_median_s: Mapped[float | None] = mapped_column(Float, default=None)
    device_iqr_s: Mapped[float | None] = mapped_column(Float, default=None)
    device_kernel_s: Mapped[float | None] = mapped_column(
        Float, default=None
    )  # device-event time (conform.timing.timer), not kernel time
    ref_median_s: Mapped[float | None] = mapped_column(Float, default=None)
    ref_iqr_s: Mapped[float | None] = mapped_column(Float, default=None)
    repeats: Mapped[int] = mapped_column(Integer, default=0)
    # the uncertainty of each side's time (conform.timing.timer.measure_stable): the interval it
    # lies in, and whether it is stable; an unstable side has no median, only where it was seen.
    # None on timings stored before these were measured.
    device_low_s: Mapped[float | None] = mapped_column(Float, default=None)
    device_high_s: Mapped[float | None] = mapped_column(Float, default=None)
    device_stable: Mapped[bool | None] = mapped_column(default=None)
    ref_low_s: Mapped[float | None] = mapped_column(Float, default=None)
    ref_high_s: Mapped[float | None] = mapped_column(Float, default=None)
    ref_stable: Mapped[bool | None] = mapped_column(default=None)

    @property
    def speedup(self) -> float | None:
        if self.device_median_s and self.ref_median_s:
            return self.ref_median_s / self.device_median_s
        return None


class ModelResult(Base):
    """One `conform model` verdict: a model (its SPEC) on one environment."""

    __tablename__ = "model_results"
    __table_args__ = (Index("ix_model_results_spec", "spec"),)
    id: Mapped[int] = mapped_column(primary_key=True)
    environment_id: Mapped[int] = mapped_column(ForeignKey("environments.id", ondelete="CASCADE"))
    spec: Mapped[str] = mapped_column(String(300))  # "torchvision:resnet18", "hf:gpt2", ...
    dtype: Mapped[str] = mapped_column(String(16), default="float32")
    train: Mapped[bool] = mapped_column(default=True)
    verdict: Mapped[str] = mapped_column(String(24))  # runs | runs_with_fallback | fails | diverges
    fails_at: Mapped[dict[str, Any] | None] = mapped_column(JSON, default=None)  # op, module, error
    divergence: Mapped[dict[str, Any] | None] = mapped_column(JSON, default=None)  # culprit op, module, errors
    whole: Mapped[dict[str, Any] | None] = mapped_column(JSON, default=None)  # the whole-model comparison
    times: Mapped[dict[str, Any]] = mapped_column(default=dict)
    traced: Mapped[dict[str, Any]] = mapped_column(default=dict)  # where, calls, distinct cases, ops
    divergence_repro: Mapped[str] = mapped_column(Text, default="")
    conform_version: Mapped[str] = mapped_column(String(32), default="")
    created_at: Mapped[dt.datetime] = mapped_column(default=utcnow)

    ops: Mapped[list[ModelOp]] = relationship(back_populates="model_result", cascade="all, delete-orphan")


class ModelOp(Base):
    """One op a model dispatched: its outcome over the model's traced calls of it, and its time."""

    __tablename__ = "model_ops"
    __table_args__ = (Index("ix_model_ops_op", "op_id"),)
    model_result_id: Mapped[int] = mapped_column(ForeignKey("model_results.id", ondelete="CASCADE"), primary_key=True)
    op_id: Mapped[int] = mapped_column(ForeignKey("ops.id"), primary_key=True)
    outcome: Mapped[str] = mapped_column(String(24))
    calls: Mapped[int] = mapped_column(Integer, default=0)
    cases: Mapped[list[Any]] = mapped_column(default=list)  # each traced call: its case, calls, outcome, times
    module: Mapped[str] = mapped_column(String(300), default="")
    message: Mapped[str] = mapped_column(Text, default="")
    device_s: Mapped[float | None] = mapped_column(Float, default=None)  # calls x time per step
    cpu_s: Mapped[float | None] = mapped_column(Float, default=None)
    repro: Mapped[str] = mapped_column(Text, default="")

    model_result: Mapped[ModelResult] = relationship(back_populates="ops")
    op: Mapped[Op] = relationship()
