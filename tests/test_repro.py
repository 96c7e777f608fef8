"""Stored reproduction scripts recompute what conform compared and print the same verdict."""

from __future__ import annotations

import dataclasses
import re

import pytest

import opdb
from conform.backends import CPUBackend
from conform.outcomes import Outcome
from conform.report.repro import repro_script
from conform.run.cell import CellSettings, run_cell
from conform.run.execute import run_case, run_out_variants
from generators.case import Case
from generators.case import TensorSpec as T
from script_runner import run_script
from tests.cpu_kernels import CPUKernels


def _script_verdict(tmp_path, script: str) -> str:
    path = tmp_path / "repro.py"
    path.write_text(script)
    done = run_script(path, cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-2000:]
    found = re.findall(r"^verdict: (\S+)", done.stdout, re.M)
    assert found, done.stdout[-2000:]
    return found[-1]


# Pinned alarm cells of a CPU-vs-golden run, known bugs of torch 2.13's CPU kernels that these
# seeds find: hardswish_backward's NaN by position (forward of the backward op) and matrix_exp's
# half-precision gradient (inf where golden is finite). Each must be found, and its stored script
# must print the same verdict. (Not gelu's NaN for inf: its vectorised path differs between CPUs.)
@pytest.mark.parametrize(
    "op_name,dtype,outcome",
    [("aten::hardswish_backward", "float32", "mismatch"), ("aten::matrix_exp", "float16", "grad_mismatch")],
)
def test_the_stored_script_of_an_alarm_cell_prints_its_verdict(tmp_path, op_name, dtype, outcome):
    cell = run_cell(opdb.lookup(op_name), dtype, CPUBackend(), CellSettings(examples=30, hypothesis_db=None, seed=1))
    assert cell.outcome == outcome, f"{op_name} {dtype} with seed 1: {cell.outcome}: {cell.message}"
    assert _script_verdict(tmp_path, cell.repro) == outcome


def test_the_script_of_a_failing_out_variant_rebuilds_that_variant(tmp_path):
    # gelu.out never writes a non-contiguous out (torch 2.13's CPU kernel)
    op = opdb.lookup("aten::gelu.out")
    case = Case("aten::gelu.out", (T((24,), "float32", seed=1),), {"out": T((24,), "float32", seed=2)})
    checked, failure = run_out_variants(op, case, CPUBackend())
    assert checked and failure is not None and failure.outcome.value == "mismatch", failure
    script = repro_script(op, failure.variant_case, "cpu", result=failure, golden_is_expectation=True)
    assert _script_verdict(tmp_path, script) == "mismatch"
    # the case as drawn (a contiguous out) passes: the script is the variant's, not the original's
    assert (
        _script_verdict(tmp_path, repro_script(op, case, "cpu", result=failure, golden_is_expectation=True)) == "pass"
    )


def test_a_device_that_agrees_with_the_cpu_reproduces_as_pass_by_parity(tmp_path):
    # sinh's float32 vector loop overflows at 89 (2.24e38 fits): the CPU is off golden, a device
    # that agrees with the CPU passes by parity, the CPU under test does not
    case = Case("aten::sinh", (T((36,), "float32", data=(89.0, 1.0, -89.0) * 12),))
    script = repro_script(opdb.lookup("aten::sinh"), case, "cpu", golden_is_expectation=False)
    assert _script_verdict(tmp_path, script) == "pass"
    assert (
        _script_verdict(tmp_path, repro_script(opdb.lookup("aten::sinh"), case, "cpu", golden_is_expectation=True))
        == "mismatch"
    )


def test_keyword_arguments_and_scalars_reach_the_op(tmp_path):
    op = opdb.lookup("aten::add.Tensor")
    case = Case("aten::add.Tensor", (T((3, 4), "float32", seed=1), T((4,), "float32", seed=2)), {"alpha": 2})
    assert _script_verdict(tmp_path, repro_script(op, case, "cpu")) == "pass"
    assert (
        run_cell(
            opdb.lookup("aten::add.Tensor"), "float32", CPUKernels(), CellSettings(examples=2, hypothesis_db=None)
        ).outcome
        == "pass"
    )


def _script_output(tmp_path, script: str) -> str:
    path = tmp_path / "repro.py"
    path.write_text(script)
    return run_script(path, cwd=tmp_path).stdout


def test_an_exact_tolerance_reaches_the_script(tmp_path):
    # exactly determined results are compared with tolerance 0: the script must not fall back
    # to float32's default tolerance and call a one-ulp difference a pass
    from types import SimpleNamespace

    op = opdb.lookup("aten::floor")
    case = Case("aten::floor", (T((4,), "float32", seed=1),))
    script = repro_script(
        op,
        case,
        "cpu",
        result=SimpleNamespace(outcome="mismatch", phase="forward", rtol=0.0, atol=0.0),
        golden_is_expectation=True,
    )
    assert "beyond rtol=0, atol=0" in _script_output(tmp_path, script)


def test_float64_does_not_judge_an_op_whose_result_is_its_dtypes_next_value(tmp_path):
    # nextafter(x, y) in float32 steps by a float32 unit; float64 golden by a float64 unit
    op = opdb.lookup("aten::nextafter")
    case = Case("aten::nextafter", (T((), "float32", seed=0), T((), "float32", seed=1)))
    assert run_case(op, case, CPUBackend()).outcome.value == "pass"
    assert _script_verdict(tmp_path, repro_script(op, case, "cpu", golden_is_expectation=True)) == "pass"


def test_a_bool_negative_view_is_read_by_what_it_stores(tmp_path):
    op = opdb.lookup("aten::_neg_view")
    case = Case("aten::_neg_view", (T((3,), "bool", seed=1),))
    assert run_case(op, case, CPUBackend()).outcome.value == "pass"
    assert _script_verdict(tmp_path, repro_script(op, case, "cpu", golden_is_expectation=True)) == "pass"


def test_a_death_inside_the_generators_functional_call_keeps_that_calls_case_and_script():
    from conform.plugin import died_result
    from conform.run.isolation import InFlight

    functional = Case("aten::_chunk_cat", (), {"tensors": [T((), "bool", seed=1)], "dim": 0, "num_chunks": 1})
    record = InFlight(
        op="aten::_chunk_cat.out", dtype="bool", case=functional.to_json(), describe=functional.describe()
    )
    r = died_result(("aten::_chunk_cat.out", "bool"), record, "cpu")
    assert r.outcome == "crash" and "torch.ops.aten._chunk_cat.default(" in r.repro


def test_the_generator_announces_the_functional_it_runs_for_an_out_op(monkeypatch):
    # a crash or hang in that call is recorded with its case (conform.run.cell arms the watchdog)
    import generators.backward as gb

    seen = []
    monkeypatch.setattr(gb, "on_functional", seen.append)
    gb.out_results(opdb.lookup("aten::add.out"), {"self": T((3,), "float32"), "other": T((3,), "float32"), "alpha": 1})
    assert [c.op if c is not None else None for c in seen] == ["aten::add.Tensor", None]


def test_a_gradient_verdict_is_reproduced(tmp_path):
    # bfloat16 convolution (the seed-13 sweep's minimal case): the forward agrees with golden, the
    # input gradient is NaN for an element no window reads (0 in float32/64, and 0 again from
    # contiguous inputs); the script runs the backward and ends with its verdict
    def tensor(shape, layout, values):
        return {"__tensor__": {"shape": shape, "dtype": "bfloat16", "layout": layout, "values": values, "seed": 0}}

    case = Case.from_json(
        {
            "op": "aten::_convolution",
            "args": [
                tensor([1, 2, 1, 1, 2], "contiguous", "real"),
                tensor([2, 2, 1, 1, 2], "channels_last", "special"),
                None,
                [1, 1, 1],
                [0, 0, 1],
                [1, 1, 1],
                True,
                [0, 0, 0],
                2,
                False,
                False,
                False,
                False,
            ],
            "kwargs": {},
            "seed": 0,
        }
    )
    op = opdb.lookup("aten::_convolution")
    r = run_case(op, case, CPUBackend())
    # the NaN comes from the bfloat16 kernel's vector path, which not every CPU takes: where this
    # one computes the gradient right, the script must say pass as the verdict did
    assert r.outcome.value in ("grad_mismatch", "pass"), r.message
    script = repro_script(op, case, "cpu", result=r, golden_is_expectation=True)
    assert _script_verdict(tmp_path, script) == r.outcome.value


def test_a_gradient_verdict_stays_the_scripts_where_the_forward_differs(tmp_path):
    # bilinear float32 beyond sqrt(max): the forward's products overflow where golden's are
    # beyond float32 (an excuse the script does not recompute). conform now passes the case (the
    # NaN gradients sit at the range's top, 2e38); a script whose verdict came from the backward
    # still says the forward differs and ends with the backward's own verdict
    def huge(shape, seed, layout="transposed"):
        spec = {"shape": shape, "dtype": "float32", "layout": layout, "seed": seed, "magnitude": "beyond_sqrt"}
        return {"__tensor__": spec}

    case = Case.from_json(
        {
            "op": "aten::bilinear",
            "args": [huge([2, 3], 0), huge([2, 3], 218), huge([1, 3, 3], 0), huge([1], 0, "sliced")],
            "kwargs": {},
            "seed": 186616,
        }
    )
    op = opdb.lookup("aten::bilinear")
    r = run_case(op, case, CPUBackend())
    assert r.outcome.value == "pass" and r.finding["kind"] == "precision_edge", r.message
    from_backward = dataclasses.replace(r, outcome=Outcome.GRAD_MISMATCH, phase="backward")
    script = repro_script(op, case, "cpu", result=from_backward, golden_is_expectation=True)
    path = tmp_path / "repro.py"
    path.write_text(script)
    done = run_script(path, cwd=tmp_path)
    assert "the forward differs here" in done.stdout, done.stdout[-2000:]
    assert re.findall(r"^verdict: (\S+)", done.stdout, re.M)[-1] == "grad_mismatch"


def test_a_result_that_varies_from_run_to_run_is_reproduced_by_running_again(tmp_path):
    # a kernel that reads memory it never wrote fails on some runs only (chebyshev_polynomial_w at
    # NaN returns whatever its result's memory held): the script of a cell conform failed runs the
    # same calls again, up to TRIES times, and says on which attempt the failure came back.
    # Simulated: the op gives a wrong result from its fifth call on (the third attempt's device run).
    case = Case("aten::sin", (T((8,), "float32", seed=1),))
    result = dataclasses.make_dataclass("R", ["outcome", "phase", "rtol", "atol"])("mismatch", "forward", 1.3e-6, 1e-5)
    script = repro_script(opdb.lookup("aten::sin"), case, "cpu", result=result, golden_is_expectation=True)
    flaky = (
        "\n_calls = [0]\n_real_call = call\n\n\ndef call(device, requires_grad=False):\n"
        "    result, written = _real_call(device, requires_grad)\n"
        "    if not _GOLDEN:\n"
        "        _calls[0] += 1\n"
        "        if _calls[0] >= 5:\n"
        "            result = result + 1.0\n"
        "    return result, written\n"
    )
    anchor = "\n\ndef scribble(device):"
    assert anchor in script
    path = tmp_path / "repro.py"
    path.write_text(script.replace(anchor, flaky + anchor, 1))
    done = run_script(path, cwd=tmp_path)
    assert "verdict: mismatch" in done.stdout and "on attempt 3 of 8" in done.stdout, done.stdout[-2000:] + done.stderr
    # a cell conform passed is run once
    passed = dataclasses.replace(result, outcome="pass")
    path.write_text(
        repro_script(opdb.lookup("aten::sin"), case, "cpu", result=passed, golden_is_expectation=True).replace(
            anchor, flaky + anchor, 1
        )
    )
    done = run_script(path, cwd=tmp_path)
    assert "verdict: pass" in done.stdout and "attempt 2" not in done.stdout, done.stdout[-2000:]


def test_a_script_carries_the_tensor_builder_code_without_its_comment_lines():
    # the scripts go into bug reports and pull-request comments (conform gate's summary, which
    # GitHub limits in size): the builder's code, verbatim, and none of its comment lines
    import inspect

    from conform.report import repro as repro_module
    from generators import tensor as tensor_module

    src = repro_module._tensor_builder_source()
    compile(src, "tensor builder", "exec")
    body = src.splitlines()[1:]
    assert "def _make_values(" in src and not any(line.lstrip().startswith("#") for line in body)
    assert len(src) < 0.8 * len(inspect.getsource(tensor_module))
