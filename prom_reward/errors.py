"""The library's exceptions: one base class (``PromRewardError``), a few specific kinds; every message says
what was expected, what arrived, and how to fix it."""

from __future__ import annotations

from collections.abc import Mapping


class PromRewardError(Exception):
    """Base class of every error prom_reward raises on purpose. ``setting``: the setting it is about (its prefix),
    ``mentions``: the others, written ``{name}`` in its text; ``said`` names them as a caller does (a flag)."""

    setting = ""
    mentions: tuple[str, ...] = ()

    def said(self, names: Mapping[str, str] | None = None) -> str:
        """The message, each setting it names said as ``names`` says it (default: its Python name)."""
        names = names or {}
        text = getattr(self, "problem", str(self))
        for name in (self.setting, *self.mentions):
            text = text.replace("{" + name + "}", names.get(name, name)) if name else text
        return f"{names.get(self.setting, self.setting)}: {text}" if self.setting else text


class ConfigError(PromRewardError, ValueError):
    """An option or configuration value is invalid (raised at construction time)."""

    def __init__(self, message: str, setting: str = "", mentions: tuple[str, ...] = ()) -> None:
        self.setting, self.problem, self.mentions = setting, message, mentions
        super().__init__(self.said())

    def said_as(self, name: str, where: str = "") -> ConfigError:
        """This error about a setting, naming it ``name`` (and where it is given, ``where``)."""
        if not self.setting:
            return self
        return ConfigError(self.problem + (f" [{where}]" if where else ""), name, self.mentions)


class JudgeConfigError(ConfigError):
    """The judge server answers, but not as configured (a 404, refused credentials, another model): no sample's
    fault, never a failure reward."""

    def __init__(self, message: str, *, url: str | None = None, status: int | None = None) -> None:
        super().__init__(message)
        self.url, self.status = url, status


class InputError(PromRewardError, ValueError):
    """A batch of judge inputs is malformed (raised before any generation starts): ``index``, ``field``: the
    offending item's position and field (None: unknown)."""

    def __init__(
        self, message: str, *, index: int | None = None, field: str | None = None, mentions: tuple[str, ...] = ()
    ) -> None:
        self.problem, self.mentions, self.index, self.field = message, mentions, index, field
        super().__init__(self.said())

    def at(self, where: str, problem: str | None = None) -> InputError:
        """This error said at ``where`` (a file's line), its ``problem`` (default: the message) after it."""
        text = self.problem if problem is None else problem
        return InputError(f"{where}: {text}", index=self.index, field=self.field, mentions=self.mentions)


class UnknownNameError(PromRewardError, KeyError):
    """A registry lookup failed; the message lists the valid names."""

    def __init__(self, kind: str, name: object, valid: list[str]) -> None:
        self.kind, self.name, self.valid = kind, name, sorted(valid)
        super().__init__(f"unknown {kind} {name!r}; valid names: {', '.join(self.valid)}; fix: give one of these")

    def __str__(self) -> str:  # KeyError would repr() the message otherwise
        return str(self.args[0])


class BackendError(PromRewardError, RuntimeError):
    """A generation backend failed (server unreachable, engine died, bad reply)."""


class OutputError(PromRewardError):
    """An output cannot be written or resumed (it exists, is another job's, is unreadable, the disk is full)."""


class StoreError(PromRewardError, RuntimeError):
    """A judgment store cannot be used: not an SQLite store, damaged, or locked past its timeout."""


class ServerRejected(BackendError):
    """A judge server answered 4xx (not 429), ``status``: the request itself is wrong, so it is not retried."""

    def __init__(self, message: str, status: int) -> None:
        super().__init__(message)
        self.status = status


class ContextLengthError(InputError):
    """A rendered judge prompt does not fit the judge's context window."""


class JudgeUnavailableError(PromRewardError, RuntimeError):
    """The judge kept failing past the outage budget (``rewards.outage``), for ``failing_s``, last with ``cause``;
    not a ``BackendError``, so nothing retries it again."""

    def __init__(self, message: str, *, failing_s: float = 0.0, cause: str | None = None) -> None:
        super().__init__(message)
        self.failing_s, self.cause = failing_s, cause
