"""The page in a real browser, as a person uses it: headless Chromium (Debian's ``chromium``
and ``chromium-driver``) driven by Selenium, against the stand-in Hub. Check a broken repo by
keyboard and read the verdict, the grid and the diff; sign in (huggingface_hub's mocked OAuth),
open the PR, see it land in the stand-in Hub, check again and see it open; drop files; the
check without JavaScript. On every page: no console error, and axe-core (npm, injected) finds
no serious or critical accessibility violation.

A screenshot of each state goes to ``$EOSFIX_ARTEFACTS/page/`` (default ``.ci/artefacts``);
with ``EOSFIX_DOC_SCREENSHOTS=1`` the result page's is also written to
``docs/images/page-check.png`` (the docs' picture: ``python tools/page_screenshots.py``).

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
DOC_SHOT = ROOT / "docs" / "images" / "page-check.png"


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

    def state(self, label: str) -> None:
        """The state's screenshot; no console error; no serious accessibility violation."""
        ARTEFACTS.mkdir(parents=True, exist_ok=True)
        shot = ARTEFACTS / f"{self.name}-{label}.png"
        self.driver.save_screenshot(str(shot))
        self.shots.append(shot)
        errors = [e for e in self.driver.get_log("browser") if e["level"] == "SEVERE"]
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
    assert verdict.text == "fixable"
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
    assert excerpt == ["…<|im_start|>assistant\\n", "Eosfixassistant1<|im_end|>\\n"]
    assert browser.find("#command").text == "eosfix hub org/broken --pr"
    browser.state("result")
    if os.environ.get("EOSFIX_DOC_SCREENSHOTS") == "1":
        DOC_SHOT.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(browser.shots[-1], DOC_SHOT)


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
    folder = tmp_path / "files"
    folder.mkdir()
    for name, data in repo_files(BROKEN).items():
        if "/" not in name:
            (folder / name).write_bytes(data)
    browser.open("/")
    picked = "\n".join(str(p) for p in sorted(folder.iterdir()))
    browser.find("#files").send_keys(picked)
    browser.find("#files-form button").click()
    assert browser.wait("#verdict").text == "fixable"
    assert "+    248046" in browser.find("pre.diff").text
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
        assert b.wait("#verdict").text == "fixable"
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
    quant's group is checked by its header, with no pull request button and the reason."""
    from selenium.webdriver.common.keys import Keys

    from tests.support.hubserver import GGUF_ORG

    browser.open("/")
    browser.tab_to("#repo")
    browser.keys(f"hf.co/{GGUF_ORG}/Chat-7B-GGUF:Q2_K", Keys.ENTER)
    assert browser.wait("#verdict").text == "fixable"
    assert "Chat-7B-Q2_K.gguf" in browser.find("h1").text
    assert "no pull request can change a GGUF header" in browser.find("#no-pr").text
    assert browser.find("#command").text == f"eosfix check hf.co/{GGUF_ORG}/Chat-7B-GGUF:Q2_K"
    browser.state("gguf")
    browser.open(f"/check?repo={GGUF_ORG}/Chat-7B-GGUF")  # two groups: ids stay unique
    assert browser.wait("#verdict-2").text == "fixable"
    assert browser.find("#verdict").text == "ok"
    browser.state("gguf-groups")
