"""The installed package is the source tree: every Python package under conform/, opdb/ and
generators/ is listed in pyproject.toml's [tool.setuptools] packages. A package left out is
missing from the wheel, and `pip install .` then gives a `conform` that fails at its first import
(as generators.families did), while tests run from the repository root never notice."""

from pathlib import Path

try:
    import tomllib
except ImportError:  # Python 3.10
    import tomli as tomllib

ROOT = Path(__file__).resolve().parent.parent


def test_every_source_package_is_in_the_wheel():
    listed = set(tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"])
    found = {
        ".".join(init.parent.relative_to(ROOT).parts)
        for top in ("conform", "opdb", "generators")
        for init in (ROOT / top).rglob("__init__.py")
    }
    assert found - listed == set(), f"packages missing from pyproject.toml: {sorted(found - listed)}"
