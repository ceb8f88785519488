"""Fuzz the loaders, the checker, the planner and the JSON editor for a bounded time.

    python fuzz/fuzz_eosfix.py --seconds 60

Inputs: random bytes and mutations of the real config files in sample_repos/ and the
corpus, written into a repo folder and fed to ``load_repo`` -> ``check`` ->
``plan_patches``; random JSON text to ``jsonedit.set_json_value``. An ``EosfixError`` (or,
from the editor, the documented ``ValueError``) is a refusal; anything else is a bug: the
input is saved under fuzz/crashes/ and the run fails. Keep each one as a regression test in
tests/test_fuzz_crashes.py.
"""

from __future__ import annotations

import argparse
import json
import random
import shutil
import sys
import tempfile
import time
import traceback
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from eosfix.containers.folder.keys import FolderStops
from eosfix.containers.folder.plan import plan_patches
from eosfix.containers.folder.read import load_repo
from eosfix.core.errors import EosfixError
from eosfix.core.jsonedit import set_json_value
from eosfix.decide.check import check as decide_check

FILES = (
    "generation_config.json",
    "config.json",
    "tokenizer_config.json",
    "special_tokens_map.json",
    "chat_template.jinja",
    "added_tokens.json",
)
CORPUS = ROOT.parent / "shared" / "corpus"
CRASHES = ROOT / "fuzz" / "crashes"


def _seeds() -> dict[str, list[bytes]]:
    seeds: dict[str, list[bytes]] = {name: [] for name in FILES}
    for base in (ROOT / "sample_repos", CORPUS):
        for path in sorted(base.glob("*/*")) if base.is_dir() else []:
            if path.name in seeds and path.stat().st_size < 400_000:
                seeds[path.name].append(path.read_bytes())
    return seeds


SEEDS = _seeds()
_INTERESTING = [
    b"",
    b"{",
    b"}",
    b"[",
    b"]",
    b'"',
    b"\\",
    b"\xff",
    b"\xef\xbb\xbf",
    b"null",
    b"-1",
    b"1e999",
    b"2.0",
    b"[]",
    b"{}",
    b'"eos_token_id"',
    b"{%",
    b"%}",
    b"{{",
    b"}}",
    b"<|im_end|>",
    b"\x00",
    b"\r\n",
    b"NaN",
    b"99999999999999999999",
]


def _mutate(data: bytes, rnd: random.Random) -> bytes:
    out = bytearray(data)
    for _ in range(rnd.randint(1, 6)):
        op = rnd.randrange(5)
        pos = rnd.randint(0, len(out))
        if op == 0 and out:
            del out[pos : pos + rnd.randint(1, 16)]
        elif op == 1:
            out[pos:pos] = rnd.choice(_INTERESTING)
        elif op == 2 and out:
            out[min(pos, len(out) - 1)] = rnd.randrange(256)
        elif op == 3 and out:
            start = rnd.randrange(len(out))
            out[pos:pos] = out[start : start + rnd.randint(1, 64)]
        else:
            out = out[:pos]
    return bytes(out)


def _json_value(obj: object) -> bytes:
    return json.dumps(obj).encode()


_json_objects = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=8),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=12,
)


@st.composite
def _repo_files(draw: st.DrawFn) -> dict[str, bytes]:
    """A plausible repo (seed files, mostly intact) with one or two files damaged."""
    files: dict[str, bytes] = {}
    victims = set(draw(st.lists(st.sampled_from(FILES), min_size=1, max_size=2)))
    for name in FILES:
        seeds = SEEDS.get(name) or [b"{}"]
        seed = seeds[draw(st.integers(0, len(seeds) - 1))]
        if name not in victims:
            if draw(st.booleans()):
                files[name] = seed
            continue
        choice = draw(st.integers(0, 3))
        if choice in (0, 1):
            files[name] = _mutate(seed, random.Random(draw(st.integers(0, 2**32))))
        elif choice == 2:
            files[name] = draw(st.binary(max_size=200))
        elif name.endswith(".json"):
            files[name] = _json_value(
                draw(
                    st.dictionaries(
                        st.sampled_from(
                            [
                                "eos_token_id",
                                "chat_template",
                                "eos_token",
                                "added_tokens_decoder",
                                "text_config",
                                "bos_token",
                            ]
                        ),
                        _json_objects,
                        max_size=4,
                    )
                )
            )
        else:
            files[name] = draw(st.text(max_size=200)).encode()
    return files


OUTCOMES = {"analyzed": 0, "refused": 0}


class Bug(Exception):
    pass


def _run_repo(files: dict[str, bytes], workdir: Path) -> None:
    root = workdir / "repo"
    shutil.rmtree(root, ignore_errors=True)
    root.mkdir()
    for name, data in files.items():
        (root / name).write_bytes(data)
    try:
        check = decide_check(load_repo(root), FolderStops())
        plan_patches(check, config_json=True)
        OUTCOMES["analyzed"] += 1
    except EosfixError:
        OUTCOMES["refused"] += 1
    except Exception as exc:
        _save("repo", {k: v.hex() for k, v in files.items()}, exc)
        raise Bug(repr(exc)) from exc


def _run_edit(text: str, value: object) -> None:
    for path in (("eos_token_id",), ("text_config", "eos_token_id")):
        try:
            new = set_json_value(text, path, value)
        except (ValueError, EosfixError):
            continue
        except Exception as exc:
            _save("jsonedit", {"text": text, "path": path, "value": value}, exc)
            raise Bug(repr(exc)) from exc
        if set_json_value(new, path, value) != new:
            _save("jsonedit", {"text": text, "path": path, "value": value}, "not idempotent")
            raise Bug("set_json_value is not idempotent")


def _save(kind: str, data: object, exc: object) -> None:
    CRASHES.mkdir(parents=True, exist_ok=True)
    name = CRASHES / f"{kind}-{int(time.time() * 1000)}.json"
    tb = "".join(traceback.format_exception(exc)) if isinstance(exc, BaseException) else exc
    name.write_text(json.dumps({"kind": kind, "input": data, "error": tb}, indent=1))
    print(f"bug saved to {name}", file=sys.stderr)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seconds", type=float, default=60.0)
    args = parser.parse_args()
    deadline = time.monotonic() + args.seconds
    workdir = Path(tempfile.mkdtemp(prefix="eosfix-fuzz-"))
    counts = {"repo": 0, "jsonedit": 0}
    json_texts = st.one_of(
        st.text(max_size=80),
        _json_objects.map(json.dumps),
        st.sampled_from(
            [s.decode("utf-8", "replace") for v in SEEDS.values() for s in v if len(s) < 20_000]
            or ["{}"]
        ).flatmap(
            lambda s: st.integers(0, 2**32).map(
                lambda seed: _mutate(s.encode(), random.Random(seed)).decode("utf-8", "replace")
            )
        ),
    )
    eos = st.none() | st.integers(-5, 2**40) | st.lists(st.integers(0, 2**31), max_size=4)

    # Small batches, so the deadline is checked often; hypothesis shrinks a failure first.
    fuzz_settings = settings(
        max_examples=200, deadline=None, database=None, suppress_health_check=list(HealthCheck)
    )

    @fuzz_settings
    @given(files=_repo_files())
    def fuzz_repo(files: dict[str, bytes]) -> None:
        if time.monotonic() > deadline:
            return
        counts["repo"] += 1
        _run_repo(files, workdir)

    @fuzz_settings
    @given(text=json_texts, value=eos)
    def fuzz_edit(text: str, value: object) -> None:
        if time.monotonic() > deadline:
            return
        counts["jsonedit"] += 1
        _run_edit(text, value)

    status = 0
    try:
        while time.monotonic() < deadline:
            fuzz_repo()
            fuzz_edit()
    except Exception as exc:  # a Bug, or hypothesis' group of several  # noqa: BLE001
        print(f"BUG: {exc!r}", file=sys.stderr)
        status = 1
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    print(
        f"ran {counts['repo']} repos ({OUTCOMES['analyzed']} analyzed, "
        f"{OUTCOMES['refused']} refused as EosfixError) and {counts['jsonedit']} edits",
        file=sys.stderr,
    )
    return status


if __name__ == "__main__":
    raise SystemExit(main())
