"""A Jinja string literal such as ``'\\n'`` means a newline only where YAML turned it into one.

YAML processes backslash escapes in double-quoted scalars only. In a plain, single-quoted or block scalar
(``>-``, ``|``) the two characters backslash and ``n`` reach the template, and Ansible's templating leaves them as
they are: ``{{ a ~ '\\n' ~ b }}`` in a ``>-`` value joins with a literal backslash-n. A record written that way
(``to_nice_json ~ '\\n'``) is no longer JSON, and a pip log joined that way is one line to a line-based classifier.
Inside a regular expression (``regex_search('[^\\n]*')``) the backslash is the regex engine's and is fine, so only a
whole string literal of escapes is refused.

Fails on every loaded YAML string under roles/, playbooks/ and molecule/ that holds a template and a string
literal made only of backslash escapes, naming the file and the key path.
"""

from __future__ import annotations

import pathlib
import re

import yaml

import ansible_run

ROOT = pathlib.Path(ansible_run.ROOT)
TREES = ("roles", "playbooks", "molecule")
# a quoted literal of escapes only: '\n', "\t", '\r\n'
ESCAPE_LITERAL = re.compile(r"""(['"])(?:\\[nrt])+\1""")


def _strings(node, path):
    if isinstance(node, dict):
        for key, value in node.items():
            yield from _strings(value, path + [str(key)])
    elif isinstance(node, list):
        for index, value in enumerate(node):
            yield from _strings(value, path + [str(index)])
    elif isinstance(node, str):
        yield path, node


def _hits(text):
    found = []
    for doc in yaml.safe_load_all(text):
        for path, value in _strings(doc, []):
            if ("{{" in value or "{%" in value) and ESCAPE_LITERAL.search(value):
                found.append("/".join(path))
    return found


def test_the_check_finds_what_it_is_for():
    assert _hits("a: >-\n  {{ x ~ '\\n' ~ y }}\n") == ["a"]
    assert _hits("b: \"{{ x | join('\\n') }}\"\n") == []          # YAML made it a newline
    assert _hits("c: >-\n  {{ x | regex_search('[^\\n]*') }}\n") == []  # the regex engine's escape
    assert _hits("d: 'no template \\n here'\n") == []


def test_no_unprocessed_escape_literals_in_templates():
    found = []
    for tree in TREES:
        for path in sorted((ROOT / tree).rglob("*.yml")):
            try:
                hits = _hits(path.read_text(encoding="utf-8"))
            except yaml.YAMLError:
                continue  # Jinja-templated YAML (templates/) is not YAML until rendered
            found += ["%s: %s" % (path.relative_to(ROOT), hit) for hit in hits]
    assert not found, "use a double-quoted YAML scalar for a template with '\\n' (see the module docstring):\n" + \
        "\n".join(found)
