"""What a run is asked to do, as one typed object from the command line to the workers.

`conform run`'s options (or `pytest -p conform.plugin --pyargs conform.suite --conform-*`) become a
`RunConfig`, checked once, here, as it is built; every default is written once, below. The
controller (conform.plugin.Controller) resolves what needs torch (the backend, the ops, the
dtypes) and hands each worker a `WorkerSetup` through xdist's `workerinput`, as its `to_json()`,
rebuilt there with `from_json()`. The device process gets `CellSettings`: how hard to try on one cell.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

from conform.errors import ConformError

# int32 as well as int64: MPS lacks int64 in places, and integer promotion bugs show on int32.
# Not uint8, by measurement: with it the default CPU sweep took 14 min 10 s of its 15 (25,769
# cells), too close to run on a slower machine; a sweep of its own (`--dtypes uint8`, about two
# minutes) finds what only its kernels have (the AVX uint8 resampling, Python integers outside
# 0..255 in comparisons, clamps and shifts)
DEFAULT_DTYPES = ("float32", "float16", "bfloat16", "float64", "complex64", "int64", "int32", "bool")
# On the CPU the reference is float64 itself, so a float64 cell would compare a computation with
# itself: it is left out of the CPU's default set (name it in --dtypes to run it anyway).
CPU_DEFAULT_DTYPES = tuple(d for d in DEFAULT_DTYPES if d != "float64")


@dataclass(frozen=True)
class CellSettings:
    """How hard to try on one cell; what the device process needs besides the cell itself."""

    # valid cases judged per cell: drawn cases and their value variants (values_per_draw). A
    # full sweep has ~22k cells; its passing cells take about two thirds of its time, nearly all
    # of it in their cases. On 2 cores (benchmarks/full_sweep.py, budget 15 minutes), every case
    # drawn: 18 minutes at 12, 15.7 at 8, 13.6 at 7. With a variant each: 17.3 at 14 (7 drawn),
    # 14.3 at 10 (5 drawn), which found 61 published bugs of 83 where 7 drawn cases found 65
    # (benchmarks/real_bugs.py --set all --seed 11): other values of a case found less than
    # other cases. So every case is drawn, 7 of them.
    examples: int = 7
    # cases per draw: the drawn case, then the same case with other values (each tensor's seed
    # derived from its own: generators.variants.reseeded). Drawing a case costs hypothesis about
    # as much as running it (benchmarks/example_cost.py), so a value variant costs about half a
    # drawn case; the drawn cases are the first of those the cell draws with 1 at the same
    # examples (hypothesis draws the next case the same whatever a passing case's variants did).
    # A failing variant is the cell's failure, shrunk as the drawn case's: each shrink step runs
    # the variants too. A case with no tensor values from a seed has none: all its cases are drawn.
    values_per_draw: int = 1
    # failures of other kinds a cell looks for after its first (conform.run.cell): within the
    # cell's own cases, so a failing cell draws what a passing one would (a device with two bugs in
    # one op shows both; the first alone hid the second)
    further_failures: int = 2
    grad: bool = True
    grad_examples: int = 3  # examples per cell whose gradients are compared (each costs a backward per side)
    relations: bool = True  # metamorphic relations and finite-difference gradients (conform.judge.metamorphic)
    relation_examples: int = 2  # examples per cell they run on: the first, then ones with special or extreme values
    seed: int = 0
    max_numel: int = 4096  # elements per case (all tensors together)
    cell_budget_s: float = 8.0  # generation time per cell before it stops asking for more
    # time hypothesis may spend shrinking one failure: most of the size goes first. At 1 s the
    # failing cells were 40% of a sweep's time; at 0.3 s, 34 of 40 failing cells sampled from a
    # sweep shrank to the same case and the other 6 to one of about the same size
    shrink_budget_s: float = 0.3
    hypothesis_db: str | None = ".conform/hypothesis"  # example database: failures replay first
    derandomize: bool = False

    def __post_init__(self):
        _at_least(1, examples=self.examples, max_numel=self.max_numel, values_per_draw=self.values_per_draw)
        _at_least(0, further_failures=self.further_failures)
        _positive(cell_budget_s=self.cell_budget_s)


# A case's hang limit by device. On the CPU and meta a default sweep's slowest whole cell takes 3 to
# 9 s (all its cases and their shrinking), and each of its three hangs (aten::count of an empty
# substring, binomial of a NaN count) held a worker for the whole limit: 10 s. An accelerator's
# first call of a kernel may compile it (Metal shaders on MPS, the jiterator's kernels on CUDA): 30 s.
AUTO_CASE_TIMEOUT_S = {"cpu": 10.0, "meta": 10.0, "accelerator": 30.0}


@dataclass(frozen=True)
class RunConfig:
    """One run's settings, valid once built (ConformError otherwise)."""

    device: str | None = None  # None: the best available accelerator, else the CPU
    ops: str = "all"
    dtypes: str | None = None  # None: DEFAULT_DTYPES, or CPU_DEFAULT_DTYPES on the plain CPU
    seed: int | None = None  # None: a random one, recorded with the run
    case_timeout_s: float | None = None  # a case running longer is a hang; None: case_timeout_for the device
    memory_limit: str = "auto"  # GiB | auto | none, see memory_limit_bytes
    cell: CellSettings = field(default_factory=CellSettings)
    db: str | None = None  # None: conform.db or $CONFORM_DB (conform.store)
    resume: str | None = None  # RUN_ID | latest: continue that run with its own settings
    workdir: str = ".conform"  # the hypothesis example database and per-run files
    progress: bool = False

    def __post_init__(self):
        if self.case_timeout_s is not None:
            _positive(case_timeout_s=self.case_timeout_s)
        _memory_limit_gib(self.memory_limit)
        if self.resume is not None and self.resume != "latest" and not self.resume.isdigit():
            raise ConformError(f"--resume takes a run id or 'latest', not {self.resume!r}")

    @classmethod
    def from_options(cls, **options) -> RunConfig:
        """From flat command-line options (CellSettings' fields among them); None means the default."""
        given = {k: v for k, v in options.items() if v is not None}
        # (the run's seed is RunConfig's; the controller gives each cell's settings the resolved one)
        cell_fields = {f.name for f in dataclasses.fields(CellSettings)} - {f.name for f in dataclasses.fields(cls)}
        cell = CellSettings(**{k: v for k, v in given.items() if k in cell_fields})
        return cls(cell=cell, **{k: v for k, v in given.items() if k not in cell_fields})

    # -- the run's row in the store (runs.options); a resumed run continues with what it recorded

    def stored_options(self) -> dict[str, Any]:
        return {
            "device": self.device, "ops": self.ops, "dtypes": self.dtypes, "examples": self.cell.examples,
            "values_per_draw": self.cell.values_per_draw,
            "further_failures": self.cell.further_failures, "grad": self.cell.grad, "max_numel": self.cell.max_numel,
            "case_timeout": self.case_timeout_s, "cell_budget": self.cell.cell_budget_s,
            "derandomize": self.cell.derandomize,
        }  # fmt: skip

    def resumed(self, options: dict[str, Any], seed: int) -> RunConfig:
        """This config continuing a stored run: the run's own settings (`options`, `seed`), this
        session's store, folders, memory limit and display."""
        cell = dataclasses.replace(
            self.cell,
            examples=options.get("examples", CellSettings.examples),
            # (a run stored before value variants drew every case)
            values_per_draw=options.get("values_per_draw", 1),
            # (a run stored before further failures looked for none)
            further_failures=options.get("further_failures", 0),
            grad=options.get("grad", CellSettings.grad),
            max_numel=options.get("max_numel", CellSettings.max_numel),
            cell_budget_s=options.get("cell_budget", CellSettings.cell_budget_s),
            derandomize=options.get("derandomize", CellSettings.derandomize),
        )
        return dataclasses.replace(
            self, device=options.get("device"), ops=options.get("ops", RunConfig.ops), dtypes=options.get("dtypes"),
            seed=seed, case_timeout_s=options.get("case_timeout", RunConfig.case_timeout_s), cell=cell,
        )  # fmt: skip

    def case_timeout_for(self, device_type: str) -> float:
        """Seconds one case may run before it is a hang: --case-timeout, else AUTO_CASE_TIMEOUT_S."""
        if self.case_timeout_s is not None:
            return float(self.case_timeout_s)
        return AUTO_CASE_TIMEOUT_S.get(device_type, AUTO_CASE_TIMEOUT_S["accelerator"])

    def memory_limit_bytes(self, device_type: str) -> int | None:
        """The address-space cap of each device process: 'auto' is 4 GiB on the CPU and meta,
        none on GPUs, whose drivers reserve large address ranges."""
        if self.memory_limit == "auto":
            return 4 << 30 if device_type in ("cpu", "meta") else None
        gib = _memory_limit_gib(self.memory_limit)
        return int(gib * (1 << 30)) if gib else None

    def to_json(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> RunConfig:
        return cls(**{**d, "cell": CellSettings(**d["cell"])})


@dataclass(frozen=True)
class WorkerSetup:
    """What each xdist worker needs to run cells: the run's settings (seed and dtypes resolved)
    and where the run keeps its files. Sent once per worker through `workerinput`."""

    config: RunConfig
    device_name: str  # what --device chose (repro scripts name it)
    run_dir: str  # plan.json, inflight/, crashed-ops.txt
    crashers: str  # the ops that crashed a process on this torch and device, across runs
    memory_limit: int | None  # bytes, from config.memory_limit and the device type
    # some of the run's cells run in a fresh process each (isolated ops, earlier crashers): their
    # fork server pays the first dispatch mode's imports once for all of them
    warm_dispatch: bool = False

    def to_json(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> WorkerSetup:
        return cls(**{**d, "config": RunConfig.from_json(d["config"])})


def _memory_limit_gib(value: str) -> float | None:
    if value in ("auto", "none"):
        return None
    try:
        gib = float(value)
    except ValueError:
        gib = -1.0
    if gib < 0 or gib != gib:
        raise ConformError(f"--memory-limit takes GiB, 'auto' or 'none', not {value!r}")
    return gib


def _at_least(minimum: int, **values) -> None:
    for name, v in values.items():
        if v < minimum:
            raise ConformError(f"--{name.replace('_', '-')} must be at least {minimum}, not {v}")


def _positive(**values) -> None:
    for name, v in values.items():
        if not v > 0:
            raise ConformError(
                f"--{name.removesuffix('_s').replace('_', '-')} must be a positive number of seconds, not {v:g}"
            )
