"""Errors the engine raises on purpose; each carries a message fit to show a user."""


class WorkbenchError(Exception):
    """Base class: the message is what the user reads."""


class ConfigError(WorkbenchError):
    pass


class StoreError(WorkbenchError):
    pass


class ImportFailed(WorkbenchError):
    """Nothing could be read from a transcript."""


class SessionNotFound(WorkbenchError):
    pass
