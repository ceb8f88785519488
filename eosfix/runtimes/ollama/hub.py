"""``ollama run hf.co/{user}/{repo}:{tag}``: the stop list the Hub hands ollama for a GGUF
repo, and which of its strings ollama can see.

ollama has no Hub-specific code: ``hf.co`` is a registry host like any other
(ollama/ollama@fb3076099 ``types/model/name.go`` lines 38-43, 146 ff.; ``server/images.go``
``pullModelManifest`` lines 1272-1291 asks ``/v2/{user}/{repo}/manifests/{tag}``). The Hub
answers with the GGUF and, as layers, a Go template and ``params`` (``images.go`` lines
716-787: ``application/vnd.ollama.image.params`` is JSON decoded into the model's options;
``server/routes.go`` lines 130-147 apply them; ``api/types.go`` ``FromMap`` lines 1051-1058
refuse a ``stop`` that is not an array of strings). Where those come from
(huggingface/hub-docs@242f4a1 ``docs/hub/ollama.md`` lines 69-88): the repo's own files
named ``template`` (a Go template), ``system`` and ``params`` (JSON, Modelfile parameter
names) when it has them; otherwise the Hub's conversion of the GGUF's
``tokenizer.chat_template``, the npm package ``@huggingface/ollama-utils`` (huggingface.js
PR #1111: the package holds "tools that power this integration"). Whether a repo's ``params``
replaces the converted params or is merged with them is not public: eosfix takes the file as
the whole params, and a pull request writes a complete one.

``convert`` is eosfix's model of that package's ``convertGGUFTemplateToOllama``
(packages/ollama-utils/src/chat-template.ts at huggingface/huggingface.js@fe42e68, identical
to the 0.0.18 release, lines 113-198); tests/conformance/test_ollama_hub.py executes the
package from npm on many templates and compares. In order:

1. no template: nothing (``undefined``); an OuteTTS template: the package throws;
2. a table entry whose template has the same first 128 characters (UTF-16 code units): the
   entry as it is, its params the ollama library model's (``hubmap.TABLE``, generated from
   the package);
3. a table entry with the same set of special tokens (``RE_SPECIAL_TOKEN``, line 6);
4. twelve hand-written rules keyed on substrings (lines 8-111), each one stop string or none;
5. the "auto-conversion" (lines 202-270): the Jinja template rendered for four conversations
   whose contents are ``{{ .System }}``, ``{{ .Prompt }}``, ``{{ .Response }}`` (a render
   that fails is retried without the system message; failing again, the conversion gives
   nothing), the renders diffed into a Go template; the stop list is every special token of
   that template, then ``###`` when the Jinja template holds it, else the user turn's prefix;
6. else nothing: ollama then gets no params from the Hub.

What ollama does with the list depends on its release: from 0.30.0 (9db4bdbad) it hands it
to llama-server as ``stop`` (``llm/llama_server.go`` lines 1569 and 2162 at fb3076099), which
matches it on the text it generates, where a control token is empty (ollama starts it without
``--special``; only a request's preserved tokens, tool-call tags, keep their text): a string
naming a control token never matches. Before (0.6.0-0.24.0), ollama's own runners matched it
on each token's text, control tokens included (``runner/llamarunner/runner.go`` line 541 and
``common.FindStop``, ``llama/llama.go`` ``TokenToPiece`` with ``special`` true, at v0.24.0;
the Go engine's ``tokenizer/bytepairencoding.go`` ``Decode``).

Runtime data: nothing here feeds the terminator analysis.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from eosfix.runtimes.ollama.engines import LLAMA_SERVER_SINCE
from eosfix.runtimes.ollama.hubmap import JINJA_VERSION, PACKAGE, TABLE, VERSION
from eosfix.runtimes.rule import Rule, Runtime, StopInputs
from eosfix.runtimes.rule import parse_version as _v

NAME = "ollama hf.co"
CONVERSION = f"{PACKAGE} {VERSION} (@huggingface/jinja {JINJA_VERSION})"
RE_SPECIAL_TOKEN = re.compile(r"<[|_A-Za-z0-9]+>|\[[A-Z]+\]|<\uff5c[\u2581A-Za-z]+\uff5c>")
PREFIX_UNITS = 128

# Renders a chat template with exactly the given variables; raises when the template fails.
Render = Callable[[str, Mapping[str, Any]], str]

# chat-template.ts lines 8-111: (alternatives, each a set of patterns that must all be found;
# the stop string, or None). The Go templates they give are not kept: only the stop matters.
CUSTOM: tuple[tuple[tuple[tuple[str, ...], ...], str | None], ...] = (
    (((r"<用户>", r"<AI>"),), None),
    (((r"### Instruction:",),), "### Instruction:"),
    (((r"Human:",),), "Human:"),
    (((r"<start_of_turn>",),), "<end_of_turn>"),
    (((r"(bos_token|'<s>') \+ message\['role'\]",),), "</s>"),
    (((r"<\|start_header_id\|>", r"eos_token|</s>"),), "</s>"),
    (((r"<\|assistant\|>", r"<\|end\|>"),), "<|end|>"),
    (((r"<\|{{ item\['role'\] }}\|>", r"<\|begin_of_image\|>"),), "<|user|>"),
    (((r"<\|START_OF_TURN_TOKEN\|>", r"<\|USER_TOKEN\|>"),), "<|END_OF_TURN_TOKEN|>"),
    (((r"Mistral Small 3", r"2023-10-01"),), "[INST]"),
    (((r"rwkv-world",),), "### Instruction:"),
    (((r"\[gMASK\]<sop>", r"<\|user\|>"), (r"chatglm4",)), "<|user|>"),
)
AUTO, CUSTOM_PATH, NONE, ERROR = "auto-conversion", "custom-matching", "none", "error"


@dataclass(frozen=True)
class Converted:
    """What the Hub's conversion gives for one chat template: ``path`` is the table entry
    matched (``library/llama3.1:8b``), ``custom-matching``, ``auto-conversion``, ``none``
    (the package returns nothing) or ``error`` (it throws: ``error``); ``params`` the params
    JSON text the Hub hands ollama (None: none)."""

    path: str
    params: str | None = None
    error: str | None = None

    @property
    def stop(self) -> tuple[str, ...]:
        return params_stop(self.params) or ()


def params_stop(text: str | None) -> tuple[str, ...] | None:
    """A params document's ``stop`` (None: no document, or no ``stop`` key). ValueError when
    ollama would refuse it (not a JSON object, or ``stop`` not an array of strings)."""
    if text is None:
        return None
    data = json.loads(text)
    if not isinstance(data, dict):
        raise ValueError("params is not a JSON object")  # noqa: TRY004 - a document's fault
    if "stop" not in data:
        return None
    stop = data["stop"]
    if not isinstance(stop, list) or not all(isinstance(s, str) for s in stop):
        raise ValueError('"stop" must be an array of strings (ollama refuses the request)')
    return tuple(stop)


def _utf16_prefix(text: str, units: int = PREFIX_UNITS) -> str:
    """JavaScript's ``text.substring(0, units)``."""
    return text.encode("utf-16-le", "surrogatepass")[: 2 * units].decode(
        "utf-16-le", "surrogatepass"
    )


def _utf16_len(text: str) -> int:
    return len(text.encode("utf-16-le", "surrogatepass")) // 2


def _utf16_from(text: str, units: int) -> str:
    """JavaScript's ``text.substring(units)``."""
    return text.encode("utf-16-le", "surrogatepass")[2 * units :].decode(
        "utf-16-le", "surrogatepass"
    )


def _js_trim(text: str) -> str:
    """JavaScript's ``String.prototype.trim`` (its whitespace, not Python's)."""
    return text.strip(" \t\n\v\f\r\u00a0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006"
                      "\u2007\u2008\u2009\u200a\u2028\u2029\u202f\u205f\u3000\ufeff")  # fmt: skip


def _table(template: str) -> Converted | None:
    """The table entry the template matches (by prefix, then by special-token set)."""
    prefix = _utf16_prefix(template)
    for model, head, _tokens, params in TABLE:
        if head == prefix:
            return Converted(model, params)
    found = set(RE_SPECIAL_TOKEN.findall(template))
    if found:
        for model, _head, tokens, params in TABLE:
            if set(tokens) == found:
                return Converted(model, params)
    return None


def _custom(template: str) -> tuple[bool, str | None]:
    for alternatives, stop in CUSTOM:
        if any(all(re.search(p, template) for p in group) for group in alternatives):
            return True, stop
    return False, None


class _Unconvertible(Exception):
    """A render failed with and without the system message (the package recurses until its
    stack overflows, and gives nothing)."""


def _auto(template: str, bos: str, eos: str, render: Render) -> tuple[str, str | None] | None:
    """convertJinjaToGoTemplate (lines 202-270): the Go template and the user turn's prefix."""
    system = {"role": "system", "content": "{{ .System }}"}
    user = {"role": "user", "content": "{{ .Prompt }}"}
    assistant = {"role": "assistant", "content": "{{ .Response }}"}

    def fmt(messages: list[dict[str, str]]) -> str:
        for msgs in (messages, [m for m in messages if m["role"] != "system"]):
            context = {
                "messages": msgs,
                "bos_token": bos,
                "eos_token": eos,
                "add_generation_prompt": False,
            }
            try:
                return render(template, context)
            except Exception:  # noqa: BLE001, S112 - any failure of the template: retry, then give up
                continue
        raise _Unconvertible

    try:
        formatted_system = fmt([system])
        resp0 = fmt([system, user])
        resp1 = fmt([system, user, assistant])
        user1 = fmt([system, user, assistant, user])
    except _Unconvertible:
        return None
    resp = _utf16_from(resp1, _utf16_len(resp0))
    user_part = _utf16_from(user1, _utf16_len(resp1))
    go = f"{{{{ if .System }}}}{formatted_system}{{{{ end }}}}{{{{ if .Prompt }}}}{user_part}{{{{ end }}}}{resp}"
    if "{{ .System }}" not in formatted_system:
        user_content = user_part.replace("{{ .Prompt }}", "{{ .Content }}", 1)
        resp_content = resp.replace("{{ .Response }}", "{{ .Content }}", 1)
        added = resp.split("{{ .Response }}")[0]
        go = (
            f'{formatted_system}{{{{- range .Messages }}}}{{{{- if eq .Role "user" }}}}'
            f'{user_content}{{{{- else if eq .Role "assistant" }}}}{resp_content}'
            f"{{{{- end }}}}{{{{- end }}}}{added}"
        )
    stop = _js_trim(re.sub(r"{{ \.Prompt }}.*", "", user_part, count=1, flags=re.DOTALL))
    return go, (stop if _utf16_len(stop) >= 2 else None)


def convert(
    chat_template: str | None, bos_token: str | None, eos_token: str | None, render: Render
) -> Converted:
    """What the Hub's conversion hands ollama for a GGUF with this chat template and these
    bos/eos texts (see the module); ``render`` renders a Jinja template."""
    if not chat_template:
        return Converted(NONE)
    if re.search(r"outetts-\d", chat_template):
        return Converted(ERROR, error="OuteTTS is not a text model")
    matched = _table(chat_template)
    if matched is not None:
        return matched
    found, stop = _custom(chat_template)
    if found:
        return Converted(CUSTOM_PATH, json.dumps({"stop": [stop]} if stop else {}))
    auto = _auto(chat_template, bos_token or "", eos_token or "", render)
    if auto is None:
        return Converted(NONE)
    go, user_prefix = auto
    stops = RE_SPECIAL_TOKEN.findall(go)
    if "###" in chat_template:
        stops.append("###")
    elif user_prefix:
        stops.append(user_prefix)
    return Converted(AUTO, json.dumps({"stop": list(dict.fromkeys(stops))}, ensure_ascii=False))


def sees_control_tokens(version: str) -> bool:
    """Whether ollama ``version`` matches stop strings on control tokens' text too (before
    llama-server, 0.30.0); from 0.30.0 a control token is empty in the text it matches."""
    return _v(version) < _v(LLAMA_SERVER_SINCE)


def visible_ids(
    stops: Sequence[str],
    text_ids: Mapping[str, int],
    terminators: Mapping[str, int | None],
    control: Callable[[int], bool],
    version: str,
) -> frozenset[int]:
    """The token ids at which ollama ``version`` stops because of ``stops``: a terminator
    whose text holds a stop string, and a token whose text is one, unless it is a control
    token that release does not see (``control(id)``)."""
    seen = sees_control_tokens(version)
    out = {i for s in stops if (i := text_ids.get(s)) is not None}
    out |= {
        i
        for text, i in terminators.items()
        if i is not None and any(s and s in text for s in stops)
    }
    return frozenset(i for i in out if seen or not control(i))


def _no_folder(x: StopInputs) -> frozenset[int]:
    raise TypeError(f"{NAME} applies to GGUF files on the Hub, not to a model folder")


_READS = (
    "the Hub's params stop (the repo's params file, else its conversion of the GGUF's chat "
    f"template, {CONVERSION}) + ollama's set for the GGUF"
)
_SOURCE = (
    "ollama/ollama@fb3076099 server/images.go, llm/llama_server.go; huggingface/hub-docs "
    f"docs/hub/ollama.md; {PACKAGE} {VERSION} src/chat-template.ts"
)
_OLDER = Rule(
    _no_folder,
    _READS,
    "ollama v0.24.0 runner/llamarunner/runner.go, llama/llama.go TokenToPiece",
    "stop strings match control tokens' text too",
    "0.6.0",
    LLAMA_SERVER_SINCE,
)
RUNTIME = Runtime(
    name=NAME,
    reads=_READS,
    source=_SOURCE,
    derive=_no_folder,
    note="a stop string naming a control token never matches (llama-server drops its text)",
    since=LLAMA_SERVER_SINCE,
    older=(_OLDER,),
    floor="before 0.6.0 ollama picked no engine by architecture; those releases were not read",
    remedy="",
)
