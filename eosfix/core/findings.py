"""What one problem eosfix reports looks like: a stable code, a file, a message, a severity.

Shared by every module that produces findings (``check``, ``earlystop``, ``ggufplan``), so
none of them needs the others to describe a problem.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass


class Severity(enum.Enum):
    ERROR = "error"
    WARNING = "warning"


@dataclass(frozen=True)
class Finding:
    code: str
    file: str
    message: str
    severity: Severity = Severity.ERROR
    fixable: bool = False
