"""Every field-report id (B.., N.., C0.) used in a message or comment of the collection resolves to a row of
docs/field-reports.md, and every row names a test file that exists."""

import os
import re

from conftest import ROOT

# C-kind ids have a leading zero (C0 and one digit): C10 (torch's c10) and C64 (complex64) are not ids
ID_RE = re.compile(r"\b([BNS]\d{2}|C0[1-9])\b")
SCAN = ("plugins", "roles", "playbooks", "docs", "meta", "tests/unit")
SUFFIXES = (".py", ".yml", ".yaml", ".j2", ".md", ".cfg", ".txt")


def doc_rows():
    rows = {}
    with open(os.path.join(ROOT, "docs", "field-reports.md")) as handle:
        for line in handle:
            match = re.match(r"^\| (B\d\d|N\d\d|C\d\d|S\d\d|MIG) \| (.*)\|\s*$", line)
            if match:
                rows[match.group(1)] = match.group(2)
    return rows


def used_ids():
    found = {}
    for top in SCAN:
        for dirpath, _dirs, files in os.walk(os.path.join(ROOT, top)):
            for name in files:
                if not name.endswith(SUFFIXES):
                    continue
                path = os.path.join(dirpath, name)
                with open(path, errors="replace") as handle:
                    for ident in ID_RE.findall(handle.read()):
                        found.setdefault(ident, os.path.relpath(path, ROOT))
    return found


def test_every_used_id_has_a_row():
    rows = doc_rows()
    missing = dict((i, f) for i, f in used_ids().items() if i not in rows)
    assert not missing, "ids without a row in docs/field-reports.md: %s" % missing


def test_every_row_names_existing_tests():
    for ident, row in doc_rows().items():
        tests = row.rsplit("|", 1)[-1]
        files = re.findall(r"`(?:tests/unit/)?([\w/]+\.py)", tests)
        assert files, "%s names no test" % ident
        for name in files:
            candidates = [os.path.join(ROOT, "tests", "unit", name)] + [
                os.path.join(ROOT, "tests", "unit", d, name) for d in os.listdir(os.path.join(ROOT, "tests", "unit"))]
            assert any(os.path.isfile(c) for c in candidates), "%s: %s does not exist" % (ident, name)


def test_every_n_kind_of_the_second_set_is_in_the_table():
    for ident in ("N01", "N03", "N04", "N05", "N06", "N07", "N08", "N09", "N12", "N13", "N14", "N16", "N18", "N19",
                  "N20"):
        assert ident in doc_rows()


def test_every_c_kind_of_the_third_set_is_in_the_table():
    for ident in ("C01", "C02"):
        assert ident in doc_rows()
