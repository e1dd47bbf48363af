"""The README's table of modules names every module of plugins/modules (a module left out of it is one a reader of
the README never finds), and nothing that is not one."""

from __future__ import annotations

import pathlib
import re

ROOT = pathlib.Path(__file__).resolve().parents[3]


def _table_modules():
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    start = text.index("| Modules (`plugins/modules/`")
    rows = []
    for line in text[start:].splitlines()[2:]:
        if not line.startswith("|"):
            break
        rows.append(line.split("|")[1])
    return {name for row in rows for name in re.findall(r"`([a-z0-9_]+)`", row)}


def test_the_readme_lists_every_module():
    modules = {p.stem for p in (ROOT / "plugins" / "modules").glob("*.py") if not p.name.startswith("_")}
    listed = _table_modules()
    assert len(modules) >= 23
    assert sorted(modules - listed) == [], "modules missing from the README's table"
    assert sorted(listed - modules) == [], "the README's table names modules that do not exist"
