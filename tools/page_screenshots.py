"""Make the docs' picture of the page (docs/images/page-check.png): runs the browser test of a
check (tests/serve/test_page_browser.py) with EOSFIX_DOC_SCREENSHOTS=1, which copies its
screenshot of the result there. Needs chromium, chromedriver and axe-core, as the test does.

    python tools/page_screenshots.py
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TEST = "tests/serve/test_page_browser.py::test_check_by_keyboard_shows_verdict_grid_and_diff"


def main() -> int:
    env = {**os.environ, "EOSFIX_DOC_SCREENSHOTS": "1", "CI": "true"}  # a skip is a failure
    command = [sys.executable, "-m", "pytest", "-q", TEST]
    done = subprocess.run(command, check=False, cwd=ROOT, env=env)
    if done.returncode == 0:
        print(ROOT / "docs" / "images" / "page-check.png")
    return done.returncode


if __name__ == "__main__":
    sys.exit(main())
