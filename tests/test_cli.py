"""The spine end to end, as a user meets it: `conform run`, `conform report`, `conform ops`,
`pytest --pyargs conform.suite`, and one clear line with exit 2 for every kind of bad input."""

import json
import re
import sqlite3
import subprocess
import sys
from pathlib import Path

from cli_helpers import cells, conform_env, conform_here, damaged_database

FAILING = {
    "mismatch",
    "grad_mismatch",
    "meta_mismatch",
    "device_error",
    "missing_error",
    "crash",
    "timeout",
    "not_implemented",
}


def test_clean_cpu_run_has_no_false_alarm(clean_run):
    tmp, proc = clean_run
    assert proc.returncode == 0, proc.stderr
    assert "finished" in proc.stdout
    got = cells(tmp / "c.db")
    assert len(got) >= 20
    alarms = [c for c in got if c[2] in FAILING]
    assert not alarms, alarms
    assert sum(1 for c in got if c[2] == "pass") >= 15


def test_report_json_accounts_for_the_catalog(clean_run):
    tmp, _ = clean_run
    proc = conform_here("report", "--format", "json", "--db", tmp / "c.db", cwd=tmp, check=True)
    (env,) = json.loads(proc.stdout)["environments"]
    import torch

    assert env["torch_version"] == torch.__version__
    assert env["backend"] == "cpu"
    assert env["device_name"]
    assert env["ops_total"] == len(torch._C._jit_get_all_schemas()) - sum(
        1 for s in torch._C._jit_get_all_schemas() if not s.name.startswith("aten::")
    )
    assert 5 <= env["ops_exercised"] <= env["ops_total"]
    assert sum(env["cells"].values()) == len(cells(tmp / "c.db"))


def test_report_markdown_and_table(clean_run):
    tmp, _ = clean_run
    md = conform_here("report", "--format", "markdown", "--db", tmp / "c.db", cwd=tmp, check=True).stdout
    assert md.startswith("| torch |") and "cpu" in md
    table = conform_here("report", "--db", tmp / "c.db", cwd=tmp, check=True).stdout
    assert "exercised" in table and "pass" in table


def test_report_and_merge_start_without_torch(clean_run):
    # they read the store only: importing torch (and building the op catalog) was most of their
    # start-up, paid again by every such command a script or a CI job runs
    tmp, _ = clean_run
    code = (
        "import sys\n"
        "from conform import cli\n"
        "try:\n"
        "    cli.main(sys.argv[1:])\n"
        "finally:\n"
        "    print('torch imported:', 'torch' in sys.modules, file=sys.stderr)\n"
    )
    for args in (["report", "--db", str(tmp / "c.db")], ["merge", str(tmp / "c.db"), "-o", str(tmp / "merged.db")]):
        proc = subprocess.run(
            [sys.executable, "-c", code, *args], cwd=tmp, env=conform_env(), capture_output=True, text=True, timeout=300
        )
        assert proc.returncode == 0, (args, proc.stderr)
        assert "torch imported: False" in proc.stderr, (args, proc.stderr)


def test_run_records_the_environment_and_seed(clean_run):
    tmp, _ = clean_run
    with sqlite3.connect(tmp / "c.db") as c:
        seed, state, options = c.execute("SELECT seed, state, options FROM runs").fetchone()
        torch_git, python = c.execute("SELECT torch_git, python_version FROM environments").fetchone()
    assert seed == 3 and state == "finished"
    assert json.loads(options)["examples"] == 5
    assert torch_git and python


def _one_line_error(proc, *needles):
    assert proc.returncode == 2, (proc.returncode, proc.stdout, proc.stderr)
    err = proc.stderr.strip()
    assert "Traceback" not in err
    assert len(err.splitlines()) == 1, err
    for n in needles:
        assert n in err, err


def test_unknown_op_suggests_close_matches(tmp_path):
    _one_line_error(
        conform_here("run", "--ops", "aten::ad.Tensor", "--db", tmp_path / "c.db", cwd=tmp_path),
        "unknown op",
        "aten::add.Tensor",
    )
    assert not (tmp_path / "c.db").exists()


def test_unknown_dtype(tmp_path):
    _one_line_error(
        conform_here("run", "--ops", "aten::relu", "--dtypes", "float33", "--db", tmp_path / "c.db", cwd=tmp_path),
        "float33",
        "float32",
    )


def test_unavailable_device(tmp_path):
    from conform.backends.builtin import BUILTIN

    # whichever accelerator this machine lacks (a Mac has MPS, not CUDA; Linux has no MPS)
    absent = next(name for name in ("mps", "cuda", "xpu") if not BUILTIN[name]().is_available())
    _one_line_error(
        conform_here("run", "--ops", "aten::relu", "--device", absent, "--db", tmp_path / "c.db", cwd=tmp_path),
        absent,
        "not available",
    )


def test_unknown_device(tmp_path):
    _one_line_error(conform_here("run", "--ops", "aten::relu", "--device", "tpu9", cwd=tmp_path), "unknown device")


def test_garbage_database(tmp_path):
    db = tmp_path / "c.db"
    db.write_text("definitely not sqlite\n" * 50)
    _one_line_error(conform_here("report", "--db", db, cwd=tmp_path), "not a readable conform database")
    _one_line_error(
        conform_here("run", "--ops", "aten::relu", "--db", db, cwd=tmp_path), "not a readable conform database"
    )
    assert db.read_text().startswith("definitely not sqlite")


def test_every_command_refuses_a_damaged_database_and_writes_nothing(clean_run, tmp_path):
    good, _ = clean_run
    db = tmp_path / "damaged.db"
    before = damaged_database(db)
    commands = [
        ("report",),
        ("coverage",),
        ("site", "--out", tmp_path / "site"),
        ("expectations", "--from-run", "latest", "-o", tmp_path / "e.toml"),
        ("bench",),
        ("gate", "--baseline", Path(__file__).parent.parent / "ci" / "expectations-cpu.toml"),
        ("run", "--ops", "aten::relu", "--dtypes", "float32", "-n", "1"),
    ]
    for args in commands:  # in this process: each refuses before it writes or starts anything
        _one_line_error(
            conform_here(*args, "--db", db, cwd=tmp_path), "damaged.db is damaged: database disk image is malformed"
        )
    # as a baseline or a merge source, next to a good database
    _one_line_error(
        conform_here("gate", "--baseline", db, "--db", good / "c.db", cwd=tmp_path), "damaged.db is damaged"
    )
    _one_line_error(conform_here("merge", db, "-o", tmp_path / "all.db", cwd=tmp_path), "damaged.db is damaged")
    assert db.read_bytes() == before  # no new run, no WAL switch, nothing
    assert sorted(p.name for p in tmp_path.iterdir()) == ["damaged.db"]


def test_missing_database_for_report(tmp_path):
    _one_line_error(conform_here("report", "--db", tmp_path / "nope.db", cwd=tmp_path), "no conform database")


def test_ops_lists_the_catalog_with_counts(tmp_path):
    proc = conform_here("ops", "add*", cwd=tmp_path, check=True)
    assert "aten::add.Tensor" in proc.stdout and "by variant:" in proc.stdout and "by family:" in proc.stdout
    data = json.loads(conform_here("ops", "aten::add.Tensor", "--json", cwd=tmp_path, check=True).stdout)
    (op,) = [o for o in data["ops"] if o["qualname"] == "aten::add.Tensor"]
    assert op["variant"] == "functional" and "pointwise" in op["tags"] and "CPU" in op["kernels"]


def test_pytest_pyargs_entry_point_and_junit(tmp_path):
    """The suite runs under plain pytest too, with --junitxml for free. (`-p no:conform`: an
    environment where an older conform is installed still has its pytest11 entry point.)"""
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-p",
            "no:conform",
            "-p",
            "conform.plugin",
            "--pyargs",
            "conform.suite",
            "--conform-device",
            "cpu",
            "--conform-ops",
            "aten::relu,aten::neg",
            "--conform-dtypes",
            "float32",
            "--conform-examples",
            "3",
            "--conform-db",
            str(tmp_path / "c.db"),
            "-p",
            "no:cacheprovider",
            "--junitxml",
            str(tmp_path / "j.xml"),
            "-q",
        ],
        cwd=tmp_path,
        env=conform_env(),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    got = {(op, dt): o for op, dt, o in cells(tmp_path / "c.db")}
    assert got[("aten::relu", "float32")] == "pass"
    assert got[("aten::neg", "float32")] == "pass"
    assert "relu/float32" in (tmp_path / "j.xml").read_text()


def test_the_main_command_leaves_timings_for_the_performance_page(tmp_path):
    """`conform run` with no flag times the core ops after its sweep (README's first command)."""
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "conform.cli",
            "run",
            "--ops",
            "aten::abs,aten::add.Tensor,aten::mm",
            "--dtypes",
            "float32",
            "--examples",
            "3",
            "--db",
            "c.db",
        ],
        cwd=tmp_path,
        env=conform_env(),
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stderr
    assert re.search(r"^timed 3 cells: 6 timings stored in \d+ s$", proc.stdout, re.M), proc.stdout
    assert "timing pass: passing float32 cells of the core ops on the CPU (skip with --no-bench)" in proc.stderr
    with sqlite3.connect(tmp_path / "c.db") as c:
        timed = {r[0] for r in c.execute("SELECT o.qualname FROM timings t JOIN ops o ON o.id = t.op_id")}
    assert timed == {"aten::abs", "aten::add.Tensor", "aten::mm"}
    conform_here("site", "--db", "c.db", "--out", "site", cwd=tmp_path, check=True)
    assert "no timings" not in (tmp_path / "site" / "index.html").read_text()
    assert "No timings in this database" not in (tmp_path / "site" / "perf.html").read_text()
