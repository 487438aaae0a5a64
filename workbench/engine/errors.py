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


class StaleSession(WorkbenchError):
    """Another program changed the session after this change was planned against it: nothing was written."""

    def __init__(self) -> None:
        super().__init__("the session changed; nothing was done: run it again")


def reason_of(exc: BaseException) -> str:
    """What went wrong, in words, for the end of an error message: the exception's own text, or (when it
    has none, as a timeout from the HTTP client often does) what its kind says, so a message never ends
    in a bare colon."""
    text = str(exc).strip()
    if text:
        return text
    name = type(exc).__name__
    if isinstance(exc, TimeoutError) or "Timeout" in name:
        return f"no answer before the timeout ({name})"
    if isinstance(exc, ConnectionError) or "Connect" in name or "Protocol" in name:
        return f"the connection failed ({name})"
    return f"{name} (no details given)"
