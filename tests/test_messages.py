"""What a finding's message says: each finding once, and the CPU named once when it is both sides."""

from conform.judge.compare import Record
from conform.judge.verdict import attribution
from conform.run.execute import _joined


def _record(message: str) -> Record:
    r = Record("output")
    r.message = message
    r.kind = "values"
    return r


def test_the_same_finding_at_output_and_out_is_said_once_with_both_places():
    same = "Mismatched elements: 1 / 6 (16.7%); greatest absolute difference 0.5 at index (1,) (up to 1e-05 allowed); worst element 1.5 vs 1 expected"
    message = _joined(
        [
            _record(same + " [output]"),
            _record(same + " [out (out)]"),
            _record("NaN mismatch at index (0,): nan vs 0.0 expected [grad[self]]"),
        ]
    )
    assert message.count("Mismatched elements") == 1, message
    assert message == same + " [output, out (out)]; NaN mismatch at index (0,): nan vs 0.0 expected [grad[self]]"


def test_cpu_only_attribution_names_the_cpu_once():
    bad = [_record("x [output]")]
    assert attribution(2.92e-05, 2.92e-05, bad, plain_cpu=True) == "; CPU error 2.92e-05 vs golden float64"
    assert attribution(2.92e-05, 2.92e-05, bad) == "; device error 2.92e-05 vs CPU 2.92e-05 (golden float64)"
