"""Make the docs' pictures of the page: the first screen of a safetensors repo's result
(docs/images/page-check.png) and of a GGUF repo's (docs/images/page-gguf.png). Runs the browser
tests of those checks (tests/serve/test_page_browser.py) with EOSFIX_DOC_SCREENSHOTS=1, which
write their first screens there. Needs chromium, chromedriver and axe-core, as the tests do.

    python tools/page_screenshots.py
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TESTS = [
    "tests/serve/test_page_browser.py::test_check_by_keyboard_shows_verdict_grid_and_diff",
    "tests/serve/test_page_browser.py::test_a_gguf_repos_params_pull_request_from_the_page",
]
IMAGES = [ROOT / "docs" / "images" / name for name in ("page-check.png", "page-gguf.png")]


def main() -> int:
    env = {**os.environ, "EOSFIX_DOC_SCREENSHOTS": "1", "CI": "true"}  # a skip is a failure
    command = [sys.executable, "-m", "pytest", "-q", "-p", "no:xdist", *TESTS]
    done = subprocess.run(command, check=False, cwd=ROOT, env=env)
    if done.returncode == 0:
        print(*IMAGES, sep="\n")
    return done.returncode


if __name__ == "__main__":
    sys.exit(main())
