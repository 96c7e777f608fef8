"""Expectations files: reading, validating (FILE:LINE messages), conditions, writing from a run."""

from __future__ import annotations

import textwrap
from types import SimpleNamespace

import pytest

from conform.ci import expectations as ex
from conform.cli.main import main
from conform.results import CellResult
from conform.store import Store

ENV_M1 = {
    "torch_version": "2.3.1",
    "os": "macOS",
    "os_version": "14.4.1",
    "backend": "mps",
    "device_name": "Apple M1 Pro",
}
ENV_M3 = {
    "torch_version": "2.13.0",
    "os": "macOS",
    "os_version": "15.1",
    "backend": "mps",
    "device_name": "Apple M3 Max",
}

GOOD = """\
[defaults]
expected = "pass"
ops = ["aten::nonzero", "add.Tensor", "aten::sum*"]

[[expect]]
op = "aten::nonzero"
dtypes = ["float16", "bfloat16"]
outcome = "not_implemented"
reason = "no MPS kernel for half"
issue = "https://github.com/pytorch/pytorch/issues/77764"
torch = ">=2.1,<2.5"
os_version = ">=14"
chip = "Apple M1*"

[[expect]]
op = "aten::sum*"
outcome = ["mismatch", "pass"]
reason = "accumulates in half"

[[expect]]
op = "aten::sum.dim_IntList"
dtypes = "*"
outcome = "pass"
reason = "fixed: the last matching entry wins"
"""


def cli(*args: str) -> int:
    """`conform ARGS` in this process: its exit status."""
    try:
        main(list(args))
    except SystemExit as e:
        return 0 if e.code is None else e.code
    return 0


def load_text(tmp_path, text: str, name: str = "exp.toml"):
    p = tmp_path / name
    p.write_text(textwrap.dedent(text))
    return p, ex.load(p)


def test_a_cell_expects_what_its_last_matching_entry_says_under_its_conditions(tmp_path):
    _, e = load_text(tmp_path, GOOD)
    assert e.ops == ("aten::nonzero", "aten::add.Tensor", "aten::sum*")
    outcomes, entry = e.expected("aten::nonzero", "float16", ENV_M1)
    assert outcomes == ("not_implemented",) and entry.issue.endswith("77764") and entry.line == 5
    # another chip, or a torch outside the range: the entry does not apply, the default does
    assert e.expected("aten::nonzero", "float16", ENV_M3) == (("pass",), None)
    assert e.expected("aten::nonzero", "float16", dict(ENV_M1, torch_version="2.5.0"))[0] == ("pass",)
    assert e.expected("aten::nonzero", "float32", ENV_M1)[0] == ("pass",)  # dtype not listed
    assert e.expected("aten::sum.default", "float16", ENV_M3)[0] == ("mismatch", "pass")
    assert e.expected("aten::sum.dim_IntList", "float16", ENV_M3)[0] == ("pass",)
    assert e.covers("aten::sum.out", "int64") and not e.covers_op("aten::mul.Tensor")
    assert e.named_ops() == ["aten::nonzero", "aten::add.Tensor"]


def test_ops_default_to_the_ops_the_entries_name(tmp_path):
    _, e = load_text(tmp_path, '[[expect]]\nop = "erfinv"\noutcome = "not_implemented"\n')
    assert e.ops == ("aten::erfinv",) and e.dtypes is None


@pytest.mark.parametrize(
    "text, line, words",
    [
        ('[defaults]\nexpected = "pas"\n', 2, "unknown outcome 'pas'; did you mean 'pass'?"),
        (
            '[[expect]]\nop = "a"\noutcome = "pass"\n\n[[expect]]\nop = "b"\noutcome = "pass"\ndtype = "float16"\n',
            8,
            "unknown key 'dtype' in [[expect]]",
        ),
        ('[[expect]]\nop = "a"\noutcome = "pass"\n[[expect]]\nop = "b"\n', 4, "[[expect]] entry without 'outcome'"),
        ('[[expect]]\nop = "a"\noutcome = "pass"\ntorch = "2.1"\n', 4, "bad version range for 'torch'"),
        (
            '[[expect]]\nop = "a"\noutcome = "pass"\ndtypes = ["flot16"]\n',
            4,
            "unknown dtype 'flot16'; did you mean 'float16'?",
        ),
        ('[defaults]\nops = "aten::add"\n', 2, "'ops' must be a list"),
        ("[defaults]\n\n[expected]\nx = 1\n", 3, "unknown table or key 'expected'"),
        ('[[expect]]\nop = "a"\noutcome = "pass"\nreason = "unterminated\n', 4, "Illegal character"),
        ('[[expect]]\nop = "a"\noutcome = = "pass"\n', 3, "Invalid value"),
    ],
)
def test_a_malformed_file_is_reported_with_its_file_and_line(tmp_path, text, line, words):
    p = tmp_path / "bad.toml"
    p.write_text(text)
    with pytest.raises(ex.ExpectationsError) as e:
        ex.load(p)
    assert str(e.value).startswith(f"{p}:{line}: "), str(e.value)
    assert words in str(e.value)


def test_the_cli_says_file_and_line_and_exits_2(tmp_path, capsys):
    p = tmp_path / "bad.toml"
    p.write_text('[[expect]]\nop = "aten::add.Tensor"\noutcome = "mismatched"\n')
    assert cli("expectations", "--check", str(p)) == 2
    err = capsys.readouterr().err
    assert err.strip() == f"conform: error: {p}:3: unknown outcome 'mismatched'; did you mean 'mismatch'?"
    assert cli("gate", "--baseline", str(p), "--db", str(tmp_path / "none.db")) == 2


@pytest.mark.parametrize(
    "spec, yes, no",
    [
        (">=2.1,<2.5", ["2.1", "2.4.1+cpu", "2.1.0a0+git123"], ["2.0.1", "2.5.0", "2.13.0"]),
        ("==2.13.*", ["2.13.0+cpu", "2.13.1"], ["2.1.3", "2.14.0"]),
        ("!=2.13.*", ["2.12.0"], ["2.13.0"]),
        (">=14", ["14", "14.4.1", "15.0"], ["13.6.7", ""]),
        ("<2.14", ["2.13.9"], ["2.14.0.dev20250101+cpu"]),  # a nightly of 2.14 is 2.14
        (
            ">=6.1",
            ["6.1.0-13-amd64", "6.18.44-fc-v1147"],
            ["5.15.0-91-generic"],
        ),  # Linux kernels: not PEP 440, read by their numbers
    ],
)
def test_version_ranges(spec, yes, no):
    r = ex.VersionRange.parse(spec)
    assert all(r.contains(v) for v in yes), [v for v in yes if not r.contains(v)]
    assert not any(r.contains(v) for v in no), [v for v in no if r.contains(v)]


def _fake_specs(names):
    return [SimpleNamespace(qualname=q, variant="functional", family="other", tags=(), schema="") for q in names]


def make_run(
    store: Store, cells: dict, *, backend="cpu", device_name="Test CPU", state="finished", options=None
) -> int:
    """A stored run with these {(op, dtype): outcome} cells, built without running anything."""
    env = {
        "fingerprint": f"{backend}/{device_name}",
        "torch_version": "2.13.0",
        "os": "Linux",
        "os_version": "6.1",
        "backend": backend,
        "device_name": device_name,
    }
    run_id = store.start_run(
        env,
        options=options if options is not None else {"derandomize": True},
        seed=0,
        ops_total=0,
        cells_planned=len(cells),
    )
    store.op_ids(_fake_specs(sorted({op for op, _ in cells})))
    for (op, dtype), outcome in cells.items():
        r = {"op": op, "dtype": dtype, "outcome": outcome, "message": f"{op} {outcome} here\nsecond line"}
        if outcome != "pass":
            r["repro"] = f"# reproduce {op}\nimport torch\n"
        store.record_result(run_id, CellResult(**r))
    store.set_run_state(run_id, state)
    return run_id


def test_from_run_writes_a_file_that_reads_back_and_expects_exactly_that_run(tmp_path, capsys):
    db = tmp_path / "r.db"
    store = Store(db)
    cells = {
        ("aten::add.Tensor", "float32"): "pass",
        ("aten::nonzero", "float16"): "not_implemented",
        ("aten::nonzero", "bfloat16"): "not_implemented",
        ("aten::nonzero", "float32"): "pass",
        ("aten::sum.default", "float16"): "mismatch",
    }
    run_id = make_run(store, cells)
    store.close()
    out = tmp_path / "exp.toml"
    assert cli("expectations", "--from-run", "latest", "--db", str(db), "-o", str(out)) == 0
    e2 = ex.load(out)
    assert set(e2.ops) == {op for op, _ in cells} and set(e2.dtypes) == {"float16", "bfloat16", "float32"}
    grouped = {(x.op, x.outcomes): x.dtypes for x in e2.entries}
    assert grouped == {
        ("aten::nonzero", ("not_implemented",)): ("bfloat16", "float16"),
        ("aten::sum.default", ("mismatch",)): ("float16",),
    }
    assert e2.entries[0].reason == "aten::nonzero not_implemented here"  # the message's first line
    for (op, dtype), outcome in cells.items():
        assert e2.expected(op, dtype, {})[0] == (outcome,)
    # and gating that run against it finds nothing
    capsys.readouterr()
    assert cli("gate", "--baseline", str(out), "--db", str(db), "--run", str(run_id)) == 0, capsys.readouterr()


def test_from_run_of_an_unknown_run_is_bad_input(tmp_path, capsys):
    db = tmp_path / "r.db"
    make_run(Store(db), {("aten::add.Tensor", "float32"): "pass"})
    assert cli("expectations", "--from-run", "7", "--db", str(db)) == 2
    assert "no run 7" in capsys.readouterr().err


def test_strings_that_need_escaping_survive_the_round_trip(tmp_path):
    db = tmp_path / "r.db"
    store = Store(db)
    run_id = store.start_run(
        {"fingerprint": "x", "torch_version": "2.13.0", "backend": "cpu"},
        options={},
        seed=0,
        ops_total=0,
        cells_planned=1,
    )
    store.op_ids(_fake_specs(["aten::add.Tensor"]))
    nasty = 'expected "quoted" \\ back\tslash \x7f and ünïcode 😀 ' + "x" * 300
    store.record_result(
        run_id, CellResult(op="aten::add.Tensor", dtype="float32", outcome="device_error", message=nasty)
    )
    text = ex.from_run(store, run_id)
    e = ex.loads(text, "round.toml")
    assert e.entries[0].reason.startswith('expected "quoted" \\ back\tslash \x7f and ünïcode 😀 ')
    assert len(e.entries[0].reason) <= 200
