"""Value contracts (opdb/rules/contracts.toml): drawn cases keep them, each names its evidence,
internal ops take what their caller passes, and golden reads div's rounding modes as defined."""

from __future__ import annotations

import importlib
import inspect
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

import opdb
from conform.backends import CPUBackend
from conform.outcomes import Outcome as O
from conform.run.execute import run_case
from generators import capture
from generators.case import Case
from generators.case import TensorSpec as T
from generators.schema import from_schema
from opdb.rules import load_entries
from tests.test_generators import _drawn


def _drawn_args(name, dtype, n=30):
    op = opdb.lookup(name)
    names = [a.name for a in op.arguments]
    for case in _drawn(from_schema(op, dtype), examples=n):
        args, kwargs = case.materialize(lambda t: t, torch.device("cpu"))
        yield {**dict(zip(names, args)), **kwargs}


def _contract_entries():
    return [e for e in load_entries() if e.source == "contracts.toml"]


@pytest.mark.parametrize(
    "name",
    [
        "aten::cosine_embedding_loss",
        "aten::soft_margin_loss_backward",
        "aten::soft_margin_loss_backward.grad_input",
        "aten::margin_ranking_loss",
        "aten::hinge_embedding_loss",
    ],
)
def test_loss_labels_are_minus_one_or_one(name):
    # a label of 365 or -105 put exp(-y * x) beyond float32 where golden held it: the sweep's
    # alarms were about conform's input, not the kernel
    seen = 0
    for b in _drawn_args(name, "float32"):
        t = b["target"]
        assert set(t.unique().tolist()) <= {-1.0, 1.0}, t
        seen += t.numel()
    assert seen


def test_a_logit_is_any_real_and_its_target_a_probability():
    big = False
    for b in _drawn_args("aten::binary_cross_entropy_with_logits", "float32", n=40):
        t = b["target"]
        assert not t.numel() or (0 <= float(t.min()) and float(t.max()) <= 1), t
        big |= bool(b["self"].numel() and b["self"].abs().max() > 1)
    assert big  # the logits are not held in [0, 1]


@pytest.mark.parametrize(
    ("name", "factors", "pivots"),
    [
        ("aten::lu_solve", "LU_data", "LU_pivots"),
        ("aten::linalg_lu_solve", "LU", "pivots"),
        ("aten::lu_unpack", "LU_data", "LU_pivots"),
    ],
)
def test_lu_factors_come_from_a_pivoted_lu(name, factors, pivots):
    # partial pivoting keeps every multiplier (L's strictly lower part) at most 1; drawn apart,
    # lu_solve met multipliers near 1e19 and its solve overflowed by construction
    n = 0
    for b in _drawn_args(name, "float32"):
        lu, piv = b[factors], b[pivots]
        if not lu.numel():
            continue
        assert lu.tril(-1).abs().max() <= 1, lu
        assert 1 <= int(piv.min()) and int(piv.max()) <= lu.shape[-1], piv
        n += 1
    assert n


def test_householder_reflectors_and_cholesky_factors_come_from_their_producer():
    # geqrf's reflectors with its tau make an orthogonal Q; a tau drawn apart does not
    for b in _drawn_args("aten::ormqr", "float64", n=15):
        q = torch.linalg.householder_product(b["self"], b["input2"])
        assert torch.allclose(q.mT @ q, torch.eye(q.shape[-1], dtype=q.dtype), atol=1e-9), q
    for name, arg in (("aten::cholesky_solve", "input2"), ("aten::cholesky_inverse", "self")):
        for b in _drawn_args(name, "float64", n=15):
            f = b[arg]
            upper = bool(b.get("upper", False))
            assert torch.equal(f, f.triu() if upper else f.tril()), (name, f)
            assert bool((f.diagonal(dim1=-2, dim2=-1).real > 0).all()), (name, f)


def test_weight_norm_backward_gets_the_norms_of_its_v_and_a_strided_gradient():
    # drawn apart, a stride-0 grad_w and norms of inf (float32's own forward overflowing for a v
    # of 1e20s whose norm is 1e21) made the backward NaN where golden was 0 (sweep seed 16)
    for name in ("aten::_weight_norm_interface_backward", "aten::_weight_norm_interface_backward.out"):
        n = 0
        for b in _drawn_args(name, "float32"):
            v, dim, norms = b["saved_v"].double(), b["dim"], b["saved_norms"]
            others = [i for i in range(v.dim()) if i != dim % max(v.dim(), 1)]
            want = torch.linalg.vector_norm(v, dim=others, keepdim=True) if others else v.abs()
            torch.testing.assert_close(norms, want.to(norms.dtype), rtol=0, atol=0, equal_nan=True)
            assert b["grad_w"].numel() < 2 or 0 not in b["grad_w"].stride()
            n += 1
        assert n


@pytest.mark.parametrize("dividend", ["int32", "float32"])
@pytest.mark.parametrize("name", ["aten::div.Tensor_mode", "aten::div.out_mode"])
def test_trunc_division_truncates_the_quotient_the_result_dtype_rounds(name, dividend):
    # div(int32 2228, float32 -0.31482267, 'trunc'): the op promotes the dividend to float32 and
    # truncates float32's quotient -7077.0; golden divided exactly (-7076.9998) and truncated to -7076
    a = T((3,), dividend, data=(2228, 3929, 5))
    b = T((3,), "float32", data=(-0.3148226737976074, -1.0734972953796387, 2.0))
    out = {"out": T((3,), "float32")} if name.endswith("out_mode") else {}
    r = run_case(opdb.lookup(name), Case(name, (a, b), {"rounding_mode": "trunc", **out}), CPUBackend())
    assert r.outcome == O.PASS, r.message


def test_a_half_precision_quotient_rounded_before_the_floor_still_alarms():
    # bfloat16 560 // 3 floors a quotient rounded to bfloat16 (187) where float32 math gives 186
    # (pytorch#193754): the rounded-quotient reading is float32's, not the half dtype's
    a, b = T((70,), "bfloat16", data=(560.0,) * 70), T((70,), "bfloat16", data=(3.0,) * 70)
    for mode in ("floor", "trunc"):
        r = run_case(
            opdb.lookup("aten::div.Tensor_mode"),
            Case("aten::div.Tensor_mode", (a, b), {"rounding_mode": mode}),
            CPUBackend(),
        )
        assert r.outcome == O.MISMATCH, (mode, r.message)


def test_every_contract_names_its_evidence_and_the_docs_say_it():
    entries = _contract_entries()
    assert entries
    for e in entries:
        hints = e.fields.get("hints", {})
        assert e.fields.get("reason"), e.key
        assert hints.get("argument_values") or hints.get("produced_by") or hints.get("caller"), e.key
        doc = hints.get("contract_doc")
        if doc is None:
            continue
        path, words = doc
        module, _, attr = path.rpartition(".")
        obj = getattr(importlib.import_module(module), attr)
        text = " ".join((inspect.getdoc(obj) or "").split())
        assert " ".join(words.split()) in text, (e.key, path, words)


def test_producers_and_callers_are_real_ops():
    entries = [e for e in _contract_entries() if {"produced_by", "caller"} & set(e.fields.get("hints", {}))]
    assert len(entries) >= 8
    for e in entries:
        hints = e.fields.get("hints", {})
        for qualname in filter(None, ((hints.get("produced_by") or {}).get("op"), hints.get("caller"))):
            if qualname != capture.AUTOGRAD:
                assert opdb.lookup(qualname).resolve() is not None, (e.key, qualname)
    # a derived caller: every op the entry matches has one
    for op in opdb.select("all"):
        if op.rules and op.rules.hints.get("caller") == capture.AUTOGRAD:
            assert capture.callers_of(op), op.qualname


def opinfo_samples_check() -> int:
    """Every OpInfo sample (PyTorch's record of each op's valid inputs) satisfies a value contract
    that cites it, and a producer contract's sample function calls the producer. Returns the
    number of checks made; an AssertionError names the contract that disagrees."""
    cmi = importlib.import_module("torch.testing._internal.common_methods_invocations")
    infos = {(o.name if not o.variant_test_name else f"{o.name}.{o.variant_test_name}"): o for o in cmi.op_db}
    kinds = {
        "sign": lambda t: bool(((t == 1) | (t == -1)).all()),
        "probability": lambda t: bool(((t >= 0) & (t <= 1)).all()),
        "nonnegative": lambda t: bool((t >= 0).all()),
    }
    checked = 0
    for e in _contract_entries():
        hints = e.fields.get("hints", {})
        name = hints.get("contract_opinfo")
        if name is None:
            continue
        info = infos[name]
        produced = hints.get("produced_by")
        if produced:
            source = inspect.getsource(info.sample_inputs_func)
            producer = produced["op"].removeprefix("aten::").removeprefix("linalg_")
            assert producer in source or "sample_inputs_linalg_cholesky_inverse" in source, (name, producer)
            checked += 1
            continue
        params = list(inspect.signature(info.op).parameters)
        for sample in info.sample_inputs("cpu", torch.float32):
            bound = {**dict(zip(params, [sample.input, *sample.args])), **sample.kwargs}
            for arg, kind in hints["argument_values"].items():
                t = bound.get(arg if arg != "self" else params[0])
                if isinstance(t, torch.Tensor):
                    assert kinds[kind](t), (name, arg, t)
                    checked += 1
    return checked


# nll_loss's OpInfo samples carry class indices, not signs: a contract claiming signs disagrees
WRONG_CONTRACT = (
    '["aten::nll_loss"]\nreason = "a wrong contract"\n'
    'hints = { argument_values = { target = "sign" }, contract_opinfo = "nn.functional.nll_loss" }\n'
)


@pytest.fixture(scope="module")
def opinfo_checks(request, tmp_path_factory) -> dict:
    """The OpInfo check of the committed contracts, then of WRONG_CONTRACT alone, in one child
    process for the whole session (each check paid the import of PyTorch's test suite again). A
    child because importing that suite forbids setting torch.backends flags for the rest of the
    process (common_utils calls torch.backends.disable_global_flags()), and the CUDA backend's
    tests in the same worker set them, as conform does. Each check: its count, or the exception
    it raised with its traceback."""
    pytest.importorskip("expecttest")  # torch.testing._internal imports it (the test extra)
    from conftest import once_per_session

    code = (
        "import json, sys, traceback, tests.test_contracts as t\n"
        "from opdb.rules import load_entries\n"
        "def check():\n"
        "    try:\n"
        "        return {'checked': t.opinfo_samples_check()}\n"
        "    except Exception as e:\n"
        "        return {'raised': type(e).__name__, 'traceback': traceback.format_exc()}\n"
        "committed = check()\n"
        "t._contract_entries = lambda: [e for e in load_entries(sys.argv[1]) if e.source == 'contracts.toml']\n"
        "print(json.dumps({'committed': committed, 'wrong': check()}))\n"
    )

    def make(folder):
        (folder / "contracts.toml").write_text(WRONG_CONTRACT)
        root = Path(__file__).parent.parent
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(root), os.environ.get("PYTHONPATH")]))}
        proc = subprocess.run(
            [sys.executable, "-c", code, str(folder)], cwd=root, env=env, capture_output=True, text=True, timeout=600
        )
        assert proc.returncode == 0, proc.stderr[-3000:]
        return json.loads(proc.stdout.splitlines()[-1])

    return once_per_session(request, tmp_path_factory, "opinfo-checks", make)[1]


def test_contracts_agree_with_pytorchs_own_sample_inputs(opinfo_checks):
    committed = opinfo_checks["committed"]
    assert committed.get("checked", 0) > 0, committed.get("traceback", committed)


def test_a_contract_that_pytorchs_samples_break_fails_the_opinfo_check(opinfo_checks):
    wrong = opinfo_checks["wrong"]
    assert wrong.get("raised") == "AssertionError", wrong


# a point (0.5149...) exactly on the 17th of 25 edges float32 computes from the data's range,
# a few units off float64's edge: float32 and float64 count it in neighbouring bins
_ON_AN_EDGE = (
    1.4513001441955566, -2.9472756385803223, 0.06719112396240234, 1.5421390533447266, 0.13959407806396484,
    1.7229118347167969, -0.12210655212402344, -2.1369152069091797, 1.833785057067871, 0.5149016380310059,
    -1.6599143743515015, -0.30864381790161133, 1.0589494705200195, -0.6313469409942627, -0.13462495803833008,
)  # fmt: skip


@pytest.mark.parametrize("name", ["aten::_histogramdd_from_bin_cts", "aten::_histogramdd_from_bin_cts.out"])
def test_a_point_on_a_data_defined_bin_edge_is_counted_by_the_kernels_own_edges(name):
    x = T((15, 1), "float32", data=_ON_AN_EDGE)
    out = {"out": T((25,), "float32")} if name.endswith(".out") else {}
    op = opdb.lookup(name)
    counts = torch.ops.aten._histogramdd_from_bin_cts(torch.tensor(_ON_AN_EDGE).reshape(15, 1), [25])
    assert not torch.equal(
        counts.double(),
        torch.ops.aten._histogramdd_from_bin_cts(counts.new_tensor(_ON_AN_EDGE).double().reshape(15, 1), [25]),
    )
    r = run_case(op, Case(name, (x, [25]), out), CPUBackend())
    assert r.outcome == O.PASS, r.message
    # a count that no edges give still fails
    from tests.faulty import FaultyBackend, aten

    def one_more_in_the_first_bin(func, args, kwargs):
        result = func(*args, **kwargs)
        result[0] += 1
        return result

    body = {
        "name": "faulty-hist",
        "targets": frozenset({aten._histogramdd_from_bin_cts.default, aten._histogramdd_from_bin_cts.out}),
        "bug": staticmethod(one_more_in_the_first_bin),
    }
    backend = type("HistOneMore", (FaultyBackend,), body)()
    assert run_case(op, Case(name, (x, [25]), out), backend).outcome == O.MISMATCH


def test_a_contract_of_an_unknown_kind_or_a_producer_without_results_is_rejected(tmp_path):
    from opdb.rules import RulesError

    for body in (
        '["aten::x"]\nhints = { argument_values = { target = "signs" } }\n',
        '["aten::x"]\nhints = { produced_by = { op = "aten::geqrf" } }\n',
    ):
        (tmp_path / "c.toml").write_text(body)
        with pytest.raises(RulesError):
            load_entries(tmp_path)


# -- internal ops fed as their callers feed them (caller = "autograd": derivatives.yaml) -------------


def test_the_callers_of_a_backward_kernel_come_from_the_derivative_formulas():
    assert "aten::_softmax" in capture.autograd_callers()["_softmax_backward_data"]
    assert capture.callers_of(opdb.lookup("aten::native_batch_norm_backward"))
    # an op's own double backward calls it too, and is not its caller
    assert "aten::_softmax_backward_data" not in capture.callers_of(opdb.lookup("aten::_softmax_backward_data"))
    # running statistics are not differentiated: the capture must not ask for their gradient
    assert capture.differentiable_inputs("aten::native_batch_norm") == {"input", "weight", "bias"}


def test_batch_norm_backward_gets_the_statistics_of_its_input():
    # drawn apart, save_mean and save_invstd were any numbers: an invstd of 1e9 for an input of
    # variance 1 is a backward no forward leads to
    n = 0
    for b in _drawn_args("aten::native_batch_norm_backward", "float32", n=20):
        if not b["train"] or b["input"].numel() <= b["input"].shape[1] or not b["input"].isfinite().all():
            continue
        x = b["input"].double()
        dims = [d for d in range(x.dim()) if d != 1]
        mean = x.mean(dims)
        torch.testing.assert_close(b["save_mean"].double(), mean, rtol=1e-5, atol=1e-5)
        invstd = 1 / (x.var(dims, unbiased=False) + b["eps"]).sqrt()
        torch.testing.assert_close(b["save_invstd"].double(), invstd, rtol=1e-4, atol=1e-5)
        n += 1
    assert n


@pytest.mark.parametrize(("name", "to_probabilities"), [("_softmax", lambda y: y), ("_log_softmax", torch.exp)])
def test_softmax_backward_gets_a_softmax(name, to_probabilities):
    # the forward's own output: each row of probabilities sums to 1 along dim (an 'output' drawn as
    # any tensor held infinities a log_softmax never returns)
    n = 0
    for b in _drawn_args(f"aten::{name}_backward_data", "float32", n=20):
        y = to_probabilities(b["output"].double())
        if y.dim() == 0:
            y = y.reshape(1)
        if y.shape[b["dim"]] == 0:
            continue  # no row: nothing sums
        sums = y.sum(b["dim"])
        finite = sums.isfinite()  # a row with a NaN or an infinity in its input has none
        torch.testing.assert_close(sums[finite], torch.ones_like(sums[finite]), rtol=1e-4, atol=1e-4)
        n += int(finite.sum())
    assert n


def test_a_captured_scalar_type_is_stored_as_a_case_stores_one():
    # _softmax_backward_data's input_dtype came back from the capture as a torch.dtype, which a
    # case cannot be written as (every cell of it was conform's internal error)
    op = opdb.lookup("aten::_softmax_backward_data")
    for case in _drawn(from_schema(op, "float32"), examples=5):
        assert json.loads(json.dumps(case.to_json()))["args"][-1] == {"dtype": "float32"}, case
