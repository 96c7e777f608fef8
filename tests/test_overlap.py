"""The in-place overlap contract (conform.run.execute.run_overlapping_self): an in-place op handed
a self whose elements share memory (an expanded tensor) must refuse it, as ATen's own check does
("unsupported operation: more than one element of the written-to tensor refers to a single
memory location"). torch 2.13's triu_ writes it (pytorch#165987); fill_ may (a fill is
idempotent), and an in-place view (squeeze_) writes no element."""

from __future__ import annotations

import torch

import opdb
from conform.backends import CPUBackend
from conform.outcomes import Outcome
from conform.run import execute
from generators.case import Case, TensorSpec
from generators.variants import overlapping_self_case
from tests.faulty import FaultyBackend
from tests.replay import replayed

aten = torch.ops.aten


def _triu_writes_an_overlapping_self() -> bool:
    x = torch.ones(1, 3).expand(3, 3)
    try:
        x.triu_()
    except RuntimeError:
        return False
    return True


def _case(qualname, *args, **kwargs):
    return Case(qualname, args, kwargs, seed=3)


def test_an_overlapping_self_is_an_expanded_view_of_the_same_shape():
    case = _case("aten::triu_", TensorSpec((3, 5), "float32", seed=1), 0)
    over = overlapping_self_case(case).args[0]
    assert over.layout == "expanded" and over.shape == (3, 5)
    t = over.materialize(lambda t: t)
    assert t.stride()[0] == 0 and t.shape == (3, 5)
    row = _case("aten::triu_", TensorSpec((1, 5), "float32", seed=1), 0)
    assert overlapping_self_case(row).args[0].layout == "expanded_last"
    assert overlapping_self_case(_case("aten::triu_", TensorSpec((1, 1), "float32", seed=1), 0)) is None


def test_the_plain_cpu_is_held_to_the_contract_and_its_script_shows_it():
    op = opdb.lookup("aten::triu_")
    case = _case("aten::triu_", TensorSpec((4, 4), "float32", seed=1), 0)
    r = execute.run_overlapping_self(op, case, CPUBackend())
    if not _triu_writes_an_overlapping_self():  # a torch that refuses it: the contract holds
        assert r is None
        return
    assert r is not None and r.outcome is Outcome.MISSING_ERROR and r.message.startswith("[overlapping self]")
    assert r.variant_case.args[0].layout == "expanded"
    assert replayed(op, r.variant_case, r).startswith("verdict: missing_error")


def test_ops_that_refuse_it_or_may_write_it_pass():
    backend = CPUBackend()
    add = _case("aten::add_.Tensor", TensorSpec((4, 4), "float32", seed=1), TensorSpec((4, 4), "float32", seed=2))
    assert execute.run_overlapping_self(opdb.lookup("aten::add_.Tensor"), add, backend) is None  # refuses
    fill = _case("aten::fill_.Scalar", TensorSpec((4, 4), "float32", seed=1), 2.5)
    assert execute.run_overlapping_self(opdb.lookup("aten::fill_.Scalar"), fill, backend) is None  # idempotent
    squeeze = _case("aten::squeeze_", TensorSpec((4, 1), "float32", seed=1))
    assert execute.run_overlapping_self(opdb.lookup("aten::squeeze_"), squeeze, backend) is None  # a view
    # a call that writes no element (threshold_ with every value above its threshold)
    above = _case("aten::threshold_", TensorSpec((4, 4), "float32", seed=1), -100.0, 0.0)
    assert execute.run_overlapping_self(opdb.lookup("aten::threshold_"), above, backend) is None


def _unchecked_mul(func, args, kwargs):
    """mul_ written through the storage, one element at a time, with no overlap check: right for
    a self of its own memory, silent for an expanded one (the last alias written wins)."""
    self_, other = args[0], args[1]
    result = torch.mul(self_, other)
    flat = torch.empty(0, dtype=self_.dtype).set_(self_.untyped_storage())
    where = torch.arange(flat.numel()).as_strided(self_.shape, self_.stride(), self_.storage_offset())
    flat[where.flatten()] = result.flatten()
    return self_


class UncheckedMulBackend(FaultyBackend):
    name = "unchecked_mul"
    targets = frozenset({aten.mul_.Tensor})
    bug = _unchecked_mul


def test_a_device_that_writes_what_the_cpu_refuses_is_a_missing_error():
    op = opdb.lookup("aten::mul_.Tensor")
    case = _case("aten::mul_.Tensor", TensorSpec((4, 4), "float32", seed=1), TensorSpec((4, 4), "float32", seed=2))
    assert execute.run_case(op, case, UncheckedMulBackend(), grad=False).outcome is Outcome.PASS  # right otherwise
    r = execute.run_overlapping_self(op, case, UncheckedMulBackend())
    assert r is not None and r.outcome is Outcome.MISSING_ERROR
    assert r.variant_case.args[0].layout == "expanded"


def test_a_device_that_shares_the_cpus_missing_check_passes_with_a_finding():
    if not _triu_writes_an_overlapping_self():
        return
    from tests.cpu_kernels import CPUKernels

    op = opdb.lookup("aten::triu_")
    case = _case("aten::triu_", TensorSpec((4, 4), "float32", seed=1), 0)
    r = execute.run_overlapping_self(op, case, CPUKernels())
    assert r is not None and r.outcome is Outcome.PASS and "the CPU's kernel writes it too" in r.finding["message"]
