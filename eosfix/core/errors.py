"""Expected failures. Each carries the file it is about, so the CLI prints one line."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from typing_extensions import Self  # typing.Self from Python 3.11


class _Same:
    """``EosfixError.but``'s default: the field is kept as it is."""


SAME = _Same()


class EosfixError(Exception):
    """An expected problem with the input; the CLI prints it as one line, no traceback."""

    def __init__(self, message: str, *, path: str | Path | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.path = str(path) if path is not None else None

    def __str__(self) -> str:
        return f"{self.path}: {self.message}" if self.path else self.message

    def but(self, *, path: str | Path | _Same | None = SAME, message: str | None = None) -> Self:
        """The same error (its class and every other field kept) naming ``path`` instead, or
        saying ``message``: how an error is renamed for whoever reads it (a Hub repo's file
        by ``org/name/file``, not eosfix's store; a page's upload by its file name)."""
        out = type(self).__new__(type(self))
        out.__dict__.update(self.__dict__)
        out.args = self.args
        if not isinstance(path, _Same):
            out.path = str(path) if path is not None else None
        if message is not None:
            out.message, out.args = message, (message,)
        return out


class NotChecked(EosfixError):
    """A path or name eosfix does not check (missing, not a model folder, not a Hub repo
    id...), with the reason."""


class RepoLoadError(EosfixError):
    """A file of the model repository cannot be read or parsed."""


class TemplateError(EosfixError):
    """A chat template cannot be compiled (not valid Jinja)."""


class WriteError(EosfixError):
    """A file cannot be written safely (symlink, read-only, vanished...). ``instead``: a
    command that writes the fix elsewhere, as it runs when typed (the message names it)."""

    def __init__(
        self, message: str, *, path: str | Path | None = None, instead: str | None = None
    ) -> None:
        super().__init__(message, path=path)
        self.instead = instead


class VerificationError(EosfixError):
    """A planned edit failed its own safety check: a bug, nothing was written."""


@contextlib.contextmanager
def reading(
    path: str | Path, *, expected: str = "a file", missing: str = "file not found"
) -> Iterator[None]:
    """Turn every OS error while reading ``path`` into a one-line ``RepoLoadError``."""
    try:
        yield
    except FileNotFoundError:
        raise RepoLoadError(missing, path=path) from None
    except IsADirectoryError:
        raise RepoLoadError(f"is a directory, expected {expected}", path=path) from None
    except PermissionError:
        raise RepoLoadError("permission denied", path=path) from None
    except OSError as exc:
        raise RepoLoadError(f"cannot read: {exc.strerror or exc}", path=path) from None
