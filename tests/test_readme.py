"""The front doors agree: README.md points to the guide, and every page names the same extras (issue 42)."""

from __future__ import annotations

import re
from pathlib import Path

from modelval.settings import tomllib

ROOT = Path(__file__).resolve().parents[1]
GUIDE = ROOT / "README_VALIDATION_TEST.md"


def _extras() -> set[str]:
    declared = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    return set(declared) - {"test"}


def test_readme_md_names_the_set_up_commands_and_the_guide():
    text = (ROOT / "README.md").read_text()
    assert "make evaluate" in text and "make test" in text and "MODELVAL_DATA_HOME" in text
    assert "(README_VALIDATION_TEST.md)" in text


def test_every_page_names_every_extra():
    extras = _extras()
    for page in (GUIDE, ROOT / "docs" / "install.md"):
        (line,) = [line for line in page.read_text().splitlines() if "extras, named by what they enable" in line]
        named = set(re.split(r"[,\s]+", line.split("enable:")[1].strip()))
        assert named == extras, (page.name, named ^ extras)
    table = set(re.findall(r"^\| `modelval\[(\w+)\]`", (ROOT / "docs" / "python.md").read_text(), re.M))
    assert table == extras, table ^ extras


def test_the_fast_tiers_time_is_stated_one_way():
    """It was 3:09 in the README and 17 min in a Makefile comment."""
    stated = {"about 2 min on 2 quiet cores"}
    for path in (GUIDE, ROOT / "Makefile"):
        text = " ".join(path.read_text().replace("#", " ").split())
        found = set(re.findall(r"about \d+ min on \d+ quiet cores", text))
        assert found == stated, (path.name, found)
