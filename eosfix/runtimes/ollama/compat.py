"""A GGUF blob as ollama reads it (``OllamaGguf``), and the stop keys ollama's llama.cpp
compatibility layer rewrites when llama-server loads it (``translate``).

From ollama 0.30.0 on, every GGUF runs on llama-server (upstream llama.cpp at the tag in
``LLAMA_CPP_VERSION``), patched so that the model loader first calls ``translate_metadata``
(``llama/compat/001-llama-cpp-hooks.patch``). That function rewrites the in-memory metadata of
"Ollama-format" blobs, architecture by architecture; the handlers that touch what llama.cpp
stops on are modelled here, read at ollama/ollama@fb3076099 (2026-08-21),
``llama/compat/llama-ollama-compat.cpp`` (line numbers at that commit; the same code since
9db4bdbad, the first commit of v0.30.0). The layer is off when ``OLLAMA_LLAMA_CPP_COMPAT=0``
(line 68).

llama.cpp never reads ``tokenizer.ggml.eos_token_ids``: what the handlers write there changes
no stop id; what they write to eos/eot/eom, the token list or the tokenizer model does.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import NamedTuple

from eosfix.runtimes.llamacpp import GgufVocab

COMPAT = "ollama/ollama@fb3076099 llama/compat/llama-ollama-compat.cpp"
# ollama's converter writes the list as INT32 (convert/convert.go:155, []int32)
INT32, UINT32 = "INT32", "UINT32"
# The architectures whose handler reads tensor shapes (the vocabulary rows of an embedding)
SHAPE_ARCHITECTURES = ("gemma3", "gemma3n")


class OllamaGguf(NamedTuple):
    """What ollama reads of a GGUF blob to decide where generation ends.

    ``vocab`` is llama.cpp's view (tokenizer model, pre, token texts, every ``*_token_id`` key).
    The rest: ``general.architecture``; ``tokenizer.ggml.eos_token_ids`` and its array item type
    name; ``tokenizer.chat_template``; the names of every metadata key; the shape (``ne``) of
    each tensor (``None``: not read); whether the ollama manifest has a projector layer.
    """

    vocab: GgufVocab
    architecture: str
    eos_token_ids: tuple[int, ...] | None = None
    eos_token_ids_type: str = INT32
    chat_template: str | None = None
    key_names: frozenset[str] | None = None
    tensor_shapes: Mapping[str, tuple[int, ...]] | None = None
    has_projector: bool = False

    def key(self, role: str) -> int | None:
        return self.vocab.key_ids.get(role)  # eos, eot, eom: the slot is the role

    def rows(self, tensor: str) -> int | None:
        """``ne[1]`` of a 2-D tensor (the vocabulary rows of an embedding)."""
        shape = (self.tensor_shapes or {}).get(tensor)
        return shape[1] if shape is not None and len(shape) >= 2 else None

    def has_tensor_prefix(self, *prefixes: str) -> bool:
        return any(n.startswith(prefixes) for n in self.tensor_shapes or {})

    def token(self, token_id: int) -> str | None:
        return self.vocab.token_text(token_id)


class Translated(NamedTuple):
    """A blob after the compatibility layer, and what it rewrote: field -> new value, a field
    being an id slot (``eot``) or ``architecture``, ``model``, ``pre``, ``tokens``,
    ``eos_token_ids`` (the GGUF container names their keys:
    ``eosfix.containers.gguf.format.field_key``)."""

    gguf: OllamaGguf
    rewrites: Mapping[str, object]
    notes: tuple[str, ...] = ()


def _with_keys(g: OllamaGguf, **changes: int) -> OllamaGguf:
    keys = dict(g.vocab.key_ids)
    keys.update(changes)
    return g._replace(vocab=g.vocab._replace(key_ids=keys))


def _truncated(g: OllamaGguf, rows: int, model: str | None = None) -> OllamaGguf:
    """util.cpp:112 truncate_str_arr: the token list cut to ``rows`` (no-op when not longer)."""
    v = g.vocab
    n = min(v.n_tokens, rows)
    text_ids = {t: i for t, i in v.text_ids.items() if i < n}
    vocab = v._replace(n_tokens=n, text_ids=text_ids, model=model or v.model)
    return g._replace(vocab=vocab)


def _gemma3(g: OllamaGguf) -> Translated:
    # :222 detect_ollama_gemma3: an Ollama converter quirk; :265-273 tokens cut to token_embd rows
    keys = g.key_names
    rows = g.rows("token_embd.weight")
    if keys is None or g.tensor_shapes is None:
        return Translated(g, {}, ("gemma3: key names or tensor shapes not given, not translated",))
    quirk = (
        bool(keys & {"gemma3.mm.tokens_per_image", "gemma3.rope.global.freq_base",
                     "gemma3.rope.local.freq_base", "tokenizer.ggml.add_padding_token",
                     "tokenizer.ggml.add_unknown_token"})
        or g.has_tensor_prefix("v.", "mm.")
        or "gemma3.attention.layer_norm_rms_epsilon" not in keys
    )  # fmt: skip
    if not quirk or rows is None or rows >= g.vocab.n_tokens:
        return Translated(g, {})
    return Translated(_truncated(g, rows), {"tokens": f"first {rows}"})


def _gemma3n(g: OllamaGguf) -> Translated:
    # :307 detect_ollama_gemma3n: token_embd and per_layer_token_embd disagree on the vocab size
    te, pe = g.rows("token_embd.weight"), g.rows("per_layer_token_embd.weight")
    if g.tensor_shapes is None:
        return Translated(g, {}, ("gemma3n: tensor shapes not given, not translated",))
    if te is None or pe is None or te == pe:
        return Translated(g, {})
    # :326 tokenizer model "llama"; :331 tokens cut to per_layer rows; :354-372 106 appended to
    # eos_token_ids ([1, 106] when absent), which llama.cpp does not read
    out = _truncated(g, pe, model="llama")
    ids = g.eos_token_ids
    if ids is not None and g.eos_token_ids_type in (INT32, UINT32):
        new = ids if 106 in ids else (*ids, 106)
    else:
        new = ids if ids is not None else (1, 106)
    out = out._replace(eos_token_ids=new)
    return Translated(out, {"model": "llama", "tokens": f"first {pe}", "eos_token_ids": new})  # fmt: skip


def _gemma4(g: OllamaGguf) -> Translated:
    # :987 detect_ollama_gemma4 holds whenever the tokenizer model is "llama" (or a./v./mm.
    # tensors are embedded); :1079-1087 then "llama" -> "gemma4" (llama.cpp's gemma4 tokenizer
    # has no default ids); nothing else touches stop keys
    if g.vocab.model != "llama":
        return Translated(g, {})
    vocab = g.vocab._replace(model="gemma4")
    return Translated(g._replace(vocab=vocab), {"model": "gemma4"})


def _glm4moelite(g: OllamaGguf) -> Translated:
    # :1704 handle_glm4moelite: architecture -> deepseek2, pre -> glm4, then :91-119
    # fix_glm4moelite_eog_token_ids: eot = eos_token_ids[1], eom = [2], each only when absent
    # (INT32 items: negatives dropped first; UINT32 as they are; any other type: nothing)
    vocab = g.vocab._replace(pre="glm4")
    out = g._replace(architecture="deepseek2", vocab=vocab)
    rewrites: dict[str, object] = {
        "architecture": "deepseek2",
        "pre": "glm4",
    }
    ids: tuple[int, ...] = ()
    if g.eos_token_ids is not None and g.eos_token_ids_type == INT32:
        ids = tuple(i for i in g.eos_token_ids if i >= 0)
    elif g.eos_token_ids is not None and g.eos_token_ids_type == UINT32:
        ids = g.eos_token_ids
    changes = {role: ids[n] for role, n in (("eot", 1), ("eom", 2))
               if g.key(role) is None and len(ids) > n}  # fmt: skip
    rewrites.update(changes)
    return Translated(_with_keys(out, **changes), rewrites)


def _llama3(g: OllamaGguf) -> Translated:
    # :1316 detect_ollama_llama3_metadata_gap: token 128009 is <|eot_id|>, Llama 3 chat markers
    # (token 128006 <|start_header_id|>, or the template names it or <|eot_id|>), and the pre
    # missing/""/"default" or eos 128001 (:158 get_u32_kv reads UINT32, the only type
    # eosfix's reader accepts for an id key: llama.cpp refuses any other)
    template = g.chat_template or ""
    markers = (
        g.token(128006) == "<|start_header_id|>"
        or "<|start_header_id|>" in template
        or "<|eot_id|>" in template
    )
    default_pre = g.vocab.pre in ("", "default")
    if (
        g.token(128009) != "<|eot_id|>"
        or not markers
        or not (default_pre or g.key("eos") == 128001)
    ):
        return Translated(g, {})
    # :1334-1355: pre -> llama-bpe; eos and eot -> 128009 when absent or 128001;
    # eos_token_ids -> [128009]
    changes = {r: 128009 for r in ("eos", "eot") if g.key(r) in (None, 128001)}
    out = _with_keys(g, **changes)
    if default_pre:
        out = out._replace(vocab=out.vocab._replace(pre="llama-bpe"))
    out = out._replace(eos_token_ids=(128009,), eos_token_ids_type=INT32)
    rewrites: dict[str, object] = dict(changes)
    rewrites.update({"pre": "llama-bpe"} if default_pre else {})
    rewrites["eos_token_ids"] = (128009,)
    return Translated(out, rewrites)


# :3239-3276 translate_metadata dispatches on general.architecture (one handler each here)
_HANDLERS = {
    "gemma3": _gemma3,
    "gemma3n": _gemma3n,
    "gemma4": _gemma4,
    "glm4moelite": _glm4moelite,
    "llama": _llama3,
}


def translate(g: OllamaGguf) -> Translated:
    """The blob as llama-server sees it after ``translate_metadata`` (stop-relevant parts)."""
    handler = _HANDLERS.get(g.architecture)
    return handler(g) if handler is not None else Translated(g, {})
