"""The GGUF field cache (``KnownFields``, and the builds from its token lists) is bounded in
fields and bytes whatever headers it sees, so a process checking hostile headers again and
again stays flat, while quantisations of one model still share their token arrays."""

from __future__ import annotations

import json
import os
import struct
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from eosfix.containers.gguf import read
from eosfix.containers.gguf.read import KnownFields, model_from_header
from eosfix.containers.gguf.remote import read_remote_header
from tests.support.ggufs import BASE, Bytes, chatml_pairs, kv, raw_gguf, str_kv

ROOT = Path(__file__).resolve().parents[3]
TOKENS = "tokenizer.ggml.tokens"
SPECIALS = ("<|endoftext|>", "<|im_start|>", "<|im_end|>")


def odd_keys(seed: int, n: int = 3000, size: int = 8192) -> bytes:
    """A ChatML GGUF with ``n`` string keys of ``size`` bytes that no other header has."""
    odd = [str_kv(f"odd.{seed}.{i}", (f"{seed}.{i}." * size)[:size]) for i in range(n)]
    return raw_gguf([*odd, *chatml_pairs()])


def _string(text: str) -> bytes:
    raw = text.encode()
    return struct.pack("<Q", len(raw)) + raw


def huge_tokens(seed: int, n: int) -> bytes:
    """A ChatML GGUF whose ``n`` tokens no other header has (the ChatML specials last)."""
    words = [*BASE, *(f"{seed}w{i}" for i in range(n - len(BASE) - 3)), *SPECIALS]
    tokens = kv(TOKENS, 9, struct.pack("<IQ", 8, n) + b"".join(map(_string, words)))
    types = struct.pack(f"<IQ{n}i", 5, n, *([1] * (n - 3)), 3, 3, 3)
    return raw_gguf(chatml_pairs(**{
        TOKENS: tokens,
        "tokenizer.ggml.token_type": kv("tokenizer.ggml.token_type", 9, types),
        "tokenizer.ggml.eos_token_id": kv("tokenizer.ggml.eos_token_id", 4,
                                          struct.pack("<I", n - 3)),
    }))  # fmt: skip


def check_header(known: KnownFields, name: str, data: bytes) -> None:
    """What a check of a GGUF on the Hub does with the caches: its header read through the
    field cache, its model built (text -> id and the added tokens, once per token list)."""
    model = model_from_header(read_remote_header(name, Bytes(data), known=known))
    assert model.repo.templates


def test_odd_keys_checked_again_and_again_stay_within_the_budget():
    """3,000 keys of 8 KB that no other header has, in ten checks: after each, the cache
    holds at most its fields and its bytes, the latest kept (a cache, not a no-op)."""
    known = KnownFields()
    for seed in range(10):
        check_header(known, f"evil/odd-{seed}/x.gguf", odd_keys(seed))
        assert len(known) == known.max_fields
        assert known.held_bytes <= known.max_bytes
    assert known.held_bytes == sum(k.held for k in known._kept.values())


def test_a_token_array_larger_than_the_budget_is_never_kept(monkeypatch):
    """A token list whose bound exceeds the byte budget is not kept (nor the builds from a
    list over theirs), check after check; the smaller large fields of the same header are."""
    monkeypatch.setattr(read, "_SHARED_ITEMS", 1 << 16)
    read._SHARED.clear()
    known = KnownFields(max_bytes=2 << 20)
    n = 120_000  # 3.3 MB by the bound
    for seed in range(3):
        check_header(known, f"evil/tokens-{seed}/x.gguf", huge_tokens(seed, n))
        kept = [k.field.key for k in known._kept.values()]
        assert TOKENS not in kept
        assert "tokenizer.ggml.token_type" in kept  # 0.5 MB, by the bound too
        assert known.held_bytes <= known.max_bytes
        assert read.shared_items() <= read._SHARED_ITEMS
    assert not read._SHARED


def test_the_least_recently_used_field_goes_first():
    """A field matched again is the most recent: when the budget is full, an older one goes."""
    a, b, c = (huge_tokens(seed, 20_000) for seed in range(3))
    known = KnownFields(max_fields=2, per_key=4)
    known.MIN_BYTES = 100_000  # the token lists only
    check_header(known, "org/a/x.gguf", a)
    check_header(known, "org/b/x.gguf", b)
    check_header(known, "org/a/y.gguf", a)  # a is used again: b is now the oldest
    check_header(known, "org/c/x.gguf", c)
    reused = known.reused
    check_header(known, "org/a/z.gguf", a)
    assert known.reused == reused + 1
    check_header(known, "org/b/y.gguf", b)
    assert known.reused == reused + 1  # b went
    assert len(known) == 2


def test_siblings_still_share_their_tokens_after_hostile_headers():
    """After the cache was filled by hostile headers, two quantisations of one model share
    their token list (the second walks nothing again)."""
    known = KnownFields()
    for seed in range(3):
        check_header(known, f"evil/odd-{seed}/x.gguf", odd_keys(seed))
    model = huge_tokens(99, 150_000)
    first = read_remote_header("org/m/Q4.gguf", Bytes(model), known=known)
    second = read_remote_header("org/m/Q8.gguf", Bytes(model), known=known)
    assert second.fields[TOKENS].value is first.fields[TOKENS].value


@pytest.mark.package_index
def test_every_shipped_vocabulary_fits_the_default_budget(ggml_vocab_files):
    """The default budget keeps every large field of each of llama.cpp's vocabularies
    (gemma-4's 262,144 tokens the largest), so their quantisations always share them."""
    for path in ggml_vocab_files:
        known = KnownFields()
        data = path.read_bytes()
        header = read_remote_header(path.name, Bytes(data), known=known)
        large = [f for f in header.fields.values() if f.end - f.start >= known.MIN_BYTES]
        assert len(known) == len(large), path.name
        again = read_remote_header(path.name, Bytes(data), known=known)
        assert known.reused == len(large), path.name
        assert again.fields[TOKENS].value is header.fields[TOKENS].value


CHILD = textwrap.dedent(
    """
    import json, sys
    from eosfix.containers.gguf.read import KnownFields
    from tests.support.memory import peak_mib
    from tests.containers.gguf.test_read_known_fields import check_header, huge_tokens, odd_keys

    limit, tokens = int(sys.argv[1]), int(sys.argv[2])
    known = KnownFields()  # as the process-wide one of eosfix.targets.gguf_hub
    peaks = []
    for i in range(10):
        data = odd_keys(i) if i % 2 == 0 else huge_tokens(i, tokens)
        check_header(known, f"evil/r{i}/x.gguf", data)
        del data
        peaks.append(int(peak_mib()))
        if peaks[-1] - peaks[1 if i else 0] > limit:
            break  # unbounded already: spare the machine the rest
    print(json.dumps(peaks))
    """
)


@pytest.mark.slow
def test_ten_hostile_checks_leave_the_process_within_100_mb():
    """A process checking hostile headers (3,000 odd 8 KB keys; a million tokens, about 15 MB
    of header: both kinds in turn, ten checks) peaks no more than 100 MB above its peak after
    the first check of each kind (its own VmHWM: tests/support/memory.py)."""
    limit = 100
    proc = subprocess.run(
        [sys.executable, "-c", CHILD, str(limit), "1000000"],
        capture_output=True, text=True, timeout=600, check=False, cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-2000:]
    peaks = json.loads(proc.stdout)
    assert len(peaks) == 10, peaks
    assert peaks[-1] - peaks[1] <= limit, peaks
