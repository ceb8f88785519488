"""Say what went wrong in what a hand-written generation loop produced.

Problems (``kind``), each with the id to compare and the evidence:

- ``prompt_not_templated``: the reply is empty or starts with a stop id, or opens a turn
  itself; or the prompt ids hold no turn of the template / lack the generation prompt.
- ``ran_past_stop``: tokens follow a stop id: the loop does not compare stop ids.
- ``invented_turn``: a turn header (``<|im_start|>user``) after the answer.
- ``hidden_terminator``: text decoded with ``skip_special_tokens=True``: no control token is
  left, yet a plain turn header (``\\nuser\\n``) shows the model went on past its terminator.
- ``prompt_ids_differ``: the prompt ids are not the template's (or not tokenizer.json's
  encoding of their own text): the first differing position, both tokens.
- ``not_a_token``: an id (generated, or of the prompt) that no token has: past the token
  list (tokenizer.json, a GGUF's), or past config.json's ``vocab_size``.

What each input can decide: ids show every stop id exactly; text with control tokens kept
does too; text without them shows only what plain headers betray; no input shows whether a
transcript without any stop id ended on a stop the loop dropped or on its token limit.

Pure: no printing, no writing.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

from eosfix.containers.gguf.pieces import DECODED_MODELS, GgufTokens
from eosfix.decide.check import RepoCheck
from eosfix.decide.stopids import OUT_OF_VOCAB, classify
from eosfix.ports.render import (
    Conversation,
    LoopStops,
    PortInputError,
    decode,
    encode,
    first_difference,
    loop_stops,
    render_conversation,
    select_template,
)
from eosfix.ports.turns import (
    Piece,
    Transcript,
    TurnFound,
    TurnHeader,
    find_plain_turns,
    find_turns,
    transcript_from_ids,
    transcript_from_text,
    turn_headers,
)

PROMPT_NOT_TEMPLATED = "prompt_not_templated"
RAN_PAST_STOP = "ran_past_stop"
INVENTED_TURN = "invented_turn"
HIDDEN_TERMINATOR = "hidden_terminator"
PROMPT_IDS_DIFFER = "prompt_ids_differ"
NOT_A_TOKEN = "not_a_token"


@dataclass(frozen=True)
class Problem:
    kind: str
    message: str
    position: int | None = None  # token index (ids) or character offset (text), from 0;
    # the message counts from 1 ("token 2"), as explain does ("generated token 2")
    token_id: int | None = None


@dataclass(frozen=True)
class Diagnosis:
    input_kind: str  # "ids" | "text"
    length: int  # generated ids or characters
    stops: LoopStops
    problems: tuple[Problem, ...]
    notes: tuple[str, ...]  # what the input cannot decide
    ending: str | None  # how a correct transcript ends ("<|im_end|> (2), a stop id")

    @property
    def ok(self) -> bool:
        return not self.problems


def _compare(stops: LoopStops) -> str:
    ids = f"stop when the sampled id is in {list(stops.ids)}"
    if stops.needs_fix:
        only = " only" if set(stops.current) <= set(stops.ids) else ""  # or ids to remove
        ids += f" (the repo's files list{only} {list(stops.current)}: run `{stops.fix}`)"
    if stops.strings:
        ids += f"; also stop on the text {list(stops.strings)}"
    return ids


def _is_stop(p: Piece, stops: LoopStops) -> bool:
    """A stop id, or in text a terminator whose id is unknown, or a plain-text stop string."""
    if p.token_id is not None:
        return p.token_id in stops.ids
    ends = {c for c, _ in stops.ends} | set(stops.strings)
    return p.control and p.text is not None and p.text in ends


def _name(p: Piece, stops: LoopStops) -> str:
    if p.token_id is not None:
        return f"{p.text} ({p.token_id})" if p.text else stops.name(p.token_id)
    return repr(p.text)


def _a(word: str) -> str:
    return f"an {word}" if word[:1] in "aeio" else f"a {word}"  # "a user"


def _unreadable(check: RepoCheck) -> str:
    """Why generated ids cannot be read as text here: ``without tokenizer.json``..."""
    vocab = check.repo.vocabulary
    if isinstance(vocab, GgufTokens):
        known = " and ".join(repr(m) for m in DECODED_MODELS)
        return (
            f"in a GGUF file of a {vocab.model!r} vocabulary (eosfix reads the token pieces of "
            f"{known} ones)"
        )
    return "without tokenizer.json"


def _turn_list(turns: Sequence[TurnFound], unit: str, unreadable: str) -> str:
    parts = []
    for f in turns[:4]:
        role = _a(f"{f.header.role} turn") if f.header.role else f"a turn ({f.header.opener})"
        if f.content is None:
            said = f" (content unknown {unreadable})"
        else:
            said = f": {f.content!r}" if f.content else " (empty)"
        parts.append(f"{role} at {unit} {f.pos + 1}{said}")
    more = f", and {len(turns) - 4} more" if len(turns) > 4 else ""
    return ", then ".join(parts) + more


def _invented(
    turns: Sequence[TurnFound], unit: str, token_id: int | None, unreadable: str = ""
) -> Problem:
    n = len(turns)
    listed = _turn_list(turns, unit, unreadable)
    msg = f"the model wrote {n} turn{'s' if n > 1 else ''} of its own: {listed}"
    return Problem(INVENTED_TURN, msg, turns[0].pos, token_id)


def _ends_at_stop(f: TurnFound, t: Transcript, stops: LoopStops) -> bool:
    """A turn header that starts at a stop id with nothing but whitespace after it: the reply
    ended there. GLM's ``<|user|>`` opens the next turn and is the terminator itself, so a
    transcript that ends with it (and the line break its header writes) ended on its stop."""
    if not _is_stop(t.pieces[f.piece], stops):
        return False
    return all(
        p.text is not None and not p.control and not p.text.strip() for p in t.pieces[f.piece + 1 :]
    )


def _transcript_problems(
    t: Transcript, stops: LoopStops, headers: Sequence[TurnHeader], unreadable: str
) -> list[Problem]:
    """Problems in what the loop generated, and a note when nothing decides."""
    problems: list[Problem] = []
    meaningful = [p for p in t.pieces if p.control or (p.text is None) or p.text.strip()]
    if not meaningful:  # empty input never gets here: diagnose refuses it
        msg = (
            "the reply is only whitespace: the model ended its turn at once, as an instruct "
            "model does when the "
            "prompt was not rendered with the chat template (check it with --prompt-ids, or "
            "render it with `eosfix render`)"
        )
        return [Problem(PROMPT_NOT_TEMPLATED, msg, 0)]
    first = meaningful[0]
    if _is_stop(first, stops):
        msg = (
            f"the first generated {t.unit} is {_name(first, stops)}, a stop id: the model ended "
            "its turn before writing anything, so the prompt was not rendered with the chat "
            "template (render it with `eosfix render`)"
        )
        problems.append(Problem(PROMPT_NOT_TEMPLATED, msg, first.pos, first.token_id))
    stop_i = next((i for i, p in enumerate(t.pieces) if _is_stop(p, stops)), None)
    if stop_i is not None:
        stop = t.pieces[stop_i]
        after = t.pieces[stop_i + 1 :]
        trailing = t.kind == "text" and all(
            p.text is not None and not p.text.strip() and not p.control for p in after
        )
        if after and not trailing:
            n = t.length - (stop.pos + (1 if t.kind == "ids" else len(stop.text or "")))
            more = f"1 more {t.unit} follows" if n == 1 else f"{n} more {t.unit}s follow"
            msg = (
                f"{t.unit} {stop.pos + 1} is {_name(stop, stops)}, which ends the turn, but {more}: "
                f"the loop does not compare stop ids; {_compare(stops)}"
            )
            problems.append(Problem(RAN_PAST_STOP, msg, stop.pos, stop.token_id))
    turns = [f for f in find_turns(t, headers) if not _ends_at_stop(f, t, stops)]
    if turns and t.pieces[turns[0].piece] is first:
        opened = turns[0].header
        msg = (
            f"the reply starts by opening {_a(opened.role or 'new')} turn ({opened.text!r}): "
            "the prompt did not end with the chat template's generation prompt (render it "
            "with `eosfix render`)"
        )
        problems.append(Problem(PROMPT_NOT_TEMPLATED, msg, first.pos, first.token_id))
    if turns:
        problems.append(_invented(turns, t.unit, t.pieces[turns[0].piece].token_id, unreadable))
    return problems


def _plain_problems(
    text: str, stops: LoopStops, headers: Sequence[TurnHeader]
) -> tuple[list[Problem], str | None]:
    """Text without any control token: only plain headers can show a hidden terminator."""
    found = find_plain_turns(text, headers)
    if not found:
        return [], (
            "the text holds no control token and no sign of a new turn: from text alone eosfix "
            "cannot tell whether the loop stopped on a stop id or at its token limit (decode "
            "with skip_special_tokens=False, or give --ids)"
        )
    problems: list[Problem] = []
    first = found[0]
    if not text[: first.pos].strip():
        msg = (
            f"the text starts by opening {_a(first.header.role)} turn ({first.header.plain!r} "
            f"where the template writes {first.header.text!r}): the prompt did not end with the "
            "chat template's generation prompt (render it with `eosfix render`)"
        )
        problems.append(Problem(PROMPT_NOT_TEMPLATED, msg, first.pos))
    after = [f for f in found if text[: f.pos].strip()]
    if after:
        f = after[0]
        terms = stops.named_ends() or "the stop id"
        msg = (
            f"the text reads as an answer, then {f.header.plain!r} at character {f.pos + 1} where the "
            f"template writes {f.header.text!r}, and no control token: it was decoded with "
            f"skip_special_tokens=True, which hid the terminator ({terms}) the model wrote, and "
            f"the loop went on past it; {_compare(stops)}"
        )
        problems.append(Problem(HIDDEN_TERMINATOR, msg, f.pos))
    problems.append(_invented(found, "character", None))
    return problems, None


def _token(check: RepoCheck, token_id: int) -> str:
    text = decode(check.repo, [token_id])
    return f"{token_id} ({text!r})" if text is not None else str(token_id)


def _id_diff(
    check: RepoCheck, yours: Sequence[int], expected: Sequence[int], what: str
) -> list[Problem]:
    if list(yours) == list(expected):
        return []
    i = first_difference(yours, expected)
    if i < len(yours) and i < len(expected):
        detail = f"yours {_token(check, yours[i])}, {what} {_token(check, expected[i])}"
    elif i < len(expected):
        detail = f"yours end there; {what} go on with {_token(check, expected[i])}"
    else:
        detail = f"yours go on with {_token(check, yours[i])}; {what} end there"
    msg = f"the prompt ids differ from {what} at position {i}: {detail}"
    return [Problem(PROMPT_IDS_DIFFER, msg, i, yours[i] if i < len(yours) else None)]


def _generation_prompt(check: RepoCheck) -> str | None:
    try:
        name = select_template(check.repo, None, None).name
    except PortInputError:  # several templates, none default: nothing to compare the end with
        return None
    return next(
        (ta.generation_prompt for ta in check.terminators.templates if ta.name == name), None
    )


def _prompt_shape(
    check: RepoCheck, text: str, n: int, headers: Sequence[TurnHeader]
) -> list[Problem]:
    """A prompt without any turn header, or without the generation prompt at its end."""
    bos = check.repo.special_tokens.get("bos_token")
    problems = []
    if bos and text.startswith(bos + bos):
        msg = (
            f"the prompt starts with {bos} twice: the template writes it and the tokenizer added "
            "it again (encode the rendered prompt with add_special_tokens=False)"
        )
        problems.append(Problem(PROMPT_IDS_DIFFER, msg, 1))
    gp = _generation_prompt(check)
    if not gp or text.endswith(gp):
        return problems
    if not any(h.text in text for h in headers):
        msg = (
            "the prompt holds no turn of the chat template (no "
            f"{', '.join(repr(h.text) for h in headers[:2])}): it was not rendered with the chat "
            "template; render it with `eosfix render`"
        )
    else:
        msg = (
            f"the prompt does not end with the generation prompt {gp!r}: render it with "
            "add_generation_prompt=True"
        )
    problems.append(Problem(PROMPT_NOT_TEMPLATED, msg, n))
    return problems


def _prompt_problems(
    check: RepoCheck,
    prompt_ids: Sequence[int],
    conversation: Conversation | None,
    headers: Sequence[TurnHeader],
) -> tuple[list[Problem], list[str]]:
    """Compare the prompt ids with the template's (given the conversation) or check their shape."""
    if check.repo.tokenizer() is None:
        return [], ["the prompt ids cannot be checked without tokenizer.json"]
    if conversation is not None:
        expected = render_conversation(check, conversation).ids or ()
        return _id_diff(check, prompt_ids, expected, "the template's"), []
    text = decode(check.repo, prompt_ids) or ""
    canonical = encode(check.repo, text) or ()
    problems = _id_diff(check, prompt_ids, canonical, "tokenizer.json's encoding of their text")
    return problems + _prompt_shape(check, text, len(prompt_ids), headers), []


def _ending(t: Transcript, stops: LoopStops) -> tuple[str | None, str | None]:
    """How a transcript without problems ends, or a note saying what cannot be told."""
    last = next(
        (p for p in reversed(t.pieces) if p.control or p.text is None or p.text.strip()), None
    )
    if last is not None and _is_stop(last, stops):
        return f"{_name(last, stops)}, a stop id, and nothing after it", None
    return None, (
        "no stop id in the transcript: fine if the loop drops the stop token it stopped on; if "
        "it hit its token limit instead, the reply was cut. The transcript cannot tell which"
    )


def _no_token(check: RepoCheck, ids: Sequence[int], what: str) -> list[Problem]:
    """Each id that no token has (once, at its first position)."""
    kinds = classify(check.repo, check.terminators, check.tokenizer_eos, ids)
    dead = {s.id: s for s in kinds if s.kind == OUT_OF_VOCAB}
    out, seen = [], set()
    for pos, token_id in enumerate(ids):
        if token_id in dead and token_id not in seen:
            seen.add(token_id)
            msg = (
                f"{what} {pos + 1} is {token_id}, which is no token: {dead[token_id].reason} (a "
                "loop sampling past the tokenizer's vocabulary, or ids of another model)"
            )
            out.append(Problem(NOT_A_TOKEN, msg, pos, token_id))
    return out


def diagnose(
    check: RepoCheck,
    *,
    ids: Sequence[int] | None = None,
    text: str | None = None,
    prompt_ids: Sequence[int] | None = None,
    conversation: Conversation | None = None,
    fix: str = "eosfix fix",
) -> Diagnosis:
    """What went wrong in a loop's output (``ids`` or ``text``), and in its prompt ids;
    ``fix``: the command that writes this repo's fix, as the messages name it."""
    if (ids is None) == (text is None):
        raise ValueError("give exactly one of ids and text")
    if (ids is not None and not ids) or text == "":
        raise PortInputError(
            f"no generated {'ids' if ids is not None else 'text'}: nothing to diagnose"
        )
    stops = replace(loop_stops(check), fix=fix)
    headers = turn_headers(check)
    problems: list[Problem] = []
    notes: list[str] = []
    if prompt_ids is not None:
        problems += _no_token(check, prompt_ids, "prompt token")
        found, said = _prompt_problems(check, prompt_ids, conversation, headers)
        problems += found
        notes += said
    if ids is not None:
        dead = _no_token(check, ids, "token")
        problems += dead
        t = transcript_from_ids(
            check, ids, stops, (p.token_id for p in dead if p.token_id is not None)
        )
        if not t.decoded:
            notes.append(f"{_unreadable(check)} only control ids can be read, not the text")
    else:
        t = transcript_from_text(check, text or "", stops)
    plain_text = t.kind == "text" and not any(p.control for p in t.pieces) and (text or "").strip()
    if plain_text:
        found, note = _plain_problems(text or "", stops, headers)
    else:
        found, note = _transcript_problems(t, stops, headers, _unreadable(check)), None
    problems += found
    ending = None
    if not found and note is None:
        ending, note = _ending(t, stops)
    notes += [note] if note else []
    return Diagnosis(t.kind, t.length, stops, tuple(problems), tuple(notes), ending)
