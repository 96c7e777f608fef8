"""What a matrix factorization's factors must satisfy, checked on the side under judgement.

Eigenvectors and singular vectors are unique only up to a sign or phase, a general matrix's
eigenvalues come in no defined order, and pivoting may choose between equal candidates: golden
compares those outputs by shape and dtype only (compare.AMBIGUOUS_OUTPUTS), and where it compares
values it runs the same LAPACK routine, so a routine's own bug is in golden too. Every
factorization has a contract that needs neither: the factors multiply back to the input, and
have the form torch's documentation gives them (torch.linalg.eig: "normalized to have norm 1";
eigh and svd: orthogonal or unitary; qr: "R is upper triangular with real diagonal"; lu: "P is a
permutation matrix, L is lower triangular with ones on the diagonal and U is upper triangular";
lu_factor: pivots are 1-indexed rows at or below their own).

The products are computed in float64 (complex128) NumPy from the factors as returned. A backward
stable algorithm leaves a residual of a few units of the factors' dtype times the matrix's size
and norm (LU: times the norms of its factors, whose growth pivoting bounds only loosely), so the
bound is `SLACK * n * eps * scale`: SLACK leaves two orders of magnitude over what LAPACK's
float32 routines reach on the drawn matrices; a wrong factor misses it by the size of the matrix
itself. Where a floating input is not finite, or its norm lies outside what the dtype scales
safely, the check has no opinion: NaN and overflow land where the algorithm puts them.
"""

from __future__ import annotations

import numpy as np
import torch

from conform.judge import formulas
from conform.judge.compare import Record, bind_arguments
from conform.judge.trees import leaves

# residual allowed, in units of n * eps * scale
SLACK = 200.0
# the matrix norms (as a fraction of the dtype's largest and above its smallest normal) the check
# judges at: beyond them a correct routine overflows or loses its low bits to underflow
_HEADROOM = 1e-6


def _eps(dtype: torch.dtype) -> float:
    real = dtype.to_real() if dtype.is_complex else dtype
    return torch.finfo(real).eps


def _np(t: torch.Tensor) -> np.ndarray:
    t = t.detach().cpu().resolve_conj().resolve_neg()
    return t.to(torch.complex128 if t.is_complex() else torch.float64).numpy()


def _judged(a: torch.Tensor) -> bool:
    """The input is one the check judges: floating, finite, of a norm the dtype scales safely."""
    if not (a.is_floating_point() or a.is_complex()) or a.dim() < 2 or a.numel() == 0:
        return False
    if a.dtype not in (torch.float32, torch.float64, torch.complex64, torch.complex128):
        return False
    x = _np(a)
    if not np.isfinite(x).all():
        return False
    fi = torch.finfo(a.dtype.to_real() if a.is_complex() else a.dtype)
    peak = float(np.abs(x).max())
    return peak == 0.0 or (fi.tiny / _HEADROOM <= peak <= fi.max * _HEADROOM / max(a.shape[-2:]))


def _mh(x: np.ndarray) -> np.ndarray:
    return np.conj(np.swapaxes(x, -1, -2))


def _fro(x: np.ndarray) -> np.ndarray:
    return np.sqrt((np.abs(x) ** 2).sum(axis=(-1, -2)))


class _Judge:
    def __init__(self, path_of, dtype, n):
        self.path_of = path_of
        self.tol = SLACK * max(n, 1) * _eps(dtype)
        self.found: list[Record] = []

    def residual(self, what: str, at: int, off: np.ndarray, scale: np.ndarray, *alternatives):
        """A record where `off` (a batch of matrices) is not small against `scale`, nor any
        (off, scale) of `alternatives` (the same residual measured as another correct algorithm
        bounds it)."""
        if off.size == 0 or self.found:
            return
        rel = self._relative(off, scale)
        for other in zip(alternatives[::2], alternatives[1::2]):
            rel = np.fmin(rel, self._relative(*other))
        bad = ~(rel <= self.tol)  # NaN is bad
        if bad.any():
            i = int(np.argmax(bad))
            path = self.path_of(at)
            self.found.append(
                Record(
                    path,
                    "values",
                    f"documented invariant: {what}: off by {rel[i]:.3g} of the matrix's scale in matrix {i} of "
                    f"{rel.size}, where {self.tol:.2g} is a backward-stable routine's bound [{path}]",
                    mismatched=int(bad.sum()),
                    total=rel.size,
                )
            )

    @staticmethod
    def _relative(off: np.ndarray, scale: np.ndarray) -> np.ndarray:
        err = _fro(off).reshape(-1)
        scale = np.asarray(scale, dtype=np.float64).reshape(-1)
        with np.errstate(divide="ignore", invalid="ignore"):
            return np.where(err == 0, 0.0, err / np.maximum(scale, np.finfo(np.float64).tiny))

    def exact(self, what: str, at: int, bad: np.ndarray):
        """A record where `bad` (a boolean array over an output's elements) holds anywhere."""
        if bad.size and bad.any() and not self.found:
            path = self.path_of(at)
            self.found.append(
                Record(
                    path,
                    "values",
                    f"documented invariant: {what} ({int(bad.sum())} of {bad.size} elements) [{path}]",
                    mismatched=int(bad.sum()),
                    total=bad.size,
                )
            )


def _balanced(a: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(B, T^-1) with B = T^-1 A T balanced as LAPACK's ?gebal balances (permuted and scaled)."""
    import scipy.linalg  # here: only eig and eigvals cells need SciPy, which a run may never import otherwise

    flat = a.reshape(-1, *a.shape[-2:])
    bs, invs = [], []
    for x in flat:
        b, t = scipy.linalg.matrix_balance(x, permute=True, separate=False)
        bs.append(b)
        invs.append(np.linalg.inv(t))
    return np.stack(bs).reshape(a.shape), np.stack(invs).reshape(a.shape)


def _eye_off(q: np.ndarray) -> np.ndarray:
    """Q^H Q - I for a batch of matrices with orthonormal columns."""
    k = q.shape[-1]
    return _mh(q) @ q - np.eye(k)


def _lu_form(j: _Judge, lower: np.ndarray, upper: np.ndarray, at_l: int, at_u: int, unit: bool = True):
    k = lower.shape[-1]
    if unit:
        d = np.arange(min(lower.shape[-2:]))
        j.exact("L has ones on its diagonal", at_l, lower[..., d, d] != 1)
    j.exact("L is lower triangular", at_l, np.triu(lower, 1) != 0)
    j.exact("U is upper triangular", at_u, np.tril(upper[..., :k, :], -1) != 0)


def _check(name: str, bound: dict, outs: list, j: _Judge) -> None:
    a_t = bound.get("A", bound.get("self", bound.get("input")))
    a = _np(a_t)
    norm = _fro(a)
    m, n = a.shape[-2:]
    if name in ("linalg_eig", "_linalg_eig"):
        # LAPACK's ?geev balances A first (B = T^-1 A T, ?gebal): it is backward stable for B, so
        # the residual is also judged there, for the eigenvectors T^-1 V of B; an algorithm that
        # does not balance is judged on A
        w, v = _np(outs[0]), _np(outs[1])
        b, t_inv = _balanced(a)
        bv = t_inv @ v
        j.residual(
            "A V = V diag(eigenvalues)",
            1,
            a @ v - v * w[..., None, :],
            norm * _fro(v),
            b @ bv - bv * w[..., None, :],
            _fro(b) * _fro(bv),
        )
        j.residual(
            "eigenvectors of norm 1", 1, (np.sqrt((np.abs(v) ** 2).sum(-2)) - 1)[..., None], np.ones(w.shape[:-1])
        )
    elif name in ("linalg_eigvals", "_linalg_eigvals"):
        w = _np(outs[0])
        if n > 8:
            return
        # each eigenvalue is one of a matrix near A (or near the balanced B, as ?geev computes
        # them): A - lambda I is singular to the backward error; and they sum to the trace
        b, _ = _balanced(a)

        def singular(x):
            s = np.linalg.svd(x[..., None, :, :] - w[..., :, None, None] * np.eye(n), compute_uv=False)
            return s[..., -1].max(-1)[..., None, None]

        j.residual("A - lambda I singular for each eigenvalue", 0, singular(a), norm, singular(b), _fro(b))
        trace = (w.sum(-1) - np.trace(a, axis1=-2, axis2=-1))[..., None, None]
        j.residual("the eigenvalues sum to the trace", 0, trace, norm * n, trace, _fro(b) * n)
    elif name in ("linalg_eigh", "_linalg_eigh"):
        if len(outs) < 2 or outs[1].numel() == 0:
            return
        h = formulas.hermitian(a, str(bound.get("UPLO", "L")).upper() == "U")
        w, v = _np(outs[0]), _np(outs[1])
        j.residual("A Q = Q diag(eigenvalues)", 1, h @ v - v * w[..., None, :], _fro(h))
        j.residual("Q unitary", 1, _eye_off(v), np.ones(w.shape[:-1]))
    elif name in ("linalg_svd", "_linalg_svd", "svd"):
        if outs[0].numel() == 0 or (name == "svd" and bound.get("compute_uv") is False):
            return
        u, s, vh = _np(outs[0]), _np(outs[1]), _np(outs[2])
        if name == "svd":
            vh = _mh(vh)
        k = s.shape[-1]
        u, vh = u[..., :, :k], vh[..., :k, :]
        j.residual("U diag(S) Vh = A", 0, (u * s[..., None, :]) @ vh - a, norm)
        j.residual("U has orthonormal columns", 0, _eye_off(u), np.ones(s.shape[:-1]))
        j.residual("Vh has orthonormal rows", 2, _eye_off(_mh(vh)), np.ones(s.shape[:-1]))
    elif name in ("linalg_qr", "qr"):
        q, r = _np(outs[0]), _np(outs[1])
        j.exact("R is upper triangular", 1, np.tril(r, -1) != 0)
        if np.iscomplexobj(r):
            d = np.arange(min(r.shape[-2:]))
            j.exact("R has a real diagonal", 1, r[..., d, d].imag != 0)
        if q.size == 0:
            return  # mode 'r'
        j.residual("Q R = A", 0, q @ r - a, norm)
        j.residual("Q has orthonormal columns", 0, _eye_off(q), np.ones(a.shape[:-2]))
    elif name == "geqrf":
        h, tau = _np(outs[0]), _np(outs[1])
        k = min(m, n)
        q = formulas.householder_q(h, tau, m)[..., :, :k]
        j.residual("Q R = A, Q the product of the Householder reflectors", 0, q @ np.triu(h)[..., :k, :] - a, norm)
    elif name == "linalg_lu":
        p, lower, upper = _np(outs[0]), _np(outs[1]), _np(outs[2])
        _lu_form(j, lower, upper, 1, 2)
        if p.size:
            j.exact("P is a permutation matrix", 0, ~np.isin(p, (0.0, 1.0)))
            j.exact("P is a permutation matrix", 0, (p.sum(-1) != 1) | (p.sum(-2) != 1))
        else:
            p = np.eye(m)
        j.residual("P L U = A", 1, p @ lower @ upper - a, _fro(lower) * _fro(upper))
    elif name in ("linalg_lu_factor", "linalg_lu_factor_ex"):
        lu, piv = _np(outs[0]), outs[1].detach().cpu().numpy()
        k = min(m, n)
        lower = np.tril(lu, -1)[..., :, :k] + np.eye(m, k)
        upper = np.triu(lu)[..., :k, :]
        if bound.get("pivot", True) is not False:
            rows = np.arange(1, k + 1)
            j.exact("pivots are 1-indexed rows at or below their own", 1, (piv < rows) | (piv > m))
            if j.found:
                return
            p = formulas.pivots_permutation(piv, m)
        else:
            p = np.eye(m)
        j.residual("P L U = A", 0, p @ lower @ upper - a, _fro(lower) * _fro(upper))


NAMES = frozenset(
    {
        "linalg_eig",
        "_linalg_eig",
        "linalg_eigvals",
        "_linalg_eigvals",
        "linalg_eigh",
        "_linalg_eigh",
        "linalg_svd",
        "_linalg_svd",
        "svd",
        "linalg_qr",
        "qr",
        "geqrf",
        "linalg_lu",
        "linalg_lu_factor",
        "linalg_lu_factor_ex",
    }
)


def records(op, inputs, result) -> list[Record]:
    """A failing record for the first factorization invariant the result breaks, else []."""
    name = op.base_name
    if name not in NAMES or not inputs or result is None:
        return []
    try:
        bound = bind_arguments(op, *inputs)
    except Exception:  # noqa: BLE001 - an argument this check cannot read: no opinion
        return []
    a = bound.get("A", bound.get("self", bound.get("input")))
    outs = list(result) if isinstance(result, (tuple, list)) else [result]
    tensors = [t for o in outs for t in leaves(o)]
    if not isinstance(a, torch.Tensor) or not _judged(a) or len(tensors) != len(outs):
        return []
    if any(t.device.type == "meta" or t.layout != torch.strided for t in tensors):
        return []
    j = _Judge(lambda i: f"output[{i}]" if len(outs) > 1 else "output", outs[0].dtype, max(a.shape[-2:]))
    try:
        _check(name, bound, outs, j)
    except (ValueError, IndexError, np.linalg.LinAlgError):
        return []  # factors of a shape the contract does not give: the comparison with golden speaks
    return j.found
