"""The `conform` command: thin click commands over the packages that do the work."""

import importlib


def main(argv=None) -> None:
    """The `conform` command. Ctrl-C is taken over before the commands and what they import are
    loaded: one that lands meanwhile is noted, and the command then ends with status 130 like
    any other interrupt (a KeyboardInterrupt escaping an import would end it by SIGINT)."""
    from conform.run import interrupts  # before anything slow: this module is the entry point

    interrupts.install()
    with interrupts.held(deliver=False):  # (an interrupt here waits for the command's first checkpoint)
        commands = _commands()
    commands.main(argv)


_ENTRY_POINT = main


def _commands():
    """conform.cli.main, loaded on first use. Importing it binds the submodule to the name `main`
    here: the entry point takes the name back."""
    commands = importlib.import_module("conform.cli.main")
    globals()["main"] = _ENTRY_POINT
    return commands


def __getattr__(name: str):
    if name == "cli":  # the click group
        return _commands().cli
    raise AttributeError(f"module 'conform.cli' has no attribute {name!r}")


__all__ = ["cli", "main"]
