"""opdb: the catalog must describe the installed torch faithfully, and selection must fail loudly."""

from __future__ import annotations

import json
import pickle

import pytest
import torch

import opdb
from opdb import UnknownOpError, catalog, counts, lookup, select
from opdb.rules import RulesError, expand_braces, load_entries, matching_entries, rules_for


def _aten_schemas():
    return [s for s in torch._C._jit_get_all_schemas() if s.name.startswith("aten::")]


def test_catalog_covers_every_aten_schema_once_sorted():
    specs = catalog()
    assert len(specs) == len(_aten_schemas())
    names = [s.qualname for s in specs]
    assert names == sorted(names)
    assert len(set(names)) == len(names)
    assert all(s.variant in opdb.VARIANTS and s.family in opdb.FAMILY_NAMES for s in specs)


def test_catalog_is_cached_but_callers_cannot_mutate_it():
    a = catalog()
    a.clear()
    assert len(catalog()) == len(_aten_schemas())


def test_add_tensor_functional_pointwise_core_with_cpu_kernel():
    op = lookup("aten::add.Tensor")
    assert op.variant == "functional"
    assert {"pointwise", "core"} <= set(op.tags)
    assert op.family == "pointwise"
    assert "CPU" in op.kernels
    assert [a.name for a in op.arguments] == ["self", "other", "alpha"]
    alpha = op.arguments[2]
    assert (alpha.type, alpha.default, alpha.kwarg_only) == ("Scalar", "1", True)
    assert op.resolve() is torch.ops.aten.add.Tensor


def test_inplace_writes_self():
    op = lookup("add_.Tensor")
    assert op.variant == "inplace"
    assert op.arguments[0].name == "self" and op.arguments[0].is_write
    assert op.arguments[0].type == "Tensor"  # alias annotation stripped
    assert not op.arguments[1].is_write
    assert op.returns == ("Tensor(a!)",)


def test_out_variant_has_out_arg():
    op = lookup("add.out")
    assert op.variant == "out"
    (out,) = op.out_args
    assert out.name == "out" and out.is_out and out.is_write and out.kwarg_only and out.type == "Tensor"
    assert out not in op.tensor_args


def test_native_types_are_kept():
    op = lookup("sum.dim_IntList")
    types = {a.name: a.type for a in op.arguments}
    assert types["dtype"] == "ScalarType?"
    assert types["dim"] == "int[1]?"
    conv = lookup("conv2d")  # list defaults "[1, 1]" need normalising before torchgen parses them
    assert {a.name: a.type for a in conv.arguments}["stride"] == "SymInt[2]"
    assert {a.name: a.type for a in lookup("index.Tensor").arguments}["indices"] == "Tensor?[]"


def test_torchscript_builtin_falls_back_to_jit_schema():
    op = lookup("aten::append.t")
    assert not op.parsed
    assert op.family == "torchscript"
    assert op.kernels == ()
    assert not op.rules.untestable  # runs through a one-node TorchScript graph
    assert op.resolve()([1.5], 2.0) == [1.5, 2.0]
    self_arg = op.arguments[0]
    assert self_arg.type == "t[]" and self_arg.is_write
    pop = lookup("aten::pop.Dict_default_str")
    assert pop.arguments[0].type == "Dict(str, t)"


def test_argument_order_matches_the_jit_schema():
    jit = {(s.name, s.overload_name): s for s in _aten_schemas()}
    for op in catalog():
        names = [a.name for a in jit[(op.name, op.overload)].arguments]
        assert [a.name for a in op.arguments] == names, op.qualname


def test_backward_ops_share_their_forward_family():
    assert lookup("convolution_backward").family == "conv"
    assert lookup("max_pool2d_with_indices_backward").family == "pooling"
    assert lookup("_softmax_backward_data").family == "activation"


def test_specs_travel_to_workers():
    op = lookup("add.Tensor")
    assert pickle.loads(pickle.dumps(op)) == op
    d = json.loads(json.dumps(op.to_dict()))
    assert d["qualname"] == "aten::add.Tensor" and d["rules"]["domain"] == "real"


# --- lookup / select ----------------------------------------------------------------------------


def test_lookup_spellings_agree():
    assert lookup("relu") is lookup("aten::relu")
    assert lookup("add.Tensor") is lookup("aten::add.Tensor")


def test_select_glob_and_bare_name():
    names = {s.qualname for s in select("add*")}
    assert {"aten::add.Tensor", "aten::add_.Tensor", "aten::addmm"} <= names
    bare = {s.qualname for s in select("add")}
    assert {"aten::add.Tensor", "aten::add.out", "aten::add.Scalar"} <= bare
    assert "aten::add_.Tensor" not in bare and "aten::addmm" not in bare
    assert [s.qualname for s in select("add.Tensor")] == ["aten::add.Tensor"]


def test_select_all_core_family_and_lists():
    assert len(select("all")) == len(catalog())
    core = select("core")
    assert core and all("core" in s.tags for s in core) and len(core) < len(catalog())
    linalg = select("family:linalg")
    assert linalg and {"aten::mm", "aten::linalg_svd"} <= {s.qualname for s in linalg}
    both = select("relu, family:linalg,relu")
    assert len(both) == len(linalg) + len(select("relu"))


def test_unknown_op_suggests_and_is_one_line():
    with pytest.raises(UnknownOpError) as e:
        select("ad.Tensor")
    msg = str(e.value)
    assert "\n" not in msg
    assert msg.startswith("unknown op 'aten::ad.Tensor'") and "aten::add.Tensor" in msg
    assert isinstance(e.value, ValueError)
    with pytest.raises(UnknownOpError, match="matches no op"):
        select("nosuchop*")
    with pytest.raises(UnknownOpError, match="unknown family"):
        select("family:linalgg")


def test_op_list_file(tmp_path):
    f = tmp_path / "ops.txt"
    f.write_text("# smoke set\nrelu\n\naten::mm  # matrix multiply\nadd.Tensor\n")
    expected = {s.qualname for s in select("relu") + select("mm")} | {"aten::add.Tensor"}
    assert [s.qualname for s in select(f"@{f}")] == sorted(expected)
    with pytest.raises(UnknownOpError, match=r"^cannot read op list .*missing.txt: No such file"):
        select(f"@{tmp_path / 'missing.txt'}")
    bad = tmp_path / "bad.txt"
    bad.write_text("relu\nrelux\n")
    with pytest.raises(UnknownOpError, match="relux"):
        select(f"@{bad}")


def test_counts_add_up():
    c = counts(catalog())
    assert c["total"] == len(catalog())
    assert sum(c["variant"].values()) == c["total"]
    assert sum(c["family"].values()) == c["total"]
    assert c["variant"]["out"] == sum(bool(s.out_args) for s in catalog())


def test_every_unparsed_schema_is_a_torchscript_builtin():
    # torchgen parses every dispatcher op once list defaults are normalised; what it cannot parse
    # is TorchScript's own list/dict/str builtins
    unparsed = [s for s in catalog() if not s.parsed]
    assert unparsed
    # get_gradients (distributed autograd) returns Dict(Tensor, Tensor), outside torchgen's grammar
    assert [s.qualname for s in unparsed if s.family != "torchscript"] == ["aten::get_gradients"]
    assert lookup("conv2d").parsed and lookup("conv2d").arguments[3].default == "[1, 1]"


# --- rules ----------------------------------------------------------------------------------------


def test_rules_attached_to_specs():
    assert lookup("log").rules.domain == "positive"
    assert lookup("log.out").rules.domain == "positive"
    assert lookup("log_softmax.int").rules.domain == "real"  # not caught by the log rule
    assert lookup("acosh").rules.domain == "above_one"
    assert lookup("empty.memory_format").rules.nondeterminism == "uninitialized"
    assert lookup("bernoulli").rules.nondeterminism == "seeded"  # from the tag, no file entry
    assert lookup("sort").rules.nondeterminism == "ties"
    assert not lookup("add.Tensor").rules.untestable and lookup("add.Tensor").rules.hint("reference")
    assert "Storage" in lookup("set_.source_Storage").rules.untestable


def test_rules_precedence_exact_beats_glob_and_later_wins(tmp_path):
    (tmp_path / "a.toml").write_text(
        '["aten::foo*"]\ndomain = "positive"\nreason = "glob"\n'
        '["aten::foo.bar"]\ndomain = "unit"\nreason = "exact"\n'
        '["aten::f*"]\ndomain = "small"\nreason = "shorter glob"\n'
    )
    (tmp_path / "b.toml").write_text(
        '["aten::foo*"]\nnondeterminism = "ties"\nreason = "later file"\n'
        '["aten::foo.baz"]\ntolerances = { float16 = [1e-2, 1e-3] }\ntolerance_reason = "fp16 accumulation"\n'
    )
    entries = load_entries(tmp_path)
    bar = rules_for("aten::foo.bar", entries=entries)
    assert (bar.domain, bar.nondeterminism) == ("unit", "ties")
    assert bar.hints["reasons"]["domain"] == "exact"
    baz = rules_for("aten::foo.baz", ("nondeterministic_seeded",), entries=entries)
    assert baz.domain == "positive" and baz.nondeterminism == "ties"  # file overrides the tag
    assert baz.tolerances["float16"] == opdb.Tolerance(1e-2, 1e-3)
    assert rules_for("aten::fox", entries=entries).domain == "small"


def test_rules_files_reject_mistakes(tmp_path):
    (tmp_path / "x.toml").write_text('["aten::relu"]\ndomian = "positive"\n')
    with pytest.raises(RulesError, match="x.toml.*domian"):
        load_entries(tmp_path)
    (tmp_path / "x.toml").write_text('["aten::relu"]\ndomain = "positve"\n')
    with pytest.raises(RulesError, match="positve"):
        load_entries(tmp_path)
    (tmp_path / "x.toml").write_text('["aten::relu"]\nuntestable = true\n')
    with pytest.raises(RulesError, match="reason"):
        load_entries(tmp_path)


def test_a_misspelt_or_mistyped_hint_fails_at_load_with_file_and_line(tmp_path):
    text = '# comment\n["aten::add.Tensor"]\nreason = "r"\nhints = { sign_of_zero = true }\n\n["aten::relu"]\n'
    (tmp_path / "y.toml").write_text(text + 'reason = "r"\nhints = { golden = false, sgin_of_zero = true }\n')
    with pytest.raises(
        RulesError, match=r"^y\.toml:8: \['aten::relu'\]: unknown hint 'sgin_of_zero'; known: .*sign_of_zero"
    ):
        load_entries(tmp_path)
    (tmp_path / "y.toml").write_text(text + 'hints.zero_dim = "high"\n')
    with pytest.raises(RulesError, match=r"^y\.toml:7: .*'zero_dim' must be a list of argument names, got 'high'"):
        load_entries(tmp_path)
    (tmp_path / "y.toml").write_text(text + 'hints = { golden = "no" }\n')
    with pytest.raises(RulesError, match=r"^y\.toml:7: .*'golden' must be true or false"):
        load_entries(tmp_path)
    (tmp_path / "y.toml").write_text(text + "hints = { golden = false }\n")
    relu = rules_for("aten::relu", entries=load_entries(tmp_path))
    assert relu.hint("golden") is False and relu.hint("strides") is True  # set, and the default
    with pytest.raises(KeyError):
        relu.hint("sgin_of_zero")  # a misspelling in code fails as loudly


def test_brace_expansion():
    assert expand_braces("aten::log{,_}{,.*}") == ["aten::log", "aten::log.*", "aten::log_", "aten::log_.*"]


def test_every_rule_key_matches_some_op_and_fast_matching_agrees_with_fnmatch():
    import fnmatch

    names = [s.qualname for s in catalog()]
    entries = load_entries()
    fast = matching_entries(names, entries)
    by_key: dict[tuple[str, str], bool] = {}
    for e in entries:
        slow = {n for n in names if fnmatch.fnmatchcase(n, e.pattern)}
        assert slow == {n for n, hits in fast.items() if e in hits}, e.pattern
        by_key[(e.source, e.key)] = by_key.get((e.source, e.key), False) or bool(slow)
    assert [k for k, hit in by_key.items() if not hit] == []  # a typo in a rules file selects nothing


def test_an_op_whose_kernel_assumes_its_callers_setup_gets_it_from_resolve():
    """_nnpack_spatial_convolution fails for every input when called first in a process
    ("NNPACK SpatialConvolution_updateOutput failed"): NNPACK is initialised by
    _nnpack_available(), which its caller in PyTorch asks first. The resolved op runs."""
    import subprocess
    import sys

    code = (
        "import torch, opdb\n"
        "x, w = torch.ones(1, 1, 3, 3), torch.ones(1, 1, 1, 1)\n"
        "print(opdb.lookup('aten::_nnpack_spatial_convolution').resolve()(x, w, None, [0, 0]).sum().item())\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    if "not compiled with NNPACK" in done.stderr:
        pytest.skip("this torch has no NNPACK")
    assert done.returncode == 0 and done.stdout.strip() == "9.0", done.stderr[-1000:]


def test_the_built_catalog_is_kept_on_disk_and_rebuilt_when_what_it_reads_changes(tmp_path, monkeypatch):
    import sys

    module = sys.modules["opdb.catalog"]  # (`opdb.catalog` is the function)
    # the build itself is tested above; here each build, counted, gives this process's catalog
    # (a real build is 1-2 s of CPU, and this test asks for five)
    real = module._catalog()
    monkeypatch.setenv(module.CACHE_ENV, str(tmp_path))
    built = []

    def build(schemas):
        built.append(1)
        return real

    monkeypatch.setattr(module, "_build_catalog", build)
    fresh = module._catalog.__wrapped__()
    assert built == [1] and len(list(tmp_path.glob("*.pickle"))) == 1
    assert module._catalog.__wrapped__() == fresh and built == [1]  # read back, not built
    # a kernel registered in this process (a library's) is another catalog: built again
    real_registrations = torch._C._dispatch_get_registrations_for_dispatch_key
    monkeypatch.setattr(
        torch._C,
        "_dispatch_get_registrations_for_dispatch_key",
        lambda key: [*real_registrations(key), "aten::abs"] if key == "CPU" else real_registrations(key),
    )
    assert module._catalog.__wrapped__() == fresh and built == [1, 1]
    monkeypatch.undo()
    # a damaged file is built again and replaced; "off" keeps nothing
    monkeypatch.setenv(module.CACHE_ENV, str(tmp_path))
    monkeypatch.setattr(module, "_build_catalog", build)
    for path in tmp_path.glob("*.pickle"):
        path.write_bytes(b"not a pickle")
    assert module._catalog.__wrapped__() == fresh and len(built) == 3
    assert module._catalog.__wrapped__() == fresh and len(built) == 3
    monkeypatch.setenv(module.CACHE_ENV, "off")
    assert module._catalog.__wrapped__() == fresh and len(built) == 4
    assert module._catalog.__wrapped__() == fresh and len(built) == 5
