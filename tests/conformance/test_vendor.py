"""The vendored TGI files are the ones published at the commit their README names."""

from __future__ import annotations

import hashlib
from pathlib import Path

VENDOR = Path(__file__).parent / "vendor" / "text-generation-inference"


def test_vendored_tgi_files_are_unchanged():
    lines = (VENDOR / "SHA256SUMS").read_text(encoding="utf-8").splitlines()
    sums = dict(reversed(line.split(maxsplit=1)) for line in lines)
    assert len(sums) == 6
    for name, digest in sums.items():
        assert hashlib.sha256((VENDOR / name).read_bytes()).hexdigest() == digest, name
    files = {str(p.relative_to(VENDOR)) for p in VENDOR.rglob("*") if p.is_file()}
    assert files == {*sums, "SHA256SUMS", "README.md", "COMMIT"}
    commit = (VENDOR / "COMMIT").read_text(encoding="utf-8").split()[0]
    assert commit in (VENDOR / "README.md").read_text(encoding="utf-8")
