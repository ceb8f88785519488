"""Hostile chat templates: stopped by counts, quickly and in little memory, reported, batch
goes on; the wall-clock backstop only ever says "this machine, retry" (EOS103).

Time is measured as CPU time of the process (``time.process_time``): what the template costs,
whatever else the machine is doing, so these bounds hold on a loaded machine too.
"""

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
from eosfix.analysis import template
from eosfix.analysis.template import render, strike_scope
from eosfix.cli import main
from eosfix.core import limits
from eosfix.core.limits import (
    DEFAULT_LIMITS,
    RenderDeadline,
    RenderLimitExceeded,
    RenderLimits,
    SandboxEscape,
    weight,
)
from tests.conftest import ROOT, SAMPLES, copy_repo
from tests.support.hostile import HOSTILE, hostile_repo

# What one hostile repo may cost. That a count (EOS101), not the wall-clock backstop (EOS103),
# stopped a render is asserted by its code; this bound only catches a guard that lets a render
# run orders of magnitude longer. Measured: the worst (exponential-macro, stopped at 100,000
# calls) takes 0.46 s of CPU with the current dependencies and 1.5 s with the minimum versions,
# 3.3 s on CI's loaded floor run; how fast eosfix is belongs to benchmarks/, not to this bound.
CPU_SECONDS = 10.0


def _snapshot(root: Path) -> dict[str, bytes]:
    return {
        str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()
    }


@pytest.mark.parametrize(("source", "code"), [pytest.param(t, c, id=i) for i, t, c in HOSTILE])
def test_hostile_template_is_stopped_and_reported(tmp_path, source, code):
    root = hostile_repo(tmp_path, "hostile", source)
    before = _snapshot(root)
    start = time.process_time()
    result = api.fix(root)
    elapsed = time.process_time() - start
    assert elapsed < CPU_SECONDS, f"took {elapsed:.2f} s of CPU"
    assert result.error is None
    assert result.check is not None
    findings = [f for f in result.check.findings if f.code == code]
    assert findings, result.check.findings
    assert findings[0].file == "chat_template.jinja"
    assert result.written == ()
    assert _snapshot(root) == before


def test_batch_goes_on_after_a_hostile_repo(tmp_path, capsys):
    bad = [hostile_repo(tmp_path, f"bad{i}", HOSTILE[i][1]) for i in (0, 9, 24)]
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


def test_a_struck_template_is_refused_at_once_within_its_scope(monkeypatch):
    source = "{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}"
    few = RenderLimits(max_loop_iterations=1000)
    with strike_scope():
        with pytest.raises(RenderLimitExceeded) as first:
            render(source, {}, few)
        assert first.value.limit == "loop iterations"

        def compile_again(_source):
            raise AssertionError("a struck template is not rendered again")

        monkeypatch.setattr(template, "compile_template", compile_again)
        with pytest.raises(RenderLimitExceeded, match="earlier render") as again:
            render(source, {}, few)
        assert again.value.limit == "loop iterations"
        monkeypatch.undo()
        with pytest.raises(RenderLimitExceeded, match=r"over 1000000 per render"):
            render(source, {})  # other limits: a render of its own


def test_nothing_is_struck_outside_a_scope():
    """A process remembers no refusal between analyses: the second render is a real one."""
    source = "{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}"
    few = RenderLimits(max_loop_iterations=1000)
    for _ in range(2):
        with pytest.raises(RenderLimitExceeded, match=r"over 1000 per render"):
            render(source, {}, few)
    with strike_scope(), pytest.raises(RenderLimitExceeded, match=r"over 1000 per render"):
        render(source, {}, few)  # a new scope starts clean


def test_a_repo_gets_the_same_verdict_whatever_the_process_checked_before(tmp_path):
    """Two repos share a hostile template (as quantized uploads of one model do): the second
    one's JSON is the same checked alone or after the first, in one process."""
    first = hostile_repo(tmp_path, "first", HOSTILE[0][1])
    second = hostile_repo(tmp_path, "second", HOSTILE[0][1])
    (second / "generation_config.json").write_text('{\n  "eos_token_id": 2\n}\n')

    def entry(*roots):
        proc = subprocess.run(
            [sys.executable, "-m", "eosfix", "check", "--format", "json", *map(str, roots)],
            capture_output=True,
            text=True,
            env={**os.environ, "PYTHONPATH": str(ROOT)},
            timeout=120,
            check=False,
        )
        assert proc.returncode == 1, proc.stderr
        return json.loads(proc.stdout)["repos"][-1]

    alone, after = entry(second), entry(first, second)
    assert alone == after
    assert "over 1000000 per render" in json.dumps(alone)  # the real refusal, each time


def test_the_backstop_is_its_own_retryable_outcome(tmp_path, monkeypatch):
    """A render still running at the wall-clock backstop is EOS103 ("this machine, retry"),
    never EOS101; fix writes nothing; and the next analysis starts afresh (no strike)."""
    root = copy_repo(SAMPLES / "chatml-missing-im-end", tmp_path / "repo")
    before = _snapshot(root)
    monkeypatch.setattr(limits, "DEFAULT_LIMITS", RenderLimits(max_seconds=0.0))
    result = api.fix(root, config_json=True)
    assert result.check is not None
    codes = [f.code for f in result.check.findings]
    assert "EOS103" in codes
    assert "EOS101" not in codes
    eos103 = next(f for f in result.check.findings if f.code == "EOS103")
    assert eos103.file == "chat_template.jinja"
    assert eos103.message.startswith("template 'default' could not finish in 0 s on this machine")
    assert eos103.message.endswith("): retry")
    assert eos103.fixable is False
    assert result.check.proposed is None
    assert result.written == ()
    assert _snapshot(root) == before
    monkeypatch.setattr(limits, "DEFAULT_LIMITS", DEFAULT_LIMITS)
    again = api.fix(root)
    assert again.check is not None
    assert not {"EOS101", "EOS103"} & {f.code for f in again.check.findings}
    assert again.written == ("generation_config.json",)


def test_the_backstop_is_far_beyond_what_counts_allow():
    """Counts decide; the backstop (seconds of wall clock) is only for a stalled machine."""
    assert DEFAULT_LIMITS.max_seconds >= 3 * CPU_SECONDS


def test_deadline_stops_a_slow_render():
    source = "{% for i in range(100000) %}{{ i }}{% endfor %}{# deadline #}"
    with pytest.raises(RenderDeadline) as exc:
        render(source, {}, RenderLimits(max_seconds=0.0))
    assert exc.value.limit == "time"
    assert str(exc.value).startswith("could not finish in 0 s on this machine (")
    assert str(exc.value).endswith("): retry")


def test_a_deadline_in_a_scope_spares_the_rest_of_the_analysis(monkeypatch):
    """After a deadline, later renders of the template in the same analysis are refused at
    once, still as "this machine, retry"."""
    source = "{% for i in range(100000) %}{{ i }}{% endfor %}{# deadline 2 #}"
    limits = RenderLimits(max_seconds=0.0)
    with strike_scope():
        with pytest.raises(RenderDeadline):
            render(source, {}, limits)

        def compile_again(_source):
            raise AssertionError("rendered again")

        monkeypatch.setattr(template, "compile_template", compile_again)
        with pytest.raises(RenderDeadline, match="retry"):
            render(source, {}, limits)


def test_recursion_is_stopped_by_a_count_at_any_stack_depth():
    """A deep macro is refused at the same nesting depth whether the render starts from a
    shallow or a deep Python stack (Python's own recursion limit would depend on it)."""
    source = "{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}"

    def at_depth(n):
        if n:
            return at_depth(n - 1)
        with pytest.raises(RenderLimitExceeded) as exc:
            render(source, {})
        return str(exc.value)

    shallow, deep = at_depth(0), at_depth(150)
    assert shallow == deep
    assert shallow == "render limit exceeded: recursion depth (over 100 nested macro or loop calls)"


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
    import json, sys, time
    from pathlib import Path
    from eosfix.core.limits import set_memory_ceiling
    from tests.support.memory import peak_mib
    set_memory_ceiling(1 << 30)
    from eosfix import api
    out = {}
    for root in sys.argv[1:]:
        start = time.process_time()
        result = api.check(root)
        codes = sorted({f.code for f in result.check.findings})
        out[Path(root).name] = [time.process_time() - start, codes]
    out["peak_rss_mb"] = peak_mib()
    print(json.dumps(out))
    """
)


def test_hostile_batch_under_a_memory_ceiling(tmp_path):
    roots = [hostile_repo(tmp_path, i, t) for i, t, _ in HOSTILE]
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
        assert seconds < CPU_SECONDS, (name, seconds)
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
