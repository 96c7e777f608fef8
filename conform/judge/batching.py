"""The batch relation: an op applied per batch item (or per row) gives each item the same result
in the batch as alone, and a tall batch the results of its rows (DeepREL's and nabla-Fuzz's
batch relation; docs/verdict-rule.md).

Kernels switch algorithm by size: cdist past 25 rows computes |x|^2 + |y|^2 - 2xy by matrix
multiply, which cancels for points far from the origin (pytorch#37734); a batched solver may take
a blocked path past some batch size. Golden float64 runs the same switch and, in float64, does not
see it. So the relation runs the drawn case's items again on the device under test:

* alone: the last item of every batch dim by itself (the size-one path);
* tall: the batch repeated until it has at least TALL items (the large-batch path).

Which argument dims index independent items, and which result dim each lands on, is data
(opdb/rules/relations.toml, hint `batch_relation`, with the documentation that says so). As the
other relations: special values must match exactly, finite ones within the drawn case's
tolerance, and a difference is a violation only where it is no rounding of the case: float64
golden shows the same dependence, or the other run is off its own golden beyond the case's
conditioning (an accurate algorithm switch stays quiet; 0.6% at well-conditioned points does not).
"""

from __future__ import annotations

import dataclasses
import math

import torch

from conform.judge.compare import failures, leaves
from conform.judge.metamorphic import (
    Sides,
    Violation,
    _confirmed,
    _first_diff,
    _hint,
    _logical,
    _names,
    _plain_spec,
    _take,
    _tolerance,
    _with_values,
    identical,
)
from generators.case import Case, TensorSpec

BATCH = "batch"
# items a tall batch has at least: past the size switches of the CPU's kernels (cdist's 25 rows)
TALL = 32
# elements a tall case may hold, so that the relation stays cheap
MAX_TALL_NUMEL = 1 << 15


def rule(op) -> dict[str, tuple[int, int]]:
    """{argument: (its item dim, the result dim the item lands on)} from the op's hint."""
    found = _hint(op, "batch_relation", None) or {}
    return {name: (int(dims[0]), int(dims[1])) for name, dims in found.items()}


def _bound(op, case: Case) -> dict[str, object]:
    names = _names(op)
    out = {names[i]: v for i, v in enumerate(case.args) if i < len(names)}
    out.update(case.kwargs)
    return out


def _with_args(op, case: Case, replaced: dict[str, TensorSpec]) -> Case:
    names = _names(op)
    args = tuple(replaced.get(names[i], v) if i < len(names) else v for i, v in enumerate(case.args))
    kwargs = {k: replaced.get(k, v) for k, v in case.kwargs.items()}
    return dataclasses.replace(case, args=args, kwargs=kwargs)


def batch_cases(op, case: Case, observed) -> list[tuple[Case, list[int], str]]:
    """The relation's cases, each with the flat position in the drawn result of each of its
    result elements, and what it is, in words. Empty where the rule does not fit the case."""
    dims = rule(op)
    if not dims or op.variant != "functional":
        return []
    outs = [t for t in leaves(observed[0]) if isinstance(t, torch.Tensor)]
    if not outs or any(t.layout != torch.strided or t.shape != outs[0].shape for t in outs):
        return []
    shape = tuple(outs[0].shape)
    bound = _bound(op, case)
    items: dict[str, tuple[TensorSpec, int, int]] = {}  # argument -> (spec, item dim, result dim)
    sizes: dict[int, int] = {}  # result dim -> items along it
    for name, (in_dim, out_dim) in dims.items():
        spec = bound.get(name)
        if not isinstance(spec, TensorSpec) or not _plain_spec(spec):
            continue
        rank = len(spec.shape)
        if not -rank <= in_dim < rank or not -len(shape) <= out_dim < len(shape):
            return []  # no such dim in this case (an unbatched matrix): the rule does not fit
        n, out_dim = spec.shape[in_dim], out_dim % len(shape)
        if n == 1 and shape[out_dim] > 1:
            continue  # broadcast over the batch (baddbmm's self): every item reads it whole
        if shape[out_dim] != n:
            return []  # the result is not laid out as the rule says
        items[name] = (spec, in_dim, out_dim)
        sizes[out_dim] = n
    if not items or all(n < 2 for n in sizes.values()):
        return []
    flat = torch.arange(math.prod(shape)).reshape(shape)
    made = []

    # alone: the last item of every batch dim
    alone_index = flat
    for d, n in sizes.items():
        alone_index = alone_index.narrow(d, n - 1, 1)
    replaced = {}
    for name, (spec, in_dim, _) in items.items():
        values = _logical(spec).narrow(in_dim, spec.shape[in_dim] - 1, 1)
        replaced[name] = _with_values(spec, values, "contiguous")
    made.append((_with_args(op, case, replaced), alone_index.reshape(-1).tolist(), "its last item alone"))

    # tall: every batch dim repeated up to TALL items
    reps = {d: max(1, math.ceil(TALL / n)) for d, n in sizes.items()}
    tall_index = flat
    for d, k in reps.items():
        tall_index = torch.cat([tall_index] * k, dim=d)
    if tall_index.numel() > MAX_TALL_NUMEL or any(
        spec.numel * reps[d] > MAX_TALL_NUMEL for spec, _, d in items.values()
    ):
        return made
    replaced = {}
    for name, (spec, in_dim, d) in items.items():
        replaced[name] = _with_values(spec, torch.cat([_logical(spec)] * reps[d], dim=in_dim), "contiguous")
    tall = ", ".join(str(n * reps[d]) for d, n in sizes.items())
    made.append(
        (_with_args(op, case, replaced), tall_index.reshape(-1).tolist(), f"the batch repeated to {tall} items")
    )
    return made


def _shaped(taken, like):
    """`taken` (flat leaves) in the shapes of `like`'s leaves."""
    shapes = [t.shape for t in leaves(like[0]) if isinstance(t, torch.Tensor)]
    flat = [t for t in leaves(taken[0]) if isinstance(t, torch.Tensor)]
    if len(shapes) != len(flat) or any(math.prod(s) != t.numel() for s, t in zip(shapes, flat)):
        return taken
    out = [t.reshape(s) for t, s in zip(flat, shapes)]
    return (out[0] if isinstance(taken[0], torch.Tensor) else type(taken[0])(out)), taken[1]


def check_batch(op, case: Case, observed, sides: Sides, compare_fn) -> Violation | None:
    """The batch relation on one case (see batch_cases); `observed` is the device's
    (result, written) for `case`. A Violation or None."""
    for other, index, label in batch_cases(op, case, observed):
        other_obs, err = sides.device(other)
        if err is not None:
            continue  # another batch size is another case (a relation on values, not on errors)
        want = _shaped(_take(observed, index), other_obs)
        if identical(other_obs, want):
            continue
        records = compare_fn(other_obs, want)
        if not failures(records):
            continue
        if not _confirmed(
            op, sides, case, observed, other, other_obs, compare_fn, lambda obs: _shaped(_take(obs, index), other_obs)
        ):
            continue
        return Violation(
            BATCH,
            "mismatch",
            f"the result depends on the batch: with {label} (the same values), {_first_diff(records)}"
            " (expected: the item's result in the drawn batch)",
            other,
            index=index,
            kinds=frozenset(r.kind for r in failures(records)),
            tolerance=_tolerance(records),
        )
    return None
