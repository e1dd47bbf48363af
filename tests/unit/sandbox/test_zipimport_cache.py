"""tests/sandbox/blackwell_zipimport_cache.py: zipimport's compiles kept on disk, for the test machines' module runs.

Each check runs a fresh interpreter (``-S``: no ``.pth`` hook of the dev venv, so only the cache under test is
installed) that imports a package from a zip archive, as an AnsiballZ payload is imported. The archives carry the
same source under different paths, as two payloads of one module do.
"""

import hashlib
import json
import marshal
import os
import subprocess
import sys
import zipfile

import pytest

HOOK_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "sandbox")
SOURCE = (
    "def answer():\n"
    "    return 6 * 7\n"
    "def where():\n"
    "    return answer.__code__.co_filename\n"
    "def fail():\n"
    "    raise RuntimeError('from the payload')\n"
)
RUN = """
import json, sys, traceback
sys.path.insert(0, {hook!r})
import blackwell_zipimport_cache
if {cache!r}:
    blackwell_zipimport_cache.install({cache!r})
sys.path.insert(0, {archive!r})
import payload.util as util
try:
    util.fail()
except RuntimeError:
    tb = traceback.format_exc()
print(json.dumps({{"answer": util.answer(), "where": util.where(), "traceback": tb}}))
"""


def _archive(path, source=SOURCE):
    with zipfile.ZipFile(str(path), "w") as archive:
        archive.writestr("payload/__init__.py", "")
        archive.writestr("payload/util.py", source)
    return str(path)


def _run(archive, cache):
    proc = subprocess.run([sys.executable, "-S", "-c", RUN.format(hook=HOOK_DIR, cache=cache and str(cache),
                                                                  archive=archive)],
                          capture_output=True, text=True, timeout=60, check=False)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def _entries(cache):
    return sorted(name for name in os.listdir(str(cache)) if not name.endswith(".tmp")) if cache.exists() else []


def test_a_second_payload_with_the_same_source_is_served_from_the_cache_under_its_own_path(tmp_path):
    cache = tmp_path / "cache"
    first = _run(_archive(tmp_path / "one.zip"), cache)
    entries = _entries(cache)
    assert len(entries) == 2, entries                              # payload/__init__.py and payload/util.py
    assert oct(os.stat(str(cache)).st_mode & 0o777) == "0o700"
    second = _run(_archive(tmp_path / "two.zip"), cache)
    assert _entries(cache) == entries                              # no new entry (the next test shows it is read)
    assert first["answer"] == second["answer"] == 42
    # the file names are the archive that ran, in the code and in tracebacks
    assert first["where"] == os.path.join(str(tmp_path / "one.zip"), "payload", "util.py")
    assert second["where"] == os.path.join(str(tmp_path / "two.zip"), "payload", "util.py")
    assert "two.zip" in second["traceback"] and "one.zip" not in second["traceback"]
    assert second == dict(_run(_archive(tmp_path / "two.zip"), None), where=second["where"])


def _entry(cache, source):
    """The cache file of ``source`` (named by the SHA-256 of its bytes)."""
    key = hashlib.sha256(source.encode()).hexdigest()
    found = [name for name in _entries(cache) if name.startswith(key + ".")]
    assert len(found) == 1, (key, _entries(cache))
    return cache / found[0]


def test_the_cache_is_what_is_imported_and_a_changed_source_gets_its_own_entry(tmp_path):
    cache = tmp_path / "cache"
    changed = SOURCE.replace("6 * 7", "6 * 9")
    assert _run(_archive(tmp_path / "one.zip"), cache)["answer"] == 42
    assert _run(_archive(tmp_path / "two.zip", changed), cache)["answer"] == 54
    assert len(_entries(cache)) == 3                               # one __init__.py, two versions of util.py
    # the entry is what is imported: put the changed source's code under the first source's key
    _entry(cache, SOURCE).write_bytes(_entry(cache, changed).read_bytes())
    assert _run(_archive(tmp_path / "three.zip"), cache)["answer"] == 54


@pytest.mark.parametrize("damage", [b"", b"not marshal data", b"\xe3\x00"])
def test_a_damaged_entry_is_compiled_again_and_rewritten(tmp_path, damage):
    cache = tmp_path / "cache"
    _run(_archive(tmp_path / "one.zip"), cache)
    good = {name: (cache / name).read_bytes() for name in _entries(cache)}
    for name in good:
        (cache / name).write_bytes(damage)
    assert _run(_archive(tmp_path / "two.zip"), cache)["answer"] == 42
    # rewritten with the code compiled now (it names two.zip, the archive that compiled it)
    assert _entries(cache) == sorted(good)
    for name in good:
        code = marshal.loads((cache / name).read_bytes())
        assert code.co_filename.startswith(str(tmp_path / "two.zip")), code.co_filename


def test_a_cache_that_cannot_be_written_leaves_the_import_uncached(tmp_path):
    blocked = tmp_path / "file"
    blocked.write_text("a file where the cache directory would be\n")
    result = _run(_archive(tmp_path / "one.zip"), blocked / "cache")
    assert result["answer"] == 42 and blocked.read_text().startswith("a file")
