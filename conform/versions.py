"""Versions of torch and of operating systems, read with `packaging.version` (PEP 440).

One parser for every place conform orders or compares versions: the site's columns, declared
releases, and the version ranges of expectations files. A version packaging cannot read (an OS
version such as "6.1.0-13-amd64") falls back to its leading numeric parts.
"""

from __future__ import annotations

import re

from packaging.version import InvalidVersion, Version


def parse(version: str) -> Version | None:
    try:
        return Version(version.strip())
    except InvalidVersion:
        return None


def release(version: str) -> tuple[int, ...]:
    """The numeric release: "2.13.0+cpu" -> (2, 13, 0); "2.14.0.dev20250101" -> (2, 14, 0) (a
    nightly of 2.14 is 2.14); "14.4.1" -> (14, 4, 1); () when there is no number to read."""
    v = parse(version)
    if v is not None:
        return v.release
    parts = []
    for piece in re.split(r"[+\s]", version.strip(), maxsplit=1)[0].split("."):
        m = re.match(r"\d+", piece)
        if not m:
            break
        parts.append(int(m.group()))
        if m.end() != len(piece):  # "0-13-amd64": the numeric part ends here
            break
    return tuple(parts)


def sort_key(version: str) -> tuple:
    """Sorts versions as versions: 1.12.1 < 1.13.0 < 2.0.0 < 2.10.0 < 2.10.0+cpu; a version
    packaging cannot read comes after those it can, by its numeric release."""
    v = parse(version)
    if v is not None:
        return (0, v, "")
    return (1, release(version), version)
