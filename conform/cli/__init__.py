"""The `conform` command: thin click commands over the packages that do the work."""


def main(argv=None) -> None:
    """The `conform` command. Ctrl-C is taken over before the commands and what they import are
    loaded: one that lands meanwhile is noted, and the command then ends with status 130 like
    any other interrupt (a KeyboardInterrupt escaping an import would end it by SIGINT)."""
    from conform.run import interrupts  # before anything slow: this module is the entry point

    interrupts.install()
    with interrupts.held(deliver=False):
        from conform.cli.main import main as run  # (held: an interrupt here waits for run's checkpoint)

    run(argv)


def __getattr__(name: str):
    if name == "cli":
        from conform.cli.main import cli  # the click group, loaded on first use (see main)

        return cli
    raise AttributeError(f"module 'conform.cli' has no attribute {name!r}")


__all__ = ["cli", "main"]
