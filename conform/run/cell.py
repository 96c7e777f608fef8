"""One cell (op x dtype): hypothesis drives the examples, conform.run.execute runs each case.

This is what a pytest item of conform's suite calls. It never raises for anything the op or
the device does: every behaviour ends up in a `CellResult`, the record that travels to
the controller and the store (conform.results).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import re
import time
import traceback as tb
import zlib
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path

import hypothesis
import torch
from hypothesis import HealthCheck, Phase, Verbosity, given
from hypothesis.database import DirectoryBasedExampleDatabase
from hypothesis.errors import Flaky, Unsatisfiable
from hypothesis.internal import entropy
from hypothesis.internal.conjecture import engine

import generators
import opdb
from conform import backends
from conform.config import CellSettings, WorkerSetup
from conform.judge import references
from conform.judge.outcome import STICKY, skip_reason_of_case, skip_reason_of_empty_cell, sticky_error
from conform.judge.trees import bind_arguments
from conform.outcomes import INTERNAL_ERROR, NO_KERNEL, UNTESTABLE, Outcome
from conform.report.repro import repro_script
from conform.results import CellResult
from conform.run import execute
from conform.run.execute import CaseResult, is_plain_cpu
from conform.run.isolation import InFlight, Watchdog, apply_memory_limit, crashed_ops, op_base
from generators import Untestable, op_ranges, variants
from generators import backward as generators_backward
from generators.seeding import seed_only
from generators.tensor import base_magnitude

# Outcomes that are facts about the cell, not about one input: shrinking them teaches nothing,
# so the first occurrence ends the cell.
CELL_LEVEL = {Outcome.NOT_IMPLEMENTED, Outcome.UNSUPPORTED_DTYPE, Outcome.FALLBACK, Outcome.SKIPPED}


@dataclass
class _Progress:
    """What a cell's cases have shown so far."""

    failing: bool = False  # a case failed: hypothesis is shrinking it
    failure_class: tuple | None = None  # how it failed: a shrink step must fail the same way
    first_failure: tuple | None = None  # (CaseResult, case) of the first failure
    first_invalid: str = ""  # the first invalid case's message
    invalid_reasons: set[str] = field(default_factory=set)  # invalid cases' messages, numbers blanked
    no_kernel: bool = False  # every invalid case said the CPU has no kernel for the dtype
    out_variants_checked: int = 0  # passing out= cases whose out variants ran
    overlaps_checked: int = 0  # passing in-place cases run again with a self whose elements share memory
    sizes_checked: bool = False  # whether a passing case's wrongly sized inputs ran
    malformed_wide: bool = False  # whether the malformed arguments ran on a case past the simplest sizes
    # (case, contain_shapes) the malformed arguments are due on: they run once the cell's verdict
    # is in (_malformed_last), since a death ends the process and every check that would follow
    malformed_due: list = field(default_factory=list)
    wrong_size_failed: bool = False  # the cell's failure came from them (its shrink steps run them too)
    relation_runs: int = 0  # valid cases whose metamorphic relations ran
    differenced: bool = False  # a valid case's gradients were held against finite differences
    differenced_wide: bool = False  # ... one of them of the relations' size (RELATABLE_NUMEL)
    drawn: int = 0  # valid drawn cases (their value variants not counted)
    grad_modes: set = field(default_factory=set)  # the modes (see _modes) whose gradients ran
    mode_grads: int = 0  # gradient checks run because a case's mode was new
    stopped: bool = False  # stop_if ended the cell (a poisoned device context): nothing more runs
    known: set = field(default_factory=set)  # failure classes already reported: no longer failures to look for
    # drawn cases judged while nothing was failing, with their results: a search for further
    # failures draws the same cases first (the same seed) and takes their results from here
    judged: list = field(default_factory=list)


class _CaseFailed(Exception):
    """Raised inside the hypothesis test so that hypothesis shrinks the case."""

    def __init__(self, result, case):
        super().__init__(f"{result.outcome}: {result.message}")
        self.result = result
        self.case = case


class _StopCell(BaseException):
    """Ends the cell without shrinking: a cell-level fact was found, or the budget is spent.
    A BaseException, so that hypothesis lets it through instead of treating it as a failure."""

    def __init__(self, result=None, case=None):
        super().__init__()
        self.result = result
        self.case = case


class _GiveUp(KeyboardInterrupt):
    """Ends the cell with nothing found: its time budget is spent, or too many inputs were invalid.
    A KeyboardInterrupt because that is the one exception hypothesis lets through without saving
    the case in flight to the example database: saved, a case that proves nothing would be
    replayed first by the next run, which would then draw other cases and maybe another verdict."""


@contextlib.contextmanager
def _numpy_rng_unmanaged():
    """Hypothesis saves, seeds and restores NumPy's global RNG around every case it runs
    (hypothesis.internal.entropy.deterministic_PRNG): 0.2 ms a case, 3% of a sweep. Nothing a cell
    runs draws from it (cases come from hypothesis's choices and torch generators seeded from
    them), so while a cell searches it is left alone; Python's `random` is still managed.
    Reaches into hypothesis's internals (6.1xx); with another layout it does nothing."""
    managed = getattr(entropy, "RANDOMS_TO_MANAGE", None)
    if managed is None or not hasattr(entropy, "NP_RANDOM"):
        yield
        return
    before = entropy.NP_RANDOM
    # a wrapper in NP_RANDOM is what keeps hypothesis from registering one of its own
    wrapper = before if before is not None else object()
    entropy.NP_RANDOM = wrapper
    keys = [k for k, ref in list(managed.data.items()) if ref() is wrapper]
    for k in keys:
        del managed[k]
    try:
        yield
    finally:
        for k in keys:
            managed[k] = wrapper
        entropy.NP_RANDOM = before


def _set_shrink_budget(seconds: float) -> None:
    # hypothesis caps shrinking at 300 s and 500 shrinks; a sweep of thousands of cells needs a
    # much smaller cap. There is no public setting for it, hence the module attributes.
    engine.MAX_SHRINKING_SECONDS = seconds


def run_cell(
    op,
    dtype: str,
    backend,
    settings: CellSettings,
    *,
    on_case: Callable | None = None,
    after_case: Callable | None = None,
    stop_if: Callable | None = None,
    on_malformed: Callable | None = None,
) -> CellResult:
    """Run one cell. `on_case(case)` is called before each case runs and `after_case()` after
    (the worker uses them to record the case in flight and arm its hang watchdog). `stop_if(r)`
    sees each case's result; what it returns instead of None ends the cell as its verdict, with
    no shrinking (the device process uses it when an error poisoned the device context).
    `on_malformed(case, earlier)` is called before the malformed arguments of a passing case run,
    last, with what the cell found until then (see _malformed_last)."""
    started = time.monotonic()
    result = CellResult(op=op.qualname, dtype=dtype)
    if op.rules.untestable:
        result.message = f"untestable: {op.rules.untestable}"
        result.skip_reason = UNTESTABLE
        return result
    try:
        strategy = generators.from_schema(
            op, dtype, max_numel=settings.max_numel, reference=references.float64_function
        )
    except Untestable as e:
        result.message = f"untestable: {e}"
        result.skip_reason = UNTESTABLE
        return result

    progress = _Progress()
    _set_shrink_budget(settings.shrink_budget_s)

    def merge_errors(r: CaseResult) -> None:
        """The cell keeps the worst error of its cases, and the tolerance of the last compared."""
        result.max_abs_err = _worst(result.max_abs_err, r.max_abs_err)
        result.max_rel_err = _worst(result.max_rel_err, r.max_rel_err)
        result.max_ulp_err = _worst(result.max_ulp_err, r.max_ulp_err)
        result.device_golden_err = _worst(result.device_golden_err, r.device_golden_err)
        result.ref_golden_err = _worst(result.ref_golden_err, r.ref_golden_err)
        if r.rtol is not None:
            result.rtol, result.atol = r.rtol, r.atol

    def keep_finding(r: CaseResult) -> None:
        f = r.finding
        if f and not any((g["kind"], g["phase"]) == (f["kind"], f["phase"]) for g in result.findings):
            result.findings.append(f)

    out_names = frozenset(a.name for a in op.out_args)

    def drawn_checks(case) -> tuple[CaseResult, object]:
        """A drawn case with the checks it is due: (its result, the case to keep, which is an
        out= or wrong-size variant of it where one failed)."""
        # metamorphic relations on the first valid example whose largest tensor has two to 512
        # elements (hypothesis draws the simplest first: a 0-d tensor, where layout and position
        # mean nothing; the third valid one if none has), then on one whose values make them
        # informative (specials, extremes), and on every shrink step
        first = progress.relation_runs == 0 and (_relatable(case) or progress.drawn >= 2)
        relations = settings.relations and (
            progress.failing or progress.relation_runs < settings.relation_examples and (first or _informative(case))
        )
        # gradients on the first few valid examples, on every shrink step of a failure, on the
        # informative one (an infinite input, where an equivalent API's gradient speaks), on
        # those drawn in the op's own range (where a derivative saturates or overflows first),
        # and on a few whose mode (a str or bool argument: gelu's approximate, a loss's
        # reduction) no gradient-checked case had: a backward formula branches on it
        mode = _modes(op, case)
        new_mode = mode not in progress.grad_modes and progress.mode_grads < settings.grad_examples
        # finite differences (five float64 forwards and two AD passes) on the first valid example
        # whose values are all finite (they read the forward at finite points only), again on the
        # first such example of the relations' size where the first was smaller (a formula wrong
        # off the diagonal, across a reduction or in a broadcast has no such element in a 0-d or
        # one-element tensor: triangular_solve's forward-mode derivative reads the triangle the
        # op ignores), and on every shrink step
        fd = settings.relations and (
            relations
            and progress.failing
            or not progress.failing
            and _finite(case)
            and (not progress.differenced or not progress.differenced_wide and _relatable(case) and _moderate(case))
        )
        grad = (
            settings.grad
            and not _near_max(case)
            and not execute.degenerate_data(case, op)
            and (
                progress.failing
                or progress.drawn < settings.grad_examples
                or relations
                or fd
                or _in_op_range(case)
                or new_mode
            )
        )
        r = execute.run_case(
            op,
            case,
            backend,
            grad=grad,
            relations=relations,
            finite_differences=fd and grad,
            second_order=fd and grad and dtype in SECOND_ORDER_DTYPES,
        )
        if fd and grad and not progress.failing and not r.invalid:
            progress.differenced = True
            progress.differenced_wide = progress.differenced_wide or _relatable(case)
        if relations and not progress.failing and not r.invalid:
            progress.relation_runs += 1
        if grad and not progress.failing and not r.invalid and mode not in progress.grad_modes:
            progress.mode_grads += progress.drawn >= settings.grad_examples  # beyond the first few
            progress.grad_modes.add(mode)
        # out= ops: preallocated, wrongly sized and non-contiguous outs too, on the first two
        # passing examples with non-trivial outs (they triple the cost) and every shrink step
        if (
            op.variant == "out"
            and r.outcome == Outcome.PASS
            and not r.invalid
            and (progress.failing or progress.out_variants_checked < 2)
        ):
            ran, failure = execute.run_out_variants(op, case, backend, relations=settings.relations)
            progress.out_variants_checked += ran
            if failure is not None:
                # the variant that failed is the case to keep and reproduce
                r, case = failure, failure.variant_case or case
        # in-place ops: a self whose elements share memory, on the first two passing examples
        # and every shrink step: it must be refused
        if (
            op.variant == "inplace"
            and r.outcome == Outcome.PASS
            and not r.invalid
            and (progress.failing or progress.overlaps_checked < 2)
        ):
            progress.overlaps_checked += 1
            failure = execute.run_overlapping_self(op, case, backend)
            if failure is not None:
                r, case = failure, failure.variant_case or case
        passing = r.outcome == Outcome.PASS and not r.invalid
        # the malformed arguments (run last, see _malformed_last) of the first passing example,
        # and again of the first one past the simplest sizes where the first was not (see
        # _wide), contiguous as the first is
        if passing and not progress.failing and not progress.malformed_due:
            progress.malformed_wide = _wide(case)
            progress.malformed_due.append((case, False))
        elif passing and not progress.failing and not progress.malformed_wide and _wide(case):
            progress.malformed_wide = True
            progress.malformed_due.append((variants.contiguous_inputs(case), True))
        # inputs of a wrong size, one at a time, on the first passing example with an input of a
        # dim or more (hypothesis draws 0-d ones first, where no size can be wrong) and every
        # shrink step: the device must refuse what the CPU refuses (not on the plain CPU); and
        # dims out of range, refused with a batch of none as without (the plain CPU too)
        if (
            passing
            and (progress.wrong_size_failed if progress.failing else not progress.sizes_checked)
            and variants.has_sized_input(case, out_names)
        ):
            progress.sizes_checked = True
            failure = execute.run_wrong_sizes(op, case, backend) or execute.run_dim_range(op, case, backend)
            if failure is not None:
                progress.wrong_size_failed = True
                r, case = failure, failure.variant_case
        return r, case

    def checked(case, *, drawn: bool) -> tuple[CaseResult, object]:
        """Run `case` (see drawn_checks); a value variant (`drawn` False) gets the forward
        judgement, and gradients where the drawn case would (a shrink step, the op's own range)."""
        if on_case:
            on_case(case)
        try:
            if drawn:
                r, case = drawn_checks(case)
            else:
                grad = settings.grad and (progress.failing or _in_op_range(case))
                r = execute.run_case(op, case, backend, grad=grad)
            stop = stop_if(r) if stop_if else None
            if stop is not None:
                progress.stopped = True
                raise _StopCell(stop, case)
            return r, case
        finally:
            if after_case:
                after_case()

    def value_variants(case):
        """The drawn case's value variants (generators.variants.reseeded), lazily."""
        for k in range(1, settings.values_per_draw):
            variant = variants.reseeded(case, k, out_names)
            if variant is None:
                return
            yield variant

    def still_fails(r: CaseResult) -> bool:
        # shrinking: only whether the case still fails, and the same way (see failure_class)
        return r.outcome != Outcome.PASS and not r.invalid and failure_class(r) == progress.failure_class

    def tally(r: CaseResult, case):
        """Count a valid case; (result, case) when it is the cell's first failure, else None."""
        result.examples_run += 1
        merge_errors(r)
        keep_finding(r)
        if r.outcome == Outcome.PASS:
            result.examples_passed += 1
            return None
        if Outcome(r.outcome) in CELL_LEVEL:
            raise _StopCell(r, case)
        if failure_class(r) in progress.known:
            return None  # a failure the cell reports already: the search goes on for others
        progress.failing = True
        progress.failure_class = failure_class(r)
        progress.first_failure = (r, case)
        return r, case

    judged_before: dict[str, tuple] = {}  # (the keys of progress.judged, made when a further search starts)

    def one_case(case) -> None:
        if not progress.failing and time.monotonic() - started > settings.cell_budget_s:
            raise _GiveUp()
        if judged_before and not progress.failing:
            # a case an earlier search judged: counted then (its variants too), judged alike now
            before = judged_before.get(_case_key(case.to_json()))
            if before is not None:
                if before.invalid:
                    hypothesis.reject()
                if before.outcome == Outcome.PASS.value or failure_class(before) in progress.known:
                    return
        r, kept = checked(case, drawn=True)
        if settings.further_failures and not progress.failing:
            progress.judged.append((case, r))
        failed = None
        if progress.failing:
            # a shrink step fails when the drawn case or one of its value variants fails the same way
            failed = (r, kept) if still_fails(r) else None
            for variant in () if failed else value_variants(case):
                rv, kv = checked(variant, drawn=False)
                if still_fails(rv):
                    failed = (rv, kv)
                    break
            if failed is None:
                hypothesis.reject()
        elif r.invalid:
            result.invalid_examples += 1
            keep_finding(r)  # an error the CPU shares may still be a finding about it
            progress.first_invalid = progress.first_invalid or r.message
            progress.invalid_reasons.add(_reason_key(r.message))
            progress.no_kernel = (result.invalid_examples == 1 or progress.no_kernel) and _says_no_kernel_for(
                r.message, dtype
            )
            limit = _invalid_limit(
                settings.examples, result.examples_run, len(progress.invalid_reasons), no_kernel=progress.no_kernel
            )
            if result.invalid_examples >= limit:
                raise _GiveUp()
            hypothesis.reject()
        else:
            progress.drawn += 1
            failed = tally(r, kept)
            # the same case with other values, judged alike: cases at the cost of the run alone
            for variant in () if failed else value_variants(case):
                if result.examples_run >= settings.examples or time.monotonic() - started > settings.cell_budget_s:
                    break
                rv, kv = checked(variant, drawn=False)
                if not rv.invalid:  # (values the op rejects: not a case, not counted)
                    failed = tally(rv, kv)
                    if failed:
                        break
            if failed is None:
                if result.examples_run >= settings.examples:
                    raise _GiveUp()  # enough cases: the cell passes (hypothesis would draw more)
                return
        # One raise statement for the first failure and every shrink step: hypothesis tells bugs
        # apart by where they are raised, and two sites made it call the shrunk case a different
        # bug, then report "Inconsistent results from replaying a test case" (FlakyFailure).
        raise _CaseFailed(*failed)

    def search(key: bytes):
        """One hypothesis search of the cell: (result, case, flaky) of the failure it found and
        shrank, (None, None, False) when it found none; an internal error raises."""
        test = _hypothesis_settings(settings)(given(strategy)(one_case))
        # The cell's examples follow from the run seed and the cell alone (derandomized: from the
        # cell alone), so the same code draws the same cases, wherever it is installed (seed_only).
        # Not hypothesis.seed() nor settings(derandomize=True): both switch the example database
        # off, and a gating run must replay the stored failing examples first (a failure once
        # found is found again).
        test._hypothesis_internal_use_seed = _cell_seed(
            0 if settings.derandomize else settings.seed, op.qualname, dtype
        )
        # The example database's key. Hypothesis would hash the test function's source instead
        # (tokenising ~70 lines for every cell: 7% of a sweep), and that key changed with every
        # edit of this file, orphaning the failures it holds.
        test._hypothesis_internal_database_key = key
        try:
            with seed_only(), _numpy_rng_unmanaged():
                test()
        except (_CaseFailed, _StopCell) as e:
            return e.result, e.case, False
        except (_GiveUp, Unsatisfiable):
            pass
        except Flaky:
            # a case failed, then did not fail the same way when hypothesis replayed it: the
            # kernel's result is not a function of its inputs (a read of uninitialised memory:
            # median along an expanded dim, chebyshev_polynomial_w of NaN). The first failure is
            # the verdict.
            if progress.first_failure is None:
                raise
            return (*progress.first_failure, True)
        return None, None, False

    key = _database_key(op.qualname, dtype)
    try:
        final, final_case, flaky = search(key)
    except Exception as e:  # a harness or generator bug: visible, never counted as pass
        return _internal_error(result, e, started)

    # Further failures: the same cases drawn again (the same seed; their results kept from the
    # first search), where a failure of a kind already reported counts as a case run and the
    # search goes on to the cell's remaining cases; a failure of another kind is shrunk as the
    # first was. So a failing cell judges the cases a passing cell would, and reports each kind of
    # failure among them (a kernel right in general with a wrong vector tail, whose cell failed
    # first on another bug, showed only that one).
    stopped_why = ""
    searching = final is not None and not flaky and Outcome(final.outcome) not in CELL_LEVEL and not progress.stopped
    if searching:
        progress.known.add(failure_class(final))
    while searching and len(result.further_failures) < settings.further_failures:
        if result.examples_run >= settings.examples or time.monotonic() - started > settings.cell_budget_s:
            break
        judged_before.update((_case_key(c.to_json()), r) for c, r in progress.judged)
        progress.judged.clear()
        progress.failing, progress.failure_class, progress.first_failure = False, None, None
        progress.wrong_size_failed = False
        # (half the first failure's shrinking time: it is the verdict, these come after it)
        _set_shrink_budget(settings.shrink_budget_s / 2)
        try:
            more, more_case, more_flaky = search(key + b"/further")
        except Exception as e:  # noqa: BLE001 - the verdict stands; the search says why it stopped
            stopped_why = f"; the search for further failures stopped: conform internal error: {type(e).__name__}: {e}"
            break
        if more is None or more_flaky or Outcome(more.outcome) in CELL_LEVEL:
            break
        progress.known.add(failure_class(more))
        result.further_failures.append(
            {
                "outcome": Outcome(more.outcome).value,
                "phase": more.phase or "",
                "message": more.message,
                "case": more_case.to_json(),
                "repro": _repro(op, more_case, backend, more),
            }
        )
        if progress.stopped:
            break

    if final is not None:
        result.outcome = Outcome(final.outcome).value
        result.phase = final.phase
        result.message = (
            final.message
            + (
                "; the case did not fail the same way when replayed (a result that is not a function of the inputs)"
                if flaky
                else ""
            )
            + stopped_why
        )
        result.traceback = final.traceback
        merge_errors(final)
        keep_finding(final)
        result.skip_reason = skip_reason_of_case(result.outcome)
        result.case = final_case.to_json()
        result.repro = _repro(op, final_case, backend, final)
    elif result.examples_run > 0:
        result.outcome = Outcome.PASS.value
        result.message = f"{result.examples_passed} examples passed"
    else:
        result.outcome = Outcome.SKIPPED.value
        reason = progress.first_invalid or "the generator produced no case"
        result.skip_reason = skip_reason_of_empty_cell(no_kernel=bool(result.invalid_examples and progress.no_kernel))
        if result.skip_reason == NO_KERNEL:
            result.message = f"no CPU kernel for {dtype}: the CPU reference has nothing to compare with; {reason}"
        else:
            result.message = f"no valid case: the CPU reference rejected all {result.invalid_examples} generated inputs; first: {reason}"
    if not progress.stopped:
        _malformed_last(op, dtype, backend, result, progress.malformed_due, on_malformed)
    result.duration_s = time.monotonic() - started
    return result


def _malformed_last(op, dtype: str, backend, result: CellResult, due: list, on_malformed: Callable | None) -> None:
    """The malformed arguments (conform.run.execute.run_malformed) of the passing cases they are
    due on, once everything else the cell judges is judged: a death there ends the process, and
    made at the first passing case it hid what the cell's other cases would have shown (a private
    attention kernel that dies on an empty key also computes wrong values for a query whose last
    dim is strided: the death was all its cell said). The worker records what the cell found so
    far with the case (`on_malformed`), and a death keeps it: the cell is a `crash`, its earlier
    failures further failures of it (conform.plugin.died_result)."""
    earlier = None
    unwritten: list = []
    for case, wide in due:
        if on_malformed is not None:
            if earlier is None:
                earlier = _found_so_far(result)
            on_malformed(case, earlier)
        execute.run_malformed(
            op, case, backend, numbers=dtype in MALFORMED_NUMBER_CELLS, contain_shapes=wide, unwritten=unwritten
        )
    for what, variant, message in unwritten[:1]:
        # a result the kernel never wrote, for an argument that does not fit: the cell's verdict
        # where it passed, a further failure where it had failed otherwise
        failure = {
            "outcome": Outcome.MISSING_ERROR.value,
            "phase": "forward",
            "message": f"[malformed argument] {what}: the op computes with it and {message.partition('] ')[2]}",
            "case": variant.to_json(),
            "repro": _repro(op, variant, backend, CaseResult(Outcome.MISSING_ERROR, "forward", "")),
        }
        if result.outcome == Outcome.PASS.value:
            result.outcome, result.phase, result.message = failure["outcome"], failure["phase"], failure["message"]
            result.case, result.repro = failure["case"], failure["repro"]
            result.skip_reason = skip_reason_of_case(result.outcome)
        else:
            result.further_failures.append(failure)


def _found_so_far(result: CellResult) -> dict:
    """A cell's failures (its verdict's, then the further ones) and findings, as the in-flight
    record keeps them while its malformed arguments run."""
    failures = []
    if result.case is not None and result.outcome != Outcome.PASS.value:
        failures.append(
            {
                "outcome": result.outcome,
                "phase": result.phase,
                "message": result.message,
                "case": result.case,
                "repro": result.repro,
            }
        )
    return {"failures": failures + list(result.further_failures), "findings": list(result.findings)}


def _hypothesis_settings(settings: CellSettings) -> hypothesis.settings:
    database = None
    if settings.hypothesis_db:
        Path(settings.hypothesis_db).mkdir(parents=True, exist_ok=True)
        database = DirectoryBasedExampleDatabase(settings.hypothesis_db)
    return hypothesis.settings(
        max_examples=settings.examples,
        deadline=None,
        database=database,
        suppress_health_check=list(HealthCheck),
        verbosity=Verbosity.quiet,
        report_multiple_bugs=False,
        print_blob=False,
        phases=[Phase.explicit, Phase.reuse, Phase.generate, Phase.shrink],
    )


def cell_process(setup: WorkerSetup, inflight: str):
    """Set up a clean device process (conform.run.isolation.CleanChild) for a worker's
    `conform.config.WorkerSetup`: its backend, its in-flight record and hang watchdog; returns
    what runs one cell there. The answer is (CellResult, poisoned): poisoned when a case left the
    device context unusable (a sticky error): the worker then replaces this process before the
    next cell."""
    apply_memory_limit(setup.memory_limit)
    torch.set_num_threads(1)  # cases are small: one intra-op thread per worker beats oversubscribing the cores
    backend = backends.resolve(setup.config.device)
    watchdog = Watchdog(Path(inflight), setup.config.case_timeout_for(torch.device(backend.device).type))
    state = {"poisoned": False}
    generator_side = {}
    if not execute.is_plain_cpu(backend):
        # which side a death happens on, where the CPU reference is not the device under test
        # (on the plain CPU it is: its death there stays the device's crash)
        execute.on_side = watchdog.side
        generator_side = {"side": "reference", "phase": "forward"}
    else:
        # the plain CPU's sides are one kernel: only the phase is recorded, so that a death in a
        # backward (float64 grid_sampler_2d_backward at a NaN coordinate segfaults) gets a script
        # that runs the backward
        execute.on_side = lambda name, phase: watchdog.side("", phase)
    # the forms relation runs a sibling's functional on the device: a death or hang there is the
    # functional's (conform.plugin), and once it failed so, the siblings do not run it again
    execute.on_functional = watchdog.functional
    execute.on_functional_poisoned = watchdog.functional_poisoned
    # an out= variant of the case (its out written through other strides): a death there is that
    # call's, recorded with the variant so that its script replays it
    execute.on_variant = lambda case, name: watchdog.variant(
        None if case is None else case.to_json(), "" if case is None else f"{case.describe()} ({name})"
    )
    execute.functional_failed = lambda qualname: op_base(qualname) in crashed_ops(Path(setup.run_dir))

    def poisoned_by(r):
        """Stop the cell at a sticky error (what follows it would fail for that reason alone and
        shrinking would chase it); the device is asked too, since an invalid case hides it."""
        signature = sticky_error(backend, f"{r.message}\n{r.traceback}")
        if not signature:
            try:
                backend.synchronize()
            except Exception as e:  # noqa: BLE001
                signature = sticky_error(backend, str(e))
        if not signature:
            return None
        state["poisoned"] = True
        return CaseResult(
            STICKY,
            r.phase or "forward",
            f"{r.message if sticky_error(backend, r.message) else signature}; this error poisoned the device context, "
            "so the device process was replaced before the next cell",
            traceback=r.traceback,
        )

    def run(cell) -> tuple[CellResult, bool]:
        op, dtype = opdb.lookup(cell[0]), cell[1]
        # the cases' tally so far travels in the in-flight record: a death on the reference side
        # keeps what the completed cases said
        current = InFlight(op=op.qualname, dtype=dtype)
        # cases the CPU reference killed an earlier process on (conform.plugin.WorkerContext):
        # rejected, so the cell draws others
        excluded = {_case_key(c) for c in (cell[2] if len(cell) > 2 else ())}

        def on_case(case):
            if excluded and _case_key(case.to_json()) in excluded:
                hypothesis.reject()
            watchdog.arm(replace(current, case=case.to_json(), describe=case.describe()))

        def tally(r):
            nonlocal current
            if not r.invalid:
                if r.outcome == Outcome.PASS:
                    current = replace(current, passed=current.passed + 1)
                else:
                    current = replace(current, failed=True)
            return poisoned_by(r)

        def drawing():
            # generation runs kernels too (an out= op's functional, to size its outs; a forward
            # result an argument needs): a hang there is the cell's timeout, not a stuck worker.
            # Those calls run on the CPU: where the CPU is not the device under test, a death or
            # hang there is the reference side's, never the device's (binomial.out's NaN count
            # hangs the CPU while its out is sized, and a device cell was blamed for it)
            watchdog.arm(
                replace(
                    current,
                    **generator_side,
                    describe="drawing the next case (the generator runs the op's functional on the CPU)",
                )
            )

        def functional(case):
            # the generator runs an out= op's functional to size its outs, or a backward's forward
            # to size its gradient: a crash or hang there is that call's, with its own case and script
            if case is None:
                drawing()
            else:
                watchdog.arm(
                    replace(
                        current,
                        **generator_side,
                        case=case.to_json(),
                        describe=f"{case.describe()}, a call the generator runs to size the outs or the gradient",
                    )
                )

        state["poisoned"] = False
        drawing()
        generators_backward.on_functional = functional
        try:
            result = run_cell(
                op,
                dtype,
                backend,
                setup.config.cell,
                on_case=on_case,
                after_case=drawing,
                stop_if=tally,
                on_malformed=lambda case, earlier: watchdog.arm(
                    replace(current, case=case.to_json(), describe=case.describe(), earlier=earlier)
                ),
            )
        finally:
            generators_backward.on_functional = None
            watchdog.disarm()
        return result, state["poisoned"]

    return run


# Failing leaves' kinds (conform.judge.compare.KINDS), most telling first: a shrink step keeps the kind
# its first failure led with. NaN and inf are one class (an overflow's inf turns into NaN further
# on: inf - inf, 0 * inf), a sign of zero is the mildest. Wrong values are gross at GROSS times
# the allowed difference or more (a kernel reading the wrong memory: 850 where golden is 0) and
# marginal below it (a rounding at the edge of the tolerance, 3.2e-5 for 1e-5).
GROSS = 100.0
_KIND_CLASSES = (
    ("relation", "relation"),  # a metamorphic relation or finite differences: no expectation involved
    ("error", "error"),
    ("structure", "structure"),
    ("shape", "structure"),
    ("dtype", "structure"),
    ("strides", "strides"),
    ("nan", "nonfinite"),
    ("inf", "nonfinite"),
    ("values", "values"),
    ("sign", "sign"),
)


def failure_class(r) -> tuple[str, str, str]:
    """What a failing case's verdict is, for the shrinker: its outcome, phase and the most telling
    kind among its failing leaves. Hypothesis shrinks toward any case that raises the same
    exception from the same place, so without this a failure "slips" to whatever simpler case
    fails at all: native_group_norm's NaN for a float32 variance that overflows (pytorch#162489)
    shrank to a one-element group's rounding (7.9e-5 where golden is exactly beta), and the cell
    reported that instead of the bug it had met; and its expanded weight's wrong values (850
    where golden is 0, a kernel that ignores strides) shrank to the same rounding. A step that
    fails some other way is no failure to the shrinker, so the minimal case shows the failure
    that was found."""
    kinds = getattr(r, "kinds", frozenset())
    lead = next((cls for kind, cls in _KIND_CLASSES if kind in kinds), "")
    if lead == "values":
        lead = "values, gross" if getattr(r, "excess", 0.0) >= GROSS else "values, marginal"
    return (Outcome(r.outcome).value, r.phase or "", lead)


# the largest tensor of the case the relations run on first: two elements or more (something to
# re-lay, move or cut), at most an edge case's rows (a huge case's 48 rows cost the relations,
# which run the op again per layout and per element, 16 times as much and show no more)
RELATABLE_NUMEL = (2, 512)
# the derivative of the backward (conform.judge.gradients.second_order) is a float64 check of the
# formulas, the same whatever the cell's dtype: it runs in the float32 cell of an op, and in the
# complex64 one, whose formulas are complex
SECOND_ORDER_DTYPES = ("float32", "complex64")

# numbers at their extremes (conform.run.execute.run_malformed) do not depend on the cell's
# dtype, except an integer tensor's limits: they run in an op's float32 cell, its int64 cell
# (where the integer tensors are the op's data too) and the single cell of an op without tensor
# inputs or dtype, once per op rather than in each of its ~11 cells
MALFORMED_NUMBER_CELLS = ("float32", "int64", "none")


# the malformed arguments (conform.run.execute.run_malformed) run on the first passing example,
# hypothesis's simplest (sizes of 1 and 2, contiguous), and again on the first whose largest
# tensor is at least MALFORMED_WIDE long in each of its last two dims (its only dim) and of at
# most RELATABLE_NUMEL's elements, its tensors made contiguous: size arithmetic that overflows,
# or a read past the end, only beyond the smallest sizes, in the path every layout shares before
# its own (published CPU crash: replication_pad2d with a padding near 2**63 dies on a contiguous
# input 3 or more high, and computes on one 2 high or channels_last)
MALFORMED_WIDE = 3


def _wide(case) -> bool:
    """The case's largest tensor is at least MALFORMED_WIDE long in each of its last two dims
    (its only dim), and of at most RELATABLE_NUMEL's elements."""
    largest = max(case.tensor_specs(), key=lambda s: s.numel, default=None)
    return (
        largest is not None
        and bool(largest.shape)
        and min(largest.shape[-2:]) >= MALFORMED_WIDE
        and largest.numel <= RELATABLE_NUMEL[1]
    )


def _relatable(case) -> bool:
    """The case's largest tensor is of a size the relations' first run should take (RELATABLE_NUMEL)."""
    largest = max((s.numel for s in case.tensor_specs()), default=0)
    return RELATABLE_NUMEL[0] <= largest <= RELATABLE_NUMEL[1]


def _finite(case) -> bool:
    """No tensor drawn with special values (an edge pattern, the "special" kind)."""
    return all(s.edges is None and s.values != "special" for s in case.tensor_specs())


def _moderate(case) -> bool:
    """Every tensor drawn in the moderate band (or the kind's own range), and every tensor given
    as explicit values (another op's result: a Cholesky factor from linalg_cholesky of a drawn
    SPD matrix) within MODERATE_DATA: where finite differences move every element (they leave
    those beyond conform.judge.gradients.LARGEST_MOVED alone). A factor of entries near 3e10 took
    cholesky_inverse's one wide finite-difference run, which its forward-mode bug (wrong by 20% at
    entries near 1) escapes there."""
    return all(
        base_magnitude(s.magnitude) in ("", "moderate", "half_integers")
        and (not s.data or max(abs(v) for v in s.data) <= MODERATE_DATA)
        for s in case.tensor_specs()
    )


MODERATE_DATA = 1e3


def _informative(case) -> bool:
    """Values where vector and scalar paths part: special values, edge patterns, extreme bands."""
    return any(
        s.edges is not None
        or s.values == "special"
        or base_magnitude(s.magnitude) in ("near_max", "sqrt_max", "beyond_sqrt")
        for s in case.tensor_specs()
    )


# integer arguments that select a formula rather than a size (ATen's losses take their
# reduction as an int: 0 none, 1 mean, 2 sum)
_INT_MODES = frozenset({"reduction"})


def _modes(op, case) -> tuple:
    """The case's mode: its str and bool arguments (and reduction), omitted ones as None."""
    bound = bind_arguments(op, case.args, case.kwargs)
    return tuple(
        (a.name, bound.get(a.name))
        for a in op.arguments
        if a.type.removesuffix("?") in ("str", "bool") or a.name in _INT_MODES
    )


def _near_max(case) -> bool:
    """A float32, bfloat16 or complex64 tensor near the dtype's largest value (an averaging reduction's
    huge case, generators.strategies.AVERAGING): its forward judges the sum's overflow; gradients there are the
    derivatives of an overflowed statistic (std's (x - mean) / std at std = inf), not compared."""
    return any(
        base_magnitude(s.magnitude) == "near_max" and s.dtype in ("float32", "bfloat16", "complex64")
        for s in case.tensor_specs()
    )


def _in_op_range(case) -> bool:
    """Some tensor drawn in the op's own range band (generators.op_ranges)."""
    return any(s.magnitude and s.magnitude.startswith(op_ranges.PREFIX) for s in case.tensor_specs())


def _case_key(case_json: dict) -> str:
    # a case as the in-flight record's JSON round trip has it (tuples read back as lists)
    return json.dumps(case_json, sort_keys=True, default=str)


def _internal_error(result: CellResult, e: Exception, started: float) -> CellResult:
    """A harness or generator bug: visible, never counted as pass."""
    result.outcome = Outcome.SKIPPED.value
    result.skip_reason = INTERNAL_ERROR
    first = str(e).strip().splitlines()[0] if str(e).strip() else ""
    result.message = f"conform internal error: {type(e).__name__}: {first}"
    result.traceback = tb.format_exc()
    result.duration_s = time.monotonic() - started
    return result


def _worst(current: float | None, new: float | None) -> float | None:
    """The larger error; NaN (nothing measured) counts as none."""
    if new is None or new != new:
        return current
    return new if current is None else max(current, new)


def _invalid_limit(examples: int, valid: int, reasons: int, *, no_kernel: bool = False) -> int:
    """How many rejected inputs a cell tolerates. With no valid case yet, give up soon: the
    generator will not find one by luck, and a sweep has thousands of cells to get through; when
    every rejection says the same thing, after a cell's worth of examples (the first draws of an
    integer argument are often all its invalid 0), and soonest when that is the reference
    having no kernel for the cell's dtype ("not implemented for 'Bool'": a third of a CPU sweep's
    cells). Once some inputs are valid, rejections only mean that part of the input space is
    invalid."""
    if valid:
        return 10 * examples
    if reasons == 1:
        return 2 if no_kernel else max(5, examples)
    return max(12, 2 * examples)


# torch's names for dtypes in "... not implemented for 'Half'" messages
_TORCH_DTYPE_NAMES = {
    "float32": "Float", "float16": "Half", "bfloat16": "BFloat16", "float64": "Double",
    "complex64": "ComplexFloat", "complex128": "ComplexDouble", "int64": "Long", "int32": "Int",
    "int16": "Short", "int8": "Char", "uint8": "Byte", "bool": "Bool",
}  # fmt: skip


def _says_no_kernel_for(message: str, dtype: str) -> bool:
    name = _TORCH_DTYPE_NAMES.get(dtype)
    return bool(name) and f"not implemented for '{name}'" in message


def _reason_key(message: str) -> str:
    """A rejection's message without its numbers, shapes and quoted values."""
    return re.sub(r"\d+|\[[^\]]*\]|'[^']*'", "#", message)[:200]


def _repro(op, case, backend, final=None) -> str:
    try:
        return repro_script(op, case, backend.name, result=final, golden_is_expectation=is_plain_cpu(backend))
    except Exception as e:  # a repro is a convenience: its failure must not lose the result
        return f"# could not build a reproduction script: {type(e).__name__}: {e}\n# case: {case.to_json()}\n"


def _database_key(op: str, dtype: str) -> bytes:
    return hashlib.sha384(f"conform-cell/{op}/{dtype}".encode()).digest()


def _cell_seed(run_seed: int, op: str, dtype: str) -> int:
    return (run_seed * 1_000_003 + zlib.crc32(f"{op}/{dtype}".encode())) % (2**63)
