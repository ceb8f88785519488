"""JSON logs for the bot: one object per line on stderr (time, level, logger, message, fields;
a traceback inside the object as ``exception``), for eosfix's, uvicorn's and every other
logger of the process (asyncio's too), so no event spans lines or escapes the format.

Rate-limited: of one kind of line (logger, level, message template) at most ``burst`` at once,
refilled at ``rate`` a second; the next line of that kind that passes says how many were left
out (``suppressed``). A flood (thousands of the same error a second) costs a few lines.
"""

from __future__ import annotations

import json
import logging
import sys
import threading
import time
from collections.abc import Callable
from typing import Any, TextIO

BURST = 200
RATE = 50.0  # lines a second, of one kind
_KINDS = 1024  # kinds remembered; more (a bug logging varying templates) start afresh


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        out: dict[str, Any] = {
            "time": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created))
            + f".{int(record.msecs):03d}Z",
            "level": record.levelname.lower(),
            "logger": record.name,
            "message": record.getMessage(),
        }
        out.update(getattr(record, "fields", {}) or {})
        if record.exc_info:
            out["exception"] = self.formatException(record.exc_info)
        suppressed = getattr(record, "suppressed", 0)
        if suppressed:
            out["suppressed"] = suppressed
        return json.dumps(out, ensure_ascii=False, default=str)


class RateLimit(logging.Filter):
    """Lets through at most ``burst`` lines of one kind at once, ``rate`` a second after."""

    def __init__(
        self,
        burst: float = BURST,
        rate: float = RATE,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        super().__init__()
        self.burst, self.rate, self.clock = burst, rate, clock
        self._kinds: dict[tuple[str, int, str], tuple[float, float, int]] = {}
        self._lock = threading.Lock()

    def filter(self, record: logging.LogRecord) -> bool:
        kind = (record.name, record.levelno, str(record.msg))
        now = self.clock()
        with self._lock:
            if len(self._kinds) >= _KINDS and kind not in self._kinds:
                self._kinds.clear()
            tokens, then, left_out = self._kinds.get(kind, (self.burst, now, 0))
            tokens = min(self.burst, tokens + (now - then) * self.rate)
            if tokens < 1:
                self._kinds[kind] = (tokens, now, left_out + 1)
                return False
            self._kinds[kind] = (tokens - 1, now, 0)
        if left_out:
            record.suppressed = left_out
        return True


def json_handler(
    stream: TextIO | None = None, *, burst: float = BURST, rate: float = RATE
) -> logging.Handler:
    """A handler writing rate-limited JSON lines to ``stream`` (stderr)."""
    handler = logging.StreamHandler(stream or sys.stderr)
    handler.setFormatter(JsonFormatter())
    handler.addFilter(RateLimit(burst, rate))
    return handler


def json_logging(level: int = logging.INFO) -> dict[str, Any]:
    """Route every logger of the process to JSON lines on stderr (eosfix's and uvicorn's at
    ``level``, others at warning); returns uvicorn's ``log_config``."""
    handler = json_handler()
    root = logging.getLogger()
    root.handlers = [handler]
    root.setLevel(logging.WARNING)
    for name in ("eosfix", "uvicorn", "uvicorn.error", "uvicorn.access"):
        logger = logging.getLogger(name)
        logger.handlers = [handler]
        logger.setLevel(level)
        logger.propagate = False
    logging.captureWarnings(True)
    return {"version": 1, "disable_existing_loggers": False}
