"""The `conform` command: thin click commands over the packages that do the work."""

from conform.cli.main import cli, main

__all__ = ["cli", "main"]
