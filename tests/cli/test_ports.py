"""`eosfix render`, `goldens` and `diagnose` on sample repos, a stand-in Hub and bad input."""

from __future__ import annotations

import io
import json
import sys
from pathlib import Path

import pytest
from tokenizers import decoders

from eosfix.cli import main
from eosfix.ports.goldens import ANSWER, GOLDEN_CASES, QUESTION
from tests.conftest import SAMPLES, copy_repo
from tests.support.tiny_lm import save_tokenizer, word_level_tokenizer

CHATML = "chatml-missing-im-end"
PROMPT = f"<|im_start|>user\n{QUESTION}<|im_end|>\n<|im_start|>assistant\n"
INVENTED = "<|im_start|>system\n<|im_end|>\n<|im_start|>user\nWhat is the capital of Spain?"
EXTRA_TEXTS = [
    PROMPT + ANSWER + "<|im_end|>\n" + INVENTED,
    "< | im_start | > Ask the user",
    *(json.dumps(c.messages) + json.dumps(c.reply) + json.dumps(c.tools) for c in GOLDEN_CASES),
]


def run(capsys, *args: str, stdin: str | None = None) -> tuple[int, str, str]:
    """The CLI through main(), as the console script runs it: (exit code, stdout, stderr)."""
    if stdin is not None:
        sys.stdin = io.StringIO(stdin)
    try:
        code = main([str(a) for a in args])
    finally:
        sys.stdin = sys.__stdin__
    out, err = capsys.readouterr()
    return code, out, err


def with_tokenizer(repo: Path, texts: list[str] = EXTRA_TEXTS):
    """A WordLevel tokenizer.json (special tokens at their real ids) that decodes losslessly."""
    from eosfix.api import check

    c = check(repo).check
    added = {t: i.id for t, i in c.repo.added_tokens.items() if i.id is not None}
    tok = word_level_tokenizer(texts, added)
    tok.decoder = decoders.Fuse()
    save_tokenizer(tok, repo)
    return tok


@pytest.fixture
def chatml(tmp_path):
    repo = copy_repo(SAMPLES / CHATML, tmp_path / CHATML)
    return repo, with_tokenizer(repo)


def ids_of(tok, text: str) -> str:
    return ",".join(str(i) for i in tok.encode(text, add_special_tokens=False).ids)


# --- render ---------------------------------------------------------------------------------


def test_render_raw_is_the_exact_prompt_string(capsys):
    code, out, err = run(capsys, "render", SAMPLES / CHATML, "--format", "raw")
    assert (code, err) == (0, "")
    assert out == PROMPT


def test_render_text_shows_tokens_ids_unavailable_and_the_fix(capsys):
    code, out, _ = run(capsys, "render", SAMPLES / CHATML)
    assert code == 0
    assert "  | <|im_start|>user\\n\n  | What is the capital of France?<|im_end|>\\n\n" in out
    assert "prompt ids: unavailable (no tokenizer.json in this repo)" in out
    assert "stop ids: [248044, 248046] = <|endoftext|> (248044), <|im_end|> (248046)" in out
    assert (
        f"needs `eosfix fix {SAMPLES / CHATML}`: today it stops on [248044] (generation_config.json), "
        in out
    )
    assert "without <|im_end|> (248046)" in out


def test_render_json_ids_come_from_tokenizer_json(chatml, capsys, tmp_path):
    repo, tok = chatml
    messages = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": QUESTION}]
    (tmp_path / "m.json").write_text(json.dumps(messages))
    code, out, _ = run(
        capsys, "render", repo, "--messages", tmp_path / "m.json", "--format", "json"
    )
    assert code == 0
    data = json.loads(out)
    assert data["text"] == f"<|im_start|>system\nBe brief.<|im_end|>\n{PROMPT}"
    assert data["prompt_ids"] == tok.encode(data["text"], add_special_tokens=False).ids
    assert data["prompt_ids"][0] == 248045
    assert (data["stop_ids"], data["stop_ids_need_fix"]) == ([248044, 248046], True)
    assert data["current_stop_ids"] == [248044]
    assert data["messages"] == messages


def test_render_reads_messages_from_stdin_and_honours_no_generation_prompt(capsys):
    messages = json.dumps([{"role": "user", "content": "Hi"}])
    code, out, _ = run(
        capsys, "render", SAMPLES / CHATML, "--messages", "-", "--no-add-generation-prompt",
        "--format", "raw", stdin=messages,
    )  # fmt: skip
    assert code == 0
    assert out == "<|im_start|>user\nHi<|im_end|>\n"


def test_render_picks_tool_use_when_tools_are_given_like_transformers(capsys, tmp_path):
    tools = tmp_path / "tools.json"
    tools.write_text(json.dumps(GOLDEN_CASES[-1].tools))
    code, out, _ = run(capsys, "render", SAMPLES / "named-templates", "--tools", tools,
                       "--format", "json")  # fmt: skip
    assert code == 0
    assert json.loads(out)["template"] == "tool_use"
    code, out, _ = run(capsys, "render", SAMPLES / "named-templates", "--tools", tools,
                       "--template", "default", "--format", "json")  # fmt: skip
    assert json.loads(out)["template"] == "default"


def test_render_a_hub_repo_reads_small_files_only(fake_hub, capsys):
    files = {p.name: p.read_bytes() for p in (SAMPLES / CHATML).iterdir() if p.is_file()}
    fake_hub.add_repo("org/chatml", {**files, "model.safetensors": b"\0" * 4096})
    code, out, err = run(capsys, "render", "org/chatml", "--format", "raw")
    assert (code, err) == (0, "")
    assert out == PROMPT
    assert "model.safetensors" not in fake_hub.downloads("org/chatml")


def test_a_name_that_is_neither_a_folder_nor_a_hub_repo_says_both(fake_hub, capsys):
    """The error eosfix check prints of the same name, word for word."""
    code, out, err = run(capsys, "render", "org/missing")
    assert (code, out) == (2, "")
    assert err == (
        "error: org/missing: repository not found (404); no local folder or file org/missing "
        "exists either\n"
    )
    assert run(capsys, "check", "org/missing")[2] == err


REFUSING_TEMPLATE = (
    "{% if messages[0]['role'] == 'system' %}{{ raise_exception('System role not supported') }}"
    "{% endif %}{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n"
    "{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)


@pytest.fixture
def refusing(tmp_path):
    repo = copy_repo(SAMPLES / CHATML, tmp_path / "refusing")
    (repo / "chat_template.jinja").write_text(REFUSING_TEMPLATE)
    return repo


@pytest.mark.parametrize(
    ("payload", "expected"),
    [
        ('{"role": "user", "content": "Hi"}', "messages must be a JSON list of"),
        ("[]", "got an empty list"),
        ('[{"content": "Hi"}]', 'message 1 has no "role" string'),
        ('[{"role": "user"}]', 'message 1 has no "content"'),
        ('[{"role": "user", "content": 3}]', '"content" must be a string, a list of part'),
        ('["hello"]', "message 1 must be an object, got a string"),
        ("[{", "not valid JSON: line 1 column 3"),
    ],
)
def test_bad_messages_are_one_line_and_exit_2(capsys, tmp_path, payload, expected):
    path = tmp_path / "m.json"
    path.write_text(payload)
    code, out, err = run(capsys, "render", SAMPLES / CHATML, "--messages", path)
    assert (code, out) == (2, "")
    assert err.count("\n") == 1
    assert err.startswith(f"error: {path}: ")
    assert expected in err


def test_refused_conversation_unknown_template_no_template_exit_2(capsys, refusing, tmp_path):
    path = tmp_path / "m.json"
    path.write_text(
        json.dumps([{"role": "system", "content": "x"}, {"role": "user", "content": "y"}])
    )
    code, _, err = run(capsys, "render", refusing, "--messages", path)
    assert code == 2
    assert err == (
        f"error: {refusing}: template 'default' refuses this conversation: "
        "System role not supported\n"
    )
    code, _, err = run(capsys, "render", SAMPLES / CHATML, "--template", "tool_use")
    assert code == 2
    assert (
        err == f"error: {SAMPLES / CHATML}: no template named 'tool_use'; this repo has: default\n"
    )
    code, _, err = run(capsys, "render", SAMPLES / "base-model")
    assert (code, err.count("\n")) == (2, 1)
    assert "no chat template" in err
    code, _, err = run(capsys, "render", SAMPLES / CHATML, "--tools", tmp_path / "missing.json")
    assert (code, err.count("\n")) == (2, 1)
    assert "missing.json: cannot read: No such file or directory" in err
    code, _, err = run(capsys, "render", "./no/such/folder")  # the path as given, one line
    assert code == 2
    assert err == "error: ./no/such/folder: no such file or directory\n"


# --- goldens --------------------------------------------------------------------------------


def test_goldens_cover_every_case_on_every_template(capsys, tmp_path):
    out_file = tmp_path / "g.jsonl"
    code, out, err = run(capsys, "goldens", SAMPLES / "named-templates", "-o", out_file)
    assert (code, out) == (0, "")
    assert err == f"14 cases on 2 templates (12 ok, 2 unsupported) -> {out_file}\n"
    records = [json.loads(line) for line in out_file.read_text().splitlines()]
    assert [(r["template"], r["case"]) for r in records] == [
        (t, c.name) for t in ("default", "tool_use") for c in GOLDEN_CASES
    ]
    by = {(r["template"], r["case"]): r for r in records}
    call = by["tool_use", "tool_call"]
    assert call["selected_by_default"] is True
    assert by["default", "tool_call"]["selected_by_default"] is False
    assert by["default", "tool_call"]["status"] == "unsupported"
    assert call["reply"]["until_stop"].endswith(".call(" + '{"city": "Paris"})<|eom_id|>')
    assert call["stop_ids"] == [128001, 128009, 128008]
    assert call["prompt_ids"] is None  # no tokenizer.json
    single = by["default", "single_turn"]
    assert single["text"].endswith("<|start_header_id|>assistant<|end_header_id|>\n\n")
    assert single["reply"]["text"] == f"{ANSWER}<|eot_id|>"
    assert by["default", "single_turn_no_generation_prompt"]["reply"] is None


def test_goldens_with_tokenizer_give_the_stop_position(chatml, capsys):
    repo, tok = chatml
    code, out, _ = run(capsys, "goldens", repo)
    assert code == 0
    records = [json.loads(line) for line in out.splitlines()]
    with_reply = [r for r in records if r["status"] == "ok" and r["reply"]]
    assert {r["case"] for r in with_reply} == {"single_turn", "with_system", "three_turns"}
    for r in with_reply:
        reply = r["reply"]
        full = tok.encode(r["text"] + reply["text"], add_special_tokens=False).ids
        assert r["prompt_ids"] + reply["ids"] == full
        assert reply["stop_id"] == 248046 == reply["ids"][reply["stop_at"]]
        assert reply["stop_position"] == len(r["prompt_ids"]) + reply["stop_at"]
        assert not set(reply["ids"][: reply["stop_at"]]) & set(r["stop_ids"])
        assert reply["until_stop"] == reply["message"]["content"] + "<|im_end|>"
    tool = {r["case"]: r for r in records}
    assert tool["tool_call"]["status"] == "unsupported"


def test_goldens_record_refusals(refusing, capsys):
    code, out, err = run(capsys, "goldens", refusing)
    assert code == 0
    records = {json.loads(line)["case"]: json.loads(line) for line in out.splitlines()}
    assert len(records) == len(GOLDEN_CASES)
    assert records["with_system"]["status"] == "refused"
    assert records["with_system"]["reason"].endswith("System role not supported")
    assert records["with_system"]["text"] is None
    assert "1 refused" in err


def test_goldens_write_nothing_on_error(capsys, tmp_path):
    out_file = tmp_path / "g.jsonl"
    code, _, err = run(capsys, "goldens", SAMPLES / "base-model", "-o", out_file)
    assert (code, err.count("\n")) == (2, 1)
    assert not out_file.exists()


def test_every_golden_case_is_documented():
    readme = (SAMPLES.parent / "docs" / "ports.md").read_text()
    for case in GOLDEN_CASES:
        assert f"`{case.name}`" in readme, case.name


# --- diagnose -------------------------------------------------------------------------------


def test_diagnose_a_correct_transcript_exits_0(chatml, capsys):
    repo, tok = chatml
    code, out, _ = run(capsys, "diagnose", repo, "--ids", ids_of(tok, ANSWER + "<|im_end|>"))
    assert code == 0
    assert (
        out.splitlines()[-1]
        == "ok: the transcript ends with <|im_end|> (248046), a stop id, and nothing after it"
    )


def test_diagnose_ran_past_the_terminator_and_invented_turns(chatml, capsys):
    repo, tok = chatml
    ids = ids_of(tok, ANSWER + "<|im_end|>\n" + INVENTED)
    code, out, _ = run(capsys, "diagnose", repo, "--ids", ids, "--format", "json")
    assert code == 1
    data = json.loads(out)
    assert [p["kind"] for p in data["problems"]] == ["ran_past_stop", "invented_turn"]
    ran, turn = data["problems"]
    at = len(tok.encode(ANSWER).ids)
    assert (ran["position"], ran["id"]) == (at, 248046)
    assert ran["message"].startswith(f"token {at + 1} is <|im_end|> (248046), which ends the turn")
    assert "stop when the sampled id is in [248044, 248046]" in ran["message"]
    assert f"the repo's files list only [248044]: run `eosfix fix {repo}`" in ran["message"]
    assert turn["message"] == (
        f"the model wrote 2 turns of its own: a system turn at token {at + 3} (empty), then a "
        f"user turn at token {at + 8}: 'What is the capital of Spain?'"
    )
    assert data["exit_code"] == 1


def test_diagnose_first_token_terminator_and_raw_prompt(chatml, capsys):
    repo, tok = chatml
    code, out, _ = run(
        capsys, "diagnose", repo, "--ids", "248046", "--prompt-ids", ids_of(tok, QUESTION)
    )
    assert code == 1
    lines = out.splitlines()[1:]
    assert lines[0].startswith(
        "prompt_not_templated: the prompt holds no turn of the chat template"
    )
    assert lines[1].startswith(
        "prompt_not_templated: the first generated token is <|im_end|> (248046), a stop id"
    )
    assert "not rendered with the chat template" in lines[1]
    assert len(lines) == 2


def test_diagnose_empty_input_is_bad_input(chatml, capsys, tmp_path):
    # nothing to diagnose is bad input (exit 2), not a reply found empty (exit 1)
    repo, _ = chatml
    (tmp_path / "empty.txt").write_text("")
    for args, expected in [
        (["--ids", ""], "error: --ids: no token ids given: nothing to diagnose\n"),
        (["--ids", " , "], "error: --ids: no token ids given: nothing to diagnose\n"),
        (["--text", ""], "error: --text: empty: no generated text to diagnose\n"),
        (["--from-file", tmp_path / "empty.txt"],
         f"error: {tmp_path / 'empty.txt'}: empty: no generated text to diagnose\n"),
        (["--ids", "2", "--prompt-ids", ""], "error: --prompt-ids: no token ids given"),
    ]:  # fmt: skip
        code, out, err = run(capsys, "diagnose", repo, *args)
        assert (code, out) == (2, ""), args
        assert err.startswith(expected), err
        assert err.count("\n") == 1


def test_diagnose_whitespace_reply_is_a_problem(chatml, capsys):
    repo, _ = chatml
    code, out, _ = run(capsys, "diagnose", repo, "--text", " \n")
    assert code == 1
    assert "prompt_not_templated: the reply is only whitespace" in out


def test_diagnose_prompt_ids_against_the_messages(chatml, capsys, tmp_path):
    repo, tok = chatml
    (tmp_path / "m.json").write_text(json.dumps([{"role": "user", "content": QUESTION}]))
    good = ids_of(tok, PROMPT)
    answer = ids_of(tok, ANSWER + "<|im_end|>")
    code, out, _ = run(capsys, "diagnose", repo, "--ids", answer, "--prompt-ids", good,
                       "--messages", tmp_path / "m.json")  # fmt: skip
    assert code == 0, out
    no_gp = ids_of(tok, PROMPT.removesuffix("<|im_start|>assistant\n"))
    code, out, _ = run(capsys, "diagnose", repo, "--ids", answer, "--prompt-ids", no_gp,
                       "--messages", tmp_path / "m.json")  # fmt: skip
    assert code == 1
    n = len(no_gp.split(","))
    assert (
        f"prompt_ids_differ: the prompt ids differ from the template's at position {n}: yours "
        "end there; the template's go on with 248045 ('<|im_start|>')"
    ) in out
    code, out, _ = run(capsys, "diagnose", repo, "--ids", answer, "--prompt-ids", no_gp)
    assert code == 1
    assert "the prompt does not end with the generation prompt '<|im_start|>assistant\\n'" in out


def test_diagnose_special_token_split_into_pieces(chatml, capsys):
    repo, tok = chatml
    pieces = [tok.token_to_id(p) for p in ("<", "|", "im_start", "|", ">")]
    rest = [int(i) for i in ids_of(tok, PROMPT).split(",")][1:]
    prompt = ",".join(str(i) for i in [*pieces, *rest])
    code, out, _ = run(capsys, "diagnose", repo, "--ids", "248046", "--prompt-ids", prompt)
    assert code == 1
    assert (
        "prompt_ids_differ: the prompt ids differ from tokenizer.json's encoding of their text "
        f"at position 0: yours {pieces[0]} ('<'), tokenizer.json's encoding of their text 248045 "
        "('<|im_start|>')"
    ) in out


def test_diagnose_double_bos(tmp_path, capsys):
    repo = copy_repo(SAMPLES / "llama3-healthy", tmp_path / "llama3")
    tok = with_tokenizer(repo, ["<|begin_of_text|><|start_header_id|>user<|end_header_id|>\n\nHi"])
    prompt = "<|begin_of_text|><|begin_of_text|><|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n"
    code, out, _ = run(
        capsys, "diagnose", repo, "--ids", "128009", "--prompt-ids", ids_of(tok, prompt)
    )
    assert code == 1
    assert "the prompt starts with <|begin_of_text|> twice" in out


def test_diagnose_text_decoded_without_special_tokens(chatml, capsys):
    repo, _ = chatml
    text = f"{ANSWER}\nsystem\n\nuser\nWhat is the capital of Spain?"
    code, out, _ = run(capsys, "diagnose", repo, "--text", text)
    assert code == 1
    lines = out.splitlines()[1:]
    assert lines[0].startswith(
        f"hidden_terminator: the text reads as an answer, then '\\nsystem\\n' at character "
        f"{len(ANSWER) + 1} where the template writes '<|im_start|>system\\n', and no control token"
    )
    assert "hid the terminator (<|im_end|> (248046))" in lines[0]
    assert lines[1] == (
        f"invented_turn: the model wrote 2 turns of its own: a system turn at character "
        f"{len(ANSWER) + 1} (empty), then a user turn at character {len(ANSWER) + 9}: "
        "'What is the capital of Spain?'"
    )


def test_diagnose_plain_answer_text_is_undecidable_not_a_problem(chatml, capsys, tmp_path):
    repo, _ = chatml
    path = tmp_path / "out.txt"
    path.write_text(ANSWER + "\n")
    code, out, _ = run(capsys, "diagnose", repo, "--from-file", path)
    assert code == 0
    assert "note: the text holds no control token and no sign of a new turn" in out


def test_diagnose_text_with_control_tokens_and_trailing_newline(chatml, capsys):
    repo, _ = chatml
    code, out, _ = run(capsys, "diagnose", repo, "--text", ANSWER + "<|im_end|>\n")
    assert code == 0
    code, out, _ = run(capsys, "diagnose", repo, "--text", ANSWER + "<|im_end|>\n" + INVENTED)
    assert code == 1
    assert f"ran_past_stop: character {len(ANSWER) + 1} is <|im_end|> (248046)" in out


def test_diagnose_llama3_plain_header_only_when_glued(tmp_path, capsys):
    repo = SAMPLES / "llama3-healthy"
    code, out, _ = run(capsys, "diagnose", repo, "--text", "Paris.user\n\nAnd Italy?")
    assert code == 1
    assert "hidden_terminator" in out
    assert "<|eot_id|> (128009)" in out
    code, out, _ = run(capsys, "diagnose", repo, "--text", "Ask the user\n\nthen go on.")
    assert code == 0, out


@pytest.mark.parametrize(
    ("given", "ran", "turn"),
    [
        (["--text", "Paris.<|user|>\nAnd Italy?"], "character 7 is <|user|> (151336)",
         "1 turn of its own: a user turn at character 7: 'And Italy?'"),
        (["--ids", "5,6,151336,7,151337"], "token 3 is <|user|> (151336)",
         "2 turns of its own: a turn (<|user|>) at token 3"),
    ],
)  # fmt: skip
def test_diagnose_next_turn_opener_template(capsys, given, ran, turn):
    """GLM: the next turn's opener is the terminator; running into it is running past it, and
    what follows is a turn the model wrote."""
    code, out, _ = run(capsys, "diagnose", SAMPLES / "glm-next-turn-opener", *given)
    assert code == 1
    assert f"ran_past_stop: {ran}" in out
    assert f"invented_turn: the model wrote {turn}" in out


@pytest.mark.parametrize(
    "given",
    [
        ["--ids", "5,6,151336"],
        ["--ids", "5,6,151338"],
        ["--text", "Paris.<|user|>"],
        ["--text", "Paris.<|user|>\n"],
    ],
)
def test_diagnose_a_next_turn_opener_that_is_a_stop_ends_the_reply(capsys, given):
    """GLM: ``<|user|>`` is the terminator eosfix proposes; a reply ending there is not a turn."""
    code, out, _ = run(capsys, "diagnose", SAMPLES / "glm-next-turn-opener", *given)
    assert code == 0, out
    assert "invented_turn" not in out
    assert "ok: the transcript ends with <|" in out


def test_diagnose_a_gguf_reads_its_token_texts(tmp_path, capsys):
    """A GGUF holds its token texts: the reply's text is known, and its next-turn opener is the
    stop as in a folder."""
    from tests.support.ggufs import BASE, glm

    path = glm(tmp_path / "glm.gguf")
    user = len(BASE) + 4  # <|user|>
    paris = ",".join(str(BASE.index(c)) for c in "Paris.")
    code, out, _ = run(capsys, "diagnose", path, "--ids", f"{paris},{user}")
    assert code == 0, out
    assert f"ok: the transcript ends with <|user|> ({user}), a stop id" in out
    assert "note:" not in out
    newline, spain = BASE.index("\u010a"), ",".join(str(BASE.index(c)) for c in "Spain?")
    code, out, _ = run(capsys, "diagnose", path, "--ids", f"{paris},{user},{newline},{spain}")
    assert code == 1
    assert f"ran_past_stop: token 7 is <|user|> ({user})" in out
    assert "a user turn at token 7: 'Spain?'" in out
    assert "tokenizer.json" not in out


def test_diagnose_ids_without_tokenizer_json(capsys):
    code, out, _ = run(capsys, "diagnose", SAMPLES / CHATML, "--ids", "17,248046,248045,5,248046")
    assert code == 1
    assert "ran_past_stop: token 2 is <|im_end|> (248046)" in out
    # the content is unknown without tokenizer.json, not "(empty)"
    assert "a turn (<|im_start|>) at token 3 (content unknown without tokenizer.json)" in out
    assert "note: without tokenizer.json only control ids can be read, not the text" in out


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["--ids", "1,x,3"], "error: --ids: 'x' is not a token id (a non-negative integer)"),
        (["--ids", "1,-2"], "error: --ids: '-2' is not a token id (a non-negative integer)"),
        (["--ids", "2", "--prompt-ids", "1.5"], "error: --prompt-ids: '1.5' is not a token id"),
    ],
)
def test_diagnose_ids_that_are_not_integers_exit_2(capsys, args, expected):
    code, out, err = run(capsys, "diagnose", SAMPLES / CHATML, *args)
    assert (code, out) == (2, "")
    assert err.startswith(expected)
    assert err.count("\n") == 1


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["--ids", "2", "--text", "x"], "give exactly one of --ids, --text and --from-file"),
        ([], "give exactly one of --ids, --text and --from-file"),
        (["--ids", "2", "--template", "default"], "--tools and --template need --messages"),
        (
            ["--ids", "2", "--messages", "m.json"],
            "--messages describes the prompt: give --prompt-ids too",
        ),
    ],
)
def test_diagnose_usage_errors_exit_2(capsys, args, expected):
    code, out, err = run(capsys, "diagnose", SAMPLES / CHATML, *args)
    assert (code, out) == (2, "")
    assert err.endswith(f"Error: {expected}\n")


# --- the port test of docs/ports.md -----------------------------------------------------------------

MY_PORT = """
from pathlib import Path

from tokenizers import Tokenizer

from eosfix.containers.folder.read import load_repo
from eosfix.analysis.template import render_chat

_repo = load_repo(Path(__file__).parent / "repo")
_tok = Tokenizer.from_file(str(_repo.root / "tokenizer.json"))
STOP_IDS = {stop_ids}


def render(messages, tools, add_generation_prompt):
    return render_chat(_repo.templates[0].source, messages, tools=tools,
                       special_tokens=_repo.special_tokens,
                       add_generation_prompt=add_generation_prompt)


def encode(text):
    return _tok.encode(text, add_special_tokens=False).ids
"""


def _readme_port_test() -> str:
    readme = (SAMPLES.parent / "docs" / "ports.md").read_text()
    section = readme.split("### `eosfix goldens`", 1)[1]
    return section.split("```python\n", 1)[1].split("```", 1)[0]


@pytest.mark.parametrize(("stop_ids", "passes"), [([248044, 248046], True), ([248044], False)])
def test_readme_port_test_runs_and_catches_a_wrong_stop_list(chatml, tmp_path, stop_ids, passes):
    """The README's example, run on a Python 'port': it passes, and fails when the port's
    loop compares only the config's stale id."""
    import os
    import subprocess

    repo, _ = chatml
    work = tmp_path / "port"
    copy_repo(repo, work / "repo")
    assert main(["goldens", str(repo), "-o", str(work / "goldens.jsonl")]) == 0
    (work / "my_port.py").write_text(MY_PORT.format(stop_ids=stop_ids))
    (work / "test_port.py").write_text(_readme_port_test())
    env = {**os.environ, "PYTHONPATH": str(SAMPLES.parent)}
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "test_port.py"],
        cwd=work, env=env, capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert (done.returncode == 0) is passes, done.stdout + done.stderr
    summary = done.stdout.strip().splitlines()[-1]
    assert "2 skipped" in summary  # the template writes no tool call: recorded, skipped
    assert ("3 failed" in summary) is not passes  # the three cases with a reply


def test_diagnose_text_terminator_without_id_and_plain_text_stop(tmp_path, capsys):
    """A terminator no file gives an id (EOS007) still ends the turn in text; so does a
    plain-text turn end (EOS005)."""
    repo = copy_repo(SAMPLES / CHATML, tmp_path / "noid")
    cfg = json.loads((repo / "tokenizer_config.json").read_text())
    del cfg["added_tokens_decoder"]["248046"]
    (repo / "tokenizer_config.json").write_text(json.dumps(cfg))
    code, out, _ = run(capsys, "diagnose", repo, "--text", "Paris.<|im_end|>")
    assert code == 0, out
    code, out, _ = run(capsys, "diagnose", repo, "--text", "Paris.<|im_end|>\n<|im_start|>user\nHi")
    assert code == 1
    assert "ran_past_stop: character 7 is '<|im_end|>', which ends the turn" in out
    code, out, _ = run(capsys, "diagnose", SAMPLES / "plain-text-turns", "--text",
                       "Paris.\n\n### Instruction:\nAnd Italy?")  # fmt: skip
    assert code == 1
    assert "ran_past_stop: character 9 is '### Instruction:'" in out


def test_diagnose_prompt_ids_without_tokenizer_is_a_note(capsys):
    code, out, _ = run(capsys, "diagnose", SAMPLES / CHATML, "--ids", "17,248046",
                       "--prompt-ids", "1,2,3")  # fmt: skip
    assert code == 0
    assert "note: the prompt ids cannot be checked without tokenizer.json" in out


def test_diagnose_reply_that_opens_its_own_turn(capsys):
    """A prompt without the generation prompt: the model writes the assistant opener itself."""
    text = "<|im_start|>assistant\nParis.<|im_end|>"
    code, out, _ = run(capsys, "diagnose", SAMPLES / CHATML, "--text", text)
    assert code == 1
    opened, invented = out.splitlines()[1:]
    assert opened == (
        "prompt_not_templated: the reply starts by opening an assistant turn "
        "('<|im_start|>assistant\\n'): the prompt did not end with the chat template's "
        "generation prompt (render it with `eosfix render`)"
    )
    assert invented == (
        "invented_turn: the model wrote 1 turn of its own: an assistant turn at character 1: "
        "'Paris.'"
    )


# --- ids that are no token, bad ids, the skip_special_tokens twin, small wording ----


def test_diagnose_names_ids_that_are_no_token(chatml, capsys):
    repo, tok = chatml
    answer = ids_of(tok, ANSWER)
    code, out, _ = run(capsys, "diagnose", repo, "--ids", f"{answer},99999,248046")
    assert code == 1  # was "ok": 99999 decoded to nothing
    n = len(answer.split(","))
    assert f"not_a_token: token {n + 1} is 99999, which is no token: tokenizer.json has " in out
    code, out, _ = run(capsys, "diagnose", repo, "--ids", "60000")
    assert code == 1
    assert "not_a_token: token 1 is 60000, which is no token" in out
    assert "prompt not templated" not in out
    assert "only whitespace" not in out
    code, out, _ = run(capsys, "diagnose", repo, "--ids", answer, "--prompt-ids", "60000")
    assert "not_a_token: prompt token 1 is 60000, which is no token" in out


@pytest.mark.parametrize(
    ("ids", "expected"),
    [
        ("1,\u00b2", "error: --ids: '\u00b2' is not a token id (a non-negative integer)\n"),
        ("\uff11\uff12", "error: --ids: '\uff11\uff12' is not a token id (a non-negative integer)\n"),
        ("1234567890123456789012345",
         ("error: --ids: 1234567890123456789012345 is not a token id (token ids are 32-bit: at "
         "most 4294967295)\n")),
        ("9" * 5000, "error: --ids: 999999999999...(5000 digits) is not a token id"),
    ],
)  # fmt: skip
def test_diagnose_ids_that_no_tokenizer_has_are_one_line_exit_2(chatml, capsys, ids, expected):
    repo, _ = chatml
    code, out, err = run(capsys, "diagnose", repo, "--ids", ids)
    assert (code, out) == (2, "")  # "²" and a 25-digit id were exit 3 (a traceback's first line)
    assert err.startswith(expected)
    assert err.count("\n") == 1


def test_diagnose_skip_special_twin_without_the_leading_line_break(chatml, capsys):
    repo, _ = chatml
    for text in ("\nassistant\nParis.", "assistant\nParis."):
        code, out, _ = run(capsys, "diagnose", repo, "--text", text)
        assert code == 1, text
        assert "prompt_not_templated: the text starts by opening an assistant turn" in out
    code, out, _ = run(capsys, "diagnose", repo, "--text", "Assistants\nhelp.")
    assert code == 0


def test_diagnose_one_more_token_is_singular(chatml, capsys):
    repo, tok = chatml
    ids = ids_of(tok, ANSWER + "<|im_end|>\n")
    code, out, _ = run(capsys, "diagnose", repo, "--ids", ids)
    assert code == 1
    assert "which ends the turn, but 1 more token follows: the loop" in out


def test_render_a_gguf_says_why_there_are_no_ids(tmp_path, capsys):
    from tests.support.ggufs import chatml as chatml_gguf

    path = chatml_gguf(tmp_path / "m.gguf")
    code, out, _ = run(capsys, "render", path)
    assert code == 0
    assert "prompt ids: unavailable (a GGUF file: eosfix reads its token list" in out
    assert "no tokenizer.json in this repo" not in out
    code, out, _ = run(capsys, "diagnose", path, "--ids", "5,98")
    assert "note:" not in out  # its token pieces are read: the text is known
    other = chatml_gguf(tmp_path / "t5.gguf", model="t5")
    code, out, _ = run(capsys, "diagnose", other, "--ids", "5,98,97")
    assert (
        "note: in a GGUF file of a 't5' vocabulary (eosfix reads the token pieces of 'llama' "
        "and 'gpt2' ones) only control ids can be read, not the text" in out
    )
    assert "(content unknown in a GGUF file of a 't5' vocabulary" in out


def test_explain_never_says_add_an_id_it_lists_already(tmp_path, capsys):
    from tests.support.ggufs import chatml as chatml_gguf

    path = chatml_gguf(tmp_path / "m.gguf")
    code, out, _ = run(capsys, "explain", path)
    assert code == 0
    assert "stop when the sampled id is in [96, 98]" in out
    assert (
        "<|endoftext|> (96) is a special token runtimes stop on by name, but no template writes "
        "it: it is among the loop's ids below (harmless: it fires only if the model emits it)"
    ) in out
    assert "add it to your loop only if" not in out
