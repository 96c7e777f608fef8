"""Run one case on the reference and on the device under test, and judge it.

`run_case(op, case, backend)` never raises (except KeyboardInterrupt / SystemExit) and returns a
`CaseResult` with a conform.outcomes.Outcome. Every case runs on up to three sides, each with
freshly materialised tensors so that nothing (in-place results, out= tensors, autograd graphs)
is shared: ``ref`` (the CPU in the case's dtypes), ``golden`` (the CPU in float64, for floating
inputs) and ``device`` (the backend under test). The verdict rule (docs/verdict-rule.md) lives
in conform.judge; this module runs the sides and hands them over.

A backend's optional ``device_context()`` returns a context manager entered around everything
done on the device side (materialising, the op, synchronising, backward).
"""

from __future__ import annotations

import contextlib
import dataclasses
import math
import re
import traceback as _traceback
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch
import torch.utils._pytree as pytree
from torch.utils._python_dispatch import TorchDispatchMode

import opdb
from conform.backends import CPUBackend
from conform.errors import first_line
from conform.judge import batching, gradients, limits, metamorphic, references, widening
from conform.judge import verdict as oracle
from conform.judge.compare import (
    AMBIGUOUS_OUTPUTS,
    Record,
    bind_arguments,
    compare,
    failures,
    leaves,
    split_ambiguous,
    statistics_records,
    stride_records,
    summary,
    tie_gradient_records,
    tie_records,
)
from conform.judge.outcome import META_KINDS, golden_runs, is_kernel_gap, of_error, of_failures, sticky_error
from conform.judge.tolerances import (
    LeafTolerance,
    gradient_tolerance,
    input_scales,
    is_inexact,
    loosest,
    numel_ratio,
    tolerance_at,
    tolerance_for,
)
from conform.judge.verdict import cast_like, max_abs_vs
from conform.outcomes import Outcome
from conform.run import contained
from conform.run.dispatch import fallback_message, tracer_for
from generators.backward import functional_of, is_backward
from generators.case import Case, TensorSpec
from generators.tensor import EQUAL_PREFIX, GUARD_ELEMENTS, STRUCTURED_KINDS, guarded_copy
from generators.variants import (
    OVERLAPPING_LAYOUTS,
    STRIDED_OUT_VARIANTS,
    UNSAFE_OUT_DTYPE,
    empty_inputs,
    input_label,
    malformed_dtypes,
    malformed_inputs,
    malformed_numbers,
    other_dtype_out_case,
    out_of_range_dims,
    out_variants,
    overlapping_self_case,
    unsafe_out_case,
    wrong_size_inputs,
)
from opdb.hints import hint


@dataclass
class CaseResult:
    outcome: Outcome
    phase: str = ""  # "forward" | "backward" | ""
    message: str = ""
    invalid: bool = False  # reference and device both rejected the input: not a valid case
    max_abs_err: float | None = None
    max_rel_err: float | None = None
    max_ulp_err: float | None = None
    rtol: float | None = None
    atol: float | None = None
    device_golden_err: float | None = None  # max abs error of the device's output vs float64 golden
    ref_golden_err: float | None = None  # max abs error of the CPU reference vs float64 golden
    traceback: str = ""  # of the device-side exception, if any
    finding: dict | None = (
        None  # conform.judge.verdict.Finding.to_dict(): a fact about the case that is not its verdict
    )
    variant_case: Any = None  # run_out_variants: the out= variant of the case that failed (a generators Case)
    kinds: frozenset = frozenset()  # the compare.Record kinds of the failing leaves ("nan", "values", ...)
    excess: float = 0.0  # the worst "values" difference, in multiples of the allowed one
    relation: dict | None = None  # conform.judge.metamorphic.Violation.to_dict(): the relation broken


# -- error classification ------------------------------------------------------------------

# -- output size --------------------------------------------------------------------------

# Elements the reference's outputs may hold, all together, for a case to be compared. The input
# cap keeps inputs small, but some ops' outputs grow as a power of their input (diagflat n -> n^2,
# cartesian_prod and meshgrid: the product of the sizes): one such case took a minute of the
# sweep and gigabytes to compare. Larger cases are declined like invalid ones, before the golden
# and device runs; hypothesis then draws another. Likewise for the number of output tensors
# (unbind of a [1334, 2] tensor: 1334 comparisons, over a second for one case).
MAX_OUTPUT_NUMEL = 1 << 18
MAX_OUTPUT_TENSORS = 256


_SPARSE_LAYOUTS = (torch.sparse_coo, torch.sparse_csr, torch.sparse_csc, torch.sparse_bsr, torch.sparse_bsc)


def output_size(value) -> tuple[int, int]:
    """(tensors, elements) in all the tensors of a result (nested tuples, lists and dicts)."""
    tensors = [t for t in pytree.tree_leaves(value) if isinstance(t, torch.Tensor)]
    return len(tensors), sum(t._nnz() if t.layout in _SPARSE_LAYOUTS else t.numel() for t in tensors)


def _oversized(value) -> str:
    tensors, numel = output_size(value)
    if numel > MAX_OUTPUT_NUMEL:
        return f"the output has {numel} elements, over conform's cap of {MAX_OUTPUT_NUMEL}"
    if tensors > MAX_OUTPUT_TENSORS:
        return f"the output has {tensors} tensors, over conform's cap of {MAX_OUTPUT_TENSORS}"
    return ""


# -- sides ---------------------------------------------------------------------------------


@dataclass
class _Side:
    """What one side produced: the return value and the tensors the op wrote to."""

    result: Any = None
    written: dict[str, Any] | None = None  # name -> tensor/list for mutated and out= arguments
    inputs: tuple = ()  # (args, kwargs) after the call, for gathering tie indices
    error: BaseException | None = None
    fallback: list[str] | None = None  # aten ops served by the device's fallback (conform.run.dispatch)

    @property
    def traceback(self) -> str:
        # formatted only when a verdict needs it: most errors are the reference rejecting an
        # invalid input, and formatting every one of them was a large share of a sweep's time
        return _format_tb(self.error)


def _device_context(backend):
    hook = getattr(backend, "device_context", None)
    if hook is None:
        return contextlib.nullcontext()
    return hook()


def _written_names(op) -> list[str]:
    return [a.name for a in op.arguments if a.is_write or a.is_out]


def _to_cpu(x, to_cpu):
    """x (a result: a tensor, or tensors nested in tuples, lists, dicts) with every tensor copied by `to_cpu`."""
    return pytree.tree_map(lambda v: to_cpu(v.detach()) if isinstance(v, torch.Tensor) else v, x)


# Told which side is about to run ("device", "reference" or "golden"), by the device process
# (conform.run.cell), for its in-flight record: a process the CPU reference kills (integer div
# trunc on INT_MIN / -1 raises SIGFPE, pytorch#138425) is not the device's crash. None elsewhere.
on_side: Callable[[str, str], None] | None = None


# Told when the forms relation starts and ends running an op's functional overload on the device
# (its qualname, then None), by the device process (conform.run.cell): a death or a hang there is
# the functional's own failure, which its own cell records, never its sibling's. And asked whether
# a functional already failed that way in this run: its siblings then hold no forms relation.
on_functional: Callable[[str | None], None] | None = None
functional_failed: Callable[[str], bool] = lambda qualname: False  # noqa: E731
# Told that the functional's error poisoned the device context (its qualname, the error's line)
on_functional_poisoned: Callable[[str, str], None] | None = None

# Told when a variant of the case (its generators Case and a description) is about to run, and
# None when the case itself runs again, by the device process (conform.run.cell): a process that
# dies on a variant (uint8 bilinear upsampling into a transposed out= segfaults) is recorded with
# that variant, so its script replays the call that died, not the drawn one.
on_variant: Callable[[Any, str], None] | None = None


def _running_variant(case, name: str = "") -> None:
    """`case` is about to run in place of the drawn case (None: the drawn case again); `name`
    says which variant it is, for the record of a death there."""
    if on_variant is not None:
        on_variant(case, name)


def _announce(to_device, dtype=None, phase="forward") -> None:
    # every CPU-reference call (reference, golden, their reruns) copies its inputs with _cpu_copy;
    # no backend does, so anything else is the device under test
    if on_side is not None:
        if to_device in (widening.widened_copy, widening.float_copy):  # integer cells' expectation, on the CPU
            on_side("golden", phase)
        else:
            on_side(
                "device" if to_device is not _cpu_copy else "golden" if dtype == torch.float64 else "reference", phase
            )


def _run_side(
    op,
    case,
    *,
    to_device,
    device,
    dtype=None,
    to_cpu=lambda t: t,
    sync=None,
    ctx=None,
    grad=False,
    trace=None,
    fill_outs=False,
):
    """`trace`: a conform.run.dispatch.FallbackTrace, active while the op runs (not while inputs are made).
    `fill_outs`: the out= tensors filled as _filled_memory fills an allocation before the call."""
    _announce(to_device, dtype)
    side = _Side()
    try:
        with contextlib.ExitStack() as stack:
            if ctx is not None:
                stack.enter_context(ctx)
            if not grad:
                stack.enter_context(torch.no_grad())
            args, kwargs = case.materialize(to_device, device, dtype=dtype)
            if fill_outs:
                _fill_outs(op, args, kwargs)
            _seed(op, case.seed)
            with trace if trace is not None else contextlib.nullcontext():
                result = _unbatched(op, op.resolve()(*args, **kwargs), args, kwargs)
            if sync is not None:
                sync()
            bound = bind_arguments(op, args, kwargs)
            written = {n: bound[n] for n in _written_names(op) if n in bound}
            side.inputs = (args, kwargs)
            if grad:
                side.result, side.written = result, written
            else:
                side.result = _to_cpu(result, to_cpu)
                side.written = {n: _to_cpu(v, to_cpu) for n, v in written.items()}
                side.inputs = (_to_cpu(args, to_cpu), {k: _to_cpu(v, to_cpu) for k, v in kwargs.items()})
    except (KeyboardInterrupt, SystemExit):
        raise
    except BaseException as e:  # noqa: BLE001 - anything a kernel raises is a verdict
        side.error = e
    side.fallback = list(trace.fallback) if trace is not None else []
    return side


def _format_tb(e: BaseException | None) -> str:
    return "".join(_traceback.format_exception(e)) if e is not None else ""


def _unbatched(op, result, args, kwargs):
    """`result`, with a legacy vmap BatchedTensor (what _add_batch_dim returns, opdb hint
    result = "legacy_batched") taken back out by _remove_batch_dim at the op's own level and
    batch dim: outside vmap every other use of it (detach, clone) has no batching rule."""
    if hint(op, "result") != "legacy_batched":
        return result
    bound = bind_arguments(op, args, kwargs)
    dim = bound["batch_dim"]
    return torch.ops.aten._remove_batch_dim(result, bound["level"], bound["self"].size(dim), dim)


def _seed(op, seed: int) -> None:
    """Seed the global generators only for ops that draw random numbers: torch.manual_seed seeds
    every device's generator and costs milliseconds, which adds up over a sweep's cases."""
    if _nondeterminism(op) == "seeded":
        torch.manual_seed(seed)


def _has_floating_inputs(case) -> bool:
    if any(is_inexact(s.torch_dtype) for s in case.tensor_specs()):
        return True

    def walk(v):
        if isinstance(v, dict) and len(v) == 1 and "dtype" in v:
            return is_inexact(getattr(torch, str(v["dtype"]), torch.int64))
        if isinstance(v, (list, tuple)):
            return any(walk(x) for x in v)
        return False

    return any(walk(v) for v in list(case.args) + list(case.kwargs.values()))


def _nondeterminism(op) -> str:
    kind = getattr(op.rules, "nondeterminism", "") or ""
    if not kind and "nondeterministic_seeded" in (op.tags or ()):
        kind = "seeded"
    return kind


# -- comparing ----------------------------------------------------------------------------


def _pairs(actual, expected, op):
    """(actual, expected, path) to compare: the return value, then each written argument
    (`actual` and `expected` are (result, written) pairs)."""
    out = [(actual[0], expected[0], "output")]
    for name, val in (expected[1] or {}).items():
        label = "out" if any(a.name == name and a.is_out for a in op.arguments) else "mutated"
        out.append(((actual[1] or {}).get(name), val, f"{name} ({label})"))
    return out


def _compare_all(pairs, tol, *, sign, meta_only):
    records: list[Record] = []
    for actual, expected, path in pairs:
        records += compare(actual, expected, tolerance=tol, check_sign_of_zero=sign, metadata_only=meta_only, path=path)
    return records


# -- backward ------------------------------------------------------------------------------


def _grad_inputs(op, args, kwargs):
    """Make floating/complex tensor inputs leaves that require grad; return them with their names."""
    found: list[tuple[str, torch.Tensor]] = []
    names = [a.name for a in op.arguments]

    def prep(v, name):
        # a Tensor[] argument's tensors are named by their place in it: tensors[1]
        leaves, spec = pytree.tree_flatten(v)
        for i, leaf in enumerate(leaves):
            if isinstance(leaf, torch.Tensor) and is_inexact(leaf.dtype):
                leaves[i] = leaf.detach().requires_grad_(True)
                found.append((name if leaf is v else f"{name}[{i}]", leaves[i]))
        return pytree.tree_unflatten(leaves, spec)

    new_args = tuple(prep(a, names[i] if i < len(names) else f"arg{i}") for i, a in enumerate(args))
    new_kwargs = {k: prep(v, k) for k, v in kwargs.items()}
    return new_args, new_kwargs, found


def _run_backward(
    op, case, *, to_device, device, dtype=None, to_cpu=lambda t: t, sync=None, ctx=None, grad_outputs=None, trace=None
):
    """(grads by input name, grad_outputs used, error, traceback). `grad_outputs` None makes them.
    `trace` (conform.run.dispatch.FallbackTrace) is active while the op and its backward run."""
    _announce(to_device, dtype, "backward")
    try:
        with contextlib.ExitStack() as stack:
            if ctx is not None:
                stack.enter_context(ctx)
            stack.enter_context(torch.enable_grad())
            args, kwargs = case.materialize(to_device, device, dtype=dtype)
            args, kwargs, inputs = _grad_inputs(op, args, kwargs)
            _seed(op, case.seed)
            with trace if trace is not None else contextlib.nullcontext():
                result = _unbatched(op, op.resolve()(*args, **kwargs), args, kwargs)
            outs = [t for t in leaves(result) if t.requires_grad and is_inexact(t.dtype)]
            if not outs or not inputs:
                return None, None, None, ""
            if grad_outputs is None:
                g = torch.Generator().manual_seed(case.seed + 1)
                grad_outputs = [torch.randn(o.shape, generator=g, dtype=o.dtype) for o in outs]
            gos = [to_device(go.to(o.dtype)) for go, o in zip(grad_outputs, outs)]
            if len(gos) != len(outs):
                raise RuntimeError(f"{len(outs)} differentiable outputs vs {len(gos)} on the reference")
            with trace if trace is not None else contextlib.nullcontext():
                grads = torch.autograd.grad(outs, [t for _, t in inputs], gos, allow_unused=True)
            if sync is not None:
                sync()
            by_name = {}
            for (name, t), gr in zip(inputs, grads):
                by_name[name] = to_cpu(gr.detach()) if gr is not None else torch.zeros(t.shape, dtype=t.dtype)
            return by_name, grad_outputs, None, ""
    except (KeyboardInterrupt, SystemExit):
        raise
    except BaseException as e:  # noqa: BLE001
        return None, grad_outputs, e, _format_tb(e)


# -- run_case ------------------------------------------------------------------------------


def _on_device(backend) -> dict:
    """The keyword arguments of `_run_side` and `_run_backward` that run a case on the backend's device."""
    return {
        "to_device": backend.to_device,
        "device": backend.device,
        "to_cpu": backend.to_cpu,
        "sync": backend.synchronize,
        "ctx": _device_context(backend),
    }


def run_case(
    op,
    case,
    backend,
    *,
    grad: bool = True,
    relations: bool = False,
    finite_differences: bool | None = None,
    second_order: bool = False,
) -> CaseResult:
    """Run `case` of `op` on the CPU reference and on `backend`; never raises (see module doc).
    `relations`: hold the device against itself too (conform.judge.metamorphic) and its
    gradients against finite differences (conform.judge.gradients; `finite_differences` None:
    with the relations). `second_order`: where finite differences agree with the gradient, hold
    the backward's own derivatives, and the forward-mode formula's, to finite differences of
    them too."""
    fd = relations if finite_differences is None else finite_differences
    try:
        return _run_case(
            op, case, backend, grad=grad, relations=relations, finite_differences=fd, second_order=second_order and fd
        )
    except (KeyboardInterrupt, SystemExit):
        raise
    except BaseException as e:  # noqa: BLE001 - a bug in conform must not kill the sweep
        # a bug in conform is not the device's: the cell is skipped with the reason, visibly
        return CaseResult(
            Outcome.SKIPPED, "", f"conform internal error: {first_line(e)}", traceback=_traceback.format_exc()
        )


def _cpu_copy(t):
    return t.clone()


def degenerate_data(case, op) -> bool:
    """A case with a tensor of one value repeated (generators.tensor.EQUAL_PREFIX): judged where a
    result is NaN or infinite against a finite golden (a variance of 0 overflowing, a norm layer's
    inf - inf) and not in its finite values, and held to no relation. A normalisation of equal
    values is 0 / 0 to within rounding: a kernel whose mean is an ulp off (a sum times the rounded
    1 / n, a transposed input's other reduction order) gives values of order one there, which is
    rounding, not a bug (_native_batch_norm_legit gave 3.8 on a transposed input, 0 on a
    contiguous one). Not for an op that subtracts no mean (opdb hint `equal_values_defined`: an
    RMS norm's x / sqrt(mean(x**2)) is +-1 there, and 0 from a float32 kernel whose squares
    overflow is its bug)."""
    if (op.rules.hints or {}).get("equal_values_defined"):
        return False
    return any(s.magnitude.startswith(EQUAL_PREFIX) for s in case.tensor_specs())


def nonfinite_matrix(case) -> bool:
    """A case with a structured matrix holding a non-finite entry (generators.tensor.STRUCTURED_EDGES):
    judged in form alone (shapes, dtypes, which side raises), as on a metadata-only device, and by
    whether the process survives it. Where a factorisation's NaNs and infinities land is the
    routine's pivoting and blocking, which two correct kernels (float32 and float64 LAPACK, LU
    against the inverse NumPy takes) choose differently: on a sample of the linalg ops, values
    compared there gave 17 alarms, every one of them such a difference."""
    return any(s.edges is not None and s.values in STRUCTURED_KINDS for s in case.tensor_specs())


def is_plain_cpu(backend) -> bool:
    """The built-in CPU backend, with no hooks: its device side would repeat the reference side
    kernel for kernel, so that work is done once (the comparison is then against golden float64)."""
    return type(backend) is CPUBackend and getattr(backend, "device_context", None) is None


def _run_case(
    op,
    case,
    backend,
    *,
    grad: bool,
    relations: bool = False,
    finite_differences: bool = False,
    second_order: bool = False,
) -> CaseResult:
    cpu = torch.device("cpu")
    device_is_cpu = torch.device(backend.device).type == "cpu"
    nonfinite = nonfinite_matrix(case)
    meta_only = bool(getattr(backend, "metadata_only", False)) or nonfinite
    if nonfinite:
        # the forward's form alone: a backward takes another path (linalg_eigvals with grad goes
        # through linalg_eig, which refuses a non-finite entry that _linalg_eigvals takes)
        grad = finite_differences = second_order = False
    nondet = _nondeterminism(op)
    floating = _has_floating_inputs(case)
    want_golden = golden_runs(
        floating=floating, metadata_only=meta_only, nondeterminism=nondet, rule_allows=hint(op, "golden")
    )
    # sign of zero only for real dtypes: complex kernels build -0.0 parts from arithmetic the
    # reference does differently (neg of a complex64 zero part), which no contract fixes
    sign = bool(hint(op, "sign_of_zero")) and not any(sp.torch_dtype.is_complex for sp in case.tensor_specs())

    ref = _run_side(op, case, to_device=_cpu_copy, device=cpu)
    oversized = _oversized(ref.result) if ref.error is None else ""
    if oversized:
        return CaseResult(Outcome.PASS, "forward", f"invalid case: {oversized}", invalid=True)
    # golden only helps when the reference ran, or lacks a kernel for the dtype (then golden
    # stands in for it); for an input the reference rejects, it would be wasted work
    if want_golden and (ref.error is None or is_kernel_gap(ref.error)):
        golden = _run_side(op, case, to_device=_cpu_copy, device=cpu, dtype=torch.float64)
    else:
        golden = None
    if golden is not None and golden.error is not None:
        golden = None
    if is_plain_cpu(backend):
        dev = ref  # the device under test computes exactly what the CPU reference side just did
    else:
        dev = _run_side(op, case, **_on_device(backend), trace=tracer_for(backend))

    # -- validity and errors -----------------------------------------------------------------
    ref_result, ref_written = ref.result, ref.written
    dtype_checked = True
    if nonfinite and (ref.error is None) != (dev.error is None) and not is_kernel_gap(ref.error or dev.error):
        # refusing a non-finite entry (linalg_eig's "input tensor should not contain infs or NaNs")
        # and returning NaNs for it are both answers; surviving it is what is asked
        said = f"one side refuses the non-finite entry, the other returns: {first_line(ref.error or dev.error)}"
        return CaseResult(Outcome.PASS, "forward", f"invalid case: {said}", invalid=True)
    if ref.error is not None:  # rules (10a), (10b)
        gap = is_kernel_gap(ref.error) and golden is not None
        if dev.error is not None:
            if gap and device_is_cpu:
                # the CPU is the device under test and lacks the kernel golden float64 has
                return _error_result(dev, backend, "forward")
            if relations:
                # an error that only the drawn layout raises is the device's, whatever the CPU says
                broken = metamorphic.check_layout(
                    op, case, None, relation_sides(op, backend), None, drawn_raised=dev.error
                )
                if broken is not None:
                    # the CPU reference raised on the drawn layout as the device did
                    shared = _shared_with_cpu(op, backend, broken, None)
                    if shared is None:
                        return violation_result(broken)
                    return CaseResult(Outcome.PASS, "forward", shared.message, invalid=True, finding=shared.to_dict())
            return CaseResult(
                Outcome.PASS,
                "forward",
                f"invalid case: the reference rejects it ({first_line(ref.error)})",
                invalid=True,
            )
        if not gap and meta_only and _DATA_DEPENDENT.search(first_line(ref.error)):
            return CaseResult(
                Outcome.PASS,
                "forward",
                f"invalid case: the reference rejects its values, which {backend.name} does not hold "
                f"({first_line(ref.error)})",
                invalid=True,
            )
        if not gap:
            return CaseResult(
                Outcome.MISSING_ERROR,
                "forward",
                f"the CPU reference raised {first_line(ref.error)}; the device returned a result",
            )
        # the CPU has no kernel for this dtype: golden float64, cast to the device's dtypes, stands in
        try:
            ref_result = cast_like(golden.result, dev.result)
            ref_written = {k: cast_like(v, (dev.written or {}).get(k)) for k, v in (golden.written or {}).items()}
            dtype_checked = False
        except (ValueError, TypeError, RuntimeError):
            return CaseResult(
                Outcome.PASS, "forward", "invalid case: the CPU has no kernel to compare with", invalid=True
            )
    elif dev.error is not None and widening.applies(case) and widening.refuses(dev.error):
        # a Python integer the narrow dtype cannot hold, which the CPU wraps (conform.judge.widening):
        # a device that refuses it with the conversion's own error is no worse than the CPU
        said = (
            f"the device refuses a Python integer the dtype cannot hold, which the CPU wraps: {first_line(dev.error)}"
        )
        return CaseResult(
            Outcome.PASS, "forward", said, finding=oracle.Finding(oracle.REFERENCE, "forward", said).to_dict()
        )
    elif dev.error is not None and (past_end := _past_end(op, case)):
        # an index past the end of its dim, which the CPU accepts: the device refusing it is right
        said = f"the CPU accepts {past_end}; the device refuses it: {first_line(dev.error)}"
        return CaseResult(
            Outcome.PASS, "forward", said, finding=oracle.Finding(oracle.CPU_WRONG, "forward", said).to_dict()
        )
    elif dev.error is not None:  # rule (10c)
        return _error_result(dev, backend, "forward")
    elif is_plain_cpu(backend):
        unsafe = _unsafe_cast_written(op, case) or _accepted_past_end(op, case) or _overlap_written(op, case, dev)
        if unsafe:
            return CaseResult(Outcome.MISSING_ERROR, "forward", unsafe)
        unwritten = _unwritten_elements(op, case, dev) if relations and not nondet else ""
        if unwritten:
            return CaseResult(Outcome.MISMATCH, "forward", unwritten)

    fallback = dev.fallback or []

    # -- the verdict (conform.judge.verdict): parity with the CPU first, golden to judge ---------------
    n = numel_ratio(op, case, ref_result)
    before = _inputs_before(case) if ref.error is None else ()
    scale, second = input_scales(before, skip=frozenset(a.name for a in op.out_args))
    # each output leaf bounds the input-scale floor by what can cancel in it (see tolerances' docstring)
    base_tol = LeafTolerance(
        lambda dt, out: tolerance_for(
            op, dt, reduction_size=n, input_scale=scale, output_scale=out, second_scale=second, case=case
        )
    )
    # a result is no more precise than its least precise input: ldexp(float32, float16) is
    # x * 2**other with 2**other rounded to float16 (see loosest)
    tol = loosest(base_tol, {sp.torch_dtype for sp in case.tensor_specs() if is_inexact(sp.torch_dtype)})

    def forward_records(actual, want):
        pairs = _pairs(actual, want, op)
        if meta_only or nondet == "uninitialized":
            out = _compare_all(pairs, tol, sign=False, meta_only=True)
        elif nondet == "seeded":
            out = []
            for a, exp, path in pairs:
                out += statistics_records(a, exp, path)
        elif nondet == "ties":
            # an out= variant's outs hold its results: the index of a tie is the kernel's choice there too
            outs = [n for n in (want[1] or {}) if any(a.name == n and a.is_out for a in op.arguments)]
            out = tie_records(op, actual[0], want[0], ref.inputs, tol)
            if outs:
                got = tuple((actual[1] or {}).get(n) for n in outs)
                out += tie_records(op, got, tuple(want[1][n] for n in outs), ref.inputs, tol, path="out")
            compared = {f"{n} (out)" for n in outs}
            out += _compare_all([p for p in pairs[1:] if p[2] not in compared], tol, sign=sign, meta_only=False)
        else:
            exact, meta = split_ambiguous(op, pairs)
            out = _compare_all(exact, tol, sign=sign, meta_only=False) + _compare_all(
                meta, tol, sign=False, meta_only=True
            )
        if not dtype_checked:
            out = [r for r in out if r.kind != "dtype"]
        return out

    reference = (ref_result, ref_written)
    phase = oracle.Phase(
        "forward",
        op,
        case,
        reference,
        forward_records,
        run_cpu=lambda c, dt, tx=None: _observed(_run_side(op, c, to_device=_cpu_copy, device=cpu, dtype=dt)),
        expect=lambda raw: oracle.golden_pair(raw, reference) if dtype_checked else None,
        golden_wanted=golden is not None,
        # output strides against the reference's, unless a rule says the backend chooses them
        layout=(lambda a, want: _layout_records(op, case, backend, a, want))
        if dtype_checked and hint(op, "strides")
        else None,
    )
    phase.preset_golden(_observed(golden))
    rerun_ref = _forward_rerun(op, None)
    v = oracle.verdict(
        phase,
        (dev.result, dev.written),
        golden_is_expectation=is_plain_cpu(backend),
        rerun_device=rerun_ref if is_plain_cpu(backend) else _forward_rerun(op, backend),
        rerun_reference=rerun_ref,
    )
    if ref.error is None and dtype_checked and not meta_only and nondet not in ("seeded", "uninitialized"):
        v = references.second_opinion(
            phase, (dev.result, dev.written), v, tol=tol, plain=is_plain_cpu(backend), inputs=before
        )
    records = v.records
    if degenerate_data(case, op):
        records = [dataclasses.replace(r, kind="ok") if r.kind == "values" else r for r in records]
    result = CaseResult(Outcome.PASS, "forward")
    _fill_errors(result, records)
    _fill_golden_errors(result, v, (dev.result, dev.written), reference if ref.error is None else None, phase.golden)
    result.finding = v.finding.to_dict() if v.finding else None

    bad = failures(records)
    if bad and not is_plain_cpu(backend) and not getattr(backend, "metadata_only", False) and ref.error is None:
        # rule (1e), self-consistent first (a case judged in form alone too: a non-finite matrix's): a CPU reference that gives another result when the
        # same case runs again (a kernel reading memory it never wrote) is no expectation
        moved = _cpu_unsteady(op, case, reference, forward_records)
        if moved:
            said = f"the CPU reference gives another result when the same case runs again: {moved}"
            finding = oracle.Finding(oracle.REFERENCE, "forward", said).to_dict()
            return CaseResult(Outcome.PASS, "forward", f"no expectation: {said}", invalid=True, finding=finding)
    if bad and not is_plain_cpu(backend) and golden is not None and dtype_checked and not meta_only:
        # a device right at an infinite input where the CPU and golden share a formula's NaN
        # (conform.judge.limits) is held to the op's value there, not to theirs
        made = _forward_limit(op, case, phase)
        expected = phase.expect(phase.golden) if phase.golden is not None else None
        if made is not None:
            cpu_off = made[0](_only_leaf((ref_result, None)))
            dev_off = made[0](_only_leaf((dev.result, dev.written)))
            fix = lambda e: _limit_expected(made, e)  # noqa: E731
        else:  # any other op, element by element (conform.judge.limits.at_probe)
            sides = [_float_leaves(dev.result), _float_leaves(ref_result)]
            general = _infinity_check(op, case, _forward_probe(op, case), sides, ["result"])
            cpu_off = general.judge(sides[1]) if general is not None else ""
            dev_off = general.judge(sides[0]) if general is not None else ""
            fix = lambda e: general.expected(e)  # noqa: E731
        if cpu_off and expected is not None and not dev_off:
            fixed = fix(expected)
            if fixed is not None and not failures(forward_records((dev.result, dev.written), fixed)):
                said = f"the CPU reference and float64 are wrong at an infinite input: {cpu_off}"
                return CaseResult(
                    Outcome.PASS, "forward", said, finding=oracle.Finding(oracle.CPU_WRONG, "forward", said).to_dict()
                )
    if bad and not is_plain_cpu(backend) and not meta_only and ref.error is None and not nondet:
        # a device right where the CPU's narrow integer kernel wraps a value (conform.judge.widening)
        right = _widened_excuse(op, case, (ref_result, ref_written), (dev.result, dev.written), forward_records)
        if right:
            said = f"the CPU reference is wrong for integer inputs widened to int64: {right}"
            return CaseResult(
                Outcome.PASS, "forward", said, finding=oracle.Finding(oracle.CPU_WRONG, "forward", said).to_dict()
            )
    if bad:
        result.outcome = of_failures({r.kind for r in bad}, "forward")
        if result.outcome is Outcome.META_MISMATCH:
            result.message = "; ".join(r.message for r in bad if r.kind in META_KINDS)
            return result
        result.message = _joined(bad) + v.attribution
        if fallback:
            result.message += f" ({fallback_message(fallback)})"
        return result
    if v.finding is not None and v.finding.kind == oracle.CPU_WRONG:
        result.message = v.finding.message

    result = _with_fallback(result, fallback)
    if result.outcome is not Outcome.PASS:
        return result

    # (after an excuse of the verdict rule too, but not where the independent reference judged golden)
    judged_golden = result.finding is not None and result.finding.get("kind") != oracle.PRECISION_EDGE
    if golden is not None and ref.error is None and dtype_checked and not meta_only and not judged_golden:
        failed = _elementwise_result(op, case, backend, phase, dev, ref_result, result)
        if failed is None:
            failed = _limit_result(op, case, backend, phase, dev, ref_result, result)
        if failed is not None:
            return failed

    if ref.error is None and dtype_checked and not meta_only and not nondet and widening.applies(case):
        failed = _widened_result(op, case, backend, (ref_result, ref_written), result)
        if failed is not None:
            return failed

    if relations and not meta_only and nondet != "uninitialized" and not degenerate_data(case, op):
        sides = relation_sides(op, backend)
        observed = (dev.result, dev.written)
        deterministic = nondet != "seeded" or _randomness_off(op, case)
        # a seeded op the case makes deterministic is held to its values, not its statistics
        by_value = (
            phase.compare
            if nondet != "seeded"
            else lambda a, e: _compare_all(_pairs(a, e, op), tol, sign=sign, meta_only=False)
        )
        broken = metamorphic.check_layout(op, case, observed, sides, by_value, values=deterministic)
        if broken is None and (not nondet or deterministic and nondet == "seeded"):
            broken = metamorphic.check_position(op, case, observed, sides, tol)
        if broken is None and not nondet:
            broken = batching.check_batch(op, case, observed, sides, by_value)
        if broken is None and not nondet and op.variant == "inplace":
            broken = metamorphic.check_alias(op, case, sides, by_value)
        if broken is None and not nondet and is_plain_cpu(backend):
            threaded = relation_sides(op, backend, threads=RELATION_THREADS)
            broken = metamorphic.check_threads(
                op,
                case,
                observed,
                sides,
                threaded,
                by_value,
                RELATION_THREADS,
                unsteady=lambda first: _cpu_unsteady(op, case, first, by_value),
            )
        functional = _functional_spec(op) if broken is None and (not nondet or _seeded_alike(op)) else None
        if (
            functional is not None
            and (not nondet or _nondeterminism(functional) == "seeded")
            and not functional_failed(functional.qualname)
        ):
            # a random overload and its random functional, each re-seeded identically, draw the same
            # values (in the same dtype: a float64 draw is another draw, not a rounding of it)
            if on_functional is not None:
                on_functional(functional.qualname)
            try:
                broken = metamorphic.check_forms(
                    op, case, observed, functional, _poison_watch(functional, backend), tol, same_dtype=bool(nondet)
                )
            finally:
                if on_functional is not None:
                    on_functional(None)
        if broken is not None:
            shared = _shared_with_cpu(op, backend, broken, by_value)
            if shared is None and broken.relation == metamorphic.ALIAS:
                shared = _alias_shared(op, backend, case, by_value)
            if shared is None and broken.relation == metamorphic.LAYOUT and not is_plain_cpu(backend):
                # the CPU's kernel breaks the layout relation on this case too, with other values
                # (memory it never wrote, read through the layout): no expectation for the device
                again = metamorphic.check_layout(
                    op, case, reference, relation_sides(op, backend, cpu_kernels=True), by_value, values=deterministic
                )
                if again is not None and again.relation == metamorphic.LAYOUT:
                    said = f"the CPU's kernel too, with other values: {metamorphic.describe(again)}"
                    shared = oracle.Finding(oracle.REFERENCE, "forward", said)
            if shared is None:
                return violation_result(broken)
            result.finding = result.finding or shared.to_dict()

    # -- backward ----------------------------------------------------------------------------
    # (gradients through sign-ambiguous outputs depend on the sign each kernel picked: not compared)
    if (
        grad
        and op.variant == "functional"
        and floating
        and nondet not in ("seeded", "uninitialized")
        and ref.error is None
        and op.base_name not in AMBIGUOUS_OUTPUTS
    ):
        # a gradient formula reads the forward's outputs too (tanh' = 1 - y*y, logcumsumexp's
        # exp(x - y)): they are inputs of the backward that can cancel (see tolerances' docstring)
        back_second = input_scales((before, ref_result))[1]
        back = _backward(
            op,
            case,
            backend,
            meta_only=meta_only,
            n=n,
            # "result": the op defines the sign of its result's zeros, not of its gradients' (a
            # broadcast operand's gradient sums products that underflow in the dtype alone)
            sign=sign and hint(op, "sign_of_zero") is True,
            scales=(scale, back_second),
            want_golden=want_golden,
            finite_differences=finite_differences and nondet != "ties",
            second_order=second_order and nondet != "ties",
            equivalents=relations and nondet != "ties",
        )
        if back is not None and back.outcome is not Outcome.PASS:
            return back
        if back is not None and back.finding and not result.finding:
            result.finding = back.finding
    return result


# ops that take indices unchecked by design: their callers have checked them (a backward's
# index, the _unsafe_ family) or their documentation says so
_UNCHECKED_INDICES = re.compile(r"^_|_backward$|unsafe")


def _past_end(op, case) -> str:
    """What in `case` is an index past the end of the dim it indexes (a spec of the "past_end"
    kind, which generators draw only where they know the dim's size), in words; "" where
    nothing is, or the op takes indices unchecked by design."""
    if _UNCHECKED_INDICES.search(op.base_name):
        return ""
    if any(s.numel == 0 for s in case.tensor_specs() if s.values not in ("index", "past_end")):
        return ""  # nothing is read or written: the index reaches no element (no opinion)
    for spec in case.tensor_specs():
        if spec.values == "past_end" and spec.numel:
            return (
                f"an index past the end of what it indexes ({spec.low} or more, where 0 to {spec.low - 1} are in range)"
            )
    return ""


def _accepted_past_end(op, case) -> str:
    """On the plain CPU, the message of a kernel that returned a result for an index past the
    end (a missing bounds check: every ATen op that takes such an index documents or raises
    "index out of range"), or ""."""
    what = _past_end(op, case)
    return f"the CPU kernel accepts {what} and returns a result: a missing bounds check" if what else ""


def _inputs_before(case):
    """The case's inputs as the op receives them: after the call an in-place op's self and an
    out= argument hold its results (batch norm's running mean of huge inputs), which are no
    input's scale (see tolerances.input_scales)."""
    try:
        return case.materialize(lambda t: t, torch.device("cpu"))
    except Exception:  # noqa: BLE001 - the reference ran it: cannot fail here, and no scale is no floor
        return ()


def _observed(side: _Side | None):
    """A side as the oracle sees it: (result, written), None where it raised."""
    return None if side is None or side.error is not None else (side.result, side.written)


def _scribble(device) -> None:
    """Fill and free memory on `device`, so that a kernel reading memory it never wrote reads
    something else the next time (NaN in floating buffers, a pattern in integer ones)."""
    for n in (64, 4096, 1 << 16, 1 << 20):
        for dt in (torch.float32, torch.int64):
            t = torch.full((n,), float("nan") if dt.is_floating_point else 0x5A5A5A5A, dtype=dt, device=device)
            del t


def _cpu_unsteady(op, case, first, records_fn) -> str:
    """Whether the CPU's kernel gives `case` another result than `first` when it runs again: once
    as it ran; once with freed memory scribbled and small blocks held, so that the inputs lie at
    other addresses (a kernel reading past an expanded input's storage reads its neighbours); once
    through Python's dispatch (a pass-through mode), whose deeper call stack leaves other values
    where a kernel reads stack memory it never wrote (an orthogonal polynomial at a NaN x); and
    once right after the op ran at the same depth on other values (every floating input PRIMED):
    a local it never sets at this case then holds what that run left there (laguerre_polynomial_l
    at a NaN x returns its loop's last value from the run before, at the same call depth the
    same in each of the others). The first difference's text, or ""."""
    cpu = torch.device("cpu")
    for how in ("plain", "scribbled", "dispatched", "primed"):
        held = [torch.full((n,), float("nan")) for n in (1, 3, 7, 16, 40)] if how == "scribbled" else []
        if how == "scribbled":
            _scribble(cpu)
        if how == "primed":
            _run_side(op, case, to_device=_primed, device=cpu)  # (an error there is no matter)
        ctx = _PassThroughMode() if how == "dispatched" else None
        again = _observed(_run_side(op, case, to_device=_cpu_copy, device=cpu, ctx=ctx))
        del held
        moved = failures(records_fn(again, first)) if again is not None and first is not None else []
        if moved:
            return moved[0].message
    return ""


# the value _cpu_unsteady's priming run gives every floating input: exact in every dtype, in every
# domain the generators draw, and no special value
PRIMED = 0.375


def _primed(t):
    t = t.clone()
    return t.fill_(PRIMED) if t.is_floating_point() or t.is_complex() else t


def _forward_rerun(op, backend):
    """The side under judgement run again (the CPU when `backend` is None), for the oracle's
    self-consistency checks; `scribble` overwrites freed memory first."""
    cpu = torch.device("cpu")

    def rerun(c, tx=None, scribble=False):
        if backend is None:
            if scribble:
                _scribble(cpu)
            return _observed(_run_side(op, c, to_device=_cpu_copy, device=cpu))
        ctx = _device_context(backend)
        if scribble:
            with _device_context(backend):
                _scribble(backend.device)
        return _observed(
            _run_side(
                op,
                c,
                to_device=backend.to_device,
                device=backend.device,
                to_cpu=backend.to_cpu,
                sync=backend.synchronize,
                ctx=ctx,
            )
        )

    return rerun


def _fill_golden_errors(result: CaseResult, v, device, reference, golden) -> None:
    """Both sides' errors against golden, on every case golden ran for (the cell keeps the worst)."""
    d, r = v.device_golden_err, v.ref_golden_err
    if golden is not None:
        flat = lambda obs: (obs[0], list((obs[1] or {}).values()))  # noqa: E731
        d = d if d is not None else max_abs_vs(flat(device), flat(golden))
        r = r if r is not None or reference is None else max_abs_vs(flat(reference), flat(golden))
    result.device_golden_err, result.ref_golden_err = d, r


def _with_fallback(result: CaseResult, fallback: list[str]) -> CaseResult:
    if fallback:
        result.outcome = Outcome.FALLBACK
        result.message = fallback_message(fallback)
    return result


def _joined(bad: list[Record]) -> str:
    """The first three findings, each text once: an out= argument is the returned tensor itself,
    and the same finding at both is said once with both places ("... expected [output, out (out)]")."""
    places: dict[str, list[str]] = {}
    for r in bad[:3]:
        body, sep, tail = r.message.rpartition(" [")
        if not (sep and r.message.endswith("]")):
            body, tail = r.message, ""
        places.setdefault(body, []).append(tail[:-1])
    return "; ".join(f"{b} [{', '.join(p)}]" if all(p) else b for b, p in places.items())


def _fill_errors(result: CaseResult, records: list[Record]) -> None:
    result.kinds = frozenset(r.kind for r in failures(records))
    result.excess = max((r.extra.get("excess", 0.0) for r in failures(records)), default=0.0)
    s = summary(records)
    result.max_abs_err, result.max_rel_err, result.max_ulp_err = s["max_abs_err"], s["max_rel_err"], s["max_ulp_err"]
    result.rtol, result.atol = s["rtol"], s["atol"]


def _layout_records(op, case, backend, actual, want) -> list[Record]:
    """Output strides against the reference's, like with like. Under any Python dispatch mode
    (a backend built as a TorchDispatchMode, as tests/cpu_kernels.py and out-of-tree Python
    backends are) composite kernels take their tensor-subclass path, which may lay the result
    out differently: ATen/TensorSubclassLikeUtils.h's isTensorSubclassLike() is true whenever
    c10::impl::dispatch_mode_enabled() (masked_select_backward is then
    zeros_like(input).masked_scatter(mask, grad)). So strides that differ from the plain CPU's
    are held against the CPU run under a pass-through mode too: the device is not blamed for
    the path its dispatch took."""
    records = stride_records(actual[0], want[0])
    if not records or not isinstance(_device_context(backend), TorchDispatchMode):
        return records
    again = _run_side(op, case, to_device=_cpu_copy, device=torch.device("cpu"), ctx=_PassThroughMode())
    if again.error is not None:
        return records
    return stride_records(actual[0], again.result)


class _PassThroughMode(TorchDispatchMode):
    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        return func(*args, **(kwargs or {}))


def _error_result(side: _Side, backend, phase: str) -> CaseResult:
    outcome = of_error(side.error, backend)
    return CaseResult(outcome, phase, first_line(side.error), traceback=side.traceback)


def _backward(
    op,
    case,
    backend,
    *,
    meta_only,
    n,
    sign,
    scales=(0.0, 0.0),
    want_golden=True,
    finite_differences=False,
    second_order=False,
    equivalents=False,
) -> CaseResult | None:
    """None when backward cannot be checked; else its CaseResult (pass with a finding, or a failure)."""
    cpu = torch.device("cpu")
    ref_grads, gos, ref_err, _ = _run_backward(op, case, to_device=_cpu_copy, device=cpu)
    if ref_err is not None or ref_grads is None:
        return None  # not differentiable, or the reference cannot do it: nothing to compare
    gold_gos = [g.double() if not g.is_complex() else g.to(torch.complex128) for g in gos]

    def run_cpu(c, dt, tx=None):
        # tx: the case's transform applied to the gradient's seed too (the oracle's element checks)
        g = [tx(x) for x in gold_gos] if tx is not None else gold_gos
        found, _, err, _ = _run_backward(op, c, to_device=_cpu_copy, device=cpu, dtype=dt, grad_outputs=g)
        return (found, {}) if err is None and found is not None and set(found) == set(ref_grads) else None

    def expect(raw):
        return ({k: raw[0][k].to(ref_grads[k].dtype) for k in ref_grads}, {}) if raw is not None else None

    def rerun_on(back):
        def rerun(c, tx=None, scribble=False):
            g = [tx(x) for x in gos] if tx is not None else gos
            if back is None:
                if scribble:
                    _scribble(cpu)
                found, _, err, _ = _run_backward(op, c, to_device=_cpu_copy, device=cpu, grad_outputs=g)
            else:
                if scribble:
                    with _device_context(back):
                        _scribble(back.device)
                found, _, err, _ = _run_backward(op, c, **_on_device(back), grad_outputs=g)
            return (found, {}) if err is None and found is not None else None

        return rerun

    plain = is_plain_cpu(backend)
    if plain:
        dev_grads, dev_err, tb, fallback = ref_grads, None, "", []
    else:
        trace = tracer_for(backend)
        dev_grads, _, dev_err, tb = _run_backward(op, case, **_on_device(backend), grad_outputs=gos, trace=trace)
        fallback = list(trace.fallback) if trace is not None else []
    if dev_err is not None:
        outcome = of_error(dev_err, backend)
        return CaseResult(outcome, "backward", first_line(dev_err), traceback=tb)
    if dev_grads is None:
        return CaseResult(
            Outcome.GRAD_MISMATCH, "backward", "the device's outputs do not require grad; the reference's do"
        )
    # gradients sum over output elements: their error grows with the outputs' size too
    out_n = max([n] + [max(1, math.ceil(t.numel() / max(1, g.numel()))) for t in gos for g in ref_grads.values()])
    # a gradient is grad_output times local derivatives of the inputs: its rounding error scales
    # with both magnitudes (see tolerances.tolerance_for's input_scale)
    go_scale = max([1.0] + [float(g.detach().abs().max()) for g in gos if g.numel() and torch.isfinite(g).all()])
    base = LeafTolerance(
        lambda dt, out: tolerance_for(
            op,
            dt,
            reduction_size=out_n,
            input_scale=scales[0] * go_scale,
            second_scale=scales[1] * go_scale,
            output_scale=out,
            gradient=True,
        )
    )
    # backward computes in the outputs' dtype: the gradient of a float32 0-d tensor multiplied
    # into a float16 tensor is a float16 sum cast to float32, as precise as float16, not float32;
    # and, as forward, no gradient is more precise than the least precise input
    tol = loosest(
        base,
        {g.dtype for g in gos if is_inexact(g.dtype)}
        | {sp.torch_dtype for sp in case.tensor_specs() if is_inexact(sp.torch_dtype)},
    )

    ties = _nondeterminism(op) == "ties"

    def grad_records(actual, want_all):
        out: list[Record] = []
        for name, want in want_all[0].items():
            got = actual[0].get(name)

            def cmp(a, e, name=name, want=want):
                return compare(
                    a,
                    e,
                    tolerance=gradient_tolerance(tol, want),
                    check_sign_of_zero=sign,
                    metadata_only=meta_only,
                    path=f"grad[{name}]",
                )

            recs = cmp(got, want)
            if ties and failures(recs) and not meta_only:
                # over tied values the gradient lands on whichever index the forward chose
                grouped = tie_gradient_records(op, case, name, got, want, cmp)
                recs = grouped if grouped is not None and not failures(grouped) else recs
            out += recs
        return out

    phase = oracle.Phase(
        "backward",
        op,
        case,
        (ref_grads, {}),
        grad_records,
        run_cpu=run_cpu,
        expect=expect,
        golden_wanted=want_golden and not meta_only,
    )
    v = oracle.verdict(
        phase,
        (dev_grads, {}),
        golden_is_expectation=plain,
        rerun_device=rerun_on(None if plain else backend),
        rerun_reference=rerun_on(None),
    )
    bad = failures(v.records)
    # an op whose gradient at inf another API gives (opdb hint gradient_equivalent) is that
    # opinion's to judge there, with the relations
    probe_grads = not ties and not hint(op, "gradient_equivalent")
    if bad and not plain and want_golden and not meta_only and probe_grads:
        # a device right at an infinite input where the CPU and golden share a formula's NaN
        # (conform.judge.limits) is held to the op's derivative there, not to theirs
        names = list(dev_grads)
        sides = [[dev_grads[n] for n in names], [ref_grads.get(n) for n in names]]
        made = _infinity_check(op, case, _gradient_probe(op, case, gos, names), sides, [f"grad[{n}]" for n in names])
        expected = phase.expect(phase.golden) if made is not None else None
        cpu_off = made.judge(sides[1]) if made is not None else ""
        if cpu_off and expected is not None and not made.judge(sides[0]):
            fixed = made.expected(([expected[0][n] for n in names], {}))
            if fixed is not None and not failures(grad_records((dev_grads, {}), (dict(zip(names, fixed[0])), {}))):
                said = f"the CPU reference and float64 are wrong at an infinite input: {cpu_off}"
                return CaseResult(
                    Outcome.PASS, "backward", said, finding=oracle.Finding(oracle.CPU_WRONG, "backward", said).to_dict()
                )
    finding = v.finding.to_dict() if v.finding else None
    elementwise = (
        _elementwise_judge(op, case, phase, run_cpu, "grad[{name}]", shape=gos[0].shape)
        if want_golden and not meta_only and not ties and not bad and len(gos) == 1
        else None
    )
    if elementwise is not None:
        dev_off = elementwise(dev_grads)
        if dev_off and not plain:
            again = rerun_on(backend)(case)  # self-consistent first: the device's rerun shows it too
            dev_off = dev_off if again is not None and elementwise(again[0]) else ""
        cpu_off = dev_off if plain else elementwise(ref_grads)
        if dev_off and (plain or not cpu_off):
            return CaseResult(
                Outcome.GRAD_MISMATCH,
                "backward",
                dev_off,
                relation=_elementwise_relation(case),
                kinds=frozenset({"relation"}),
            )
        if cpu_off:
            # the device agrees with float64 where the CPU does not, or shares the CPU's formula
            # (rule (1a): parity passes it); either way a fact about the CPU kernel
            finding = oracle.Finding(oracle.REFERENCE if dev_off else oracle.CPU_WRONG, "backward", cpu_off).to_dict()
    limit = (
        _backward_limit(op, case, gos, dev_grads, ref_grads, backend, general=probe_grads)
        if want_golden and not meta_only and not ties and not bad
        else None
    )
    if isinstance(limit, CaseResult):
        return limit
    if limit is not None and finding is None:
        finding = limit
    fd = gradients.check(op, case, vs=gold_gos) if finite_differences and not meta_only and want_golden else None
    if fd is not None and fd["bad"]:
        text = gradients.message(fd)
        if plain:
            # golden's formula is the expectation here: finite differences are the opinion it does not share
            return _differences_disagree(text, "finite_differences", fd)
        cpu_wrong = oracle.Finding(oracle.REFERENCE if not bad else oracle.CPU_WRONG, "backward", text)
        finding = cpu_wrong.to_dict()
        if bad and _device_matches(fd, dev_grads, case, tol):
            bad = []  # the device matches finite differences: the formula golden ran is wrong, not the device
    so = None
    if second_order and fd is not None and not fd["bad"] and not bad and not meta_only:
        # the backward's derivatives, then (where they agree) the forward-mode formula's
        so = gradients.second_order(op, case, vs=gold_gos)
        if so is None or not so["bad"]:
            so = gradients.forward_second_order(op, case, vs=gold_gos)
    if so is not None and so["bad"]:
        text = gradients.second_order_message(so)
        if plain:
            return _differences_disagree(text, "forward_second_order" if so.get("forward") else "second_order", so)
        # the device's own second derivatives are not computed: a fact about the formulas it shares
        finding = finding or oracle.Finding(oracle.REFERENCE, "backward", text).to_dict()
    eq = gradients.equivalent(op, case, vs=gold_gos) if equivalents and not meta_only and want_golden else None
    if eq is not None and eq["bad"]:
        agrees = gradients.equivalent_agrees(eq, dev_grads, _case_rtol(case, tol))
        if plain and not agrees:
            # golden's formula is the expectation here, and the CPU in the case's dtype sides with
            # it: the equivalent API's gradient does not share it
            return CaseResult(
                Outcome.GRAD_MISMATCH,
                "backward",
                eq["bad"],
                relation={"relation": "gradient_equivalent", "other": None, "index": None, "first": None},
                kinds=frozenset({"relation"}),
            )
        finding = oracle.Finding(oracle.REFERENCE if not bad else oracle.CPU_WRONG, "backward", eq["bad"]).to_dict()
        if bad and agrees:
            bad = []  # the device matches the equivalent API: the formula golden ran is wrong, not the device
    if not bad:
        r = CaseResult(Outcome.PASS, "backward", finding=finding)
        if v.finding is not None and v.finding.kind == oracle.CPU_WRONG:
            r.message = v.finding.message
        return _with_fallback(r, fallback)
    result = CaseResult(
        of_failures({r.kind for r in bad}, "backward"), "backward", _joined(bad) + v.attribution, finding=finding
    )
    _fill_errors(result, v.records)
    result.device_golden_err, result.ref_golden_err = v.device_golden_err, v.ref_golden_err
    if fallback:
        result.message += f" ({fallback_message(fallback)})"
    return result


def _differences_disagree(text: str, relation: str, r) -> CaseResult:
    """The plain CPU's grad_mismatch where finite differences (`r`, of conform.judge.gradients)
    disagree with a formula, with what its reproduction script needs to draw the same directions."""
    return CaseResult(
        Outcome.GRAD_MISMATCH,
        "backward",
        text,
        relation={"relation": relation, "other": None, "index": None, "first": None, "hermitian": r["hermitian"]},
        kinds=frozenset({"relation"}),
    )


def _elementwise_judge(op, case, phase, run_cpu, what: str, shape=None):
    """For an elementwise op's case in a dtype narrower than float64: a function of one side's
    values ({name: tensor}: the result, or each input's gradient) giving a message where some
    element is grossly off golden's (conform.judge.gradients.gross_elements), "" where none is;
    None where the check does not apply. `what` names the values in the message; `shape`, where
    given, is the only shape judged (a gradient of an input broadcast to the output's shape is
    a sum over the broadcast elements, not one derivative)."""
    dt = _one_exact_dtype(case)
    if dt is None or dt == torch.float64 or not metamorphic.elementwise(op):
        return None
    if _nondeterminism(op) or not hint(op, "golden") or not hint(op, "element_precision"):
        return None
    if is_backward(op):
        return None  # its inputs stand for a forward's results (tanh_backward's output in [-1, 1]) drawn freely
    golden = phase.golden
    if golden is None:
        return None
    tiny, huge = gradients.normal_range(dt)
    moved: dict[tuple, object] = {}

    def gold_at(move):  # golden with the inputs one unit of `dt` away (or scaled), run once per move
        if move not in moved:
            tx = _scaled(move[1]) if move[0] == "scale" else oracle._nudge(dt, *move)
            found = run_cpu(oracle.TransformedCase(case, tx), torch.float64)
            moved[move] = found[0] if found is not None else None
        return moved[move]

    def judge(values: dict) -> str:
        for name, want in _named(golden[0]).items():
            got = values.get(name)
            if not isinstance(got, torch.Tensor) or not isinstance(want, torch.Tensor):
                continue
            if got.shape != want.shape or not want.is_floating_point() or got.layout != torch.strided:
                continue
            if shape is not None and want.shape != shape:
                continue
            # the range's top and the moves only where some element could be off: most cases
            # pay for neither
            mask = gradients.gross_elements(got, want, want, want, tiny, huge)
            if not bool(mask.any()):
                continue
            top = _range_top(case, dt)
            for move in gradients.MOVES_BY:
                if not bool(mask.any()):
                    break
                other = _named(gold_at(move)).get(name) if gold_at(move) is not None else None
                if not isinstance(other, torch.Tensor) or other.shape != want.shape:
                    return ""
                mask &= gradients.gross_elements(got, want, other, other, tiny, huge, top)
            if bool(mask.any()):
                return gradients.elementwise_message(what.format(name=name), got, want, mask, dt)
        return ""

    return judge


def _elementwise_result(op, case, backend, phase, dev, ref_result, result) -> CaseResult | None:
    """Each element of an elementwise op's result against golden's (as `_backward` does for
    gradients): the failing CaseResult, or None (a finding about the CPU goes into `result`)."""
    judge = _elementwise_judge(op, case, phase, phase.run_cpu, "result")
    if judge is None:
        return None
    plain = is_plain_cpu(backend)
    dev_off = judge(_named(dev.result))
    if dev_off and not plain:
        again = _forward_rerun(op, backend)(case)  # self-consistent first: the device's rerun shows it too
        dev_off = dev_off if again is not None and judge(_named(again[0])) else ""
    cpu_off = dev_off if plain else judge(_named(ref_result))
    if dev_off and (plain or not cpu_off):
        return CaseResult(
            Outcome.MISMATCH, "forward", dev_off, relation=_elementwise_relation(case), kinds=frozenset({"relation"})
        )
    if cpu_off:
        kind = oracle.REFERENCE if dev_off else oracle.CPU_WRONG
        result.finding = oracle.Finding(kind, "forward", cpu_off).to_dict()
    return None


def _limit_judge(op, case, evaluate, what: str = "result", scale=None):
    """conform.judge.limits for `case`: (judge, probe case, dtype, input, limit), where judge(t)
    says what tensor `t` (the result, or with `scale` the input's gradient for those grad_outputs)
    holds off the op's value at an infinite input ("" where nothing); None where the check does
    not apply (not a one-tensor elementwise functional op, no infinite input, no saturated value).
    `evaluate(probe)` is float64's result (or gradient for grad_outputs of ones) at the probe case."""
    if op.variant != "functional" or not metamorphic.elementwise(op) or _nondeterminism(op):
        return None
    if not hint(op, "limit_at_infinity") or hint(op, "discontinuity"):
        return None
    specs = list(case.tensor_specs())
    dt = _one_exact_dtype(case)
    if len(specs) != 1 or dt is None or not metamorphic._plain_spec(specs[0]):
        return None
    x = metamorphic._logical(specs[0])
    if not bool(torch.isinf(x).any()):
        return None
    values = limits.probe(dt)
    probe = metamorphic._map_specs(
        case, lambda sp, _: metamorphic._with_values(sp, values, "contiguous"), set(), [a.name for a in op.arguments]
    )
    at = evaluate(probe)
    if not isinstance(at, torch.Tensor) or at.shape != values.shape or not at.is_floating_point():
        return None
    limit = limits.saturated(at)
    if not limit:
        return None

    def judge(got) -> str:
        if not isinstance(got, torch.Tensor) or not got.is_floating_point():
            return ""
        mask = limits.off_at_infinity(x, got, limit, dt, scale)
        return limits.message(what, x, got, mask, limit, dt) if bool(mask.any()) else ""

    return judge, probe, dt, x, limit


def _only_leaf(observed):
    """The one tensor of an observed (result, written), or None."""
    if observed is None:
        return None
    found = [t for t in leaves(observed[0]) if isinstance(t, torch.Tensor)]
    return found[0] if len(found) == 1 else None


def _forward_limit(op, case, phase):
    return _limit_judge(op, case, lambda p: _only_leaf(phase.run_cpu(p, torch.float64)))


def _limit_expected(made, expected):
    """`expected` (golden's (result, written)) with the op's value at each infinite input, or None."""
    _, _, _, x, limit = made
    result, written = expected
    if not isinstance(result, torch.Tensor) or written:
        return None
    return limits.at_infinity(x, result, limit), written


def _limit_result(op, case, backend, phase, dev, ref_result, result) -> CaseResult | None:
    """The result at an infinite input against the op's saturated value there (conform.judge.limits):
    the failing CaseResult, or None (a finding about the CPU goes into `result`)."""
    made = _forward_limit(op, case, phase)
    if made is None:
        return _infinity_result(op, case, backend, phase, dev, ref_result, result)
    judge, probe, dt, _, _ = made
    plain = is_plain_cpu(backend)
    dev_off = judge(_only_leaf((dev.result, dev.written)))
    if dev_off and not plain:
        again = _forward_rerun(op, backend)(case)  # self-consistent first: the device's rerun shows it too
        dev_off = dev_off if judge(_only_leaf(again)) else ""
    cpu_off = dev_off if plain else judge(_only_leaf((ref_result, None)))
    return _limit_verdict(dev_off, cpu_off, plain, probe, dt, result, "forward")


def _widened(op, case):
    """The case run on the CPU with its narrow integer tensors in int64, and in float64 (None where
    the op refuses it): ((result, written), (result, written) or None), or None."""
    wide = _run_side(op, case, to_device=widening.widened_copy, device=torch.device("cpu"))
    if wide.error is not None:
        return None
    exact = _run_side(op, case, to_device=widening.float_copy, device=torch.device("cpu"))
    return (wide.result, wide.written), None if exact.error is not None else (exact.result, exact.written)


_WIDENED_RELATION = {"relation": "widened", "other": None, "index": None, "first": None, "dtype": "int64"}


def _widened_result(op, case, backend, reference, result) -> CaseResult | None:
    """The CPU's integer results against the widened run (conform.judge.widening), after parity
    passed (so the device's are the CPU's): on the plain CPU a difference is the cell's mismatch,
    on an accelerator a finding about the CPU that the device shares."""
    wide = _widened(op, case)
    off = widening.off_widened(reference, *wide) if wide is not None else ""
    if not off:
        return None
    if is_plain_cpu(backend):
        return CaseResult(
            Outcome.MISMATCH, "forward", off, relation=dict(_WIDENED_RELATION), kinds=frozenset({"relation"})
        )
    result.finding = result.finding or oracle.Finding(oracle.REFERENCE, "forward", off).to_dict()
    return None


def _widened_excuse(op, case, reference, observed, forward_records) -> str:
    """Where the device and the CPU disagree on an integer case: the CPU's difference from the
    widened run (conform.judge.widening) if the device gives the widened values there, else ""."""
    if not widening.applies(case):
        return ""
    wide = _widened(op, case)
    off = widening.off_widened(reference, *wide) if wide is not None else ""
    if not off or widening.off_widened(observed, *wide):
        return ""
    return "" if failures(forward_records(observed, widening.substituted(reference, observed, *wide))) else off


def _backward_limit(op, case, gos, dev_grads, ref_grads, backend, *, general=True):
    """The input's gradient at an infinite input against grad_output times the op's saturated
    derivative there (conform.judge.limits): a failing CaseResult, a finding (dict), or None.
    `general`: any other op too, element by element (_infinity_backward)."""
    cpu = torch.device("cpu")

    def evaluate(probe):
        ones = [torch.ones(limits.probe(torch.float64).shape, dtype=torch.float64)]
        found, _, err, _ = _run_backward(
            op, probe, to_device=_cpu_copy, device=cpu, dtype=torch.float64, grad_outputs=ones
        )
        return next(iter(found.values())) if err is None and found and len(found) == 1 else None

    made = _limit_judge(op, case, evaluate, "grad", scale=gos[0]) if len(dev_grads) == len(gos) == 1 else None
    if made is None:
        return _infinity_backward(op, case, gos, dev_grads, ref_grads, backend) if general else None
    judge, probe, dt, _, _ = made
    plain = is_plain_cpu(backend)
    (name,) = dev_grads
    dev_off = judge(dev_grads[name])
    if dev_off and not plain:
        again, _, err, _ = _run_backward(op, case, **_on_device(backend), grad_outputs=gos)
        dev_off = dev_off if err is None and again and judge(again.get(name)) else ""
    cpu_off = dev_off if plain else judge(ref_grads.get(name))
    holder = CaseResult(Outcome.PASS, "backward")
    failed = _limit_verdict(dev_off, cpu_off, plain, probe, dt, holder, "backward")
    return failed if failed is not None else holder.finding


@dataclass
class _Infinity:
    """conform.judge.limits' values at infinity of one case, element by element: judge(leaves) says
    what floating `leaves` (a result's or the gradients', in order) hold off them ("" where
    nothing); expected(e) is golden's (result, written) `e` with those values in place."""

    dt: torch.dtype
    values: list[torch.Tensor]  # float64 at the first probe, per leaf
    masks: list[torch.Tensor]  # where that is the op's value at infinity
    labels: list[str]  # each leaf's name in messages

    def judge(self, got: list) -> str:
        for g, value, mask, label in zip(got, self.values, self.masks, self.labels):
            off = limits.off_infinity(g, value, mask) if isinstance(g, torch.Tensor) else None
            if off is not None and bool(off.any()):
                return limits.infinity_message(label, g, value, off, self.dt)
        return ""

    def expected(self, expected):
        result, written = expected
        if written:
            return None
        found = iter(zip(self.values, self.masks))

        def fix(t):
            if isinstance(t, torch.Tensor) and t.is_floating_point():
                value, mask = next(found, (None, None))
                return t if value is None else torch.where(mask.to(t.device), value.to(t), t)
            if isinstance(t, (list, tuple)):
                return type(t)(fix(x) for x in t)
            return t

        return fix(result), written


def _float_leaves(value) -> list:
    return [t for t in leaves(value) if isinstance(t, torch.Tensor) and t.is_floating_point()]


def _dense_leaves(leaves):
    """`leaves` with each tensor of a sparse or blocked layout made dense (None stays None)."""
    if not leaves:
        return leaves
    return [v.to_dense() if isinstance(v, torch.Tensor) and v.layout != torch.strided else v for v in leaves]


def _infinity_check(op, case, evaluate, sides: list[list], labels: list[str]) -> _Infinity | None:
    """conform.judge.limits' values at infinity for an op the one-tensor check does not take (several
    tensors, reductions, norms, losses), or None where it does not apply: no infinite floating
    input, no NaN in `sides` (the floating leaves each judged side holds), no such value where
    they hold NaN. `evaluate(j)` gives float64's floating leaves at probe j (limits.at_probe)."""
    if op.variant != "functional" or op.exact or _nondeterminism(op):
        return None
    if not hint(op, "limit_at_infinity") or hint(op, "discontinuity"):
        return None
    if is_backward(op) or "_jvp" in op.base_name or op.base_name.startswith(("_fused_", "_foreach_")):
        # a gradient formula takes its forward's results and seeds as inputs, which the op's own
        # backward reaches at their real values (silu's gradient at inf is silu_backward's);
        # an optimizer step at an infinite gradient has no documented value
        return None
    # a sparse result or gradient (a sparse constructor, embedding_bag with sparse=True) is read
    # element by element, densely
    sides = [_dense_leaves(side) for side in sides]
    # cheapest first: most cases hold no NaN at all
    if not any(isinstance(t, torch.Tensor) and bool(torch.isnan(t).any()) for side in sides for t in side):
        return None
    dt = _one_real_dtype(case)
    specs = [sp for sp in case.tensor_specs() if sp.torch_dtype.is_floating_point]
    if dt is None or dt == torch.float64 or len({id(sp) for sp in specs}) != len(specs):
        return None  # a tensor in two places would take two probes' values in a repro script
    if not all(metamorphic._plain_spec(sp) for sp in specs):
        return None
    if metamorphic.elementwise(op) and len(specs) == 1:
        return None  # the one-tensor check's (limits.saturated)
    if not any(bool(torch.isinf(metamorphic._logical(sp)).any()) for sp in specs):
        return None
    unexplained = _unexplained_nan(op, specs, sides)
    if unexplained is not None and not any(bool(m.any()) for m in unexplained):
        return None
    first = _dense_leaves(evaluate(0))
    if not first:
        return None
    wanted = []
    for k, value in enumerate(first):
        mask = torch.zeros(value.shape, dtype=torch.bool)
        for side in sides:
            got = side[k] if k < len(side) else None
            if isinstance(got, torch.Tensor) and got.shape == value.shape:
                mask |= torch.isnan(got.detach().cpu())
        if unexplained is not None and k < len(unexplained) and unexplained[k].shape == mask.shape:
            mask &= unexplained[k]
        wanted.append(mask & torch.isfinite(value))
    if not any(bool(m.any()) for m in wanted):
        return None
    runs = [first]
    for j in range(1, limits.SPREAD + 2):
        run = _dense_leaves(evaluate(j))
        if not run or len(run) != len(first) or any(a.shape != b.shape for a, b in zip(run, first)):
            return None
        runs.append(run)
    masks = [m & w for m, w in zip(limits.saturated_elements(runs), wanted)]
    if not any(bool(m.any()) for m in masks):
        return None
    if len(labels) != len(first):
        labels = [f"{labels[0]}[{k}]" for k in range(len(first))] if len(first) > 1 else labels[:1]
    return _Infinity(dt, first, masks, labels)


def _unexplained_nan(op, specs, sides) -> list[torch.Tensor] | None:
    """For an elementwise op, each result leaf's NaN elements where no input is NaN and some input
    is infinite (what a value at infinity could decide); None for any other op, or where the
    inputs do not broadcast to the leaf."""
    if not metamorphic.elementwise(op):
        return None
    xs = [metamorphic._logical(sp) for sp in specs]
    found = []
    for k in range(max((len(side) for side in sides), default=0)):
        nan = None
        for side in sides:
            t = side[k] if k < len(side) else None
            if isinstance(t, torch.Tensor):
                nan = torch.isnan(t.detach().cpu()) if nan is None else nan | torch.isnan(t.detach().cpu())
        if nan is None:
            found.append(torch.zeros((), dtype=torch.bool))
            continue
        try:
            nan_in = torch.zeros(nan.shape, dtype=torch.bool)
            inf_in = torch.zeros(nan.shape, dtype=torch.bool)
            for x in xs:
                nan_in |= torch.broadcast_to(torch.isnan(x), nan.shape)
                inf_in |= torch.broadcast_to(torch.isinf(x), nan.shape)
        except RuntimeError:
            return None
        found.append(nan & ~nan_in & inf_in)
    return found


def _probe_case(op, case, j: int, dt: torch.dtype):
    """`case` at probe `j` of limits.at_probe: each infinite element of its floating tensors replaced."""
    count = iter(range(len(case.tensor_specs())))

    def at(sp, _name):
        if not sp.torch_dtype.is_floating_point:
            return sp
        n = next(count)
        x = metamorphic._logical(sp).to(torch.float64)
        if not bool(torch.isinf(x).any()):
            return sp
        # in float64, which holds the probe's values beyond the dtype's range (golden runs in it anyway)
        wide = dataclasses.replace(sp, dtype="float64")
        return metamorphic._with_values(wide, limits.at_probe(x, n, j, dt), "contiguous")

    return metamorphic._map_specs(case, at, set(), [a.name for a in op.arguments])


def _forward_probe(op, case):
    """evaluate(j) for _infinity_check: float64's floating result leaves at probe j, the case's
    inputs made once and their tensors replaced (a probe case of values would be built anew)."""
    made = {}

    def evaluate(j):
        try:
            if not made:
                args, kwargs = case.materialize(_cpu_copy, torch.device("cpu"), dtype=torch.float64)
                flat, spec = pytree.tree_flatten((args, kwargs))
                slots = [i for i, t in enumerate(flat) if isinstance(t, torch.Tensor) and t.dtype == torch.float64]
                made.update(flat=flat, spec=spec, slots=slots, dt=_one_real_dtype(case))
            values = list(made["flat"])
            for n, i in enumerate(made["slots"]):
                values[i] = limits.at_probe(values[i], n, j, made["dt"])
            a, k = pytree.tree_unflatten(values, made["spec"])
            with torch.no_grad():
                return _float_leaves(_unbatched(op, op.resolve()(*a, **k), a, k))
        except (KeyboardInterrupt, SystemExit):
            raise
        except Exception:  # noqa: BLE001 - a probe the op rejects: no value there
            return None

    return evaluate


def _infinity_result(op, case, backend, phase, dev, ref_result, result) -> CaseResult | None:
    """The result at an infinite input of any op against its values there (_infinity_check): the
    failing CaseResult, or None (a finding about the CPU goes into `result`)."""
    plain = is_plain_cpu(backend)
    sides = [_float_leaves(dev.result)] + ([] if plain else [_float_leaves(ref_result)])
    made = _infinity_check(op, case, _forward_probe(op, case), sides, ["result"])
    if made is None:
        return None
    dev_off = made.judge(sides[0])
    if dev_off and not plain:
        again = _forward_rerun(op, backend)(case)  # self-consistent first: the device's rerun shows it too
        dev_off = dev_off if again is not None and made.judge(_float_leaves(again[0])) else ""
    cpu_off = dev_off if plain else made.judge(sides[1])
    return _limit_verdict(dev_off, cpu_off, plain, None, made.dt, result, "forward")


def _gradient_probe(op, case, gos, names):
    cpu = torch.device("cpu")
    # (a complex result's grad_output stays complex: cast to float64 it would lose its imaginary part)
    gold_gos = [g.to(torch.complex128) if g.is_complex() else g.to(torch.float64) for g in gos]

    def evaluate(j):
        probe = _probe_case(op, case, j, _one_real_dtype(case))
        found, _, err, _ = _run_backward(
            op, probe, to_device=_cpu_copy, device=cpu, dtype=torch.float64, grad_outputs=gold_gos
        )
        return [found[n] for n in names] if err is None and found and all(n in found for n in names) else None

    return evaluate


def _infinity_backward(op, case, gos, dev_grads, ref_grads, backend):
    """The gradients at an infinite input of any op against float64's there, for the case's own
    grad_outputs (_infinity_check): a failing CaseResult, a finding (dict), or None."""
    names = list(dev_grads)
    evaluate = _gradient_probe(op, case, gos, names)
    plain = is_plain_cpu(backend)
    sides = [[dev_grads[n] for n in names]] + ([] if plain else [[ref_grads.get(n) for n in names]])
    made = _infinity_check(op, case, evaluate, sides, [f"grad[{n}]" for n in names])
    if made is None:
        return None
    dev_off = made.judge(sides[0])
    if dev_off and not plain:
        again, _, err, _ = _run_backward(op, case, **_on_device(backend), grad_outputs=gos)
        dev_off = dev_off if err is None and again and made.judge([again.get(n) for n in names]) else ""
    cpu_off = dev_off if plain else made.judge(sides[1])
    holder = CaseResult(Outcome.PASS, "backward")
    failed = _limit_verdict(dev_off, cpu_off, plain, None, made.dt, holder, "backward")
    return failed if failed is not None else holder.finding


def _limit_verdict(dev_off: str, cpu_off: str, plain: bool, probe, dt, result: CaseResult, phase: str):
    """Parity first, as for the element checks: the device off the limit where the CPU is not (or
    the plain CPU off it) fails; the CPU off it is a finding about the CPU. `probe` None: the
    element-by-element check of any op (_infinity_check), whose repro script makes its probes."""
    if probe is None:
        relation = {"relation": "infinity", "other": None, "index": None, "first": None}
    else:
        relation = {"relation": "limit", "other": probe.to_json(), "index": None, "first": None}
    relation["dtype"] = str(dt).removeprefix("torch.")
    if dev_off and (plain or not cpu_off):
        outcome = Outcome.MISMATCH if phase == "forward" else Outcome.GRAD_MISMATCH
        return CaseResult(outcome, phase, dev_off, relation=relation, kinds=frozenset({"relation"}))
    if cpu_off:
        kind = oracle.REFERENCE if dev_off else oracle.CPU_WRONG
        result.finding = oracle.Finding(kind, phase, cpu_off).to_dict()
    return None


def _range_top(case, dt: torch.dtype) -> float:
    """gradients.range_top for `case`: whether its inputs reach the square root of dt's largest value."""
    return gradients.range_top(dt, oracle._inputs_reach(case, math.sqrt(torch.finfo(dt).max)))


def _elementwise_relation(case) -> dict:
    dt = oracle.rounding_dtype(case)
    top = _range_top(case, dt)
    return {
        "relation": "elementwise",
        "other": None,
        "index": None,
        "first": None,
        "dtype": str(dt).removeprefix("torch."),
        "top": top if math.isfinite(top) else None,
    }


def _one_real_dtype(case) -> torch.dtype | None:
    """The one real floating dtype of every inexact tensor of `case`, or None."""
    dts = {sp.torch_dtype for sp in case.tensor_specs() if is_inexact(sp.torch_dtype)}
    dt = dts.pop() if len(dts) == 1 else None
    return dt if dt is not None and not dt.is_complex else None


def _one_exact_dtype(case) -> torch.dtype | None:
    """The one real floating dtype of every floating tensor of `case`, where each floating
    Python scalar is exact in it too; None otherwise (a float32 0-d tensor beside a float16
    one, or a scalar 0.3 for a bfloat16 kernel: the kernel sees other inputs than golden)."""
    dts = {sp.torch_dtype for sp in case.tensor_specs() if is_inexact(sp.torch_dtype)}
    if len(dts) != 1:
        return None
    (dt,) = dts
    if dt.is_complex:
        return None
    scalars = [v for v in pytree.tree_leaves((case.args, case.kwargs)) if type(v) is float]
    if any(math.isfinite(v) and float(torch.tensor(v, dtype=dt)) != v for v in scalars):
        return None
    return dt


def _scaled(factor: float):
    """A case transform: every floating input times 1 + factor (below the dtype's unit: a
    periodic function read one unit away can alias, sin(pi x) at x = 1e21 among them)."""

    def tx(t):
        if not isinstance(t, torch.Tensor) or not t.is_floating_point() or t.layout != torch.strided:
            return t
        return (t.detach() * (1 + factor)).requires_grad_(t.requires_grad)

    return tx


def _named(values) -> dict:
    """A side's values by name: a gradients dict as it is, a single result as {"result": it}."""
    if isinstance(values, dict):
        return values
    return {"result": values} if isinstance(values, torch.Tensor) else {}


def _device_matches(fd, dev_grads, case, tol) -> bool:
    """The device's gradients, in the direction finite differences took, give their value within
    the case's precision (its dtype's rtol times the differences' scale)."""
    return gradients.device_agrees(fd, list(dev_grads.values()), _case_rtol(case, tol))


def _case_rtol(case, tol) -> float:
    """The loosest relative tolerance of the case's floating dtypes."""
    return max(
        tolerance_at(tol, sp.torch_dtype, math.inf)[0] for sp in case.tensor_specs() if is_inexact(sp.torch_dtype)
    )


# -- relations --------------------------------------------------------------------------------


def _functional_spec(op):
    """The functional overload (an OpSpec) of an in-place or out= op, or None."""

    if op.variant == "inplace" and op.base_name.endswith("_"):
        name = f"aten::{op.base_name[:-1]}" + (f".{op.overload}" if op.overload else "")
    elif op.variant == "out":
        fn = functional_of(op)
        if fn is None:
            return None
        name = f"aten::{op.base_name}" + (f".{fn._overloadname}" if fn._overloadname != "default" else "")
    else:
        return None
    found = opdb.find(name)
    return found if found is not None and found.variant == "functional" else None


def _poison_watch(functional, backend) -> metamorphic.Sides:
    """The functional's sides for the forms relation; an error of the functional that poisons the
    device context (a sticky error) is handed to `on_functional_poisoned`, which ends the process
    as the functional's failure: every later call would fail for it, and the cell is not to blame."""
    sides = relation_sides(functional, backend)

    def device(c):
        obs, err = sides.device(c)
        if err is not None and on_functional_poisoned is not None and sticky_error(backend, str(err)):
            on_functional_poisoned(functional.qualname, first_line(err))
        return obs, err

    return metamorphic.Sides(device, sides.cpu)


def _seeded_alike(op) -> bool:
    """A random op that, re-seeded identically, draws the same values into any out layout and
    overload (opdb hint seeded_relations; PyTorch's test_out expects it of every random op)."""
    return _nondeterminism(op) == "seeded" and bool(hint(op, "seeded_relations"))


def _randomness_off(op, case) -> bool:
    """A seeded op whose randomness the case switches off (opdb hint seeded_arg: dropout_p = 0,
    training = False): its values are a function of its inputs."""
    arg = hints_of(op).get("seeded_arg")
    if not arg:
        return False
    bound = bind_arguments(op, case.args, case.kwargs)
    if arg in bound:
        return not bound[arg]
    default = next((a.default for a in op.arguments if a.name == arg), None)
    return default in ("0.", "0.0", "0", "False")


def hints_of(op) -> dict:
    return getattr(op.rules, "hints", None) or {}


# The intra-op threads of the threads relation (the device process computes with one): more than
# this machine's cores is no matter, and four cut a kernel's few drawn rows or channels in more
# places than two
RELATION_THREADS = 4


@contextlib.contextmanager
def intra_op_threads(n: int | None):
    """torch's intra-op thread count set to `n` while the block runs (None: left as it is)."""
    was = torch.get_num_threads()
    if n is not None:
        torch.set_num_threads(n)
    try:
        yield
    finally:
        if n is not None:
            torch.set_num_threads(was)


def relation_sides(op, backend, *, cpu_kernels: bool = False, threads: int | None = None) -> metamorphic.Sides:
    """How conform.judge.metamorphic runs a case: on the device under test (on the CPU's kernels
    instead with `cpu_kernels`), and on the CPU; with `threads`, the CPU's kernels run with that
    many intra-op threads."""
    cpu = torch.device("cpu")

    def device(c):
        if cpu_kernels or is_plain_cpu(backend):
            side = _run_side(op, c, to_device=_cpu_copy, device=cpu, ctx=intra_op_threads(threads))
        else:
            side = _run_side(op, c, **_on_device(backend))
        return ((side.result, side.written) if side.error is None else None), side.error

    def on_cpu(c, dtype):
        return _observed(_run_side(op, c, to_device=_cpu_copy, device=cpu, dtype=dtype, ctx=intra_op_threads(threads)))

    return metamorphic.Sides(device, on_cpu)


def _shared_with_cpu(op, backend, v: metamorphic.Violation, compare_fn) -> oracle.Finding | None:
    """Parity first, for a relation too: on an accelerator, a relation the device breaks where it
    gives what the CPU's kernel gives on each case the relation ran (the same results within the
    case's tolerance, or the same error) is broken by the CPU's kernel as well. That is a finding
    about the CPU, which the device shares (rule (1a)), not the device's failure; None otherwise."""
    if is_plain_cpu(backend):
        return None
    target = op
    if v.other_op is not None:
        target = opdb.find(v.other_op)
        if target is None:
            return None
    on_device, on_cpu = relation_sides(target, backend), relation_sides(target, backend, cpu_kernels=True)
    for c in (v.other, v.first):
        if c is None:
            continue
        (dev_obs, dev_err), (cpu_obs, cpu_err) = on_device.device(c), on_cpu.device(c)
        if (dev_err is None) != (cpu_err is None):
            return None
        # (a status relation holds errors alone: `compare_fn` None)
        if dev_err is None and compare_fn is not None and failures(compare_fn(dev_obs, cpu_obs)):
            moved = _cpu_unsteady(target, c, cpu_obs, compare_fn)
            if not moved:
                return None
            # rule (1e): no expectation where the CPU's kernel is no function of the inputs
            said = f"the CPU's kernel gives another result when the same case runs again: {moved}"
            return oracle.Finding(oracle.REFERENCE, "forward", said)
    return oracle.Finding(oracle.REFERENCE, "forward", f"the CPU's kernel too: {metamorphic.describe(v)}")


def violation_result(v: metamorphic.Violation) -> CaseResult:
    r = CaseResult(Outcome(v.outcome), "forward", metamorphic.describe(v), traceback=v.traceback, relation=v.to_dict())
    r.kinds = frozenset({"relation"} | set(v.kinds))
    if v.tolerance is not None:
        r.rtol, r.atol = v.tolerance
    return r


# -- out= variants ---------------------------------------------------------------------------


def run_out_variants(
    op, case, backend, *, grad: bool = False, relations: bool = False
) -> tuple[bool, CaseResult | None]:
    """Run an out= case again with the out tensors preallocated, wrongly sized (the op must
    resize them) and non-contiguous (the op must write through the strides): where backends
    slip. Returns (checked, failure): checked is False when the outs are too small for the
    variants to mean anything (0-d or single elements); failure is the first failing variant's
    result, its message prefixed with the variant's name, or None. With `relations`, the
    device's non-contiguous out is also held against its contiguous one (the layout relation:
    the CPU reference and golden share a bug of the out's strides)."""
    shapes = _out_shapes(op, case)
    sizes = [math.prod(sh) for v in shapes.values() for sh in (v if isinstance(v, list) else [v])]
    if not sizes:
        return False, None
    variants = out_variants(case, shapes)
    if max(sizes) <= 1:
        # the layouts mean nothing for a single element; the out's dtype still does (all.all_out)
        found = _out_dtypes(op, variants["preallocated"], backend)
        return found is not None, found
    for name, variant in variants.items():
        if name == "as_drawn":
            continue
        _running_variant(variant, f"the out= {name} variant")
        try:
            r = run_case(op, variant, backend, grad=grad)
        finally:
            _running_variant(None)
        if r.outcome is not Outcome.PASS and not r.invalid:
            r.message = f"[out= {name}] {r.message}"
            r.variant_case = variant
            return True, r
    unsafe = _out_dtypes(op, variants["preallocated"], backend)
    if unsafe is not None:
        return True, unsafe
    nondet = _nondeterminism(op)
    if (
        relations
        and is_plain_cpu(backend)
        and nondet not in ("seeded", "uninitialized")
        and not hint(op, "out_accumulates")
    ):
        # an out of the right size that the kernel leaves (in part) as it was: the CPU reference and
        # golden keep the same drawn values there, so only the fill tells (_unwritten_elements)
        pre = variants["preallocated"]
        first = _run_side(op, pre, to_device=_cpu_copy, device=torch.device("cpu"))
        unwritten = _unwritten_elements(op, pre, first) if first.error is None else ""
        if unwritten:
            r = CaseResult(Outcome.MISMATCH, "forward", f"[out= preallocated] {unwritten}")
            r.variant_case = pre
            return True, r
    if relations and nondet != "uninitialized" and not degenerate_data(case, op) and not hint(op, "out_accumulates"):
        # a metadata-only device (meta) holds no values: its outs agree or not in shape and dtype
        meta_only = bool(getattr(backend, "metadata_only", False)) or nonfinite_matrix(case)

        def out_compare(a, e):
            n = numel_ratio(op, case, e[0])
            tol = LeafTolerance(lambda dt, out: tolerance_for(op, dt, reduction_size=n, output_scale=out, case=case))
            return _compare_all(_pairs(a, e, op), tol, sign=False, meta_only=meta_only)

        for name in STRIDED_OUT_VARIANTS:
            if name not in variants:
                continue
            _running_variant(variants[name], f"the out= {name} variant")
            try:
                broken = metamorphic.check_out_layout(
                    op,
                    variants["preallocated"],
                    variants[name],
                    relation_sides(op, backend),
                    out_compare,
                    # a random op re-seeded identically before each run draws the same values into
                    # either out (PyTorch's test_out expects it; randn's, randint's and normal's CPU
                    # kernels are its expected failures), unless a rule says its draws follow the layout
                    values=nondet != "seeded" or _seeded_alike(op),
                )
            finally:
                _running_variant(None)
            if broken is not None:
                return True, _out_relation_result(op, backend, broken, out_compare, variants[name])
        if not nondet and not meta_only:
            broken = metamorphic.check_alias(op, variants["preallocated"], relation_sides(op, backend), out_compare)
            if broken is not None:
                return True, _out_relation_result(op, backend, broken, out_compare, broken.other)
    return True, None


def _alias_shared(op, backend, case, compare_fn) -> oracle.Finding | None:
    """On an accelerator, the CPU's kernel breaking the alias relation on the same case too, with
    values of its own (what an aliased gemm reads depends on its blocking): no expectation for
    the device, and a finding; None where the CPU keeps it, or on the plain CPU."""
    if is_plain_cpu(backend):
        return None
    again = metamorphic.check_alias(op, case, relation_sides(op, backend, cpu_kernels=True), compare_fn)
    if again is None:
        return None
    return oracle.Finding(
        oracle.REFERENCE, "forward", f"the CPU's kernel too, with other values: {metamorphic.describe(again)}"
    )


def _out_relation_result(op, backend, broken, compare_fn, variant) -> CaseResult:
    """An out= relation the device broke: its failure, or, where the CPU's kernel breaks it too
    (parity first; for the alias relation, with values of its own), a pass with that finding;
    `variant` is the case kept and reproduced."""
    shared = _shared_with_cpu(op, backend, broken, compare_fn)
    if shared is None and broken.relation == metamorphic.ALIAS:
        shared = _alias_shared(op, backend, broken.first, compare_fn)  # first: the case it was held against
    r = violation_result(broken) if shared is None else CaseResult(Outcome.PASS, "forward", finding=shared.to_dict())
    r.variant_case = variant
    return r


def _unsafe_out(op, case, backend) -> CaseResult | None:
    """The out= contract on a device: an out the result cannot be safely cast into
    (generators.variants.unsafe_out_case) must be refused. A device that writes into it where the
    CPU refuses is the device's missing_error; a device that refuses it where the CPU writes is
    right, and the CPU's acceptance is a finding. Not for ops whose out gives the result's dtype
    (`_dtype_from_out`) nor random ones (bernoulli.out, randint_like.out: integer values by
    nature). On the plain CPU the contract alone judges, in run_case (`_unsafe_cast_written`), so
    that the cell's repro script shows it; over the out= ops (float32, seed 23) 20 accept such an
    out, 17 of them of those two kinds (the others: prod.int_out, _fft_r2c.out, _fft_c2r.out)."""
    if _dtype_from_out(op) or _nondeterminism(op) == "seeded":
        return None
    unsafe = unsafe_out_case(case, [a.name for a in op.out_args])
    if unsafe is None or is_plain_cpu(backend) and not _cpu_writes(op, unsafe):
        return None
    r = run_case(op, unsafe, backend)
    what = f"an {UNSAFE_OUT_DTYPE} out= for a floating result (an unsafe cast, which out= must refuse)"
    if r.outcome is Outcome.MISSING_ERROR and is_plain_cpu(backend):
        r.variant_case = unsafe
        return r
    if r.outcome is Outcome.MISSING_ERROR:
        r.message = f"[out= unsafe dtype] the device wrote {what}: {r.message}"
        r.variant_case = unsafe
        return r
    if r.outcome is Outcome.DEVICE_ERROR:
        said = f"[out= unsafe dtype] the CPU writes {what}; the device refuses it: {r.message}"
        return CaseResult(
            Outcome.PASS, "forward", said, finding=oracle.Finding(oracle.CPU_WRONG, "forward", said).to_dict()
        )
    return None


# CPU errors that follow the values an input holds, not its size: a wrongly sized input may meet
# them (a longer index over the same source), and meta, which holds no values, cannot raise them
_DATA_DEPENDENT = re.compile(
    r"\bindex\b[^;]*out of (bounds|range)|out of bounds for dimension|invalid value|should be between|not finite"
    r"|\bto sum to\b",
    re.I,
)


def run_wrong_sizes(op, case, backend) -> CaseResult | None:
    """Error parity for inputs of a wrong size (generators.variants.wrong_size_inputs): each
    tensor input one longer in its last dim, in turn, on a device other than the plain CPU; and
    the first input empty in its first dim (generators.variants.empty_inputs), where the device
    must compute where the CPU computes (`device_error` otherwise). An
    input the CPU refuses for its size and the device computes with is `missing_error`, the case
    that shows it kept as the cell's (DeepREL's rule: equivalent kernels agree in whether they
    raise). A refusal that follows the values (an index out of range) is not asked of the
    device: meta cannot see values. Other outcomes of the wrongly sized cases are not the
    cell's: a size the CPU accepts (broadcasting) is another valid case, drawn elsewhere."""
    if is_plain_cpu(backend):
        return None
    outs = {a.name for a in op.out_args}
    for where, variant in wrong_size_inputs(case, outs):
        r = run_case(op, variant, backend, grad=False)
        if r.outcome is Outcome.MISSING_ERROR and not _DATA_DEPENDENT.search(r.message):
            r.message = f"[wrong size] {input_label(where)} one longer in its last dim: {r.message}"
            r.variant_case = variant
            return r
    # a batch of none: where the CPU computes (an empty result), the device must too (meta's checks
    # raising a TypeError on an empty batch, pytorch#195376). Only that way round: where the CPU
    # refuses an empty batch, or gives it another shape than the device, the CPU is as often the
    # one wrong (MKL's FFT refuses a batch of none, pixel_unshuffle returns its input's shape).
    # Not for ops that take the caller's word for their inputs (`unsafe` in the name)
    empty = () if "unsafe" in op.qualname else empty_inputs(case, outs)
    return _first_failing(
        op,
        backend,
        [(f"[empty input] {input_label(where)} empty in its first dim", variant) for where, variant in empty],
        Outcome.DEVICE_ERROR,
    )


def _first_failing(op, backend, labelled: list, outcome: Outcome) -> CaseResult | None:
    """The first of the (label, variant case) pairs whose run on the device is `outcome`, its
    message prefixed with the label; None if none is."""
    for label, variant in labelled:
        r = run_case(op, variant, backend, grad=False)
        if r.outcome is outcome and not r.invalid:
            r.message = f"{label}: {r.message}"
            r.variant_case = variant
            return r
    return None


def run_dim_range(op, case, backend) -> CaseResult | None:
    """Whether a dim is in range does not depend on the values (DeepREL's rule, within one
    kernel: inputs alike in what the contract asks of them agree in whether they raise). Each dim
    argument of a passing case set far past every input's rank (generators.variants
    .out_of_range_dims): where the CPU refuses it for the case as drawn, the same dim with the
    first input's batch emptied must be refused too; computing there is `missing_error` (a kernel
    that returns early for an empty input before it checks its dim). On the plain CPU this is the
    check; on a device, run_case holds each variant's refusal to the CPU's, and where the CPU
    computes on the empty batch the device is not asked for more. Not for ops that take the
    caller's word for their inputs (`unsafe` in the name)."""
    if "unsafe" in op.qualname:
        return None
    outs = {a.name for a in op.out_args}
    plain = is_plain_cpu(backend)
    for what, drawn, emptied, empty in out_of_range_dims(op, case, outs):
        if plain:
            _running_variant(drawn, f"a dim out of range: {what}")
            try:
                refusal = _cpu_error(op, drawn)
            finally:
                _running_variant(None)
            if refusal is None:
                continue  # not a dim of a tensor here (or not checked at all): nothing to hold
            _running_variant(empty, f"a dim out of range, a batch of none: {what}")
            try:
                computed = _cpu_error(op, empty) is None
            finally:
                _running_variant(None)
            if computed:
                r = CaseResult(
                    Outcome.MISSING_ERROR,
                    "forward",
                    f"[dim out of range] {what}: the op refuses it for the case as drawn "
                    f"({type(refusal).__name__}: {str(refusal).strip().splitlines()[0][:200]}) and computes with "
                    f"{input_label(emptied)} empty in its first dim, where whether a dim is in range does not "
                    "depend on the values",
                )
                r.variant_case = empty
                return r
            continue
        found = _first_failing(
            op, backend, [(f"[dim out of range] {what}", v) for v in (drawn, empty)], Outcome.MISSING_ERROR
        )
        if found is not None:
            return found
    return None


def run_malformed(
    op, case, backend, *, numbers: bool = False, contain_shapes: bool = False, unwritten: list | None = None
) -> int:
    """The process-death contract on the plain CPU: each malformed variant of a passing case is
    called once, and the op must compute or raise. The variants
    (generators.variants.malformed_inputs): each input one longer, empty, of one more or one fewer
    dim (a 0-d one empty or of two elements), and every input empty or of one more dim at once;
    with `numbers`, also each number the case passes at its extremes
    (generators.variants.malformed_numbers: an int at 0, -1 and int64's extremes, a float at 0,
    -1, NaN and the infinities, lists of them of another length, integer tensors all at their
    dtype's limits) and each input of the other kind of number (malformed_dtypes: an integer
    tensor as float32, a floating one as int64, an int64 one as int32). Nothing but a death is judged (a shape the op accepts is
    another valid case, drawn elsewhere; a loop over 2**63 - 1 terms is a hang, the caller's).

    The numbers run first in a disposable fork (conform.run.contained), where a hang is skipped and
    a death is survived; the call that killed it is then made again here, in the isolated cell
    process, where the in-flight record names it: the cell is a `crash` whose script replays that
    call, and a death that does not happen again here (a heap an earlier call corrupted) is not
    recorded. The shapes, in every cell, run here at once (a call through the fork costs twice
    one made here, and no shape of a small case has hung a kernel in a sweep); with
    `contain_shapes` (the cell's second run, on a wider case) they go through the fork too,
    where a call that corrupts the heap without dying leaves this process's heap alone. Not for ops that
    say they skip their checks (`unsafe` in the name), nor, elsewhere than on the plain CPU, at
    all: a device's refusals are held to the CPU's by run_wrong_sizes, and a process that touched
    a device must not fork. Only in an isolated process (`on_variant` set: conform.run.cell's
    worker); a caller that runs cells in its own process would die with them. Returns the
    variants made.

    With `unwritten` (a list), each shape runs on inputs guarded by zeros (their floating
    tensors in the middle of a buffer: generators.tensor.guarded_copy), and one the op computes
    with runs again with the guards, every allocation and every out filled with NaN
    (_unwritten_elements): an element NaN only there was never written or was read from past
    an input's end, for an argument that does not fit the others: a shape check missing
    (unfold_backward of a one-dim-short grad_in reads past its end, pytorch#194807). The first
    such (what, variant, message) is appended. Not for ops whose result is not a function of their inputs, nor for
    outs that accumulate by contract."""
    if not is_plain_cpu(backend) or "unsafe" in op.qualname or on_variant is None:
        return 0
    outs = {a.name for a in op.out_args}
    shapes = malformed_inputs(case, outs)
    contain_shapes = contain_shapes and contained.AVAILABLE
    if unwritten is not None and (_nondeterminism(op) or hint(op, "out_accumulates") or _reads_storage(op)):
        unwritten = None
    for what, variant in () if contain_shapes else shapes:
        _running_variant(variant, f"a malformed argument: {what}")
        try:
            # the call as the op is given it first: a death there is the one to record (guarded
            # inputs would take a write or a read past their ends that kills it without them)
            if _cpu_call(op, variant) is None or unwritten is None or unwritten:
                continue
            found = _guarded_unwritten(op, variant)
            if found:
                unwritten.append((what, variant, found))
        finally:
            _running_variant(None)
    numbers = malformed_numbers(op, case) + malformed_dtypes(case, outs) if numbers and contained.AVAILABLE else []
    made = len(shapes) + len(numbers)
    numbers = shapes + numbers if contain_shapes else numbers  # the calls the fork makes first
    global _disposable
    if numbers and _disposable is None:
        _disposable = contained.Disposable(_disposable_call, _quiet_hooks)
    requests = [{"op": op.qualname, "case": variant.to_json()} for _, variant in numbers]
    start = 0
    while start < len(requests):
        fatal = _disposable.run(requests[start:])[0]
        if fatal is None:
            break
        what, variant = numbers[start + fatal]
        _running_variant(variant, f"a malformed argument: {what}")
        try:
            _cpu_call(op, variant)  # a death again ends this process here, recorded
        finally:
            _running_variant(None)
        start += fatal + 1
    return made


# the fork that makes run_malformed's calls first (made at its first use in a cell process)
_disposable: contained.Disposable | None = None


def _disposable_call(request: dict) -> None:
    _cpu_call(opdb.lookup(request["op"]), Case.from_json(request["case"]))


def _quiet_hooks() -> None:
    """In the disposable fork: no hook of the cell process's watchdog is called (its thread is
    not in the fork, and may have held its lock at the fork)."""
    global on_side, on_variant, on_functional, on_functional_poisoned
    on_side = on_variant = on_functional = on_functional_poisoned = None


def run_overlapping_self(op, case, backend) -> CaseResult | None:
    """The in-place contract on a written tensor whose elements share memory
    (generators.variants.overlapping_self_case): the op must refuse it, as 185 of the 225 in-place
    ops of torch 2.13 with a float32 case do (MemoryOverlap.cpp's "unsupported operation"); one
    that writes it reads elements another alias has already overwritten (triu_ on an expanded
    self, pytorch#165987). On the plain CPU the contract alone judges, in run_case
    (`_overlap_written`), so that the cell's repro script shows it. On an accelerator: a
    missing_error where the device writes it and the CPU refuses it; where the CPU's kernel writes
    it too, a pass with that finding (parity first), and where only the device refuses it, a pass
    (the device is right). Not for the ops `_overlap_checked` leaves out."""
    if not _overlap_checked(op):
        return None
    over = overlapping_self_case(case)
    if over is None:
        return None
    if is_plain_cpu(backend) or _cpu_call(op, over) is None:
        r = run_case(op, over, backend, grad=False)
        if r.outcome is not Outcome.MISSING_ERROR:
            return None
        r.variant_case = over
        return r
    side = _run_side(op, over, **_on_device(backend))
    said = _overlap_written(op, over, side)
    if side.error is not None or not said:
        return None
    shared = f"{said}; the CPU's kernel writes it too"
    return CaseResult(
        Outcome.PASS, "forward", shared, finding=oracle.Finding(oracle.REFERENCE, "forward", shared).to_dict()
    )


# internal ops no caller hands an expanded self: backward kernels, a leading underscore
_INTERNAL_OP = re.compile(r"^_|_backward")


def _overlap_checked(op) -> bool:
    """Whether `op` is held to the overlap contract: an in-place overload of a public op, not an
    in-place view (tag inplace_view: t_, squeeze_ write no element), not one that writes one value
    per element (opdb hint overlap_check: fill_, masked_fill_), not a random one (what it draws
    into an alias is any draw)."""
    return (
        op.variant == "inplace"
        and "inplace_view" not in op.tags
        and bool(hint(op, "overlap_check"))
        and not _nondeterminism(op)
        and not _INTERNAL_OP.search(op.base_name)
    )


def _overlap_written(op, case, side) -> str:
    """Why the in-place call of `side` broke the overlap contract, or "": `case`'s self shares
    memory between its elements (an expanded layout) and the call changed it without an error
    (a call that leaves every element as it was, dropout_ in eval mode, threshold_ below its
    threshold, wrote nothing)."""
    target = case.args[0] if case.args else None
    if (
        side.error is not None
        or not isinstance(target, TensorSpec)
        or target.layout not in OVERLAPPING_LAYOUTS
        or not _overlap_checked(op)
    ):
        return ""
    after = (side.written or {}).get(op.arguments[0].name)
    if not isinstance(after, torch.Tensor):
        return ""
    before = target.materialize(lambda t: t)
    if not _changed(before, after):
        return ""
    return (
        f"[overlapping self] the in-place op wrote into a self whose elements share memory ({target.describe()}) "
        "without an error: what such a self holds afterwards depends on the order in which its aliases were read "
        'and written, and in-place ops refuse it ("unsupported operation: more than one element of the '
        'written-to tensor refers to a single memory location", aten/src/ATen/MemoryOverlap.cpp)'
    )


def _changed(before: torch.Tensor, after: torch.Tensor) -> bool:
    """Whether a call changed an element of the tensor it was given (a NaN left a NaN is
    unchanged). A tensor whose shape or dtype changed was given new metadata (resize_, set_),
    not values written through its aliases: no."""
    after = after.detach().cpu()
    if after.shape != before.shape or after.dtype != before.dtype:
        return False
    if not (before.dtype.is_floating_point or before.dtype.is_complex):
        return not torch.equal(after, before)
    return not (torch.equal(after.isnan(), before.isnan()) and torch.equal(after.nan_to_num(), before.nan_to_num()))


def _out_dtypes(op, case, backend) -> CaseResult | None:
    """The out= dtype checks of a preallocated case: an unsafe cast, then another dtype."""
    return _unsafe_out(op, case, backend) or _other_dtype_out(op, case, backend)


def _other_dtype_out(op, case, backend) -> CaseResult | None:
    """Error parity for an out of another dtype (generators.variants.other_dtype_out_case: a
    float32 result into a float64 out, a bool one into float32, int64 into int32), on a device
    other than the plain CPU: such an out the CPU refuses (a reduction's out must match its
    input's dtype: amax.out, all.all_out) and the device writes is the device's missing_error.
    Other outcomes are not the cell's: where the CPU writes it, the cast is the op's to choose."""
    if is_plain_cpu(backend) or _dtype_from_out(op) or _nondeterminism(op) == "seeded":
        return None
    other = other_dtype_out_case(case, [a.name for a in op.out_args])
    if other is None:
        return None
    r = run_case(op, other, backend, grad=False)
    if r.outcome is not Outcome.MISSING_ERROR:
        return None
    dtypes = ", ".join(f"{n} {other.kwargs[n].dtype}" for n in (a.name for a in op.out_args) if n in other.kwargs)
    r.message = f"[out= other dtype] an out of another dtype ({dtypes}): {r.message}"
    r.variant_case = other
    return r


@contextlib.contextmanager
def _filled_memory():
    """torch's deterministic mode with its fill of uninitialized memory: every tensor an op
    allocates (at::empty, a resized out) starts as NaN (floating, complex) or its dtype's largest
    value (integer). Warn-only: an op without a deterministic implementation runs its own."""
    import torch.utils.deterministic  # here, not at the top: the submodule torch does not import itself

    was = (
        torch.are_deterministic_algorithms_enabled(),
        torch.is_deterministic_algorithms_warn_only_enabled(),
        torch.utils.deterministic.fill_uninitialized_memory,
    )
    torch.use_deterministic_algorithms(True, warn_only=True)
    torch.utils.deterministic.fill_uninitialized_memory = True
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            yield
    finally:
        torch.use_deterministic_algorithms(was[0], warn_only=was[1])
        torch.utils.deterministic.fill_uninitialized_memory = was[2]


def _fill_outs(op, args, kwargs) -> None:
    """Each out= tensor filled as _filled_memory fills an allocation (NaN; an integer dtype's
    largest value): the case draws an out's values, the same on every side, so an element the
    kernel never writes keeps them everywhere, golden included, and only the fill tells."""
    for name, v in bind_arguments(op, args, kwargs).items():
        if name not in {a.name for a in op.out_args}:
            continue
        for t in leaves(v):
            if not isinstance(t, torch.Tensor) or t.layout != torch.strided or t.is_quantized or t.dtype == torch.bool:
                continue
            with torch.no_grad():
                t.fill_(float("nan") if t.is_floating_point() or t.is_complex() else torch.iinfo(t.dtype).max)


# Arguments that place a result in its input's storage by hand (as_strided, set_, a nested view
# of a buffer): storage past the input's end is theirs to read, guards included
_STORAGE_ARGUMENTS = frozenset({"stride", "storage_offset", "nested_strides"})


def _reads_storage(op) -> bool:
    """Whether the op views or addresses its input's storage itself (a view's result, or sizes
    and strides given): a guarded copy's storage holds its guards, which such an op may read."""
    views = any("(" in r and "!" not in r for r in op.returns)
    return views or any(a.name in _STORAGE_ARGUMENTS for a in op.arguments)


def _guarded_unwritten(op, case) -> str:
    """_unwritten_elements of `case` on guarded inputs; "" where the guarded run raises or its
    results cannot be compared element by element (nested tensors)."""
    try:
        first = _run_side(op, case, to_device=guarded_copy(0.0), device=torch.device("cpu"))
        return _unwritten_elements(op, case, first, guard=True) if first.error is None else ""
    except (RuntimeError, TypeError, ValueError, IndexError, NotImplementedError):
        return ""


def _unwritten_elements(op, case, dev, *, guard: bool = False) -> str:
    """On the plain CPU, the op run again with every allocation and every out= tensor filled
    (_filled_memory, _fill_outs): an output element that holds the fill there (NaN; an integer
    dtype's largest value) and not in the first run, where the allocator's memory was whatever it
    was and an out held the values the case drew, is one the kernel never wrote. The first run and
    golden agree only by the allocator's luck (fresh pages are zeros) or by the drawn out's values
    reaching both, golden being the same kernel: the fill is the evidence. "" where every element
    was written, or the second run raised. With `guard`, `dev` ran on inputs guarded by zeros
    (generators.tensor.guarded_copy) and the second run's guards hold NaN too: an element that
    holds NaN only there was never written, or was read from past an input's end."""
    again = _run_side(
        op,
        case,
        to_device=guarded_copy(math.nan) if guard else _cpu_copy,
        device=torch.device("cpu"),
        ctx=_filled_memory(),
        fill_outs=True,
    )
    if again.error is not None:
        return ""
    first = [t for t in leaves((dev.result, dev.written)) if isinstance(t, torch.Tensor)]
    filled = [t for t in leaves((again.result, again.written)) if isinstance(t, torch.Tensor)]
    if len(first) != len(filled):
        return ""
    for i, (a, b) in enumerate(zip(first, filled)):
        if (
            a.is_nested
            or b.is_nested
            or a.layout != torch.strided
            or b.layout != torch.strided
            or a.shape != b.shape
            or a.dtype != b.dtype
        ):
            continue
        if a.is_quantized or a.dtype == torch.bool or a.device.type != "cpu" or not a.numel():
            continue
        a, b = a.detach().resolve_conj().resolve_neg(), b.detach().resolve_conj().resolve_neg()
        if a.is_floating_point() or a.is_complex():
            holes = torch.isnan(b) & ~torch.isnan(a)
            fill = "NaN"
        else:
            top = torch.iinfo(a.dtype).max
            holes = (b == top) & (a != top)
            fill = f"{top}"
        if bool(holes.any()):
            n, where = int(holes.sum()), tuple(int(x) for x in holes.nonzero()[0])
            if guard:
                return (
                    f"[unwritten output] {n} of {a.numel()} elements of output leaf {i} are unwritten or read from "
                    f"past an input's end: with every allocation and the {GUARD_ELEMENTS} elements on either side "
                    f"of each input filled ({fill}) they read the fill, first at index {where}, where with zeros "
                    f"beside the inputs they read {a[where].item()!r}"
                )
            return (
                f"[unwritten output] the kernel leaves {n} of {a.numel()} elements of output leaf {i} unwritten: "
                f"with every allocation filled ({fill}) they read the fill, first at index {where}, where the "
                f"first run read {a[where].item()!r} (the allocator's memory, or the value drawn into the out)"
            )
    return ""


def _cpu_call(op, case) -> dict | None:
    """One call of `case` on the CPU, no grad: its keyword arguments after the call (the outs
    as written), or None where the CPU raises."""
    return _cpu_attempt(op, case)[0]


def _cpu_error(op, case) -> BaseException | None:
    """The error the CPU raises on `case` (no grad), None where it computes."""
    return _cpu_attempt(op, case)[1]


def _cpu_attempt(op, case) -> tuple[dict | None, BaseException | None]:
    _announce(_cpu_copy)
    try:
        args, kwargs = case.materialize(_cpu_copy, torch.device("cpu"))
        with torch.no_grad():
            op.resolve()(*args, **kwargs)
    except Exception as e:  # noqa: BLE001 - the CPU refuses it
        return None, e
    return kwargs, None


def _cpu_writes(op, case) -> bool:
    """Whether the CPU runs `case` without an error: one call, where most out= ops refuse an
    unsafe out at once (the plain CPU's sweep pays this, not a whole run_case, per out= cell)."""
    return _cpu_call(op, case) is not None


def _unsafe_cast_written(op, case) -> str:
    """On the plain CPU, where the out= contract alone judges an out the CPU wrote: why its
    dtype holds the result only by an unsafe cast (a floating or complex result into an integer
    or bool out, as cumsum.out and prod.int_out write it truncated), or "". The result's dtype
    is the functional overload's on meta. Not for ops whose out gives the result's dtype, random
    ones, factories (no tensor input), nor private overloads (`_fft_r2c.out`), which the public
    functions check before they call them (torch.fft.rfft refuses an int64 out)."""
    if op.variant != "out" or op.base_name.startswith("_") or _dtype_from_out(op) or _nondeterminism(op) == "seeded":
        return ""
    outs = [a.name for a in op.out_args]
    specs = [case.kwargs.get(n) for n in outs]
    if not any(isinstance(sp, TensorSpec) and not is_inexact(sp.torch_dtype) for sp in specs):
        return ""
    inputs = [v for v in case.args if isinstance(v, TensorSpec)]
    inputs += [v for k, v in case.kwargs.items() if k not in outs and isinstance(v, TensorSpec)]
    functional = _functional_spec(op)
    if functional is None or not any(is_inexact(sp.torch_dtype) for sp in inputs):
        return ""
    call = dataclasses.replace(
        case, op=functional.qualname, kwargs={k: v for k, v in case.kwargs.items() if k not in outs}
    )
    meta = torch.device("meta")
    try:
        args, kwargs = call.materialize(lambda t: t.to(meta), meta)
        results = list(leaves(functional.resolve()(*args, **kwargs)))
    except Exception:  # noqa: BLE001 - no functional result to hold the out against
        return ""
    for name, sp, r in zip(outs, specs, results):
        if isinstance(sp, TensorSpec) and isinstance(r, torch.Tensor) and not torch.can_cast(r.dtype, sp.torch_dtype):
            return (
                f"[out= unsafe dtype] the CPU wrote a {str(r.dtype).removeprefix('torch.')} result into the "
                f"{sp.dtype} out= {name!r}: an unsafe cast, which out= must refuse (torch.{functional.base_name}'s "
                f"functional gives {str(r.dtype).removeprefix('torch.')}; torch/_prims_common/wrappers.py, _safe_copy_out)"
            )
    return ""


def _dtype_from_out(op) -> bool:
    """The out= overload takes its result's dtype from its out: its functional has a `dtype`
    argument that it lacks (ones_like.out, new_empty.out, _to_copy.out: any out dtype is one the
    caller could have asked for)."""
    functional = _functional_spec(op) or opdb.find(f"aten::{op.base_name}")
    if functional is None:
        return False
    return any(a.name == "dtype" for a in functional.arguments) and not any(a.name == "dtype" for a in op.arguments)


def _out_shapes(op, case) -> dict:
    """The shape the CPU reference gives each out argument of `case`."""
    names = [a.name for a in op.out_args]
    kwargs = _cpu_call(op, case)
    if kwargs is None:
        return {}  # the reference rejects it: no variants to try
    shapes = {}
    for n in names:
        v = kwargs.get(n)
        if isinstance(v, torch.Tensor):
            shapes[n] = tuple(v.shape)
        elif isinstance(v, (list, tuple)) and all(isinstance(t, torch.Tensor) for t in v):
            shapes[n] = [tuple(t.shape) for t in v]
    return shapes
