"""The conformance suite: one test per (op, dtype) cell, parametrized by conform's plugin.

Run it through `conform run`, or directly:
`pytest -p conform.plugin --pyargs conform.suite --conform-device cpu -n 2`.
A cell that does not pass fails its test (so --junitxml shows it); the result itself is stored
by the controller either way.
"""

import json

import pytest

from conform.outcomes import FAILING, Outcome
from conform.plugin import PROPERTY


def test_cell(conform_cell, conform_context, request):
    result = conform_context.run(conform_cell)
    # as JSON text: xdist's channel (execnet) cannot send an int below -2**31 inside a structure
    # (a drawn Python scalar beyond int32's range), and the run would end with an internal error
    request.node.user_properties.append((PROPERTY, json.dumps(result.to_json())))
    outcome = Outcome(result.outcome)
    if outcome == Outcome.SKIPPED:
        pytest.skip(result.message)
    if outcome in FAILING:
        pytest.fail(f"{outcome}: {result.message}", pytrace=False)
