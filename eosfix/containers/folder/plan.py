"""Plan the file edits that make the stop configuration include every turn terminator.

``plan_patches(check) -> tuple[FilePatch, ...]`` is pure: it returns the new text of each file
that would change. Edits are byte-level (only the ``eos_token_id`` value changes), verified by
re-parsing, and idempotent. A missing generation_config.json is created with what transformers
would have derived from config.json (``GenerationConfig.from_model_config``), so nothing else
about generation changes. A file written that starts with a UTF-8 byte-order mark loses it
(the one byte change beyond the ids): every runtime's JSON reader refuses the mark (EOS017),
which overrides the design's "keep the BOM" for these files. A generation_config.json that is
not JSON at all (EOS020) is written whole, from config.json as a missing one would be; ``fix``
keeps its old bytes beside it (``FilePatch.backup``).
"""

from __future__ import annotations

import json
from typing import Any, NamedTuple

from eosfix.core.errors import VerificationError
from eosfix.core.jsonedit import set_json_value
from eosfix.core.repo import CONFIG, GENERATION_CONFIG, ModelRepo, UnreadableFile
from eosfix.decide.check import RepoCheck

# GenerationConfig attributes that from_model_config copies from config.json (transformers
# generation/configuration_utils.py); other config.json keys are not generation settings.
_GENERATION_KEYS = frozenset(
    {
        "max_length",
        "max_new_tokens",
        "min_length",
        "min_new_tokens",
        "early_stopping",
        "max_time",
        "stop_strings",
        "do_sample",
        "num_beams",
        "num_beam_groups",
        "penalty_alpha",
        "use_cache",
        "temperature",
        "top_k",
        "top_p",
        "min_p",
        "typical_p",
        "epsilon_cutoff",
        "eta_cutoff",
        "diversity_penalty",
        "repetition_penalty",
        "encoder_repetition_penalty",
        "length_penalty",
        "no_repeat_ngram_size",
        "bad_words_ids",
        "force_words_ids",
        "renormalize_logits",
        "forced_bos_token_id",
        "forced_eos_token_id",
        "remove_invalid_values",
        "exponential_decay_length_penalty",
        "suppress_tokens",
        "begin_suppress_tokens",
        "num_return_sequences",
        "output_attentions",
        "output_hidden_states",
        "output_scores",
        "output_logits",
        "return_dict_in_generate",
        "pad_token_id",
        "bos_token_id",
        "eos_token_id",
        "encoder_no_repeat_ngram_size",
        "decoder_start_token_id",
    }
)
_SUBCONFIGS = ("decoder", "generator", "text_config")
BOM = "\ufeff"


CORRUPT_SUFFIX = ".corrupt"  # generation_config.json.corrupt: the bytes of a file replaced


class FilePatch(NamedTuple):
    file: str  # repo-relative
    old_text: str | None  # None: the file is created
    new_text: str
    # Why the old file is written whole, not edited: it is not JSON at all ("is empty", "is
    # not valid JSON (...)"); its bytes are kept beside it, in ``backup``.
    replaces: str = ""

    @property
    def created(self) -> bool:
        return self.old_text is None

    @property
    def backup(self) -> str | None:
        """Where ``fix`` keeps the old bytes of a file it replaces whole (None: it edits)."""
        return self.file + CORRUPT_SUFFIX if self.replaces else None

    @property
    def how(self) -> str:
        return ""  # a file is always written whole (atomically)

    @property
    def bom_removed(self) -> bool:
        """The file's byte-order mark goes (EOS017)."""
        old = self.old_text or ""
        return old.startswith(BOM) and not self.new_text.startswith(BOM)

    @property
    def summary(self) -> str:
        """``eos_token_id -> [..]`` as the patch writes it (``text_config.`` when nested there;
        the file named unless it is generation_config.json), and the byte-order mark it
        removes (the file named then)."""
        data = json.loads(self.new_text.removeprefix(BOM))
        unread = self.old_text is None or self.replaces
        old = {} if unread else json.loads((self.old_text or "").removeprefix(BOM))
        if "eos_token_id" in data or not isinstance(data.get("text_config"), dict):
            key, new, before = "eos_token_id", data.get("eos_token_id"), old.get("eos_token_id")
        else:
            key, new = "text_config.eos_token_id", data["text_config"].get("eos_token_id")
            before = (old.get("text_config") or {}).get("eos_token_id")
        ids = f"{key} -> {_ids_text(new)}" if self.created or new != before else ""
        if self.replaces:
            why = self.replaces.split(" (")[0]  # "is not valid JSON", without the detail
            whole = f"(the old {self.file} {why}: its bytes kept as {self.backup})"
            return f"{ids} in a new {self.file} {whole}" if ids else f"a new {self.file} {whole}"
        mark = "byte-order mark removed" if self.bom_removed else ""
        text = " and the ".join(t for t in (ids, mark) if t)
        named = self.file != GENERATION_CONFIG or not ids
        return f"{self.file}: {text}" if named else text

    def as_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"file": self.file, "created": self.created, "diff": self.diff()}
        if self.replaces:
            out |= {"replaced": self.replaces, "kept_as": self.backup}
        return out

    def diff(self, name: str = "") -> str:
        """A unified diff, as ``git diff`` would show it: the file named under ``name``, the
        folder it is in (``models/chat``), or relative to the repo when ``name`` is empty."""
        old_text = self.old_text or ""
        path = f"{name.rstrip('/')}/{self.file}" if name else self.file
        # Bytes a terminal does not show (NULs) are not diffed: a line before the diff says
        # what the file holds and where its bytes go (patch and git apply skip such lines).
        hidden = self.replaces and any(c < " " and c not in "\t\n\r" for c in old_text)
        head = f"{path} {self.replaces}: not shown; fix keeps it as {self.backup}\n"
        old = [] if hidden else old_text.splitlines(keepends=True)
        new = self.new_text.splitlines(keepends=True)
        # A name with a space ends with a tab, as git and GNU diff write it: patch -p1 reads
        # a name up to the first space otherwise.
        tab = "\t" if " " in path else ""
        src = "/dev/null" if self.created else f"a/{path}{tab}"
        import difflib  # only a diff needs it (a check that finds nothing to fix shows none)

        lines = difflib.unified_diff(old, new, src, f"b/{path}{tab}")
        body = "".join(
            line if line.endswith("\n") else line + "\n\\ No newline at end of file\n"
            for line in lines
        )
        return head + body if hidden else body


def _ids_text(ids: Any) -> str:
    if ids is None:
        return "(not set)"
    if type(ids) is int:
        return str(ids)
    if type(ids) is list and all(type(i) is int for i in ids):
        return "[" + ", ".join(str(i) for i in ids) + "]"
    return json.dumps(ids)  # a value that is not ids (EOS018), as written


def derived_generation_config(config: dict[str, Any] | None) -> dict[str, Any]:
    """What ``GenerationConfig.from_model_config(config.json)`` holds, as saved JSON keys."""
    config = config or {}
    out = {k: v for k, v in config.items() if k in _GENERATION_KEYS and v is not None}
    for name in _SUBCONFIGS:  # composite models: fill what is still unset from the sub-config
        sub = config.get(name)
        if isinstance(sub, dict):
            for k, v in sub.items():
                if k in _GENERATION_KEYS and v is not None:
                    out.setdefault(k, v)
            break
    if "transformers_version" in config:
        out["transformers_version"] = config["transformers_version"]
    return out


def _new_generation_config(repo: ModelRepo, eos: list[int]) -> str:
    cfg = repo.files.get(CONFIG)
    data = derived_generation_config(cfg.data if cfg else None)
    data["eos_token_id"] = eos
    # The layout save_pretrained writes: 2-space indent, sorted keys, trailing newline.
    return json.dumps(data, indent=2, sort_keys=True) + "\n"


def _verify(text: str, key_path: tuple[str, ...], value: list[int], file: str) -> None:
    data = json.loads(text.removeprefix(BOM))
    for key in key_path:
        data = data[key]
    if data != value or set_json_value(text, key_path, value) != text:
        raise VerificationError("planned edit is not stable; nothing written", path=file)


def _replacement(check: RepoCheck, old: UnreadableFile) -> FilePatch:
    """A generation_config.json that is not JSON at all, written whole: what transformers reads
    in its place (config.json's generation settings, as for a missing file), with the
    proposed ids when there are. ExLlamaV2 and ollama cannot load the model until then."""
    cfg = check.repo.files.get(CONFIG)
    data = derived_generation_config(cfg.data if cfg else None)
    if check.proposed is not None:
        data["eos_token_id"] = list(check.proposed)
    new = json.dumps(data, indent=2, sort_keys=True) + "\n"
    if check.proposed is not None:
        _verify(new, ("eos_token_id",), list(check.proposed), GENERATION_CONFIG)
    return FilePatch(GENERATION_CONFIG, old.text, new, replaces=old.why)


def plan_generation_config(check: RepoCheck) -> FilePatch | None:
    """The generation_config.json edit (or creation) that adds the missing terminators."""
    unreadable = check.repo.unreadable.get(GENERATION_CONFIG)
    if unreadable is not None:
        return _replacement(check, unreadable)
    gen = check.repo.files.get(GENERATION_CONFIG)
    if check.proposed is None:  # the ids stay; a byte-order mark still goes (EOS017)
        bom = gen is not None and gen.text.startswith(BOM)
        return FilePatch(GENERATION_CONFIG, gen.text, gen.text[1:]) if gen and bom else None
    eos = list(check.proposed)
    if gen is None:
        new = _new_generation_config(check.repo, eos)
        _verify(new, ("eos_token_id",), eos, GENERATION_CONFIG)
        return FilePatch(GENERATION_CONFIG, None, new)
    new = set_json_value(gen.text, ("eos_token_id",), eos).removeprefix(BOM)
    _verify(new, ("eos_token_id",), eos, GENERATION_CONFIG)
    return None if new == gen.text else FilePatch(GENERATION_CONFIG, gen.text, new)


def config_edits(check: RepoCheck) -> list[tuple[tuple[str, ...], list[int]]]:
    """The ``eos_token_id`` values ``--config-json`` writes in config.json (and text_config's):
    (key path, new list) for each one it changes; none without a config.json.

    The original first id stays first (ExLlamaV2 keeps only the first id, transformers pads
    with it) unless it cuts a reply or is no token: those ids are removed as from
    generation_config.json (``RepoCheck.review.config_remove``).
    """
    cfg = check.repo.files.get(CONFIG)
    wanted = [t.id for t in check.id_terminators if t.id is not None]
    remove = check.review.config_remove
    if cfg is None or not (wanted or remove):
        return []
    sub = cfg.data.get("text_config")
    # Edit the eos_token_id values that exist (top level and/or text_config); add a top-level
    # one only when neither exists.
    paths: list[tuple[str, ...]] = [("eos_token_id",)] if "eos_token_id" in cfg.data else []
    if isinstance(sub, dict) and "eos_token_id" in sub:
        paths.append(("text_config", "eos_token_id"))
    eos = check.tokenizer_eos.id if check.tokenizer_eos else None
    if check.review.cuts(eos):
        eos = None  # never add an eos that cuts a reply
    edits = []
    for path in paths or [("eos_token_id",)]:
        node: Any = cfg.data
        for key in path:
            node = node.get(key) if isinstance(node, dict) else None
        before = [node] if isinstance(node, int) else list(node or [])
        have = [i for i in before if i not in remove]
        missing = [i for i in wanted if i not in have]
        if not missing and have == before:
            continue
        extra = [eos] if eos is not None and missing else []
        edits.append((path, list(dict.fromkeys([*have, *extra, *missing]))))
    return edits


def plan_config(check: RepoCheck) -> FilePatch | None:
    """config.json's eos_token_id (and text_config's), for runtimes that read only config.json:
    the ``config_edits``, each made in the file's text and verified; its byte-order mark
    goes too (EOS017)."""
    cfg = check.repo.files.get(CONFIG)
    if cfg is None:
        return None
    text = cfg.text
    for path, new_list in config_edits(check):
        text = set_json_value(text, path, new_list)
        _verify(text, path, new_list, CONFIG)
    text = text.removeprefix(BOM)
    return None if text == cfg.text else FilePatch(CONFIG, cfg.text, text)


def plan_patches(check: RepoCheck, *, config_json: bool = False) -> tuple[FilePatch, ...]:
    """Every file edit ``fix`` would make, in writing order."""
    patches = [plan_generation_config(check)]
    if config_json:
        patches.append(plan_config(check))
    return tuple(p for p in patches if p is not None)
