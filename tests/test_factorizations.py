"""A factorization's factors are held to their documented contract (they multiply back to the
input, and have their documented form), which needs no unique answer: eigenvectors, singular
vectors and Q factors that golden compares by shape alone are judged by value."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from torch.utils._python_dispatch import TorchDispatchMode

import opdb
from conform.backends import CPUBackend
from conform.judge import factorizations, formulas
from conform.outcomes import Outcome
from conform.run.execute import run_case
from generators.case import Case
from generators.case import TensorSpec as T
from tests.faulty import BACKENDS


def _matrices(dtype):
    g = torch.Generator().manual_seed(0)
    for n in (1, 2, 3, 5, 8):
        yield torch.randn(3, n, n, generator=g, dtype=dtype)
        # graded: LAPACK's ?geev balances it, so its residual is small only for the balanced matrix
        yield torch.randn(2, n, n, generator=g, dtype=dtype) * torch.logspace(-6, 6, n, dtype=torch.float64).to(dtype)
        jordan = torch.diag_embed(torch.ones(n - 1, dtype=dtype), 1) + 2 * torch.eye(n, dtype=dtype)
        yield jordan[None]  # defective
        yield (torch.randn(n, 1, generator=g, dtype=dtype) @ torch.randn(1, n, generator=g, dtype=dtype))[None]
        yield torch.randint(-2, 2, (2, n, n), generator=g).to(dtype)  # singular ones among them
        yield torch.randn(2, n + 2, n, generator=g, dtype=dtype)  # tall
        yield torch.randn(2, n, n + 3, generator=g, dtype=dtype)  # wide


CALLS = [
    ("aten::linalg_eig", {}),
    ("aten::linalg_eigvals", {}),
    ("aten::linalg_eigh", {}),
    ("aten::linalg_eigh", {"UPLO": "U"}),
    ("aten::linalg_svd", {}),
    ("aten::linalg_svd", {"full_matrices": False}),
    ("aten::svd", {}),
    ("aten::linalg_qr", {}),
    ("aten::linalg_qr", {"mode": "complete"}),
    ("aten::linalg_qr", {"mode": "r"}),
    ("aten::geqrf", {}),
    ("aten::linalg_lu", {}),
    ("aten::linalg_lu_factor_ex", {}),
]


def _square_only(name):
    return any(w in name for w in ("eig",))


@pytest.mark.parametrize("dtype", [torch.float32, torch.complex64, torch.float64])
@pytest.mark.parametrize("name,kwargs", CALLS, ids=[f"{n}{k}" for n, k in CALLS])
def test_the_cpu_keeps_every_factorization_contract(name, kwargs, dtype):
    op = opdb.lookup(name)
    judged = 0
    for a in _matrices(dtype):
        if _square_only(name) and a.shape[-1] != a.shape[-2]:
            continue
        result = op.resolve()(a, **kwargs)
        assert factorizations.records(op, ((a,), kwargs), result) == [], (name, a.shape)
        judged += 1
    assert judged >= 15


def _broken(name, result):
    a, b = result[0], result[1]
    if name == "aten::linalg_eigh":
        return a, b.flip(-1)  # eigenvalues ascending, eigenvectors descending
    if name == "aten::linalg_eig":
        return a, b.roll(1, -1)  # eigenvectors paired with the wrong eigenvalues
    if name == "aten::linalg_svd":
        return a.flip(-1), b, result[2]
    if name == "aten::linalg_qr":
        return a, b + torch.tril(torch.ones_like(b), -1) * 1e-3  # garbage below the diagonal
    if name == "aten::linalg_lu_factor_ex":
        return a, b - 1, result[2]  # 0-indexed pivots
    if name == "aten::geqrf":
        return a, b * 0.5
    raise AssertionError(name)


@pytest.mark.parametrize(
    "name,what",
    [
        ("aten::linalg_eigh", "A Q = Q diag"),
        ("aten::linalg_eig", "A V = V diag"),
        ("aten::linalg_svd", "U diag(S) Vh = A"),
        ("aten::linalg_qr", "R is upper triangular"),
        ("aten::linalg_lu_factor_ex", "pivots are 1-indexed"),
        ("aten::geqrf", "Householder reflectors"),
    ],
)
def test_a_broken_factor_breaks_its_contract(name, what):
    op = opdb.lookup(name)
    a = torch.randn(2, 5, 5, generator=torch.Generator().manual_seed(1))
    found = factorizations.records(op, ((a,), {}), _broken(name, op.resolve()(a)))
    assert len(found) == 1 and what in found[0].message and "documented invariant" in found[0].message


def test_eigenvalues_that_are_not_the_matrix_s_break_their_contract():
    op = opdb.lookup("aten::linalg_eigvals")
    a = torch.randn(5, 5, generator=torch.Generator().manual_seed(2))
    w = op.resolve()(a)
    assert factorizations.records(op, ((a,), {}), w) == []
    assert "singular for each eigenvalue" in factorizations.records(op, ((a,), {}), w * 1.01)[0].message
    # every eigenvalue the first: each is one of A's, but they no longer sum to the trace
    same = w[:1].expand(5).clone()
    assert "sum to the trace" in factorizations.records(op, ((a,), {}), same)[0].message


def test_no_opinion_at_non_finite_or_overflowing_inputs():
    op = opdb.lookup("aten::linalg_eigh")
    nan = torch.full((3, 3), float("nan"))
    huge = torch.full((3, 3), 3e38)
    bogus = (torch.zeros(3), torch.zeros(3, 3))
    assert factorizations.records(op, ((nan,), {}), bogus) == []
    assert factorizations.records(op, ((huge,), {}), bogus) == []


class _EigenvectorsReversed(CPUBackend):
    """linalg_eigh's eigenvectors in descending order beside ascending eigenvalues: a backend
    that sorts the eigenvalues and forgets to permute the eigenvectors."""

    name = "faulty-eigenvectors-reversed"

    def device_context(self):
        class Mode(TorchDispatchMode):
            def __torch_dispatch__(self, func, types, args=(), kwargs=None):
                out = func(*args, **(kwargs or {}))
                if func is torch.ops.aten._linalg_eigh.default:  # linalg_eigh's kernel
                    out = (out[0], out[1].flip(-1))
                return out

        return Mode()


def test_a_device_whose_eigenvectors_golden_cannot_compare_is_failed_by_the_contract():
    op = opdb.lookup("aten::linalg_eigh")
    case = Case("aten::linalg_eigh", (T((4, 4), "float32", data=tuple(float(i % 7 - 3) for i in range(16))),))
    bad = run_case(op, case, _EigenvectorsReversed())
    assert bad.outcome == Outcome.MISMATCH, bad.message
    assert "documented invariant: A Q = Q diag(eigenvalues)" in bad.message
    assert run_case(op, case, BACKENDS["none"]()).outcome == Outcome.PASS


# -- compact forms: the documented formulas as independent references ------------------------


@pytest.mark.parametrize("dtype", [torch.float64, torch.complex128])
def test_the_compact_form_formulas_are_the_cpu_kernels(dtype):
    g = torch.Generator().manual_seed(3)
    for m, n in ((1, 1), (3, 3), (5, 3), (3, 5), (4, 4)):
        a = torch.randn(2, m, n, generator=g, dtype=dtype)
        h, tau = torch.geqrf(a)
        if m >= n:
            want = formulas.householder_product(h.numpy(), tau.numpy())
            assert np.allclose(torch.linalg.householder_product(h, tau).numpy(), want)
        for left, transpose in ((True, False), (True, True), (False, False), (False, True)):
            c = (
                torch.randn(2, m, 2, generator=g, dtype=dtype)
                if left
                else torch.randn(2, 2, m, generator=g, dtype=dtype)
            )
            want = formulas.ormqr(h.numpy(), tau.numpy(), c.numpy(), left, transpose)
            assert np.allclose(torch.ormqr(h, tau, c, left, transpose).numpy(), want)
        lu, piv = torch.linalg.lu_factor(a)
        for got, want in zip(torch.lu_unpack(lu, piv), formulas.lu_unpack(lu.numpy(), piv.numpy())):
            assert np.allclose(got.numpy(), want)
        if m == n:
            for left, adjoint in ((True, False), (False, True)):
                b = (
                    torch.randn(2, m, 2, generator=g, dtype=dtype)
                    if left
                    else torch.randn(2, 2, m, generator=g, dtype=dtype)
                )
                got = torch.linalg.lu_solve(lu, piv, b, left=left, adjoint=adjoint)
                assert np.allclose(
                    got.resolve_conj().numpy(), formulas.lu_solve(lu.numpy(), piv.numpy(), b.numpy(), left, adjoint)
                )
    assert formulas.lu_unpack(lu.numpy(), np.zeros_like(piv.numpy())) is None  # pivots out of range: no opinion


class _ReflectorSkipped:
    """householder_product that skips the last reflector, on the CPU itself: a bug golden shares."""

    def __enter__(self):
        class Mode(TorchDispatchMode):
            def __torch_dispatch__(self, func, types, args=(), kwargs=None):
                if func is torch.ops.aten.linalg_householder_product.default:
                    a, tau = args
                    tau = tau.clone()
                    tau[..., -1] = 0
                    return func(a, tau)
                return func(*args, **(kwargs or {}))

        self.mode = Mode()
        return self.mode.__enter__()

    def __exit__(self, *exc):
        return self.mode.__exit__(*exc)


def test_a_householder_bug_golden_shares_is_found_on_the_cpu():
    op = opdb.lookup("aten::linalg_householder_product")
    a = tuple(float(x) for x in (1.0, 0.5, -2.0, 0.25, 3.0, 1.5, -1.0, 2.0, 0.75, -0.5, 1.25, 2.5))
    case = Case(op.qualname, (T((4, 3), "float32", data=a), T((2,), "float32", data=(1.2, 0.7))), seed=1)
    assert run_case(op, case, CPUBackend()).outcome is Outcome.PASS
    with _ReflectorSkipped():
        r = run_case(op, case, CPUBackend())
    assert r.outcome is Outcome.MISMATCH, r.message
    assert "independent reference (formulas.householder_product)" in r.message
