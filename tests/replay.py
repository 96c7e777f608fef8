"""A reproduction script run in this process: the last line it prints (its verdict)."""

from __future__ import annotations

import contextlib
import io

from conform.report.repro import repro_script


def replayed(op, case, result, backend_name: str = "cpu") -> str:
    script = repro_script(op, case, backend_name, result=result, golden_is_expectation=backend_name == "cpu")
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(compile(script, "repro.py", "exec"), {"__name__": "__main__"})
    return out.getvalue().strip().splitlines()[-1]
