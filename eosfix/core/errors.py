"""Expected failures. Each carries the file it is about, so the CLI prints one line."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path


class EosfixError(Exception):
    """An expected problem with the input; the CLI prints it as one line, no traceback."""

    def __init__(self, message: str, *, path: str | Path | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.path = str(path) if path is not None else None

    def __str__(self) -> str:
        return f"{self.path}: {self.message}" if self.path else self.message


class NotChecked(EosfixError):
    """A path or name eosfix does not check (missing, not a model folder, not a Hub repo
    id...), with the reason."""


class RepoLoadError(EosfixError):
    """A file of the model repository cannot be read or parsed."""


class TemplateError(EosfixError):
    """A chat template cannot be compiled (not valid Jinja)."""


class WriteError(EosfixError):
    """A file cannot be written safely (symlink, read-only, vanished...)."""


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
