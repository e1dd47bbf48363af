"""Comments and names in the shipped code say why, not which issue asked for it.

An "issue 19" in a comment, a task name, a docstring or a module's documentation tells a reader nothing the code
does not: the reason goes into the text, the history into git and the changelog. Fails on ``issue <number>``
(any case, ``issues 12 and 14`` and ``issue #7`` too) anywhere under roles/, plugins/ and playbooks/.
"""

from __future__ import annotations

import pathlib
import re

import ansible_run

ROOT = pathlib.Path(ansible_run.ROOT)
TREES = ("roles", "plugins", "playbooks")
ISSUE = re.compile(r"\bissues?\s*#?\d+", re.I)


def _hits(text):
    return [(n, line.strip()) for n, line in enumerate(text.splitlines(), 1) if ISSUE.search(line)]


def test_the_pattern_finds_what_it_is_for():
    assert _hits("# Sized only when a build follows (issue 19).\n- name: Check (Issue #7)\n\"\"\"issues 12 and 14\"\"\"")
    assert _hits("see https://github.com/triton-lang/triton/issues/8539 and 19 issues") == []


def test_no_issue_numbers_under_roles_plugins_playbooks():
    found = []
    for tree in TREES:
        for path in sorted((ROOT / tree).rglob("*")):
            if path.is_file() and "__pycache__" not in path.parts:
                try:
                    text = path.read_text(encoding="utf-8")
                except UnicodeDecodeError:
                    continue
                found += ["%s:%d: %s" % (path.relative_to(ROOT), n, line) for n, line in _hits(text)]
    assert not found, "say why instead of naming the issue:\n" + "\n".join(found)
