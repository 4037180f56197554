"""A tiny name -> object registry whose failed lookups list the valid names."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Generic, TypeVar

from prom_reward.errors import UnknownNameError

T = TypeVar("T")


class Registry(Generic[T]):
    """Maps names to objects of one kind; ``get`` of an unknown name raises UnknownNameError.

    >>> reg = Registry("color")
    >>> reg.register("red", 1), reg.get("red")
    (1, 1)
    >>> reg.get("blue")  # doctest: +IGNORE_EXCEPTION_DETAIL
    Traceback (most recent call last):
    UnknownNameError: unknown color 'blue'; valid names: red
    """

    def __init__(self, kind: str) -> None:
        self.kind = kind
        self._items: dict[str, T] = {}

    def register(self, name: str, item: T) -> T:
        """Add ``item`` under ``name`` (case-insensitive) and return it."""
        self._items[name.lower()] = item
        return item

    def get(self, name: str) -> T:
        """The object registered as ``name``; raises UnknownNameError listing valid names."""
        if name not in self:
            raise UnknownNameError(self.kind, name, list(self._items))
        return self._items[name.lower()]

    def names(self) -> list[str]:
        """All registered names, sorted."""
        return sorted(self._items)

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and name.lower() in self._items

    def __iter__(self) -> Iterator[str]:
        return iter(self.names())
