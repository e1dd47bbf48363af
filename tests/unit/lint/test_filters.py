"""Every filter of the collection is documented under its own name and used.

``ansible-doc -t filter`` must show each filter its own documentation (a file that defines two filters documents
each in a ``<filter>.yml`` next to it; a ``DOCUMENTATION`` in the Python file would be shown for both), and every
filter must have a caller in roles/, playbooks/ or plugins/ (an unused one is deleted, docs/architecture.md
"Filters").
"""

from __future__ import annotations

import importlib
import json
import pathlib
import re
import subprocess

import ansible_run

ROOT = pathlib.Path(ansible_run.ROOT)
CALLERS = ("roles", "playbooks", "plugins/modules", "plugins/action", "plugins/module_utils")


def _filters():
    names = {}
    for path in sorted((ROOT / "plugins" / "filter").glob("*.py")):
        module = importlib.import_module("ansible_collections.blackwell.sglang.plugins.filter." + path.stem)
        for name in module.FilterModule().filters():
            names[name] = path.name
    return names


def test_ansible_doc_shows_every_filter_its_own_documentation():
    names = _filters()
    assert names, "no filters found"
    proc = subprocess.run([ansible_run.BIN + "/ansible-doc", "-t", "filter", "-j"]
                          + ["blackwell.sglang." + n for n in sorted(names)],
                          capture_output=True, text=True, env=ansible_run.env(), cwd=str(ROOT), timeout=300, check=False)
    assert proc.returncode == 0, proc.stderr[-3000:]
    docs = json.loads(proc.stdout)
    wrong = {}
    for name in names:
        doc = (docs.get("blackwell.sglang." + name) or {}).get("doc") or {}
        if doc.get("name") != name or not doc.get("short_description") or not doc.get("description"):
            wrong[name] = (names[name], doc.get("name"))
    assert not wrong, "filter -> (file, name its ansible-doc shows): %s" % wrong
    missing_examples = sorted(n for n in names if "blackwell.sglang." + n not in
                              ((docs.get("blackwell.sglang." + n) or {}).get("examples") or ""))
    assert not missing_examples, "EXAMPLES that do not call the filter: %s" % missing_examples


def test_every_filter_has_a_caller():
    text = "\n".join(p.read_text(encoding="utf-8", errors="replace")
                     for top in CALLERS for p in (ROOT / top).rglob("*")
                     if p.is_file() and p.suffix in (".yml", ".yaml", ".j2", ".py") and "plugins/filter" not in str(p))
    unused = sorted(n for n in _filters() if not re.search(r"\|\s*(blackwell\.sglang\.)?%s\b" % n, text))
    assert not unused, "filters no role, playbook or plugin calls: %s" % unused
