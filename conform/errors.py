"""Errors a user can act on. The CLI prints their message on one line and exits 2."""


class ConformError(Exception):
    """Bad input or an unusable environment: shown as one line, exit status 2, no traceback."""


class UnknownOpError(ConformError):
    pass


class DeviceUnavailableError(ConformError):
    pass


class StoreError(ConformError):
    pass


def first_line(message: str | BaseException, limit: int | None = None) -> str:
    """One line for a table cell, a log line or a stored message: the first line of `message`, cut
    to `limit` characters ("..." marks the cut). Of an exception: "TypeName: its first line", or
    the type's name alone when its message is empty."""
    if isinstance(message, BaseException):
        line = first_line(str(message), limit)
        return f"{type(message).__name__}: {line}" if line else type(message).__name__
    text = (message or "").strip()
    line = text.splitlines()[0] if text else ""
    return line[: limit - 3] + "..." if limit is not None and len(line) > limit else line
