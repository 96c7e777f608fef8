"""Errors a user can act on. The CLI prints their message on one line and exits 2."""


class ConformError(Exception):
    """Bad input or an unusable environment: shown as one line, exit status 2, no traceback."""


class UnknownOpError(ConformError):
    pass


class DeviceUnavailableError(ConformError):
    pass


class StoreError(ConformError):
    pass
