"""Hostile chat templates: stopped quickly and in little memory, reported, batch goes on."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from eosfix import api
from eosfix.analysis.template import render
from eosfix.cli import main
from eosfix.core.limits import RenderLimitExceeded, RenderLimits, SandboxEscape, weight
from tests.conftest import ROOT, SAMPLES, copy_repo

# (id, template, finding code). Each would hang, eat gigabytes or escape without the guards.
HOSTILE = [
    (
        "nested-range",
        ("{% for i in range(100000) %}{% for j in range(100000) %}x{% endfor %}{% endfor %}"),
        "EOS101",
    ),
    (
        "nested-range-silent",
        ("{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}"),
        "EOS101",
    ),
    ("string-times-huge", "{{ 'a' * 10**10 }}", "EOS101"),
    ("list-times-huge", "{{ ([1] * 10**9)|length }}", "EOS101"),
    (
        "doubling-tilde",
        (
            "{% set ns = namespace(s='ab') %}{% for i in range(64) %}"
            "{% set ns.s = ns.s ~ ns.s %}{% endfor %}{{ ns.s|length }}"
        ),
        "EOS101",
    ),
    (
        "doubling-plus",
        (
            "{% set ns = namespace(s='ab') %}{% for i in range(64) %}"
            "{% set ns.s = ns.s + ns.s %}{% endfor %}"
        ),
        "EOS101",
    ),
    (
        "doubling-set-block",
        (
            "{% set ns = namespace(s='ab') %}{% for i in range(64) %}"
            "{% set t %}{{ ns.s }}{{ ns.s }}{% endset %}{% set ns.s = t %}{% endfor %}"
        ),
        "EOS101",
    ),
    ("huge-output", "{% for i in range(100000) %}{{ 'x' * 100000 }}{% endfor %}", "EOS101"),
    (
        "huge-macro-output",
        (
            "{% macro m() %}{% for i in range(100000) %}{{ 'y' * 99999 }}"
            "{% endfor %}{% endmacro %}{% set s = m() %}"
        ),
        "EOS101",
    ),
    ("deep-recursion", "{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}", "EOS101"),
    (
        "exponential-macro",
        (
            "{% macro f(n) %}{% if n %}{{ f(n - 1) }}{{ f(n - 1) }}{% endif %}"
            "{% endmacro %}{{ f(64) }}"
        ),
        "EOS101",
    ),
    (
        "recursive-loop",
        ("{% for x in range(1000) recursive %}{{ loop(range(1000)) }}{% endfor %}"),
        "EOS101",
    ),
    ("center-width", "{{ 'a'.center(10**9) }}", "EOS101"),
    ("format-width", "{{ '{:>999999999}'.format(1) }}", "EOS101"),
    ("percent-width", "{{ '%999999999d' % 1 }}", "EOS101"),
    ("format-repeat", "{{ ('{0}' * 200000).format('z' * 200000) }}", "EOS101"),
    ("join-amplify", "{{ ([1] * 100000)|join('s' * 100000) }}", "EOS101"),
    ("str-join-amplify", "{{ ('s' * 100000).join('x' * 100000) }}", "EOS101"),
    ("replace-amplify", "{{ ('a' * 100000).replace('a', 'b' * 100000) }}", "EOS101"),
    ("indent-amplify", "{{ ('\\n' * 100000)|indent('x' * 100000) }}", "EOS101"),
    ("int-power", "{{ (2 ** 100000000)|string|length }}", "EOS101"),
    ("lipsum", "{{ lipsum(1000000) }}", "EOS101"),
    (
        "slow-filter-loop",
        ("{% for i in range(100000) %}{{ ('a' * 90000)|list|sort|length }}{% endfor %}"),
        "EOS101",
    ),
    ("tojson-amplify", "{{ [['x' * 1000] * 1000] * 1000 }}", "EOS101"),
    ("class-mro-subclasses", "{{ ''.__class__.__mro__[1].__subclasses__() }}", "EOS102"),
    ("globals", "{{ raise_exception.__globals__['os'] }}", "EOS102"),
    ("getitem-class", "{{ ''['__class__'] }}", "EOS102"),
    ("cycler-init-globals", "{{ cycler.__init__.__globals__.os.popen('id').read() }}", "EOS102"),
    ("format-escape", "{{ '{0.__class__.__mro__}'.format('') }}", "EOS102"),
]


def _repo(tmp_path: Path, name: str, template: str) -> Path:
    root = tmp_path / name
    root.mkdir()
    (root / "chat_template.jinja").write_text(template)
    tok = {
        "eos_token": "<|im_end|>",
        "added_tokens_decoder": {"2": {"content": "<|im_end|>", "special": True}},
    }
    (root / "tokenizer_config.json").write_text(json.dumps(tok, indent=2) + "\n")
    (root / "generation_config.json").write_text('{\n  "eos_token_id": 1\n}\n')
    return root


def _snapshot(root: Path) -> dict[str, bytes]:
    return {
        str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()
    }


@pytest.mark.parametrize(("template", "code"), [pytest.param(t, c, id=i) for i, t, c in HOSTILE])
def test_hostile_template_is_stopped_and_reported(tmp_path, template, code):
    root = _repo(tmp_path, "hostile", template)
    before = _snapshot(root)
    start = time.monotonic()
    result = api.fix(root)
    elapsed = time.monotonic() - start
    assert elapsed < 2.5, f"took {elapsed:.2f} s"
    assert result.error is None
    assert result.check is not None
    findings = [f for f in result.check.findings if f.code == code]
    assert findings, result.check.findings
    assert findings[0].file == "chat_template.jinja"
    assert result.written == ()
    assert _snapshot(root) == before


def test_batch_goes_on_after_a_hostile_repo(tmp_path, capsys):
    bad = [_repo(tmp_path, f"bad{i}", HOSTILE[i][1]) for i in (0, 9, 24)]
    good = copy_repo(SAMPLES / "llama3-healthy", tmp_path / "good")
    before = {p: _snapshot(p) for p in (*bad, good)}
    code = main(["check", str(bad[0]), str(good), str(bad[1]), str(bad[2])])
    out, err = capsys.readouterr()
    assert code == 1
    assert "Traceback" not in out + err
    for path, finding in zip(bad, ("EOS101", "EOS101", "EOS102"), strict=True):
        assert f"{path}/chat_template.jinja: {finding} template 'default'" in out
    assert str(good) in out
    assert {p: _snapshot(p) for p in before} == before


def test_limits_do_not_change_real_renders():
    source = "{% for m in messages %}{{ m.role ~ ': ' ~ m.content|trim }}\n{% endfor %}"
    messages = [{"role": "user", "content": " hi "}, {"role": "assistant", "content": "yo"}]
    assert render(source, {"messages": messages}) == "user: hi\nassistant: yo\n"


def test_a_struck_template_is_refused_at_once():
    source = "{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}"
    with pytest.raises(RenderLimitExceeded) as first:
        render(source, {}, RenderLimits(max_loop_iterations=1000))
    assert first.value.limit == "loop iterations"
    start = time.monotonic()
    with pytest.raises(RenderLimitExceeded, match="earlier render"):
        render(source, {})
    assert time.monotonic() - start < 0.05


def test_deadline_stops_a_slow_render():
    source = "{% for i in range(100000) %}{{ i }}{% endfor %}{# deadline #}"
    with pytest.raises(RenderLimitExceeded) as exc:
        render(source, {}, RenderLimits(max_seconds=0.0))
    assert exc.value.limit == "time"


def test_memory_error_becomes_a_limit(monkeypatch):
    from eosfix.analysis import template

    def boom(**_):
        raise MemoryError

    compiled = template.compile_template("{{ 1 }}{# mem #}")
    monkeypatch.setattr(compiled, "render", boom)
    with pytest.raises(RenderLimitExceeded) as exc:
        render("{{ 1 }}{# mem #}", {})
    assert exc.value.limit == "memory"


def test_sandbox_escape_is_its_own_exception():
    with pytest.raises(SandboxEscape, match="__class__"):
        render("{{ x.__class__ }}", {"x": 1})


def test_list_append_is_still_refused_like_transformers():
    from jinja2.sandbox import SecurityError

    with pytest.raises(SecurityError) as exc:
        render("{% set _ = xs.append(1) %}", {"xs": []})
    assert not isinstance(exc.value, SandboxEscape)


def test_weight_stops_counting_past_the_cap():
    shared = ["x" * 1000] * 1000
    assert weight([shared] * 1000, 10_000) <= 10_000 + 1001
    assert weight({"a": [1, "bc"]}, 100) == 2 + 1 + 2 + 1 + 2


_MEASURE = textwrap.dedent(
    """
    import json, resource, sys, time
    from pathlib import Path
    from eosfix.core.limits import set_memory_ceiling
    set_memory_ceiling(1 << 30)
    from eosfix import api
    out = {}
    for root in sys.argv[1:]:
        start = time.monotonic()
        result = api.check(root)
        codes = sorted({f.code for f in result.check.findings})
        out[Path(root).name] = [time.monotonic() - start, codes]
    out["peak_rss_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(json.dumps(out))
    """
)


def test_hostile_batch_under_a_memory_ceiling(tmp_path):
    roots = [_repo(tmp_path, i, t) for i, t, _ in HOSTILE]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.run(
        [sys.executable, "-c", _MEASURE, *map(str, roots)],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    assert out.pop("peak_rss_mb") < 1024
    for name, expected in ((i, c) for i, _, c in HOSTILE):
        seconds, codes = out[name]
        assert seconds < 2.5, (name, seconds)
        assert expected in codes, (name, codes)


def test_set_memory_ceiling_turns_exhaustion_into_memory_error():
    script = textwrap.dedent(
        """
        from eosfix.core.limits import set_memory_ceiling
        set_memory_ceiling(512 << 20)
        try:
            bytearray(1 << 30)
        except MemoryError:
            print("MemoryError")
        """
    )
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.run(
        [sys.executable, "-c", script],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
        check=False,
    )
    assert proc.stdout.strip() == "MemoryError", proc.stderr
