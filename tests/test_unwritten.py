"""Output elements a kernel never writes: the op run again with every allocation filled (NaN, an
integer dtype's largest value) reads the fill there, and the first run the allocator's memory."""

from __future__ import annotations

import torch

import opdb
from conform.backends import CPUBackend
from conform.outcomes import Outcome
from conform.run import execute
from conform.run.execute import run_case
from generators.case import Case, TensorSpec
from opdb.spec import OpSpec


def _with_kernel(monkeypatch, qualname, kernel):
    resolve = OpSpec.resolve
    monkeypatch.setattr(OpSpec, "resolve", lambda self: kernel if self.qualname == qualname else resolve(self))


def test_an_element_the_kernel_never_writes_fails(monkeypatch):
    def holes(x):
        out = torch.empty_like(x)
        out.view(-1)[1:] = -x.view(-1)[1:]  # the first element is left as allocated
        if not torch.are_deterministic_algorithms_enabled():
            # outside the check's filled allocations, the allocator's memory happens to hold the
            # right value (stale memory often does): only the check can see the hole. Left to
            # chance, memory that held a NaN failed the value comparison first, and the message
            # was that one's
            out.view(-1)[0] = -x.view(-1)[0]
        return out

    _with_kernel(monkeypatch, "aten::neg", holes)
    op = opdb.lookup("aten::neg")
    for dtype in ("float32", "int64"):
        r = run_case(
            op, Case(op.qualname, (TensorSpec((2, 3), dtype, seed=1),)), CPUBackend(), grad=False, relations=True
        )
        assert r.outcome is Outcome.MISMATCH, (dtype, r.message)
        assert "[unwritten output]" in r.message and "1 of 6 elements" in r.message and "index (0, 0)" in r.message


def test_a_kernel_that_writes_everything_passes_and_the_mode_is_restored():
    op = opdb.lookup("aten::neg")
    case = Case(op.qualname, (TensorSpec((2, 3), "float32", seed=1),))
    assert (
        execute._unwritten_elements(
            op, case, execute._run_side(op, case, to_device=execute._cpu_copy, device=torch.device("cpu"))
        )
        == ""
    )
    assert not torch.are_deterministic_algorithms_enabled()
    assert run_case(op, case, CPUBackend(), grad=False, relations=True).outcome is Outcome.PASS


# -- out= tensors: the case draws their values, the same on every side --------------------------


def test_an_out_of_the_right_size_the_kernel_leaves_in_part_is_found(monkeypatch):
    def half_written(x, *, out):
        held = out.reshape(-1)[0].clone() if out.numel() else None
        torch.ops.aten.detach_copy.out(x, out=out)  # the kernel's checks and its resize
        if held is not None and out.numel():
            out.view(-1)[0] = held  # the first element keeps what the out held
        return out

    _with_kernel(monkeypatch, "aten::detach_copy.out", half_written)
    op = opdb.lookup("aten::detach_copy.out")  # no independent reference: golden is the expectation
    case = Case(op.qualname, (TensorSpec((2, 3), "float32", seed=1),), {"out": TensorSpec((2, 3), "float32")})
    # the CPU reference and golden keep the same drawn value there: only a filled out tells
    assert run_case(op, case, CPUBackend(), grad=False).outcome is Outcome.PASS
    checked, failure = execute.run_out_variants(op, case, CPUBackend(), relations=True)
    assert checked and failure is not None and failure.outcome is Outcome.MISMATCH
    assert failure.message.startswith("[out= preallocated] [unwritten output]") and "1 of 6" in failure.message


def test_an_out_that_accumulates_by_contract_is_not_unwritten():
    # FunctionOfAMatrixUtils.cpp: out[i] += coefficients[i, j] * input[j]: the out's value is read
    op = opdb.lookup("aten::_compute_linear_combination.out")
    case = Case(
        op.qualname,
        (TensorSpec((3, 2), "float32", seed=1), TensorSpec((2, 3), "float32", seed=2)),
        {"out": TensorSpec((2, 2), "float32")},
    )
    assert execute.run_out_variants(op, case, CPUBackend(), relations=True) == (True, None)


def test_an_out_left_at_another_shape_than_the_functional_s_breaks_the_forms_relation(monkeypatch):
    def not_resized(x, *, out):
        return out  # an empty out stays empty

    _with_kernel(monkeypatch, "aten::neg.out", not_resized)
    op = opdb.lookup("aten::neg.out")
    case = Case(op.qualname, (TensorSpec((2, 3), "float32", seed=1),), {"out": TensorSpec((0,), "float32")})
    r = run_case(op, case, CPUBackend(), grad=False, relations=True)
    assert r.outcome is Outcome.MISMATCH, r.message
    assert "[forms relation] the out= overload's result has shape (0,)" in r.message and "(2, 3)" in r.message


def _unfold_backward_leaves_a_0d_grad_unwritten() -> bool:
    try:
        torch.ops.aten.unfold_backward(torch.tensor(1.0), [4], 0, 2, 1)
    except (RuntimeError, IndexError):
        return False
    return True


def test_a_result_never_written_for_a_malformed_argument_is_a_missing_check(monkeypatch, tmp_path):
    from conform.report.repro import repro_script
    from script_runner import run_script

    monkeypatch.setattr(execute, "on_variant", lambda case, name: None)  # as in an isolated process
    # a kernel that writes every element of what it computes with, malformed or not: nothing found
    mm = opdb.lookup("aten::mm")
    found: list = []
    execute.run_malformed(
        mm,
        Case(mm.qualname, (TensorSpec((2, 3), "float32"), TensorSpec((3, 4), "float32"))),
        CPUBackend(),
        unwritten=found,
    )
    assert found == []
    if not _unfold_backward_leaves_a_0d_grad_unwritten():
        return  # torch 2.13's unfold_backward takes a grad_in of the wrong rank unchecked (pytorch#194807)
    op = opdb.lookup("aten::unfold_backward")
    case = Case(op.qualname, (TensorSpec((3, 2), "float32", seed=1), [4], 0, 2, 1))
    execute.run_malformed(op, case, CPUBackend(), unwritten=found)
    ((what, variant, message),) = found
    assert what == "argument 1 with one dim fewer" and variant.args[0].shape == (2,)
    assert message.startswith("[unwritten output] 1 of 4 elements") and "read from past an input's end" in message
    # its script runs the call on guarded inputs, then with every guard, allocation and out filled
    r = execute.CaseResult(
        Outcome.MISSING_ERROR,
        "forward",
        f"[malformed argument] {what}: the op computes with it and {message.partition('] ')[2]}",
    )
    path = tmp_path / "repro.py"
    path.write_text(repro_script(op, variant, "cpu", result=r, golden_is_expectation=True))
    done = run_script(path, cwd=tmp_path)
    assert done.returncode == 0 and "verdict: missing_error" in done.stdout, done.stdout[-2000:] + done.stderr[-2000:]
    assert "were never written or were read from past" in done.stdout
