"""The page in a real browser, as a person uses it: headless Chromium (Debian's ``chromium``
and ``chromium-driver``) driven by Selenium, against the stand-in Hub. Check a broken repo by
keyboard and read the verdict, the grid and the diff; sign in (huggingface_hub's mocked OAuth),
open the PR, see it land in the stand-in Hub, check again and see it open; drop files; the
check without JavaScript. On every page: no console error, and axe-core (npm, injected) finds
no serious or critical accessibility violation.

Each result leads with the answer: the verdict for where people run the model is on the first
screen (1280 by 800 pixels) of a safetensors repo, a GGUF repo and an organisation's audit.

A screenshot of each state goes to ``$EOSFIX_ARTEFACTS/page/`` (default ``.ci/artefacts``);
with ``EOSFIX_DOC_SCREENSHOTS=1`` the first screen of a safetensors repo's result and of a
GGUF repo's are also written to ``docs/images/page-check.png`` and ``page-gguf.png`` (the
docs' pictures: ``python tools/page_screenshots.py``).

The browser reaches nothing but 127.0.0.1 (its resolver maps every other host to nowhere,
and its background services are off). Without chromium, chromedriver or axe-core the tests
skip saying which is missing (a CI run installs all three: ``.ci/run``).
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("fastapi")
pytest.importorskip("multipart")

from tests.conftest import ROOT, unavailable
from tests.support.hubrepos import BROKEN_SAMPLE as BROKEN
from tests.support.hubrepos import repo_files
from tests.support.serve import eosfix_prs

AXE_DEFAULT = Path.home() / ".cache" / "eosfix" / "npm" / "node_modules" / "axe-core" / "axe.min.js"
ARTEFACTS = Path(os.environ.get("EOSFIX_ARTEFACTS", ROOT / ".ci" / "artefacts")) / "page"
DOC_IMAGES = ROOT / "docs" / "images"
FIRST_SCREEN = (1280, 800)  # what a person sees before scrolling


def _tools() -> tuple[str, str, Path]:
    chromium = os.environ.get("EOSFIX_CHROMIUM") or shutil.which("chromium")
    driver = os.environ.get("EOSFIX_CHROMEDRIVER") or shutil.which("chromedriver")
    axe = Path(os.environ.get("EOSFIX_AXE", AXE_DEFAULT))
    if chromium is None:
        unavailable("no chromium (apt-get install chromium)", requirement="chromium")
    if driver is None:
        unavailable("no chromedriver (apt-get install chromium-driver)", requirement="chromium")
    if not axe.is_file():
        unavailable(
            f"no axe-core at {axe} (npm install --prefix ~/.cache/eosfix/npm axe-core@4.10.2)",
            requirement="axe-core",
        )
    return chromium, driver, axe


def _driver(chromium: str, driver: str, tmp: Path, *, javascript: bool = True) -> Any:
    webdriver = pytest.importorskip("selenium.webdriver")
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = chromium
    for flag in (
        "--headless=new",
        "--no-sandbox",  # CI runs as root
        "--disable-gpu",
        "--disable-dev-shm-usage",
        "--window-size=1280,1400",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--disable-default-apps",
        "--disable-features=Translate,OptimizationHints,MediaRouter",
        "--host-resolver-rules=MAP * ~NOTFOUND , EXCLUDE 127.0.0.1",
        f"--user-data-dir={tmp / 'profile'}",
    ):
        options.add_argument(flag)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    if not javascript:
        options.add_experimental_option(
            "prefs", {"profile.managed_default_content_settings.javascript": 2}
        )
    return webdriver.Chrome(options=options, service=Service(executable_path=driver))


class Browser:
    """One Chromium session on the page, with the checks every state gets."""

    def __init__(self, driver: Any, base: str, axe: Path, name: str) -> None:
        self.driver = driver
        self.base = base
        self.axe = axe.read_text(encoding="utf-8")
        self.name = name
        self.shots: list[Path] = []

    def open(self, path: str) -> None:
        self.driver.get(self.base + path)

    def find(self, css: str) -> Any:
        from selenium.webdriver.common.by import By

        return self.driver.find_element(By.CSS_SELECTOR, css)

    def has(self, css: str) -> bool:
        from selenium.webdriver.common.by import By

        return bool(self.driver.find_elements(By.CSS_SELECTOR, css))

    def wait(self, css: str) -> Any:
        from selenium.webdriver.common.by import By
        from selenium.webdriver.support import expected_conditions as ec
        from selenium.webdriver.support.ui import WebDriverWait

        return WebDriverWait(self.driver, 60).until(
            ec.presence_of_element_located((By.CSS_SELECTOR, css))
        )

    def keys(self, *keys: str) -> None:
        from selenium.webdriver.common.action_chains import ActionChains

        ActionChains(self.driver).send_keys(*keys).perform()

    def tab_to(self, css: str, limit: int = 40) -> None:
        """Press Tab until the element ``css`` has the focus (keyboard only)."""
        from selenium.webdriver.common.keys import Keys

        target = self.find(css)
        for _ in range(limit):
            if self.driver.switch_to.active_element == target:
                return
            self.keys(Keys.TAB)
        raise AssertionError(f"Tab never reached {css}")

    def on_first_screen(self, *css: str, doc: str | None = None) -> None:
        """Each element ``css`` is whole within the first screen (FIRST_SCREEN), unscrolled;
        its screenshot is kept (and with EOSFIX_DOC_SCREENSHOTS=1 written as the docs'
        picture ``doc``)."""
        width, height = FIRST_SCREEN
        self.driver.set_window_size(width, height)
        try:  # the window's own bars take some of it: the viewport is what a person sees
            bars = self.driver.execute_script("return window.outerHeight - window.innerHeight")
            self.driver.set_window_size(width, height + bars)
            inner = self.driver.execute_script("return [window.innerWidth, window.innerHeight]")
            assert inner == [width, height], inner
            self.driver.execute_script("window.scrollTo(0, 0)")
            for one in css:
                top, bottom, box_width = self.driver.execute_script(
                    "const r = arguments[0].getBoundingClientRect();"
                    "return [r.top, r.bottom, r.width];",
                    self.find(one),
                )
                assert top >= 0, (one, top)
                assert bottom <= height, (one, bottom)
                assert box_width > 0, one
            ARTEFACTS.mkdir(parents=True, exist_ok=True)
            self.driver.save_screenshot(str(ARTEFACTS / f"{self.name}-first-screen.png"))
            if doc is not None and os.environ.get("EOSFIX_DOC_SCREENSHOTS") == "1":
                DOC_IMAGES.mkdir(parents=True, exist_ok=True)
                self.driver.save_screenshot(str(DOC_IMAGES / doc))
        finally:
            self.driver.set_window_size(1280, 1400)

    def state(self, label: str, status: int = 200) -> None:
        """The state's screenshot; no console error (but the page's own ``status``, when it
        is one: the browser logs a 404 as an error); no serious accessibility violation."""
        ARTEFACTS.mkdir(parents=True, exist_ok=True)
        shot = ARTEFACTS / f"{self.name}-{label}.png"
        self.driver.save_screenshot(str(shot))
        self.shots.append(shot)
        own = f"{self.driver.current_url} - Failed to load resource: the server responded with a status of {status} "
        errors = [
            e
            for e in self.driver.get_log("browser")
            if e["level"] == "SEVERE" and not (status >= 400 and e["message"].startswith(own))
        ]
        assert not errors, f"{label}: console errors: {errors}"
        if self.driver.execute_script("return typeof document.querySelector") != "function":
            return
        if not self.javascript:
            return
        self.driver.execute_script(self.axe)
        result = self.driver.execute_async_script(
            "const done = arguments[arguments.length - 1];"
            "axe.run(document, {resultTypes: ['violations']})"
            ".then(r => done(JSON.stringify(r.violations)), e => done(String(e)));"
        )
        violations = json.loads(result)
        serious = [
            (v["id"], v["impact"], [n["target"] for n in v["nodes"]][:3])
            for v in violations
            if v["impact"] in ("serious", "critical")
        ]
        assert not serious, f"{label}: axe: {serious}"

    javascript = True


@pytest.fixture
def browser(signed, tmp_path, request) -> Iterator[Browser]:
    chromium, driver, axe = _tools()
    d = _driver(chromium, driver, tmp_path)
    try:
        yield Browser(d, signed.url, axe, request.node.name.removeprefix("test_"))
    finally:
        d.quit()


def test_check_by_keyboard_shows_verdict_grid_and_diff(fake_hub, browser):
    from selenium.webdriver.common.keys import Keys

    fake_hub.add_repo("org/broken", repo_files(BROKEN))
    browser.open("/")
    browser.state("start")
    browser.tab_to("#repo")
    browser.keys("org/broken", Keys.ENTER)
    verdict = browser.wait("#verdict")
    assert verdict.text == "runs on: fixable"
    assert browser.find("#where").text.startswith(
        "Runs on past <|im_end|> in transformers, candle and ExLlamaV2; stops in vLLM"
    )
    browser.on_first_screen("#verdict", "#where", "#after", "#command", doc="page-check.png")
    browser.state("result")
    grid = browser.find("table.grid").text
    assert "transformers ✗ misses <|im_end|> ✓ stops" in grid
    diff = browser.find("pre.diff").text
    assert '-  "eos_token_id": 248044,' in diff
    assert "+    248046" in diff
    marks = browser.driver.execute_script(
        "return [...document.querySelectorAll('pre.excerpt mark')].map(m => m.textContent)"
    )
    assert marks == ["<|im_start|>", "<|im_end|>"]  # the special tokens of the excerpt
    excerpt = browser.find("pre.excerpt").text.splitlines()
    assert excerpt == ["…<|im_start|>assistant\\n", "reply<|im_end|>\\n"]
    assert browser.find("#command").text == "eosfix hub org/broken --pr"


def test_sign_in_open_pr_and_see_it_open(fake_hub, browser):
    from selenium.webdriver.common.keys import Keys

    repo = fake_hub.add_repo("org/broken", repo_files(BROKEN))
    browser.open("/check?repo=org/broken")
    browser.wait("#verdict")
    assert not browser.has("#open-pr")
    browser.tab_to("#sign-in")
    browser.keys(Keys.ENTER)
    browser.wait("#open-pr")  # back on the result, signed in
    assert "signed in as eosfix-user" in browser.find("header").text
    browser.state("signed-in")
    browser.tab_to("#open-pr")
    browser.keys(Keys.ENTER)
    message = browser.wait("#message")
    assert message.text == "Pull request opened."
    (pr,) = eosfix_prs(repo)
    fixed = json.loads(repo.pr_files(pr.num)["generation_config.json"])
    assert fixed["eos_token_id"] == [248044, 248046]
    browser.state("pr-opened")
    browser.open("/check?repo=org/broken")
    assert "already open" in browser.wait("#pr").text
    assert browser.find("#pr a").get_attribute("href").endswith(f"/org/broken/discussions/{pr.num}")
    browser.state("pr-open")


def test_dropped_files_are_checked(browser, tmp_path):
    """A folder's files chosen as they are, tokenizer.json and a README among them: every file
    a check reads is checked (tokenizer.json shows 151700 is no token), the README ignored."""
    folder = tmp_path / "files"
    folder.mkdir()
    for name, data in repo_files("foreign-stop-ids").items():
        if "/" not in name:
            (folder / name).write_bytes(data)
    (folder / "README.md").write_text("# a model\n")
    browser.open("/")
    picked = "\n".join(str(p) for p in sorted(folder.iterdir()))
    browser.find("#files").send_keys(picked)
    browser.find("#files-form button").click()
    assert browser.wait("#verdict").text == "lists ids that never fire: fixable"
    assert "Ignored (no check reads them): README.md" in browser.find(".note").text
    assert "tokenizer.json has 259 tokens" in browser.find(".findings").text
    assert "-    200002" in browser.find("pre.diff").text
    assert browser.find("#command").text == "eosfix fix ."
    browser.state("files")


def test_a_check_works_without_javascript(fake_hub, signed, tmp_path):
    from selenium.webdriver.common.keys import Keys

    chromium, driver, axe = _tools()
    d = _driver(chromium, driver, tmp_path, javascript=False)
    try:
        b = Browser(d, signed.url, axe, "no-javascript")
        b.javascript = False
        fake_hub.add_repo("org/broken", repo_files(BROKEN))
        b.open("/")
        assert d.execute_script is not None
        b.find("#repo").send_keys("org/broken", Keys.ENTER)
        assert b.wait("#verdict").text == "runs on: fixable"
        b.state("result")
    finally:
        d.quit()


def test_an_audit_shows_progress_to_the_end_and_sorts(fake_hub, browser):
    from selenium.webdriver.common.keys import Keys

    from tests.support.hubrepos import HEALTHY_SAMPLE as HEALTHY
    from tests.support.serve import xss_repo

    fake_hub.add_repo("org/broken", repo_files(BROKEN))
    fake_hub.add_repo("org/healthy", repo_files(HEALTHY))
    fake_hub.add_repo("org/xss", xss_repo())
    # one repo's reads wait until the running state is checked: the page cannot reload
    # under the accessibility check, however slow the machine
    hold = fake_hub.hold(r"^/(api/models/)?org/healthy/")
    browser.open("/")
    browser.tab_to("#author")
    browser.keys("org", Keys.ENTER)
    browser.wait("#audit-progress")
    browser.state("audit-running")
    assert hold.arrived.wait(60), "the audit never read org/healthy"
    hold.release()
    done = browser.wait("#audit-done")  # the script polled to the end and reloaded
    assert done.text.startswith("3 repos checked")
    assert browser.find("#where").text.startswith(
        "Does not stop right (runs on past a turn's end, or stops inside a reply) in "
        "transformers (2 of 3 repos)"
    )
    browser.on_first_screen("#where", "#audit-command")

    def column(n: int) -> list[str]:
        return browser.driver.execute_script(
            f"return [...document.querySelectorAll('#repos tbody tr')]"
            f".map(r => r.cells[{n}].textContent.trim())"
        )

    browser.find("#repos th button[data-sort='1']").click()
    verdicts = column(1)
    assert verdicts == sorted(verdicts)
    browser.find("#repos th button[data-sort='1']").click()
    assert column(1) == sorted(verdicts, reverse=True)
    assert sorted(column(0)) == ["org/broken", "org/healthy", "org/xss"]
    browser.state("audit-done")


def test_a_gguf_quant_typed_as_ollama_spells_it(gguf_org, browser):
    """The box takes ``hf.co/org/name:QUANT`` (any spelling; the server parses it): the
    quant's group is checked by its header, with what works for it (no pull request can
    change a header) on the first screen."""
    from selenium.webdriver.common.keys import Keys

    from tests.support.hubserver import GGUF_ORG

    browser.open("/")
    browser.tab_to("#repo")
    browser.keys(f"hf.co/{GGUF_ORG}/Chat-7B-GGUF:Q2_K", Keys.ENTER)
    assert browser.wait("#verdict").text == "runs on: fixable"
    assert "Chat-7B-Q2_K.gguf" in browser.find("h1").text
    assert browser.find("#where").text == (
        "Runs on past <|END_OF_TURN_TOKEN|> in llama.cpp and ollama hf.co."
    )
    assert "No pull request can change a GGUF header" in browser.find("#header").text
    assert not browser.has("#open-pr")
    check = browser.find("#check-command").text
    assert check == f"eosfix check hf.co/{GGUF_ORG}/Chat-7B-GGUF:Q2_K"
    browser.on_first_screen("#where", "#header")
    browser.state("gguf")
    browser.open(f"/check?repo={GGUF_ORG}/Chat-7B-GGUF")  # two groups: ids stay unique
    assert browser.wait("#verdict-2").text == "runs on: fixable"
    assert browser.find("#verdict").text == "ok"
    browser.state("gguf-groups")


def test_a_gguf_repos_params_pull_request_from_the_page(gguf_org, browser):
    """A GGUF repo whose params file cuts replies and misses the turn end: the answer for
    llama.cpp and ``ollama run hf.co`` first, then the pull request `eosfix hub --pr` opens
    (its params file), opened as yourself."""
    from selenium.webdriver.common.keys import Keys

    from tests.support.hubserver import GGUF_ORG

    repo_id = f"{GGUF_ORG}/Reasoner-GGUF"
    browser.open(f"/check?repo={repo_id}")
    browser.wait("#verdict")
    browser.tab_to("#sign-in")
    browser.keys(Keys.ENTER)
    browser.wait("#open-pr")
    assert browser.find("#where").text == (
        "Runs on past <|turn_end|> in llama.cpp and ollama hf.co; stops inside a reply at "
        "<|think_end|> in ollama hf.co."
    )
    assert "its params (what ollama run hf.co/… stops on)" in browser.find("#act").text
    browser.on_first_screen("#verdict", "#where", "#open-pr", doc="page-gguf.png")
    browser.state("gguf-params")
    browser.tab_to("#open-pr")
    browser.keys(Keys.ENTER)
    assert browser.wait("#message").text == "Pull request opened."
    (pr,) = eosfix_prs(gguf_org.repos[repo_id])
    params = json.loads(gguf_org.repos[repo_id].pr_files(pr.num)["params"])
    assert params["stop"] == ["<|turn_end|>"]
    browser.state("gguf-params-opened")


def test_a_plain_text_turn_end_and_the_words_of_each_state(fake_hub, browser):
    """A template whose turns end with plain text: every runtime needs a stop string, in
    amber, never a green tick; a base model says it has no chat template; a missing repo
    is a 404 with check's line, a bad id a 400; an author without model repos says so."""
    fake_hub.add_repo("acme/plain-text-turns", repo_files("plain-text-turns"))
    fake_hub.add_repo("acme/base-model", repo_files("base-model"))
    browser.open("/check?repo=acme/plain-text-turns")
    assert browser.wait("#verdict").text == "needs a stop string"
    cells = browser.driver.execute_script(
        "return [...document.querySelectorAll('table.grid td:not(.basis)')]"
        ".map(c => [c.className, c.textContent.trim()])"
    )
    assert {tuple(c) for c in cells} == {("text", "! needs a stop string")}
    assert browser.find("pre.ollama").text == 'PARAMETER stop "### Instruction:"'
    browser.on_first_screen("#where", "#act")
    browser.state("plain-text")
    browser.open("/check?repo=acme/base-model")
    assert browser.wait("#verdict").text == "no chat template"
    assert browser.find("#where").text.startswith("No chat template: nothing to check")
    browser.state("base-model")
    browser.open("/check?repo=acme/absent")
    assert browser.wait("#error").text == "acme/absent: repository not found (404)"
    browser.state("missing", 404)
    browser.open("/check?repo=org/../x")
    assert "org/../x: not checked: " in browser.wait("p.problem").text
    browser.state("bad-id", 400)
    browser.open("/audit?author=nobody")
    empty = browser.wait("#audit-empty")  # the script polled to the end and reloaded
    assert empty.text == "nobody: no model repos on the Hub under this author"
    browser.state("audit-nobody", 404)


def test_an_audit_of_gguf_repos_leads_with_the_runtimes_that_load_them(gguf_org, browser):
    """An organisation of GGUF repos: the answer names llama.cpp and ``ollama run hf.co``
    alone (no runtime that never loads a GGUF is charted), on the first screen with what a
    pull request fixes and what needs a new file."""
    from tests.support.hubserver import GGUF_ORG

    browser.open(f"/audit?author={GGUF_ORG}")
    done = browser.wait("#audit-done")  # the script polled to the end and reloaded
    assert done.text.startswith("5 repos checked")
    assert browser.find("#where").text == (
        "Does not stop right (runs on past a turn's end, or stops inside a reply) in "
        "llama.cpp (2 of 4 repos), ollama hf.co (2 of 4 repos)."
    )
    assert "1 more needs new GGUF files" in browser.find("#audit-action").text
    labels = browser.driver.execute_script(
        "return [...document.querySelectorAll('svg.chart text.label')].map(t => t.textContent)"
    )
    assert labels == ["llama.cpp", "ollama hf.co"]
    browser.on_first_screen("#where", "#audit-action")
    browser.state("gguf-audit")
