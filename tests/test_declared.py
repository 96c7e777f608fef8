"""Declared kernels: reading native_functions.yaml from wheels, storing, and the site's queries."""

from __future__ import annotations

import zipfile

import pytest
from click.testing import CliRunner

from conform.errors import ConformError
from conform.report import declared
from conform.results import CellResult
from conform.store import Store, queries

YAML = """
- func: add.Tensor(Tensor self, Tensor other, *, Scalar alpha=1) -> Tensor
  structured_delegate: add.out
  dispatch:
    SparseCPU, SparseCUDA: add_sparse
- func: add.out(Tensor self, Tensor other, *, Scalar alpha=1, Tensor(a!) out) -> Tensor(a!)
  structured: True
  ufunc_inner_loop:
    Generic: add (AllAndComplex, BFloat16, Half)
  dispatch:
    MPS: add_out_mps
- func: abs(Tensor self) -> Tensor
  dispatch:
    CompositeExplicitAutograd: abs
- func: relu(Tensor self) -> Tensor
  dispatch:
    CPU, CUDA: relu
    MPS: relu_mps
  autogen: relu.out
- func: dropout(Tensor input, float p, bool train) -> Tensor
  autogen: dropout.out
- func: _nested_values(Tensor self) -> Tensor
  dispatch: {}
- func: old_style(Tensor self) -> Tensor
  dispatch:
    Math: old_style
"""


def _wheel(tmp_path, version="2.4.1", name=None, yaml=YAML):
    path = tmp_path / (name or f"torch-{version}-cp310-none-macosx_11_0_arm64.whl")
    with zipfile.ZipFile(path, "w") as z:
        if yaml is not None:
            z.writestr(declared.YAML_IN_WHEEL, yaml)
        z.writestr("torch/version.py", f"__version__ = '{version}'\ndebug = False\ngit_version = 'abc{version}'\n")
    return path


@pytest.fixture(autouse=True)
def _private_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))


def test_dispatch_rules_of_native_functions_yaml():
    kernels, schemas = declared.declared_kernels(YAML)
    # a delegate gives the out= op's kernels (ufunc codegen: CPU and CUDA), beside the op's own sparse ones
    assert kernels["aten::add.Tensor"] == {
        "SparseCPU": "kernel",
        "SparseCUDA": "kernel",
        "MPS": "structured_delegate",
        "CPU": "structured_delegate",
        "CUDA": "structured_delegate",
    }
    assert kernels["aten::add.out"]["MPS"] == "kernel" and kernels["aten::add.out"]["CPU"] == "kernel"
    assert kernels["aten::relu"] == {"CPU": "kernel", "CUDA": "kernel", "MPS": "kernel"}  # comma-joined keys
    assert kernels["aten::abs"] == {"CompositeExplicitAutograd": "composite_explicit"}
    assert kernels["aten::dropout"] == {"CompositeImplicitAutograd": "composite_implicit"}  # no dispatch: decomposes
    assert kernels["aten::_nested_values"] == {}  # an explicit empty table: no kernel anywhere
    assert kernels["aten::old_style"] == {"CompositeImplicitAutograd": "composite_implicit"}  # pre-1.10 name
    assert kernels["aten::relu.out"] == {"CompositeExplicitAutograd": "composite_explicit"}  # autogen
    assert "aten::dropout.out" not in kernels  # no generated out= op for a decomposing op
    assert schemas["aten::relu"] == "aten::relu(Tensor self) -> Tensor"


def test_a_kernel_wins_over_composites_and_decomposition_counts_as_available():
    assert declared.how_on({"MPS": "kernel", "CompositeExplicitAutograd": "composite_explicit"}, "MPS") == "kernel"
    assert (
        declared.how_on({"CPU": "kernel", "CompositeExplicitAutograd": "composite_explicit"}, "MPS")
        == "composite_explicit"
    )
    assert declared.how_on({"CompositeImplicitAutograd": "composite_implicit"}, "XPU") == "composite_implicit"
    assert declared.how_on({"CPU": "kernel", "SparseMPS": "kernel"}, "MPS") is None
    assert declared.how_on({"CompositeImplicitAutogradNestedTensor": "composite_implicit"}, "MPS") is None


def test_wheel_is_read_without_installing_and_cached(tmp_path):
    rel = declared.read_wheel(_wheel(tmp_path))
    assert (rel.torch_version, rel.torch_git, rel.platform) == ("2.4.1", "abc2.4.1", "macosx_11_0_arm64")
    assert len(list((tmp_path / "cache" / "conform" / "declared").glob("*.json"))) == 1
    again = declared.read_wheel(_wheel(tmp_path).rename(tmp_path / "moved.whl"))  # same bytes, other name: parsed again
    assert again.kernels == rel.kernels


def test_wheel_without_the_yaml_is_a_clear_error(tmp_path):
    with pytest.raises(ConformError, match="has no torchgen/packaged"):
        declared.read_wheel(_wheel(tmp_path, yaml=None))
    bad = tmp_path / "torch-9.9-x.whl"
    bad.write_bytes(b"not a zip")
    with pytest.raises(ConformError, match="not a wheel"):
        declared.read_wheel(bad)


@pytest.fixture(params=["sqlite", "postgresql"])
def store(request, tmp_path):
    url = str(tmp_path / "c.db") if request.param == "sqlite" else request.getfixturevalue("postgres_url")
    s = Store(url)
    yield s
    s.close()


def test_coverage_per_version_and_key(store, tmp_path):
    for v in ("2.4.1", "1.12.1", "2.10.0"):
        declared.record(store, declared.read_wheel(_wheel(tmp_path, v)))
    rows = declared.declared_coverage(store, keys=("MPS", "XPU"))
    assert [r["torch_version"] for r in rows[::2]] == ["1.12.1", "2.4.1", "2.10.0"]  # numeric order
    mps = rows[0]
    # MPS: add.Tensor, add.out, relu have kernels; abs, dropout, old_style, relu.out decompose
    assert (mps["dispatch_key"], mps["ops_with_kernel"], mps["ops_via_composite"], mps["ops_total"]) == ("MPS", 3, 4, 8)
    assert rows[1]["ops_with_kernel"] == 0 and rows[1]["ops_via_composite"] == 4
    ops = declared.declared_ops(store, mps["environment_id"])
    assert ops["aten::add.Tensor"] == {
        "MPS": "structured_delegate",
        "CUDA": "structured_delegate",
        "CPU": "structured_delegate",
    }
    assert ops["aten::abs"]["XPU"] == "composite_explicit"
    assert ops["aten::_nested_values"] == {}


def test_a_release_candidate_comes_before_its_release(tmp_path):
    """Versions sort as PEP 440 says, here as on the site's columns: 2.13.0rc1 < 2.13.0 < 2.13.0+cpu."""
    store = Store(tmp_path / "c.db")
    for v in ("2.13.0", "2.13.0+cpu", "2.13.0rc1", "2.9.1"):
        declared.record(store, declared.read_wheel(_wheel(tmp_path, v)))
    assert [r["torch_version"] for r in declared.declared_coverage(store, keys=("MPS",))] == [
        "2.9.1",
        "2.13.0rc1",
        "2.13.0",
        "2.13.0+cpu",
    ]
    store.close()


def test_beside_measured_answers_by_name_or_by_id():
    """The command (ops by qualified name) and the site (ops by id) share one rule."""
    kernels = {
        "relu": {"MPS": "kernel"},
        "abs": {"CompositeExplicitAutograd": "composite_explicit"},
        "mm": {"CUDA": "kernel"},
    }
    outcomes = {
        "relu": {"pass", "mismatch"},
        "abs": {"pass"},
        "mm": {"crash"},
        "custom": {"pass"},
        "sum": {"unsupported_dtype"},
    }
    by_name = declared.beside_measured(kernels, outcomes, "MPS")
    assert by_name == {
        "declared_failing": {"relu": ["mismatch"]},
        "composite_passing": {"abs": "composite_explicit"},
        "undeclared_measured": ["custom", "sum"],
    }
    ids = {name: i for i, name in enumerate(outcomes)}
    by_id = declared.beside_measured(
        {ids[k]: v for k, v in kernels.items()}, {ids[k]: v for k, v in outcomes.items()}, "MPS"
    )
    assert by_id["declared_failing"] == {ids["relu"]: ["mismatch"]} and by_id["undeclared_measured"] == [
        ids["custom"],
        ids["sum"],
    ]
    assert declared.dispatch_key_of("cuda:1") == "CUDA"


def test_recording_a_release_again_replaces_it(store, tmp_path):
    a = declared.record(store, declared.read_wheel(_wheel(tmp_path)))
    smaller = YAML.split("- func: abs")[0]
    b = declared.record(
        store, declared.read_wheel(_wheel(tmp_path, name="torch-2.4.1-cp311-cp311-linux_x86_64.whl", yaml=smaller))
    )
    assert a == b  # one environment per torch version, whatever the platform of the wheel
    assert set(queries.declared_kernels(store, a)) == {"aten::add.Tensor", "aten::add.out"}


def test_declared_beside_measured(store, tmp_path):
    declared.record(store, declared.read_wheel(_wheel(tmp_path, "2.13.0")))
    env = {"fingerprint": "m" * 32, "torch_version": "2.13.0", "backend": "mps", "device_name": "Apple M1"}
    specs = [
        type(
            "S",
            (),
            {"qualname": q, "schema": "", "variant": "functional", "family": "other", "tags": (), "kernels": ()},
        )()
        for q in ("aten::relu", "aten::abs", "aten::dropout", "aten::custom")
    ]
    run = store.start_run(env, options={}, seed=0, ops_total=4, cells_planned=4)
    store.record_catalog(run, specs)
    for q, outcome in (
        ("aten::relu", "mismatch"),
        ("aten::abs", "pass"),
        ("aten::dropout", "pass"),
        ("aten::custom", "pass"),
    ):
        store.record_result(run, CellResult(op=q, dtype="float32", outcome=outcome))
    got = declared.declared_vs_measured(store, store.get_run(run).environment_id)
    assert got["dispatch_key"] == "MPS"
    assert got["declared_failing"] == {"aten::relu": ["mismatch"]}
    assert got["composite_passing"] == {"aten::abs": "composite_explicit", "aten::dropout": "composite_implicit"}
    assert got["undeclared_measured"] == ["aten::custom"]


def test_cli_stores_wheels_and_prints_the_table(tmp_path):
    from conform.cli.main import cli

    db = tmp_path / "c.db"
    runner = CliRunner()
    empty = runner.invoke(cli, ["declared", "--db", str(db)])
    assert empty.exit_code != 0
    (tmp_path / "wheels").mkdir()
    for v in ("1.13.1", "2.0.1"):
        _wheel(tmp_path / "wheels", v)
    out = runner.invoke(cli, ["declared", "--wheel", str(tmp_path / "wheels"), "--db", str(db), "--format", "markdown"])
    assert out.exit_code == 0, out.output
    lines = [line for line in out.output.splitlines() if line.startswith("| 1.13.1") or line.startswith("| 2.0.1")]
    assert len(lines) == 2 and "| 3 (37.5%) |" in lines[0]


def test_installed_torch_agrees_with_its_dispatcher():
    """The yaml rules reproduce what the running dispatcher has registered (CPU and composites)."""
    torch = pytest.importorskip("torch")
    rel = declared.read_installed()
    checked, wrong = 0, []
    for qualname, by_key in rel.kernels.items():
        for key in ("CPU", "CompositeImplicitAutograd", "CompositeExplicitAutograd"):
            try:
                real = torch._C._dispatch_has_kernel_for_dispatch_key(qualname, key)
            except RuntimeError:
                wrong.append((qualname, "not registered"))
                break
            said = by_key.get(key) in declared.KERNEL_HOWS if key == "CPU" else key in by_key
            checked += 1
            if real != said:
                wrong.append((qualname, key, real))
    assert checked > 5000 and not wrong, wrong[:10]
