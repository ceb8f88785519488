"""Ordinary checks on the page beside a hostile mix: their latency and the server's memory.

``eosfix serve`` runs as its own process against a hostile Hub (tests/support/hostilehub.py, served
from another process by ``paired.ServedHub``). For ``--seconds`` (default 120):

- ``--ordinary`` clients each check ordinary repos (``GET /check?repo=org/ok-N``, 20 of them,
  every other one broken) one after another: latency p50, p99 and max, and how many were
  answered 200 with a verdict; the Hub answers every request ``--latency`` s late (50 ms);
- ``--hostile`` clients (default: one per kind, each sending its kind all along) send the
  hostile mix: a repo whose tokenizer_config.json is 600 MB (with its length) and one sending
  600 MB without a length; a GGUF repo whose header is 120 MB (4M tokens); a GGUF with 3,000
  distinct 8 KB keys; a config.json dripped a byte a second; a repo whose info answers 429
  ``Retry-After: 999999999``; an audit of an author whose listing's ``Link`` points at
  itself. Each hostile request is counted by how it ended; ``--without-gguf`` leaves the two
  GGUF repos out.

The server's resident memory is sampled all along: its start, peak (``VmHWM``) and the resident
set 10 s after the load stopped. Then SIGTERM: how long the server took to exit (killed after
20 s). At the end, one ordinary audit asks for an audit slot (a 503 means looping audits still
hold them all).

``--baseline DIR`` runs the same mix against another checkout's ``eosfix serve`` (e.g. main),
after this tree's, each with its own store, and prints both side by side. What the GGUF parts
cost in memory is the GGUF header reader's, not the Hub reads' (``--without-gguf`` shows the
rest alone).

    python benchmarks/bench_hostile.py                         # this tree, 2 minutes
    python benchmarks/bench_hostile.py --baseline /work/main   # and main, side by side
    python benchmarks/bench_hostile.py --seconds 20            # quick
"""

from __future__ import annotations

import argparse
import signal
import statistics
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.paired import ServedHub, answer_hub, audit_env, machine, memory_mb, start_serve

MiB = 1024 * 1024
ORDINARY = [f"org/ok-{i:02d}" for i in range(20)]
HOSTILE = [
    ("600 MB config", "/check?repo=evil/bigconfig"),
    ("600 MB, no length", "/check?repo=evil/bigstream"),
    ("120 MB GGUF header", "/check?repo=evil/bigheader-GGUF"),
    ("3,000 odd keys", "/check?repo=evil/oddkeys-GGUF"),
    ("drip 1 B/s", "/check?repo=evil/drip"),
    ("Retry-After 999999999", "/check?repo=evil/retry"),
    ("looping Link (audit)", "/audit?author=evil-org"),
]


# --- the hostile Hub, in its own process ------------------------------------------------------


def serve(latency: float) -> None:
    from tests.support.cachebuilder import chatml_files
    from tests.support.ggufs import big_vocab_header
    from tests.support.hostilehub import HostileHub, answer, drip, stream, with_headers

    hub = HostileHub()
    hub.latency = latency  # a far-away Hub: every answer begins this late
    for i, repo_id in enumerate(ORDINARY):
        hub.add_repo(repo_id, chatml_files(2000 + 10 * i, healthy=i % 2 == 1))
    for i, name in enumerate(("bigconfig", "bigstream", "drip", "retry")):
        hub.add_repo(f"evil/{name}", chatml_files(5000 + 10 * i))
    hub.on(r"^/evil/bigconfig/resolve/.*/tokenizer_config\.json$", stream(600 * MiB))
    hub.on(r"^/evil/bigstream/resolve/.*/tokenizer_config\.json$", stream(600 * MiB, declare=None))
    body = b'{"eos_token_id": 2}' + b" " * 62  # 81 bytes
    hub.on(r"^/evil/drip/resolve/.*/config\.json$", drip(body, 1.0))
    slow_down = {"Retry-After": "999999999"}
    hub.on(r"^/api/models/evil/retry/", answer(429, {"error": "slow down"}, slow_down))
    hub.cdn = True  # .gguf files from a CDN, by ranges
    for repo_id, header in (
        ("evil/bigheader-GGUF", big_vocab_header(4_000_000)),
        ("evil/oddkeys-GGUF", big_vocab_header(0, extra_keys=3000)),
    ):
        repo = hub.add_repo(repo_id, {"model-Q4_K_M.gguf": header, "README.md": b"# x\n"})
        repo.gguf = {"total": 0, "architecture": "llama"}
    for name in ("a", "b"):
        hub.add_repo(f"evil-org/{name}", chatml_files(7000 + ord(name)))

    def itself(handler: Any) -> dict[str, str]:
        return {"Link": f'<{hub.url}{handler.path}>; rel="next"'}

    hub.on(r"^/api/models$", with_headers(itself), query="author=evil-org")
    answer_hub(hub)


# --- one run against one tree ---------------------------------------------------------------


@dataclass
class Figures:
    latencies: list[float] = field(default_factory=list)
    ordinary: Counter[str] = field(default_factory=Counter)
    hostile: Counter[str] = field(default_factory=Counter)
    rss: list[int] = field(default_factory=list)
    start_mb: int = 0
    peak_mb: int = 0
    after_mb: int = 0
    sigterm_s: float | None = None
    audit_slot: int = 0


def _get(url: str, timeout: float) -> tuple[int, bytes]:
    try:
        with urllib.request.urlopen(url, timeout=timeout) as reply:
            return int(reply.status), reply.read()
    except urllib.error.HTTPError as exc:
        return int(exc.code), exc.read()
    except OSError as exc:
        return 0, type(exc).__name__.encode()


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args: Any, **kwargs: Any) -> None:
        return None


def _status_no_redirect(url: str) -> int:
    opener = urllib.request.build_opener(_NoRedirect)
    try:
        with opener.open(url, timeout=60) as reply:
            return int(reply.status)
    except urllib.error.HTTPError as exc:
        return int(exc.code)
    except OSError:
        return 0


SAID = (
    ("larger than", "refused: too large"),
    ("took over", "refused: too slow"),
    ("rate limited", "refused: rate limited"),
    ("interrupted", "interrupted"),
    ("do not match the Hub", "failed after reading it all"),
    ("could not be checked", "could not be checked"),
)


def _said(body: bytes) -> str:
    """What a result page says of a hostile check, in a few words."""
    text = body.decode("utf-8", "replace")
    return next((words for phrase, words in SAID if phrase in text), "checked")


def run(
    code: Path, hub: ServedHub, seconds: float, ordinary: int, hostile: int, gguf: bool
) -> Figures:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = int(s.getsockname()[1])
    url = f"http://127.0.0.1:{port}"
    fig = Figures()
    mix = [(name, path) for name, path in HOSTILE if gguf or "GGUF" not in path]
    with tempfile.TemporaryDirectory(prefix="bench-hostile-") as tmp:
        env = {
            **audit_env(code, hub.url, Path(tmp)),
            "EOSFIX_WEBHOOK_SECRET": "bench",
            "EOSFIX_STATE_DIR": str(Path(tmp) / "state"),
            "EOSFIX_PAGE_RATE": "100000",
        }
        proc = start_serve(env, port, code, Path(tmp) / "serve.log")
        fig.start_mb = memory_mb(proc.pid)["VmRSS"]
        end = time.monotonic() + seconds
        stop = threading.Event()

        def sample() -> None:
            while not stop.wait(0.25):
                try:
                    fig.rss.append(memory_mb(proc.pid)["VmRSS"])
                except OSError:
                    return

        def ordinary_client(k: int) -> None:
            i = k
            while time.monotonic() < end:
                repo = ORDINARY[i % len(ORDINARY)]
                i += ordinary
                started = time.perf_counter()
                status, body = _get(f"{url}/check?repo={urllib.parse.quote(repo)}", 600)
                fig.latencies.append(time.perf_counter() - started)
                ok = status == 200 and b"could not be checked" not in body
                fig.ordinary["200 with a verdict" if ok else f"status {status}"] += 1

        def hostile_client(k: int) -> None:
            name, path = mix[k % len(mix)]  # a client per kind: every kind all along
            while time.monotonic() < end:
                if path.startswith("/audit"):
                    outcome = str(_status_no_redirect(url + path))
                else:
                    status, body = _get(url + path, 600)
                    outcome = f"{status} {_said(body)}"
                fig.hostile[f"{name}: {outcome}"] += 1

        threads = [threading.Thread(target=sample, daemon=True)]
        threads += [threading.Thread(target=ordinary_client, args=(k,)) for k in range(ordinary)]
        clients = hostile or len(mix)
        threads += [
            threading.Thread(target=hostile_client, args=(k,), daemon=True) for k in range(clients)
        ]
        for t in threads:
            t.start()
        for t in threads[1 : 1 + ordinary]:
            t.join()
        time.sleep(10)  # the load stopped (hostile requests may still be in flight)
        stop.set()
        mem = memory_mb(proc.pid)
        fig.after_mb, fig.peak_mb = mem["VmRSS"], mem["VmHWM"]
        fig.audit_slot = _status_no_redirect(f"{url}/audit?author=org")
        sent = time.monotonic()
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=20)
            fig.sigterm_s = time.monotonic() - sent
        except Exception:  # noqa: BLE001 - any timeout: it did not exit
            proc.kill()
            proc.wait()
    return fig


def _pct(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def report(figures: dict[str, Figures]) -> str:
    names = list(figures)
    rows: list[tuple[str, list[str]]] = []

    def row(label: str, cell: Any) -> None:
        rows.append((label, [cell(f) for f in figures.values()]))

    row("ordinary checks", lambda f: str(sum(f.ordinary.values())))
    row("  200 with a verdict", lambda f: str(f.ordinary["200 with a verdict"]))
    row(
        "  latency p50 (s)",
        lambda f: f"{statistics.median(f.latencies):.2f}" if f.latencies else "-",
    )
    row("  latency p99 (s)", lambda f: f"{_pct(f.latencies, 0.99):.2f}")
    row("  latency max (s)", lambda f: f"{max(f.latencies):.2f}" if f.latencies else "-")
    row("hostile requests answered", lambda f: str(sum(f.hostile.values())))
    row("server RSS at start (MB)", lambda f: str(f.start_mb))
    row("server RSS peak (MB)", lambda f: str(f.peak_mb))
    row("server RSS 10 s after (MB)", lambda f: str(f.after_mb))
    row("an audit slot after (status)", lambda f: str(f.audit_slot))
    row(
        "exit on SIGTERM",
        lambda f: "no (killed after 20 s)" if f.sigterm_s is None else f"{f.sigterm_s:.1f} s",
    )
    width = max(len(label) for label, _ in rows)
    cols = [max(len(n), *(len(c[i]) for _, c in rows)) for i, n in enumerate(names)]
    lines = [" " * width + "  " + "  ".join(n.rjust(w) for n, w in zip(names, cols, strict=True))]
    for label, cells in rows:
        lines.append(
            label.ljust(width)
            + "  "
            + "  ".join(c.rjust(w) for c, w in zip(cells, cols, strict=True))
        )
    for name, fig in figures.items():
        lines.append(f"\n{name}: hostile requests by how they ended")
        lines += [f"  {n:4d}  {what}" for what, n in sorted(fig.hostile.items())]
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=120.0)
    parser.add_argument("--ordinary", type=int, default=2, help="ordinary clients")
    parser.add_argument(
        "--hostile", type=int, default=0, help="hostile clients (default: one per kind)"
    )
    parser.add_argument("--baseline", type=Path, help="another checkout (e.g. /work/main)")
    parser.add_argument(
        "--without-gguf", action="store_true", help="leave the two GGUF repos out of the mix"
    )
    parser.add_argument("--latency", type=float, default=0.05, help="the Hub's, s/request")
    parser.add_argument("--serve", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve:
        serve(args.latency)
        return 0
    print(machine())
    hub = ServedHub(__file__, "--latency", args.latency)
    try:
        load = (args.seconds, args.ordinary, args.hostile, not args.without_gguf)
        figures = {"this tree": run(ROOT, hub, *load)}
        if args.baseline is not None:
            base = args.baseline.resolve()
            figures[f"baseline {base}"] = run(base, hub, *load)
    finally:
        hub.close()
    print(report(figures))
    return 0


if __name__ == "__main__":
    sys.exit(main())
