"""The prose a newcomer reads first: README.md short and starting with the two commands that do
everything, every link and cited file in README.md and docs/ present, and no trace of one
machine or of how the project was developed anywhere in the tracked tree."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
SWEEP = "python3 -m pip install . && conform run --ops all"
TESTS = 'python3 -m pip install ".[test]" && python3 -m pytest'

LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)\)")
# a repository file named in an inline code span, optionally with a pytest node id
CITED = re.compile(
    r"`((?:conform|opdb|generators|benchmarks|tests|docs|ci|site)/[\w./-]+\.(?:py|toml|md|yml|cpp))(?:::(\w+))?`"
)
# Written so that this file does not match itself.
PROCESS_WORDS = re.compile(
    r"\bthe\s+brief\b|\b(?:this|last|previous|next)\s+session\b|\bissue\s+#?\d+|\bDESIGN\.md\b|\bSTYLE\.md\b"
    r"|/tm[p]/|/wor[k]/|\bsweep2\d\b",
    re.IGNORECASE,
)


def _prose() -> list[Path]:
    return [README, *sorted((ROOT / "docs").rglob("*.md"))]


def _tracked() -> list[Path]:
    try:
        out = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError):
        pytest.skip("not a git checkout: no list of tracked files")
    return [ROOT / p for p in out.decode().split("\0") if p]


def _without_fences(text: str) -> str:
    # example commands in fenced blocks name files of the reader's repository, not this one's
    return re.sub(r"^```.*?^```", "", text, flags=re.MULTILINE | re.DOTALL)


def test_readme_is_short_and_starts_with_the_two_commands():
    lines = README.read_text().splitlines()
    assert len(lines) <= 150, f"README.md has {len(lines)} lines"
    body = [line for line in lines[1:] if line.strip()]
    assert lines[0].startswith("# ") and body[:4] == ["```bash", SWEEP, TESTS, "```"], body[:4]


def test_ci_runs_the_readme_test_command_verbatim():
    assert TESTS in (ROOT / ".ci" / "run").read_text().splitlines()


def test_relative_links_in_readme_and_docs_resolve():
    broken = []
    for doc in _prose():
        for target in LINK.findall(doc.read_text()):
            if re.match(r"[a-z]+:", target) or target.startswith("#"):
                continue
            if not (doc.parent / target.split("#")[0]).exists():
                broken.append(f"{doc.relative_to(ROOT)}: {target}")
    assert not broken, "\n".join(broken)


def test_files_and_tests_cited_in_readme_and_docs_exist():
    missing = []
    for doc in _prose():
        for path, test in CITED.findall(_without_fences(doc.read_text())):
            where = ROOT / path
            if not where.exists():
                missing.append(f"{doc.relative_to(ROOT)}: {path}")
            elif test and not re.search(rf"^def {test}\(", where.read_text(), re.MULTILINE):
                missing.append(f"{doc.relative_to(ROOT)}: {path}::{test}")
    assert not missing, "\n".join(missing)


def test_no_machine_paths_or_process_words_in_the_tree():
    found = []
    for path in _tracked():
        try:
            text = path.read_text()
        except (UnicodeDecodeError, IsADirectoryError, FileNotFoundError):
            continue  # binary files (screenshots), and files deleted but not yet committed
        rel = path.relative_to(ROOT).as_posix()
        if rel == "tests/test_docs.py":
            continue  # its own examples of what the check catches
        for n, line in enumerate(text.splitlines(), 1):
            if PROCESS_WORDS.search(line):
                found.append(f"{rel}:{n}: {line.strip()[:120]}")
    assert not found, "\n".join(found)


def test_the_process_word_check_catches_what_it_is_for():
    # built from parts, so that the tree's own text never holds them
    for line in (
        "seen in the " + "brief",
        "as in this " + "session",
        "is" + "sue 15's bug",
        "see DES" + "IGN.md",
        "/tm" + "p/x.db",
    ):
        assert PROCESS_WORDS.search(line), line
    for line in ("pytorch#193006", "an issue link", "the sweep's 2 cores", "issues/193006"):
        assert not PROCESS_WORDS.search(line), line
