"""The alias relation (conform.judge.metamorphic.check_alias): an out= op handed one of its own
inputs as the out, or an in-place op handed self as another input, raises or gives what it gives
with memory of its own. The CPU's gemm reads an operand it has begun to overwrite (pytorch#85852,
mm; #48900, addmm): where this torch build still does, the tests that need it run on it."""

from __future__ import annotations

import pytest
import torch
from torch.utils._python_dispatch import TorchDispatchMode

import opdb
from conform.backends import CPUBackend
from conform.judge import metamorphic
from conform.outcomes import Outcome
from conform.run import execute
from generators.case import Case, TensorSpec
from tests.replay import replayed

aten = torch.ops.aten


def _mm_aliased_wrong() -> bool:
    a = torch.arange(16.0).reshape(4, 4)
    c = a.clone()
    torch.mm(c, a, out=c)
    return not torch.allclose(c, a @ a)


MM_BUG = _mm_aliased_wrong()


def _specs(*shapes, dtype="float32"):
    return tuple(TensorSpec(sh, dtype, seed=i + 1) for i, sh in enumerate(shapes))


def _out_case(qualname, *shapes):
    specs = _specs(*shapes)
    return Case(qualname, specs, {"out": TensorSpec(shapes[0], "float32", seed=9)}, seed=5)


@pytest.mark.skipif(not MM_BUG, reason="this torch build's mm gives the right result into an aliased out")
@pytest.mark.parametrize(
    ("qualname", "shapes", "aliased"),
    [
        ("aten::mm.out", [(4, 4), (4, 4)], "self"),
        ("aten::addmm.out", [(4, 4), (4, 4), (4, 4)], "mat1"),  # self, the accumulator, ATen handles
    ],
)
def test_an_out_that_is_an_input_of_a_gemm_is_found_with_a_script_that_reproduces(qualname, shapes, aliased):
    op = opdb.lookup(qualname)
    checked, r = execute.run_out_variants(op, _out_case(qualname, *shapes), CPUBackend(), relations=True)
    assert checked and r is not None and r.outcome is Outcome.MISMATCH, r and r.message
    assert r.message.startswith("[alias relation]") and f"the input {aliased} too" in r.message, r.message
    assert r.variant_case.kwargs["out"] is r.variant_case.args[[a.name for a in op.arguments].index(aliased)]
    assert replayed(op, r.variant_case, r).startswith("verdict: mismatch")


@pytest.mark.skipif(not MM_BUG, reason="this torch build's addmm_ gives the right result with self as an operand")
def test_an_in_place_self_that_is_another_input_too_is_found():
    op = opdb.lookup("aten::addmm_")
    case = Case("aten::addmm_", _specs((4, 4), (4, 4), (4, 4)), {}, seed=5)
    r = execute.run_case(op, case, CPUBackend(), grad=False, relations=True)
    assert r.outcome is Outcome.MISMATCH and r.message.startswith("[alias relation]"), r.message
    assert "the in-place self given as the input mat" in r.message, r.message
    assert replayed(op, case, r).startswith("verdict: mismatch")


@pytest.mark.parametrize(
    ("qualname", "shapes"),
    [("aten::add.out", [(4, 5), (4, 5)]), ("aten::mul.out", [(3, 4), (3, 4)]), ("aten::addcmul.out", [(6,)] * 3)],
)
def test_kernels_that_read_each_element_before_writing_it_pass(qualname, shapes):
    op = opdb.lookup(qualname)
    checked, r = execute.run_out_variants(op, _out_case(qualname, *shapes), CPUBackend(), relations=True)
    assert checked and r is None, r and r.message


def test_an_aliased_call_that_raises_is_a_right_answer():
    class Refuses(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            kwargs = kwargs or {}
            out = kwargs.get("out")
            if out is not None and any(a is out for a in args):
                raise RuntimeError("unsupported operation: the input and the written-to tensor overlap")
            return func(*args, **kwargs)

    class RefusingDevice(CPUBackend):
        name = "refusing"

        def device_context(self):
            return Refuses()

    op = opdb.lookup("aten::mm.out")
    checked, r = execute.run_out_variants(
        op, _out_case("aten::mm.out", (4, 4), (4, 4)), RefusingDevice(), relations=True
    )
    assert checked and (r is None or r.outcome is Outcome.PASS), r and r.message


@pytest.mark.skipif(not MM_BUG, reason="this torch build's mm gives the right result into an aliased out")
def test_on_an_accelerator_the_cpus_gemm_into_its_operand_is_a_finding():
    from tests.cpu_kernels import CPUKernels

    op = opdb.lookup("aten::mm.out")
    checked, r = execute.run_out_variants(op, _out_case("aten::mm.out", (4, 4), (4, 4)), CPUKernels(), relations=True)
    assert checked and r is not None and r.outcome is Outcome.PASS, r and r.message
    assert r.finding and r.finding["kind"] == "reference" and "[alias relation]" in r.finding["message"], r.finding


class _SevensIntoAnAliasedOut(TorchDispatchMode):
    """A device whose mm into one of its operands is wrong in its own way (sevens; the CPU's gemm
    zeroes its output first, so an aliased operand reads zeros)."""

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        out = kwargs.get("out")
        if func is aten.mm.out and any(a is out for a in args):
            return out.fill_(7.0)
        return func(*args, **kwargs)


class SevensDevice(CPUBackend):
    name = "sevens-into-aliased-mm"

    def device_context(self):
        return _SevensIntoAnAliasedOut()


@pytest.mark.skipif(not MM_BUG, reason="this torch build's mm gives the right result into an aliased out")
def test_a_device_wrong_its_own_way_where_the_cpu_is_wrong_too_is_a_finding_not_an_alarm():
    op = opdb.lookup("aten::mm.out")
    checked, r = execute.run_out_variants(op, _out_case("aten::mm.out", (4, 4), (4, 4)), SevensDevice(), relations=True)
    assert checked and r is not None and r.outcome is Outcome.PASS, r and r.message
    assert "the CPU's kernel too, with other values" in r.finding["message"], r.finding


def test_alias_cases_pair_only_inputs_of_the_outs_shape_and_dtype_with_memory_of_their_own():
    mm = opdb.lookup("aten::mm.out")
    sized = Case("aten::mm.out", _specs((3, 4), (4, 5)), {"out": TensorSpec((3, 5), "float32", seed=9)})
    assert not metamorphic.alias_cases(mm, sized)  # no input of the result's shape
    square = _out_case("aten::mm.out", (4, 4), (4, 4))
    assert [(w, i) for _, _, w, i in metamorphic.alias_cases(mm, square)] == [("out", "self"), ("out", "mat2")]
    expanded = Case("aten::mm.out", (TensorSpec((4, 4), "float32", layout="expanded"),) + _specs((4, 4), (4, 4))[1:],
                    square.kwargs)  # fmt: skip
    assert [i for _, _, _, i in metamorphic.alias_cases(mm, expanded)] == ["mat2"]  # rows that share memory: no
    half = Case("aten::mm.out", _specs((4, 4), (4, 4), dtype="float16"), square.kwargs)
    assert not metamorphic.alias_cases(mm, half)  # another dtype than the out's
    inplace = opdb.lookup("aten::addmm_")
    (aliased, separate, written, name), *_ = metamorphic.alias_cases(
        inplace, Case("aten::addmm_", _specs((4, 4), (4, 4), (4, 4)), {})
    )
    assert written == "self" and name == "mat1"
    assert aliased.args[1] is aliased.args[0] and separate.args[1] == separate.args[0]
    assert separate.args[1] is not separate.args[0]  # the same values in memory of its own
