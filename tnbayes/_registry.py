"""One small name → object registry, used by every registry of the package (kernels, models).

A :class:`Registry` is a mutable mapping whose keys are names (case-insensitive unless asked otherwise); looking
up an unknown name raises a ``ValueError`` that names the close matches and lists every known name. It belongs to
no axis: :mod:`tnbayes.kernels.registry` and :mod:`tnbayes.models.registry` build their public functions on it.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterator, MutableMapping
from typing import Generic, TypeVar

__all__ = ["Registry"]

T = TypeVar("T")


class Registry(MutableMapping[str, T], Generic[T]):
    """Objects by name, with close-match suggestions for names it does not know.

    Parameters
    ----------
    kind : str
        What an entry is, for messages (``"kernel"``, ``"model"``).
    listing : str, optional
        How the list of known names is introduced in the unknown-name message; default ``"Known {kind}s"``.
    advice : str
        A sentence appended to the unknown-name message (e.g. how to register a new entry).
    case_sensitive : bool
        Keep names as given; by default they are compared and stored lower-case.

    Examples
    --------
    >>> reg = Registry("colour")
    >>> reg.register("Red", "#f00")
    >>> reg.lookup("red")
    '#f00'
    >>> reg.lookup("rde")
    Traceback (most recent call last):
    ...
    ValueError: Unknown colour 'rde'. Did you mean 'red'? Known colours: red.
    """

    def __init__(self, kind: str, *, listing: str | None = None, advice: str = "",
                 case_sensitive: bool = False) -> None:
        self.kind = kind
        self.listing = listing if listing is not None else f"Known {kind}s"
        self.advice = advice
        self.case_sensitive = case_sensitive
        self._entries: dict[str, T] = {}

    # ------------------------------------------------------------------ mapping protocol
    def key(self, name: str) -> str:
        """The stored form of ``name`` (lower-case unless the registry is case-sensitive)."""
        return name if self.case_sensitive or not isinstance(name, str) else name.lower()

    def __getitem__(self, name: str) -> T:
        return self._entries[self.key(name)]

    def __setitem__(self, name: str, value: T) -> None:
        self._entries[self.key(name)] = value

    def __delitem__(self, name: str) -> None:
        del self._entries[self.key(name)]

    def __iter__(self) -> Iterator[str]:
        return iter(self._entries)

    def __len__(self) -> int:
        return len(self._entries)

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and self.key(name) in self._entries

    def __repr__(self) -> str:
        return f"Registry({self.kind!r}, names={self.names()})"

    # ------------------------------------------------------------------ registry operations
    def names(self) -> list[str]:
        """The registered names, sorted.

        Returns
        -------
        list of str
        """
        return sorted(self._entries)

    def register(self, name: str, value: T, *, overwrite: bool = False) -> None:
        """Add ``value`` under ``name``.

        Parameters
        ----------
        name : str
            A non-empty name.
        value : object
            The entry (a class, a factory, …).
        overwrite : bool
            Replace an existing entry instead of raising. Registering the very same object again is always allowed.

        Raises
        ------
        ValueError
            For an empty or non-string name, or a name already taken by another object.
        """
        if not isinstance(name, str) or not name:
            raise ValueError(f"{self.kind.capitalize()} name must be a non-empty string; got {name!r}.")
        current = self._entries.get(self.key(name))
        if current is not None and current is not value and not overwrite:
            raise ValueError(f"A {self.kind} named {name!r} is already registered ({current!r}); pass "
                             f"overwrite=True to replace it.")
        self[name] = value

    def suggestions(self, name: str, n: int = 3) -> list[str]:
        """Registered names close to ``name`` (``difflib``'s close matches), best first.

        Parameters
        ----------
        name : str
        n : int
            At most this many.

        Returns
        -------
        list of str
        """
        if not isinstance(name, str):
            return []
        return difflib.get_close_matches(self.key(name), list(self._entries), n=n)

    def lookup(self, name: str) -> T:
        """The entry registered as ``name``.

        Parameters
        ----------
        name : str

        Returns
        -------
        object
            The registered entry.

        Raises
        ------
        ValueError
            For an unknown name: the message names close matches and lists every registered name.
        """
        if name in self:
            return self[name]
        close = self.suggestions(name)
        hint = f" Did you mean {', '.join(map(repr, close))}?" if close else ""
        advice = f" {self.advice}" if self.advice else ""
        raise ValueError(f"Unknown {self.kind} {name!r}.{hint} {self.listing}: {', '.join(self.names())}.{advice}")
