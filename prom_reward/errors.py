"""The library's exceptions: one base class (``PromRewardError``), a few specific kinds; every message says
what was expected, what arrived, and how to fix it.

Example:
    >>> from prom_reward.errors import PromRewardError, InputError
    >>> issubclass(InputError, PromRewardError)
    True
"""

from __future__ import annotations

from typing import Any


class PromRewardError(Exception):
    """Base class of every error prom_reward raises on purpose."""


class ConfigError(PromRewardError, ValueError):
    """An option or configuration value is invalid (raised at construction time). ``setting`` names the
    field it is about (``""``: none): a caller says it in its own terms with ``said_as`` (a flag's name)."""

    def __init__(self, message: str, setting: str = "") -> None:
        super().__init__(f"{setting}: {message}" if setting else message)
        self.setting, self.problem = setting, message

    def __reduce__(self) -> Any:
        return (type(self), (self.problem, self.setting)) if self.setting else super().__reduce__()

    def said_as(self, name: str, where: str = "") -> ConfigError:
        """This error about a setting, naming it ``name`` (and where it is given, ``where``)."""
        return ConfigError(self.problem + (f" [{where}]" if where else ""), name) if self.setting else self


class JudgeConfigError(ConfigError):
    """The judge server answers, but not as configured: a wrong route (HTTP 404 on an API path: the URL
    usually lacks ``/v1``), refused credentials (401/403), a model it does not serve: no sample's fault, so
    never a failure reward. ``url`` is the judge URL, ``status`` the HTTP status (None when not from a reply).
    """

    def __init__(self, message: str, *, url: str | None = None, status: int | None = None) -> None:
        super().__init__(message)
        self.url = url
        self.status = status


class InputError(PromRewardError, ValueError):
    """A batch of judge inputs is malformed; raised before any generation starts. ``index``: the offending
    item's position in the batch, ``field``: its field name (each None when unknown)."""

    def __init__(self, message: str, *, index: int | None = None, field: str | None = None) -> None:
        super().__init__(message)
        self.index = index
        self.field = field


class UnknownNameError(PromRewardError, KeyError):
    """A registry lookup failed; the message lists the valid names."""

    def __init__(self, kind: str, name: object, valid: list[str]) -> None:
        self.kind = kind
        self.name = name
        self.valid = sorted(valid)
        super().__init__(f"unknown {kind} {name!r}; valid names: {', '.join(self.valid)}; fix: give one of these")

    def __str__(self) -> str:  # KeyError would repr() the message otherwise
        return str(self.args[0])


class BackendError(PromRewardError, RuntimeError):
    """A generation backend failed (server unreachable, engine died, bad reply)."""


class OutputError(PromRewardError):
    """An output cannot be written or resumed: it exists, belongs to another job, is unreadable, or the
    disk is full or read-only. The message names the file and the fix; what was written stays intact."""


class StoreError(PromRewardError, RuntimeError):
    """A judgment store cannot be used: not an SQLite store, damaged, or locked by another process for
    longer than its timeout. The message names the file and the fix."""


class ServerRejected(BackendError):
    """A judge server answered 4xx (not 429): the request itself is wrong, so it is not retried.

    ``status`` is the HTTP status.
    """

    def __init__(self, message: str, status: int) -> None:
        super().__init__(message)
        self.status = status


class ContextLengthError(InputError):
    """A rendered judge prompt does not fit the judge's context window."""


class JudgeUnavailableError(PromRewardError, RuntimeError):
    """The judge kept failing (unreachable, 5xx, hung) past the outage budget (``rewards.outage``): not a
    ``BackendError``, so nothing retries it again.

    ``failing_s`` is how long it had been failing, ``cause`` the last failure.
    """

    def __init__(self, message: str, *, failing_s: float = 0.0, cause: str | None = None) -> None:
        super().__init__(message)
        self.failing_s = failing_s
        self.cause = cause
