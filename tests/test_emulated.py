"""conform's device paths against the emulated accelerator (conform.backends.emulated).

The device is a PrivateUse1 backend built from C++ on first use; these tests build it once per
session and skip only where no C++ compiler or ninja is present. Anything that poisons a process
(a forked child of a used device, a device-side assert) runs in a subprocess, not in a test worker.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest
import torch

import opdb
from cli_helpers import cells, conform_env, conform_here
from conform.outcomes import Outcome as O
from conform.run.execute import run_case
from conftest import once_per_session
from generators.case import Case
from generators.case import TensorSpec as T


@pytest.fixture(scope="session")
def emu():
    from conform.backends import emulated

    try:
        emulated.load()
    except emulated.EmulatorUnavailable as e:
        if "compiler" in str(e) or "ninja" in str(e):
            pytest.skip(f"the emulated device cannot be built here: {e}")
        raise
    return emulated.EmulatedBackend()


@pytest.fixture
def fallback_on(monkeypatch):
    monkeypatch.setenv("CONFORM_EMU_FALLBACK", "1")


@pytest.fixture
def fallback_off(monkeypatch):
    monkeypatch.delenv("CONFORM_EMU_FALLBACK", raising=False)


def f32(*shape, dtype="float32", seed=1, **kw):
    return T(tuple(shape), dtype, seed=seed, **kw)


def run(name, *args, backend, **kwargs):
    return run_case(opdb.lookup(name), Case(name, args, kwargs), backend)


def test_native_kernel_passes_forward_and_backward(emu, fallback_off):
    r = run("aten::mul.Tensor", f32(3, 4), f32(3, 4, seed=2), backend=emu)
    assert r.outcome == O.PASS and not r.invalid, r.message


def test_op_served_by_the_fallback_is_fallback_naming_the_aten_op(emu, fallback_on):
    # on the torch.ops path the fallback's C++ warning never reaches Python: only the dispatcher can tell
    for _ in range(2):  # the fallback's warning is warn-once; the dispatcher answers every time
        r = run("aten::erfinv", f32(3, 4, values="open_unit"), backend=emu)
        assert r.outcome == O.FALLBACK and r.phase == "forward"
        assert "'aten::erfinv.out'" in r.message


def test_backward_alone_falling_back_is_fallback(emu, fallback_on):
    # tanh has a native kernel; its backward (tanh_backward) does not
    r = run("aten::tanh", f32(3, 4), backend=emu)
    assert r.outcome == O.FALLBACK and r.phase == "backward"
    assert "'aten::tanh_backward.grad_input'" in r.message and "tanh.out" not in r.message


def test_no_fallback_is_not_implemented(emu, fallback_off):
    r = run("aten::erfinv", f32(3, 4, values="open_unit"), backend=emu)
    assert r.outcome == O.NOT_IMPLEMENTED
    assert (
        "NotImplementedError: The operator 'aten::erfinv.out' is not currently implemented for the emu device"
        in r.message
    )


@pytest.mark.parametrize(
    ("dtype", "text"),
    [
        ("float64", "Cannot convert a MPS Tensor to float64 dtype as the MPS framework doesn't support float64"),
        ("bfloat16", "MPS BFloat16 is only supported on MacOS 14 or newer"),
        ("complex64", "MPS complex types are only supported on MacOS 14.0 or newer"),
    ],
)
def test_dtypes_mps_rejects_are_unsupported_dtype(emu, fallback_off, dtype, text):
    # the emulator raises MPS's own texts: the MPS backend's patterns must recognise them
    r = run("aten::add.Tensor", f32(3, dtype=dtype), f32(3, dtype=dtype, seed=2), backend=emu)
    assert r.outcome == O.UNSUPPORTED_DTYPE, r.message
    assert r.message == f"TypeError: {text}" or r.message.startswith(f"TypeError: {text}")


def test_bfloat16_works_on_an_emulated_macos_14(emu, fallback_off, monkeypatch):
    monkeypatch.setenv("CONFORM_EMU_MACOS", "14")
    r = run("aten::add.Tensor", f32(3, dtype="bfloat16"), f32(3, dtype="bfloat16", seed=2), backend=emu)
    assert r.outcome == O.PASS, r.message


def _python(script: str, **env) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(script)],
        env=conform_env(**env),
        capture_output=True,
        text=True,
        timeout=300,
    )


# What poisons a process, in one subprocess for the three tests below (each paid torch's import
# and the device's load again): a child forked while the device is loaded but unused, then the
# device used and another child forked, then a device-side assert and the calls after it.
POISONING = """
    import os, torch
    from conform.backends import emulated
    emulated.load()

    def fork(tag):
        pid = os.fork()
        if pid == 0:
            try:
                print(tag, "child:", torch.ones(2).to("emu").sum().item(), torch.emu.is_initialized(), flush=True)
                os._exit(0)
            except RuntimeError as e:
                print(tag, "child error:", e, flush=True)
                os._exit(3)
        print(tag, "exit", os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]), flush=True)

    fork("loaded:")
    torch.ones(2).to("emu")
    fork("used:")

    import opdb
    from conform.backends.emulated import EmulatedBackend
    from conform.run.execute import run_case
    from generators.case import Case, TensorSpec as T
    emu = EmulatedBackend()
    add = Case("aten::add.Tensor", (T((3,), "float32", seed=1), T((3,), "float32", seed=2)))
    print("before:", run_case(opdb.lookup("aten::add.Tensor"), add, emu).outcome)
    bad = Case("aten::index_select", (T((5, 3), "float32", seed=1), 0, T((4,), "int64", values="index", low=3, high=9, seed=2)))
    r = run_case(opdb.lookup("aten::index_select"), bad, emu)
    print("assert:", r.invalid)
    for _ in range(2):
        r = run_case(opdb.lookup("aten::add.Tensor"), add, emu)
        print("after:", r.outcome, r.message.splitlines()[0])
"""


@pytest.fixture(scope="module")
def poisoned(emu, request, tmp_path_factory) -> str:
    """POISONING's output, stdout then stderr (one subprocess in the whole test session)."""

    def make(folder):
        p = _python(POISONING)
        return p.stdout + p.stderr

    return once_per_session(request, tmp_path_factory, "emu-poisoning", make)[1]


def test_forked_child_of_a_used_device_cannot_use_it(poisoned):
    assert (
        "used: child error: Cannot re-initialize emu in forked subprocess. To use emu with multiprocessing, you must use the 'spawn' start method"
        in poisoned
    ), poisoned
    assert "used: exit 3" in poisoned


def test_forked_child_of_a_process_that_only_loaded_the_device_can_use_it(poisoned):
    assert "loaded: child: 2.0 True" in poisoned and "loaded: exit 0" in poisoned, poisoned


def test_device_assert_is_sticky_for_the_rest_of_the_process(poisoned):
    assert "before: pass" in poisoned and "assert: True" in poisoned, poisoned
    assert poisoned.count("after: device_error RuntimeError: emu error: device-side assert triggered") == 2, poisoned


def test_conform_run_on_the_emulated_device(emu, tmp_path, monkeypatch):
    db = tmp_path / "emu.db"
    ops = "aten::mul.Tensor,aten::erfinv,aten::tanh"
    cmd = [
        sys.executable,
        "-m",
        "conform.cli",
        "run",
        "--device",
        "emu",
        "--ops",
        ops,
        "--dtypes",
        "float32,float64",
        "--examples",
        "2",
        "-q",
        "--db",
        str(db),
    ]
    proc = subprocess.run(
        cmd, cwd=tmp_path, env=conform_env(CONFORM_EMU_FALLBACK="1"), capture_output=True, text=True, timeout=600
    )
    assert "unknown device 'emu'" not in proc.stderr, (
        "the installed conform predates the emu entry point: reinstall it (pip install -e .)"
    )
    assert proc.returncode in (0, 1), proc.stdout + proc.stderr
    got = {(op, dt): outcome for op, dt, outcome in cells(db)}
    assert got[("aten::mul.Tensor", "float32")] == "pass"
    assert got[("aten::erfinv", "float32")] == "fallback"
    assert got[("aten::tanh", "float32")] == "fallback"
    assert {got[(op, "float64")] for op in ops.split(",")} == {"unsupported_dtype"}
    # and the rest of the pipeline takes an emu run like any other (in this process: they read the store)
    monkeypatch.setenv("CONFORM_EMU_FALLBACK", "1")

    def cli(*args):
        return conform_here(*args, "--db", db, cwd=tmp_path, check=True).stdout

    assert '"backend": "emu"' in cli("report", "--format", "json")
    cli("site", "--out", str(tmp_path / "site"))
    assert "aten::erfinv" in (tmp_path / "site" / "index.html").read_text() or any(
        "erfinv" in f.name for f in (tmp_path / "site").rglob("*")
    )
    cli("expectations", "--from-run", "latest", "-o", str(tmp_path / "expected.toml"))
    cli("gate", "--baseline", str(tmp_path / "expected.toml"))


def test_ops_whose_kernel_is_the_fallback_itself_count_as_fallback(emu, fallback_off):
    # MPSFallback.mm registers its CPU fallback as the MPS kernel of a few ops (linalg_svd, col2im):
    # the dispatch table shows a kernel, the backend's always_fallback_ops says what it is
    from conform.backends.emulated import EmulatedBackend

    class SvdLikeMul(EmulatedBackend):
        always_fallback_ops = ("aten::mul.Tensor",)

    r = run("aten::mul.Tensor", f32(3, 4), f32(3, 4, seed=2), backend=SvdLikeMul())
    assert r.outcome == O.FALLBACK and "'aten::mul.Tensor'" in r.message


def test_trace_names_the_op_that_fell_back_not_the_composites_on_the_way(emu, fallback_on):
    # linspace.Tensor_Tensor's shared kernel calls item() (an implicit composite, then a native
    # _local_scalar_dense) and linspace.out, which only the fallback serves
    import torch

    from conform.run.dispatch import FallbackTrace

    start, end = torch.tensor(0.0).to("emu"), torch.tensor(1.0).to("emu")
    with FallbackTrace(emu.device) as trace:
        out = torch.ops.aten.linspace.Tensor_Tensor(start, end, 5, device=emu.device)
    assert trace.fallback == ["aten::linspace.out"]
    assert out.cpu().tolist() == [0.0, 0.25, 0.5, 0.75, 1.0]


def test_without_a_compiler_the_device_is_unavailable_in_one_line(tmp_path):
    cmd = [
        sys.executable,
        "-m",
        "conform.cli",
        "run",
        "--device",
        "emu",
        "--ops",
        "aten::add.Tensor",
        "-n",
        "1",
        "--db",
        str(tmp_path / "x.db"),
    ]
    proc = subprocess.run(
        cmd, cwd=tmp_path, env=conform_env(CXX="no-such-compiler-here"), capture_output=True, text=True, timeout=300
    )
    assert proc.returncode == 2
    assert proc.stderr.count("\n") == 1 and "Traceback" not in proc.stderr
    assert "no C++ compiler ('no-such-compiler-here' is not on PATH" in proc.stderr, proc.stderr


def test_python_scalars_reach_native_kernels_as_cpu_float64_without_a_dtype_refusal(emu, fallback_off):
    # mul.Scalar's shared kernel wraps 0.5 in a 0-d float64 CPU tensor for mul.Tensor: only
    # tensors on the device are subject to the device's dtype rules
    r = run("aten::mul.Scalar", f32(3, 4), 0.5, backend=emu)
    assert r.outcome == O.PASS, r.message


# -- the verdict rule on the emulated device (tests/emu_kernels.py gives it a native gelu) ------
# The CPU's vectorised float32 gelu gives NaN for +-inf where float64 gives inf and 0.
GELU_INF = Case("aten::gelu", (T((36,), "float32", data=(float("inf"), float("-inf"), 1.0) * 12),))


def _cpu_gelu_nan_for_inf() -> bool:
    """Whether this CPU's float32 gelu vector loop gives NaN for +inf (AVX-512 builds do; AVX2
    gives inf, as float64 does): the reference findings below need a CPU reference off golden."""
    return bool(torch.nn.functional.gelu(torch.full((64,), float("inf")))[0].isnan())


needs_gelu_cpu_bug = pytest.mark.skipif(
    not _cpu_gelu_nan_for_inf(),
    reason="this CPU's float32 gelu agrees with float64 at inf (no AVX-512 vector loop): no CPU deviation to find",
)


def _emu_gelu(flavour):
    import tests.emu_kernels as k

    return {"cpu": k.EmuCPUGelu, "exact": k.EmuExactGelu, "off": k.EmuOffGelu}[flavour]()


@needs_gelu_cpu_bug
def test_device_agreeing_with_the_cpu_passes_where_golden_disagrees_with_a_reference_finding(emu, fallback_off):
    # fallback off: the cell can only pass through the device's own gelu and gelu_backward kernels
    r = run_case(opdb.lookup("aten::gelu"), GELU_INF, _emu_gelu("cpu"))
    assert r.outcome == O.PASS, r.message
    assert r.finding and r.finding["kind"] == "reference" and r.finding["phase"] == "forward", r.finding
    assert r.finding["ref_golden_err"] == float("inf") and "NaN" in r.finding["message"]


@needs_gelu_cpu_bug
def test_device_disagreeing_with_the_cpu_but_close_to_golden_passes_and_names_the_cpu(emu, fallback_off):
    r = run_case(opdb.lookup("aten::gelu"), GELU_INF, _emu_gelu("exact"))
    assert r.outcome == O.PASS, r.message
    assert r.finding and r.finding["kind"] == "cpu_wrong", r.finding
    assert "CPU reference is wrong here" in r.message
    assert r.finding["ref_golden_err"] == float("inf") and r.finding["device_golden_err"] < 1e-6


def test_device_far_from_the_cpu_and_from_golden_fails(emu, fallback_off):
    for case in (GELU_INF, Case("aten::gelu", (f32(4, 9),))):
        r = run_case(opdb.lookup("aten::gelu"), case, _emu_gelu("off"))
        assert r.outcome == O.MISMATCH and r.phase == "forward", r.message
        assert "(golden float64)" in r.message and r.device_golden_err >= 0.5 - 1e-6, r.message


def _findings(db):
    import json
    import sqlite3

    with sqlite3.connect(db) as c:
        rows = c.execute(
            "SELECT o.qualname, r.dtype, r.outcome, r.findings, r.message FROM results r JOIN ops o ON o.id = r.op_id"
        ).fetchall()
    return [(q, dt, outcome, sorted({f["kind"] for f in json.loads(fs or "[]")}), m) for q, dt, outcome, fs, m in rows]


@needs_gelu_cpu_bug
@pytest.mark.parametrize(("flavour", "kind"), [("cpu", "reference"), ("exact", "cpu_wrong")])
def test_conform_run_on_the_emulated_device_stores_the_finding_parity_first_gives(emu, tmp_path, flavour, kind):
    # the whole path: fork server, clean device processes, hypothesis finding infinities in a
    # vector block, the verdict, the store
    backend = {"cpu": "EmuCPUGelu", "exact": "EmuExactGelu"}[flavour]
    db = tmp_path / "emu.db"
    cmd = [sys.executable, "-m", "conform.cli", "run", "--device", f"tests.emu_kernels:{backend}", "--ops", "aten::gelu",
           "--dtypes", "float32", "--examples", "40", "--seed", "3", "-n", "1", "-q", "--no-bench", "--db", str(db)]  # fmt: skip
    proc = subprocess.run(cmd, cwd=tmp_path, env=conform_env(), capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    rows = [r for r in _findings(db) if r[0] == "aten::gelu"]  # the pattern takes gelu.out too
    assert [r[:3] for r in rows] == [("aten::gelu", "float32", "pass")], rows
    assert kind in rows[0][3], rows


def test_views_keep_their_device_strides_on_the_way_back(emu, fallback_off):
    # Tensor.to("cpu") makes a non-dense view contiguous: expand's stride 0 and a slice's gaps
    # came back as a contiguous result, and the stride check blamed the device for the copy
    x = emu.to_device(torch.arange(12.0).reshape(3, 4))
    for view in (x[:, None, :].expand(3, 2, 4), x[:, ::2], x[1:, 1:], x.t()):
        back = emu.to_cpu(view)
        assert back.stride() == view.stride() and torch.equal(back, view.to("cpu"))
    for name, args in (
        ("aten::expand", (f32(3, 1), [3, 5])),
        ("aten::slice.Tensor", (f32(4, 6), 1, 1, 5, 2)),
    ):
        r = run(name, *args, backend=emu)
        assert r.outcome == O.PASS, r.message
