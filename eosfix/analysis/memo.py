"""A memo key for values that cannot be hashed: the very same objects.

``functools.lru_cache`` keys by equality, so its arguments must hash. A frozen dataclass that
holds a dict does not, and hashing a large one on every call would cost what the memo saves.
``Same(items)`` is equal to another ``Same`` holding the very same objects, in order: what a
memo of a memoized value's consumers needs (repos sharing a memoized template analysis share
the object; a value made anew each time never matches). The memo that holds the key keeps
its objects alive, so their ids cannot be reused while it is there. Pure.
"""

from __future__ import annotations

from typing import Generic, TypeVar

T = TypeVar("T")


class Same(Generic[T]):
    """A key equal to another holding the very same objects (``is``), in the same order."""

    __slots__ = ("_hash", "items")

    def __init__(self, items: tuple[T, ...]) -> None:
        self.items = items
        self._hash = hash(tuple(map(id, items)))

    def __hash__(self) -> int:
        return self._hash

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Same) or len(other.items) != len(self.items):
            return False
        return all(a is b for a, b in zip(self.items, other.items, strict=True))
