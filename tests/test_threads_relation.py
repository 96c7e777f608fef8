"""The threads relation: a CPU kernel gives with several intra-op threads what it gives with one."""

from __future__ import annotations

import subprocess
import sys

import torch

import opdb
from conform.backends import CPUBackend
from conform.outcomes import Outcome
from conform.report.repro import repro_script
from conform.run import execute
from conform.run.execute import run_case
from generators.case import Case, TensorSpec
from opdb.spec import OpSpec


def _with_kernel(monkeypatch, qualname, kernel):
    resolve = OpSpec.resolve
    monkeypatch.setattr(OpSpec, "resolve", lambda self: kernel if self.qualname == qualname else resolve(self))


def _neg_case(dtype="float32"):
    op = opdb.lookup("aten::neg")
    return op, Case(op.qualname, (TensorSpec((4, 5), dtype, seed=3),))


def test_a_kernel_whose_last_chunk_is_wrong_with_threads_fails(monkeypatch):
    def chunked(x):
        out = -x
        if torch.get_num_threads() > 1:  # the last thread's rows read one row too far
            out[-1] = -x[0]
        return out

    _with_kernel(monkeypatch, "aten::neg", chunked)
    threads_before = torch.get_num_threads()
    for dtype in ("float32", "int64"):
        op, case = _neg_case(dtype)
        r = run_case(op, case, CPUBackend(), grad=False, relations=True)
        assert r.outcome is Outcome.MISMATCH, (dtype, r.message)
        assert r.message.startswith("[threads relation] with 4 intra-op threads"), r.message
        assert r.relation["relation"] == "threads" and r.relation["threads"] == 4
    assert torch.get_num_threads() == threads_before


def test_a_kernel_that_raises_only_with_threads_is_a_device_error(monkeypatch):
    def refuses(x):
        if torch.get_num_threads() > 1:
            raise RuntimeError("parallel_for: nested parallel region")
        return -x

    _with_kernel(monkeypatch, "aten::neg", refuses)
    op, case = _neg_case()
    r = run_case(op, case, CPUBackend(), grad=False, relations=True)
    assert r.outcome is Outcome.DEVICE_ERROR, r.message
    assert (
        "[threads relation]" in r.message
        and "nested parallel region" in r.message
        and "with one it computes" in r.message
    )


def test_a_parallel_sum_order_within_the_tolerance_passes(monkeypatch):
    def reordered(x):
        out = -x
        if torch.get_num_threads() > 1:  # another order of summation: an ulp here and there
            out = torch.nextafter(out, torch.full_like(out, float("inf")))
        return out

    _with_kernel(monkeypatch, "aten::neg", reordered)
    op, case = _neg_case()
    r = run_case(op, case, CPUBackend(), grad=False, relations=True)
    assert "[threads relation]" not in r.message, r.message


def test_a_kernel_that_varies_with_one_thread_is_not_blamed_on_threads(monkeypatch):
    calls = {"n": 0}

    def varies(x):
        calls["n"] += 1
        return -x + calls["n"]  # another result on every run, whatever the threads

    _with_kernel(monkeypatch, "aten::neg", varies)
    op, case = _neg_case()
    r = run_case(op, case, CPUBackend(), grad=False, relations=True)
    assert "[threads relation]" not in r.message, r.message


def test_a_real_kernel_passes_and_its_script_replays_the_threads():
    op = opdb.lookup("aten::cumsum")
    case = Case(op.qualname, (TensorSpec((6, 5), "float32", seed=2), 1))
    observed = execute.relation_sides(op, CPUBackend()).device(case)[0]
    threaded = execute.relation_sides(op, CPUBackend(), threads=4)
    assert threaded.device(case)[0] is not None
    v = execute.metamorphic.Violation("threads", "mismatch", "replayed", case, threads=4)
    assert v.to_dict()["threads"] == 4 and observed is not None
    result = execute.violation_result(v)
    script = repro_script(op, case, "cpu", result=result, golden_is_expectation=True)
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300)
    assert "relation: threads (1 and 4 intra-op threads)" in out.stdout, out.stdout + out.stderr
    assert "verdict: pass" in out.stdout, out.stdout + out.stderr


_THREAD_DEPENDENT_NEG = """
import warnings
import torch
warnings.simplefilter("ignore")
_LIB = torch.library.Library("aten", "IMPL")


def _chunked_neg(x):  # the last thread's chunk reads the first row
    out = torch.sub(torch.zeros_like(x), x)
    if torch.get_num_threads() > 1:
        out[-1] = out[0]
    return out


_LIB.impl("neg", _chunked_neg, "CPU")
exec(compile(open(SCRIPT).read(), SCRIPT, "exec"), {"__name__": "__main__"})
"""


def test_the_script_reproduces_a_thread_dependent_kernel(monkeypatch, tmp_path):
    def chunked(x):
        out = torch.sub(torch.zeros_like(x), x)
        if torch.get_num_threads() > 1:
            out[-1] = out[0]
        return out

    _with_kernel(monkeypatch, "aten::neg", chunked)
    op, case = _neg_case()
    r = run_case(op, case, CPUBackend(), grad=False, relations=True)
    assert r.relation and r.relation["relation"] == "threads", r.message
    path = tmp_path / "repro.py"
    path.write_text(repro_script(op, case, "cpu", result=r, golden_is_expectation=True))
    # the same kernel registered for aten::neg in the script's process
    injected = f"SCRIPT = {str(path)!r}\n" + _THREAD_DEPENDENT_NEG
    out = subprocess.run([sys.executable, "-c", injected], capture_output=True, text=True, timeout=300)
    assert "verdict: mismatch" in out.stdout, out.stdout + out.stderr
    healthy = subprocess.run([sys.executable, str(path)], capture_output=True, text=True, timeout=300)
    assert "verdict: pass" in healthy.stdout, healthy.stdout + healthy.stderr
