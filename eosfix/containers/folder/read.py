"""Load a model repository folder: every source transformers reads, with file provenance.

``load_repo(path) -> ModelRepo`` only reads. Of tokenizer.json (often 10-35 MB) only the head
is read here, through a memory map, and decoded: its ``added_tokens`` and post-processor
(``read_tokenizer_head``); the vocabulary is loaded with the ``tokenizers`` library only if an
id must come from it. Each JSON file is checked against its view in ``eosfix.core.models``
(plain Python; pydantic only words the error of a malformed file). A generation_config.json or
special_tokens_map.json that is not JSON at all is read as absent and kept in
``ModelRepo.unreadable`` (``READ_PAST``); any other file that cannot be read refuses the folder.
"""

from __future__ import annotations

import json
import mmap
from pathlib import Path
from typing import Any, Protocol, TypeVar

from eosfix.containers.folder.files import (
    decode_text,
    mapped,
    parse_json_text,
    present,
    read_bytes,
    shallow,
    too_long_number,
)
from eosfix.core.errors import RepoLoadError
from eosfix.core.models import (
    SCHEMAS,
    AddedToken,
    ChatTemplateJson,
    GenerationConfig,
    ModelConfig,
    SpecialTokensMap,
    TokenizerConfig,
    token_content,
)
from eosfix.core.repo import (
    ADDED_TOKENS_JSON,
    CHAT_TEMPLATE_JINJA,
    CHAT_TEMPLATE_JSON,
    CONFIG,
    GENERATION_CONFIG,
    PROCESSOR_CONFIG,
    SPECIAL_TOKENS_MAP,
    TEMPLATE_DIR,
    TOKENIZER_CONFIG,
    TOKENIZER_JSON,
    ChatTemplate,
    JsonFile,
    ModelRepo,
    TokenInfo,
    TokenizerHead,
    UnreadableFile,
)


class _Checked(Protocol):
    """A view of ``eosfix.core.models``: built from a JSON object its ``accepts`` vouches for."""

    def __init__(self, data: dict[str, Any]) -> None: ...

    @staticmethod
    def accepts(data: dict[str, Any]) -> bool: ...


M = TypeVar("M", bound=_Checked)


def _data_path(data: Any, loc: tuple[Any, ...]) -> str:
    """The JSON path of a pydantic error location, without pydantic's union-branch tags."""
    parts, node = [], data
    for part in loc:
        in_list = isinstance(node, list) and isinstance(part, int) and part < len(node)
        if not (in_list or (isinstance(node, dict) and part in node)):
            continue  # "constrained-int", "str", "list[...]": which union branch failed
        node = node[part]
        parts.append(str(part))
    return ".".join(parts)


def validate(view: type[M], data: Any, path: Path) -> M:
    """Check the shape of a parsed file; the first problem becomes a one-line error.

    The view's plain check vouches for a well-formed file; anything else goes to its pydantic
    model (imported only then), which refuses it with the message or accepts it after all."""
    if not isinstance(data, dict):
        raise RepoLoadError(f"expected a JSON object, got {type(data).__name__}", path=path)
    if not view.accepts(data):
        _refuse(view, data, path)
    return view(data)


def _refuse(view: type, data: dict[str, Any], path: Path) -> None:
    """Raise the one-line error of pydantic's first problem with ``data``; return when the
    model accepts it (a plain check may doubt what the model allows, e.g. an id >= 2**63)."""
    from pydantic import ValidationError

    from eosfix.core import schemas

    try:
        getattr(schemas, SCHEMAS[view]).model_validate(data)
    except ValidationError as exc:
        err = exc.errors()[0]
        where = _data_path(data, tuple(err["loc"]))
        value = json.dumps(err.get("input"), default=str)
        value = value if len(value) <= 60 else value[:57] + "..."
        if where.split(".")[-1] == "eos_token_id" or ".eos_token_id." in f".{where}.":
            msg = f"{where}: expected a token id (an integer >= 0) or a list of at most 4096 ids"
            raise RepoLoadError(f"{msg} (got {value})", path=path) from None
        raise RepoLoadError(f"{where}: {err['msg'].lower()} (got {value})", path=path) from None


# Files runtimes read with a fallback, or only in some folders, which eosfix reads on past when
# they are not JSON at all (empty, NUL bytes, cut short), as if missing: what each runtime does
# with one is its own (``eosfix.runtimes``' refusals, EOS020). Any other file that is not JSON
# refuses the folder: every runtime refuses it.
READ_PAST = (GENERATION_CONFIG, SPECIAL_TOKENS_MAP)


def _why_not_json(text: str) -> str | None:
    """Why a file's text is not JSON, as EOS020 says it; None when it parses."""
    if not text.strip():
        return "is empty" if not text else "holds only whitespace"
    if not text.strip("\x00"):
        return f"holds only NUL bytes ({len(text)})"
    try:
        json.loads(text.removeprefix(BOM))
    except json.JSONDecodeError as exc:
        return f"is not valid JSON ({exc.msg} at line {exc.lineno} column {exc.colno})"
    except (RecursionError, ValueError):  # refused below, with the reason
        return None
    return None


def _load_json(
    root: Path, name: str, model: type[M], unreadable: dict[str, UnreadableFile] | None = None
) -> tuple[JsonFile, M] | None:
    """The file parsed and checked (None: absent); ``unreadable``: where a file of READ_PAST
    that is not JSON goes, read as absent."""
    path = root / name
    if not present(path):  # neither a file nor a link (a dangling one is an error)
        return None
    text = decode_text(read_bytes(path), path)
    if unreadable is not None and name in READ_PAST:
        why = _why_not_json(text)
        if why is not None:
            unreadable[name] = UnreadableFile(name, text, why)
            return None
    data = parse_json_text(text, path)
    parsed = validate(model, data, path)
    return JsonFile(name, path, text, data), parsed


def _read_template(root: Path, rel: str) -> ChatTemplate:
    path = root / rel
    name = "default" if rel == CHAT_TEMPLATE_JINJA else Path(rel).stem
    return ChatTemplate(name, decode_text(read_bytes(path), path), rel)


def _load_templates(
    root: Path, tok: TokenizerConfig | None, read: list[JsonFile]
) -> tuple[ChatTemplate, ...]:
    """Templates with transformers' precedence: .jinja files replace tokenizer_config's entry
    (a JSON file read for them is added to ``read``)."""
    rels = []
    if present(root / CHAT_TEMPLATE_JINJA):
        rels.append(CHAT_TEMPLATE_JINJA)
    extra_dir = root / TEMPLATE_DIR
    if extra_dir.is_dir():
        rels += sorted(f"{TEMPLATE_DIR}/{p.name}" for p in extra_dir.glob("*.jinja"))
    if rels:
        return tuple(_read_template(root, rel) for rel in rels)
    if tok is not None and tok.chat_template is not None:
        if isinstance(tok.chat_template, str):
            return (ChatTemplate("default", tok.chat_template, TOKENIZER_CONFIG),)
        return tuple(ChatTemplate(t.name, t.template, TOKENIZER_CONFIG) for t in tok.chat_template)
    return _load_processor_templates(root, read)


def _load_processor_templates(root: Path, read: list[JsonFile]) -> tuple[ChatTemplate, ...]:
    """Vision/audio repos: processor_config.json's ``chat_template`` beats chat_template.json
    (each file read is added to ``read``)."""
    for name in (PROCESSOR_CONFIG, CHAT_TEMPLATE_JSON):
        loaded = _load_json(root, name, ChatTemplateJson)
        if loaded is not None:
            read.append(loaded[0])
        if loaded is not None and loaded[1].chat_template is not None:
            return (ChatTemplate("default", loaded[1].chat_template, name),)
    return ()


def _special_tokens(tok: TokenizerConfig | None, stm: SpecialTokensMap | None) -> dict[str, str]:
    """The special-token variables a template sees (``eos_token``, ``bos_token``, ...)."""
    out: dict[str, str] = {}
    if tok is not None:
        for key, value in tok.items():
            # bos/eos/unk/sep/pad/cls/mask and any model-specific ``*_token`` (image_token...)
            content = token_content(value) if isinstance(value, (str, dict)) else None
            if content is not None and key.endswith("_token"):
                out[key] = content
        if isinstance(tok.extra_special_tokens, dict):
            for key, value in tok.extra_special_tokens.items():
                content = token_content(value) if isinstance(value, (str, dict)) else None
                if content is not None:
                    out[key] = content
    # special_tokens_map.json overrides only in the legacy layout (no added_tokens_decoder).
    if stm is not None and (tok is None or tok.added_tokens_decoder is None):
        for key, value in stm.items():
            content = token_content(value) if isinstance(value, (str, dict)) else None
            if content is not None and key.endswith("_token"):
                out[key] = content
    return out


def _tokens_from_decoder(tok: TokenizerConfig, root: Path) -> dict[str, TokenInfo]:
    out: dict[str, TokenInfo] = {}
    for key, tinfo in (tok.added_tokens_decoder or {}).items():
        if not key.isdigit():
            raise RepoLoadError(
                f"added_tokens_decoder: key {key!r} is not a token id", path=root / TOKENIZER_CONFIG
            )
        out[tinfo.content] = TokenInfo(
            tinfo.content, int(key), tinfo.special, tinfo.normalized, TOKENIZER_CONFIG
        )
    return out


BOM = "\ufeff"  # a UTF-8 byte-order mark, as decoded
_WINDOW = 64 * 1024  # decode this much after a key first; 16 times more while the value is longer


def _decode_at(raw: bytes | mmap.mmap, key: bytes, path: Path) -> tuple[bool, Any]:
    """(found, the JSON value) of the first ``"key":`` in ``raw``, decoding only a window
    after it, grown while the value runs on (up to the whole rest of the file)."""
    at = raw.find(key)
    if at < 0:
        return False, None
    colon = raw.find(b":", at + len(key))
    size = _WINDOW
    while True:
        end = min(colon + 1 + size, len(raw))
        text = raw[colon + 1 : end].decode("utf-8", "ignore").lstrip()
        try:
            value, stop = json.JSONDecoder().raw_decode(text)
            if stop < len(text) or end == len(raw):  # the value ended inside the window
                return True, shallow(value, path)
        except json.JSONDecodeError:
            if end == len(raw):
                return True, None
        except RecursionError:
            raise RepoLoadError("invalid JSON: nested too deeply", path=path) from None
        except ValueError:  # a number too long for Python's int, found in the whole file
            raise too_long_number(decode_text(bytes(raw), path), path) from None
        size *= 16


def _trailing_special(post: Any) -> str | None:
    """gguf/vocab.py: the last ``SpecialToken`` of a ``TemplateProcessing`` single template."""
    if not isinstance(post, dict):
        return None
    last = None
    for proc in post.get("processors", [post]):
        single = proc.get("single", []) if isinstance(proc, dict) else []
        if (
            proc.get("type") == "TemplateProcessing"
            and isinstance(single, list)
            and len(single) > 1
        ):
            tail = single[-1] if isinstance(single[-1], dict) else {}
            special = tail.get("SpecialToken", {})
            last = special.get("id") if isinstance(special, dict) else None
    return last if isinstance(last, str) else None


def read_tokenizer_head(path: Path) -> TokenizerHead:
    """tokenizer.json's ``added_tokens`` and post-processor, without parsing the vocabulary
    (both sit near the top of the file; an unusual layout is parsed whole)."""
    with mapped(path) as head:
        bom = head[:3] == BOM.encode()
        found, items = _decode_at(head, b'"added_tokens"', path)
        _, post = _decode_at(head, b'"post_processor"', path)
    if not isinstance(items, list):
        data = parse_json_text(decode_text(read_bytes(path), path), path)
        items = data.get("added_tokens", []) if isinstance(data, dict) else []
        if not found and isinstance(data, dict):
            post = data.get("post_processor")
    added = []
    for item in items if isinstance(items, list) else ():
        if not isinstance(item, dict) or not isinstance(item.get("id"), int):
            raise RepoLoadError("added_tokens: each entry needs an integer id", path=path)
        tinfo = validate(AddedToken, item, path)
        added.append(
            TokenInfo(tinfo.content, item["id"], tinfo.special, tinfo.normalized, TOKENIZER_JSON)
        )
    return TokenizerHead(tuple(added), _trailing_special(post), bom)


def _added_tokens(
    root: Path, tok: TokenizerConfig | None, head: TokenizerHead | None, bom: list[str]
) -> dict[str, TokenInfo]:
    """content -> id, from the first source transformers would use (added_tokens.json's
    name goes into ``bom`` when it is read and starts with a byte-order mark)."""
    if tok is not None and tok.added_tokens_decoder is not None:
        return _tokens_from_decoder(tok, root)
    out: dict[str, TokenInfo] = {t.content: t for t in head.added} if head is not None else {}
    path = root / ADDED_TOKENS_JSON
    if path.is_file():
        text = decode_text(read_bytes(path), path)
        if text.startswith(BOM):
            bom.append(ADDED_TOKENS_JSON)
        data = parse_json_text(text, path)
        if not isinstance(data, dict) or not all(isinstance(v, int) for v in data.values()):
            raise RepoLoadError("expected an object of token -> id", path=path)
        for content, token_id in data.items():
            out.setdefault(content, TokenInfo(content, token_id, False, True, ADDED_TOKENS_JSON))
    return out


def load_repo(path: str | Path) -> ModelRepo:
    """Read every stop-relevant file of the folder at ``path`` (nothing is written)."""
    root = Path(path)
    if not root.is_dir():
        raise RepoLoadError("not a directory", path=root)
    repo = ModelRepo(root=root)
    tok = _load_json(root, TOKENIZER_CONFIG, TokenizerConfig)
    stm = _load_json(root, SPECIAL_TOKENS_MAP, SpecialTokensMap, repo.unreadable)
    gen = _load_json(root, GENERATION_CONFIG, GenerationConfig, repo.unreadable)
    cfg = _load_json(root, CONFIG, ModelConfig)
    for loaded in (tok, stm, gen, cfg):
        if loaded is not None:
            repo.files[loaded[0].name] = loaded[0]
    repo.tokenizer_config = tok[1] if tok else None
    repo.generation_config = gen[1] if gen else None
    repo.config = cfg[1] if cfg else None
    read: list[JsonFile] = []
    repo.templates = _load_templates(root, repo.tokenizer_config, read)
    repo.files.update((f.name, f) for f in read)  # chat_template.json, processor_config.json
    repo.special_tokens = _special_tokens(repo.tokenizer_config, stm[1] if stm else None)
    tokenizer_json = root / TOKENIZER_JSON
    if tokenizer_json.is_file() or tokenizer_json.is_symlink():
        repo.tokenizer_head = read_tokenizer_head(tokenizer_json)
    bom = [name for name, f in repo.files.items() if f.text.startswith(BOM)]
    repo.added_tokens = _added_tokens(root, repo.tokenizer_config, repo.tokenizer_head, bom)
    if repo.tokenizer_head is not None and repo.tokenizer_head.bom:
        bom.append(TOKENIZER_JSON)
    repo.bom = tuple(bom)
    return repo
