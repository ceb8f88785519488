"""The one check: terminators against a container's stop keys -> findings and a proposal.

Every container (a model folder, a GGUF file, an ollama model's blob) goes through
``check``: the templates are analysed (``eosfix.analysis``), the template and terminator
findings are raised here, once, with one wording; the container's ``StopKeys``
(``eosfix.decide.keys``) decide what its keys say and what ``fix`` would write. Codes,
severities and titles come from the one registry, ``eosfix.core.codes``. Pure.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable
from dataclasses import dataclass, field

from eosfix.analysis.inturn import closers_inside_a_call, closers_inside_a_turn
from eosfix.analysis.positions import EMPTY_TEMPLATE, TURN_END
from eosfix.analysis.terminators import (
    STOP_STRING,
    Placement,
    Terminator,
    TerminatorSet,
    find_terminators,
)
from eosfix.core.codes import (
    EOS005,
    EOS006,
    EOS007,
    EOS008,
    EOS009,
    EOS010,
    EOS016,
    EOS019,
    EOS100,
    EOS101,
    EOS102,
    EOS103,
    Finding,
    Severity,
    finding,
)
from eosfix.core.repo import ChatTemplate, ModelRepo, TokenInfo
from eosfix.decide.keys import StopConfig, StopIdReview, StopKeys, tokenizer_eos
from eosfix.runtimes.llamacpp import EOG_TEXTS

__all__ = ["Finding", "RepoCheck", "Severity", "Status", "check"]


class Status(enum.Enum):
    OK = "ok"  # every terminator is a stop id, and nothing for fix to change
    FIXABLE = "fixable"  # eosfix fix would repair it
    PROBLEMS = "problems"  # errors eosfix cannot fix by writing ids
    NO_TEMPLATE = "no_template"  # a base model: nothing to check
    NOT_A_MODEL = "not_a_model"  # no runtime loads a model from it (tokenizer files only)
    ERROR = "error"  # not checked: RepoResult.error says why (never a RepoCheck's status)


@dataclass(frozen=True)
class RepoCheck:
    """Everything eosfix knows about one repo (folder or GGUF); one meaning for every container.

    ``stop``: what the container's reference reader stops on now; ``proposed``: what it stops
    on once ``fix`` has written the plan (None: nothing to write); ``review``: every stop id
    of its keys, classified; ``unplaced``: terminators no key can hold (stop strings instead,
    ``instead`` says how per program).
    """

    repo: ModelRepo
    terminators: TerminatorSet
    stop: StopConfig
    tokenizer_eos: TokenInfo | None
    proposed: tuple[int, ...] | None
    findings: tuple[Finding, ...]
    review: StopIdReview
    keep_ids: tuple[int, ...] = ()  # ids the user keeps (--keep-id), never removed
    unplaced: tuple[Terminator, ...] = ()
    instead: dict[str, str] = field(default_factory=dict)
    model: bool = True  # False: a tokenizer-only folder, no runtime loads a model from it

    @property
    def status(self) -> Status:
        if not self.repo.templates:
            return Status.NO_TEMPLATE
        if not self.model:
            return Status.NOT_A_MODEL
        errors = [f for f in self.findings if f.severity is Severity.ERROR]
        if any(not f.fixable for f in errors):
            return Status.PROBLEMS
        # A fixable warning too (EOS013: an id that is no token): fix would change a file.
        return Status.FIXABLE if any(f.fixable for f in self.findings) else Status.OK

    @property
    def id_terminators(self) -> tuple[Terminator, ...]:
        return tuple(t for t in self.terminators.terminators if t.kind != STOP_STRING)

    @property
    def unwritten_eog_tokens(self) -> tuple[tuple[str, int], ...]:
        """Special tokens runtimes treat as end-of-generation by their text (llama.cpp's list)
        that no template writes: a model may still have learned them from data the template
        does not show (Llama 3.2's ``<|eom_id|>``). Evidence for a person, never written."""
        rendered = "".join(p.text or "" for ta in self.terminators.templates for p in ta.rendered)
        ends = {t.content for t in self.terminators.terminators}  # an empty template's eos
        return tuple(
            (text, info.id)
            for text in EOG_TEXTS
            if (info := self.repo.added_tokens.get(text)) is not None
            and info.special
            and info.id is not None
            and text not in rendered
            and text not in ends
        )

    @property
    def unfinished(self) -> bool:
        """A render ran into the wall-clock backstop (EOS103): nothing is planned from it."""
        return any(f.code == EOS103.code for f in self.findings)

    @property
    def stop_strings(self) -> tuple[str, ...]:
        """Turn ends that are plain text: no id can express them."""
        return tuple(t.content for t in self.terminators.terminators if t.kind == STOP_STRING)

    @property
    def stop_strings_needed(self) -> tuple[str, ...]:
        """Texts a runtime must stop on as strings: plain-text ends, and terminators the
        container's keys cannot hold as ids."""
        return tuple(dict.fromkeys([*self.stop_strings, *(t.content for t in self.unplaced)]))


def _terminator_findings(repo: ModelRepo, ts: TerminatorSet) -> list[Finding]:
    vocab = repo.vocabulary
    vocabulary = vocab.source if vocab is not None else "tokenizer.json"
    out = []
    for t in ts.terminators:
        files = ", ".join(sorted({ta.file for ta in ts.templates if ta.name in t.templates}))
        if t.kind == STOP_STRING:
            msg = f"turns end with plain text {t.content!r}: runtimes need it as a stop string"
            out.append(finding(EOS005, files, msg))
        elif t.id is None and vocab is not None and vocab.available:
            msg = f"{t.content} ends a turn but is not a single token of {vocabulary}"
            out.append(finding(EOS006, files, msg))
        elif t.id is None:
            msg = f"{t.content} ends a turn; its id cannot be checked without {vocabulary}"
            out.append(finding(EOS007, files, msg))
        elif t.special is False and t.content != repo.eos_token:
            msg = (
                f"{t.content} ({t.id}) ends a turn but is not marked special: "
                "decoding with skip_special_tokens=True leaves it in the reply text"
            )
            out.append(finding(EOS008, t.id_source or "", msg))
    in_call = closers_inside_a_call(ts)
    cut = [t for t in closers_inside_a_turn(ts) if t not in in_call]
    if cut:
        msg = (
            f"{' '.join(cut)} closes the last reply but is also written inside a turn "
            "(between reasoning and answer): stopping on it cuts the turn, and no other token "
            "ends the reply"
        )
        out.append(finding(EOS010, ts.templates[0].file, msg))
    if in_call:
        msg = (
            f"{' '.join(in_call)} closes the last reply but a reply that makes tool calls also "
            "writes it before more of its own text (before a call or between two): stopping "
            "on it cuts every tool call, and no other token ends the reply"
        )
        out.append(finding(EOS016, ts.templates[0].file, msg))
    elif (
        not cut
        and repo.templates
        and not ts.terminators
        and any(ta.rendered for ta in ts.templates)
        and not all(_empty(t) for t in repo.templates)  # EOS019 says it
    ):
        msg = "no turn terminator found: the template writes nothing that ends a reply"
        if all(ta.quoted for ta in ts.templates if ta.rendered):
            msg = (
                "no turn terminator found: the template quotes the conversation as text inside "
                "its prompt and writes nothing after the reply position, so nothing in it "
                "shows what ends the model's verdict"
            )
        out.append(finding(EOS009, ts.templates[0].file, msg))
    return out


# A template a folder's file holds (``chat_template.jinja``, ``additional_chat_templates/*``,
# tokenizer_config.json...), which transformers renders; a GGUF's is a metadata key.
_TEMPLATE_FILES = (".jinja", ".json")


def _empty(t: ChatTemplate) -> bool:
    """A folder's template that writes nothing but whitespace, whatever the conversation."""
    return t.file.endswith(_TEMPLATE_FILES) and not t.source.strip()


def _empty_template_findings(repo: ModelRepo) -> list[Finding]:
    """EOS019 for each empty template file. transformers 5.24 reads chat_template.jinja (and
    each additional template) whole, an empty one too, into the tokenizer's chat_template
    (tokenization_utils_base.py lines 1822-1839), which then replaces tokenizer_config.json's;
    get_chat_template uses it because '' is not None (lines 3378-3382); vLLM 0.33 resolves the
    template through the same get_chat_template (vllm/renderers/hf.py resolve_chat_template)."""
    out = []
    config = repo.tokenizer_config
    shadowed = config is not None and config.chat_template is not None
    for t in repo.templates:
        if not _empty(t):
            continue
        remedy = (
            "delete it to use tokenizer_config.json's chat_template"
            if shadowed and t.file.endswith(".jinja")
            else "write the template back"
        )
        name = (
            t.file.rsplit("/", 1)[-1] if t.file.endswith(".jinja") else f"{t.file}'s chat_template"
        )
        msg = (
            f"{name} is empty: transformers loads it as the chat template and renders every "
            f"conversation as an empty prompt, as vLLM does through it; {remedy}"
        )
        out.append(finding(EOS019, t.file, msg))
    return out


def _eos_ends_an_empty_template(repo: ModelRepo, ts: TerminatorSet) -> TerminatorSet:
    """When every template is empty, nothing they write ends a reply: the model's reply ends
    where it writes the tokenizer's eos, so that is the terminator every runtime is judged by
    (and ``fix`` adds to the stop ids)."""
    if ts.terminators or not repo.templates or not all(_empty(t) for t in repo.templates):
        return ts
    eos = tokenizer_eos(repo)
    if eos is None or eos.id is None:
        return ts
    names = tuple(t.name for t in repo.templates)
    where = (Placement(EMPTY_TEMPLATE),)
    eos_end = Terminator(eos.content, eos.id, TURN_END, names, "", "", eos.source, eos.special,
                         where)  # fmt: skip
    return ts._replace(terminators=(eos_end,))


def _template_findings(ts: TerminatorSet) -> list[Finding]:
    out = []
    for ta in ts.templates:
        limited = next((p for p in ta.probes if p.limit is not None), None)
        if limited is not None and limited.limit == "time":  # this machine, not the repo
            msg = f"template {ta.name!r} {limited.refusal}"
            out.append(finding(EOS103, ta.file, msg))
        elif limited is not None:  # named first: it explains why the probes failed
            escape = limited.limit == "sandbox"
            what = "was stopped by the sandbox" if escape else "exceeded a render limit"
            msg = f"template {ta.name!r} {what}: {limited.refusal}"
            out.append(finding(EOS102 if escape else EOS101, ta.file, msg))
        elif not ta.rendered:
            first = ta.refusals[0].refusal if ta.refusals else "no output"
            msg = f"template {ta.name!r} refused every probe ({first})"
            out.append(finding(EOS100, ta.file, msg))
    return out


def check(
    repo: ModelRepo,
    keys: StopKeys,
    *,
    keep_ids: Iterable[int] = (),
    config_json: bool = False,
) -> RepoCheck:
    """Analyze a loaded repo against its container's stop keys: terminators, what the
    reader stops on, findings, what ``fix`` would make it stop on.

    ``keep_ids``: stop ids never removed (``--keep-id``); ``config_json``: config.json's ids
    are edited too (a folder), so its early stops are fixable.
    """
    keep = tuple(dict.fromkeys(keep_ids))
    ts = _eos_ends_an_empty_template(repo, find_terminators(repo))
    decision = keys.decide(repo, ts, keep=keep, config_json=config_json)
    template_findings = _template_findings(ts)
    if any(f.code == EOS103.code for f in template_findings):
        # An analysis this machine could not finish proposes nothing: fix writes nothing.
        no_removal = decision.review._replace(remove=frozenset(), config_remove=frozenset())
        decision = decision._replace(proposed=None, review=no_removal)
    findings = [
        *_empty_template_findings(repo),
        *template_findings,
        *decision.missing,
        *_terminator_findings(repo, ts),
        *decision.findings,
    ]
    return RepoCheck(
        repo, ts, decision.stop, decision.tokenizer_eos, decision.proposed, tuple(findings),
        decision.review, keep, decision.unplaced, dict(decision.instead), decision.model,
    )  # fmt: skip
