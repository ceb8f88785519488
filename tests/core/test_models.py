"""The views of eosfix.core.models agree with the pydantic models of eosfix.core.schemas: a
view vouches only for a file its model accepts, and reads the same values from it."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import BaseModel, ValidationError

from eosfix.core import models, schemas

FLAGS = ("special", "normalized", "lstrip", "rstrip", "single_word")

# JSON values near the edges of each field's shape: ints around 0 and 2**63, bools (ints
# to Python), floats, strings, nulls, lists and objects of those.
scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-3, 3),
    st.sampled_from([2**63 - 1, 2**63, 2**70, -(2**70)]),
    st.floats(allow_nan=False, allow_infinity=False, width=32),
    st.sampled_from(["", "<|im_end|>", "2", "x_token"]),
)
values = st.recursive(
    scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4),
        st.dictionaries(st.sampled_from(["content", "name", "template", *FLAGS, "x"]), inner),
    ),
    max_leaves=8,
)
ids = st.one_of(st.none(), st.integers(-2, 2**64), st.lists(st.integers(-1, 2**64), max_size=5))
token = st.one_of(
    values,
    st.fixed_dictionaries(
        {"content": st.one_of(st.text(max_size=3), values)},
        optional={f: st.one_of(st.booleans(), values) for f in FLAGS},
    ),
)
named = st.fixed_dictionaries(
    {"name": st.one_of(st.text(max_size=3), values), "template": st.text(max_size=3)}
)
KEYS = {
    models.AddedToken: {"content": st.one_of(st.text(max_size=3), values)}
    | {f: st.one_of(st.booleans(), values) for f in FLAGS},
    models.TokenizerConfig: {
        "chat_template": st.one_of(values, st.text(max_size=3), st.lists(named, max_size=3)),
        "added_tokens_decoder": st.one_of(values, st.dictionaries(st.text(max_size=2), token)),
        "eos_token": token,
        "bos_token": token,
        "pad_token": token,
        "extra_special_tokens": values,
        "model_max_length": values,
    },
    models.SpecialTokensMap: {"eos_token": token, "pad_token": token, "unk_token": token},
    models.GenerationConfig: {"eos_token_id": st.one_of(ids, values), "temperature": values},
    models.ModelConfig: {
        "eos_token_id": st.one_of(ids, values),
        "vocab_size": values,
        "text_config": st.one_of(
            values,
            st.fixed_dictionaries({}, optional={"eos_token_id": ids, "vocab_size": values}),
        ),
    },
    models.ChatTemplateJson: {"chat_template": st.one_of(values, st.text(max_size=3))},
}


def _schema(view: type) -> type[BaseModel]:
    schema: type[BaseModel] = getattr(schemas, models.SCHEMAS[view])
    return schema


def _has_huge_int(value: Any) -> bool:
    if isinstance(value, dict):
        return any(_has_huge_int(v) for v in value.values())
    if isinstance(value, list):
        return any(_has_huge_int(v) for v in value)
    return type(value) is int and value >= 2**63


def _same(view_value: Any, model_value: Any) -> None:
    """A view's value equals the model's (a nested model compared field by field)."""
    if isinstance(model_value, BaseModel):
        dumped = model_value.model_dump()
        assert {k: getattr(view_value, k) for k in type(model_value).model_fields} == {
            k: dumped[k] for k in type(model_value).model_fields
        }
    elif isinstance(model_value, list) and model_value and isinstance(model_value[0], BaseModel):
        assert len(view_value) == len(model_value)
        for v, m in zip(view_value, model_value, strict=True):
            _same(v, m)
    elif isinstance(model_value, dict) and any(
        isinstance(v, BaseModel) for v in model_value.values()
    ):
        assert view_value.keys() == model_value.keys()
        for k, m in model_value.items():
            _same(view_value[k], m)
    else:
        assert view_value == model_value
        assert type(view_value) is type(model_value)


@pytest.mark.parametrize("view", list(KEYS), ids=lambda v: v.__name__)
@settings(max_examples=400, deadline=None)
@given(data=st.data())
def test_a_view_vouches_only_for_what_its_model_accepts(view, data):
    obj = data.draw(st.fixed_dictionaries({}, optional=KEYS[view]))
    try:
        model = _schema(view).model_validate(obj)
    except ValidationError:
        assert not view.accepts(obj)
        return
    if not view.accepts(obj):  # only an id too large to vouch for is left to the model
        assert _has_huge_int(obj), obj
    got = view(obj)
    for field in _schema(view).model_fields:
        _same(getattr(got, field), getattr(model, field))
    if isinstance(got, models.View):  # the order the template variables are read in
        dumped = model.model_dump(exclude_none=True)
        assert [k for k, _ in got.items()] == list(dumped)


def test_plain_checks_leave_only_huge_ids_to_pydantic():
    """What a view cannot vouch for but its model accepts: ids of 2**63 and more (in
    generation_config.json every value runtimes may read as ids is the view's to vouch for)."""
    big = {"eos_token_id": [2**64, 3]}
    assert not models.ModelConfig.accepts(big)
    assert schemas.ModelConfigModel.model_validate(big).eos_token_id == [2**64, 3]
    assert models.ModelConfig(big).eos_token_id == [2**64, 3]
    assert models.GenerationConfig.accepts(big)


@pytest.mark.parametrize(
    ("value", "ids"),
    [
        ("248044", (248044,)),
        ([248044, "248046"], (248044, 248046)),
        (248044.0, (248044,)),
        (True, ()),
        ([248044, None], (248044,)),
        ([[248044, 248046]], (248044, 248046)),
        ([1.5, "x", "-3", 7, 7.0], (7,)),
    ],
)
def test_an_eos_token_id_of_the_wrong_type_is_read_for_the_ids_it_names(value, ids):
    gen = models.GenerationConfig({"eos_token_id": value})
    assert models.GenerationConfig.accepts(gen.data)
    assert gen.eos_malformed
    assert gen.eos_ids == ids


@pytest.mark.parametrize("value", [7, [7, -1], -1, [], None])
def test_ids_and_negative_ids_are_well_formed(value):
    gen = models.GenerationConfig({"eos_token_id": value})
    assert not gen.eos_malformed
    assert gen.eos_ids == models.eos_tuple(value)


def test_an_object_is_still_no_eos_token_id():
    assert not models.GenerationConfig.accepts({"eos_token_id": {"id": 2}})
    with pytest.raises(ValidationError):
        schemas.GenerationConfigModel.model_validate({"eos_token_id": [2, {"id": 2}]})


def test_model_config_reads_vocab_size_and_text_config():
    cfg = models.ModelConfig({"vocab_size": 9, "text_config": {"eos_token_id": 7, "vocab_size": 8}})
    assert cfg.vocab_size == 9
    assert cfg.eos_token_id is None
    assert cfg.text_config is not None
    assert (cfg.text_config.eos_token_id, cfg.text_config.vocab_size) == (7, 8)
    assert models.ModelConfig({}).text_config is None
