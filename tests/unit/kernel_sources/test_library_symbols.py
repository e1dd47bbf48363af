"""blackwell.sglang.library_symbols: every undefined symbol of a distribution's libraries resolves.

Real shared libraries are compiled here with the system C compiler into a distribution laid out as pip installs
one (a package directory and a ``*.dist-info/RECORD``), and the module runs for real through ``ansible`` on
localhost: a library with one planted unresolved symbol must fail the check, naming the library and the symbol;
resolution through ``$ORIGIN`` run paths, weak references, the interpreter's C API and the system's libraries must
pass. The interpreter the module asks for its ``sys.path`` is a stand-in script (it prints the test's site directory
and the real interpreter), so that no virtual environment has to be created.
"""

import json
import os
import shutil
import subprocess
import sys
import textwrap

import pytest

from ansible_collections.blackwell.sglang.plugins.module_utils import _elf
from conftest import ROOT

CC = shutil.which("cc") or shutil.which("gcc")
pytestmark = pytest.mark.skipif(CC is None, reason="no C compiler to build the test libraries")


def _cc(tmp_path, name, source, out, *args):
    src = tmp_path / (name + ".c")
    src.write_text(textwrap.dedent(source))
    subprocess.run([CC, "-shared", "-fPIC", "-o", str(out), str(src)] + list(args), check=True,
                   capture_output=True, text=True)


def _dist(tmp_path, name, libs):
    """A distribution ``name`` 1.0 under ``tmp_path/site`` whose RECORD lists ``libs`` (paths relative to site)."""
    site = tmp_path / "site"
    info = site / ("%s-1.0.dist-info" % name)
    info.mkdir(parents=True, exist_ok=True)
    (info / "RECORD").write_text("".join("%s,,\n" % rel for rel in libs + ["%s-1.0.dist-info/RECORD" % name]))
    return site


def _python(tmp_path, site):
    script = tmp_path / "python"
    # called as `<script> -I -c <code>`: it ignores the code and answers for the test's site directory
    script.write_text("#!%s\nimport json, sys\nprint(json.dumps({'path': [%r], 'executable': sys.executable}))\n"
                      % (sys.executable, str(site)))
    script.chmod(0o755)
    return str(script)


def _module(tmp_path, args):
    exe = os.path.join(os.path.dirname(sys.executable), "ansible")
    if not os.path.exists(exe):
        pytest.skip("ansible is not next to this Python")
    env = dict(os.environ, ANSIBLE_CONFIG=os.path.join(ROOT, "ansible.cfg"), ANSIBLE_NOCOLOR="1",
               ANSIBLE_COLLECTIONS_PATH=os.path.join(ROOT, "collections"), ANSIBLE_LOAD_CALLBACK_PLUGINS="1", ANSIBLE_CALLBACKS_ENABLED="ansible.builtin.json",
               ANSIBLE_STDOUT_CALLBACK="ansible.builtin.json", ANSIBLE_LOCAL_TEMP=str(tmp_path / "tmp"))
    proc = subprocess.run([exe, "localhost", "-c", "local", "-e", "ansible_python_interpreter=%s" % sys.executable,
                           "-m", "blackwell.sglang.library_symbols", "-a", json.dumps(args)],
                          env=env, capture_output=True, text=True, timeout=120, check=False)
    try:
        doc = json.JSONDecoder().raw_decode(proc.stdout.lstrip())[0]
    except ValueError:
        raise AssertionError(proc.stdout[-3000:] + proc.stderr[-3000:])
    return proc.returncode, doc["plays"][0]["tasks"][0]["hosts"]["localhost"]


@pytest.fixture()
def package(tmp_path):
    """A package whose libraries resolve in every way the loader allows, plus one with a planted unresolved symbol."""
    pkg = tmp_path / "site" / "kernelpkg"
    (pkg / "lib").mkdir(parents=True)
    # a helper library found through the extension's $ORIGIN run path, as mscclpp's libraries are in the wheel
    _cc(tmp_path, "helper", "int helper_value(void) { return 42; }\n", pkg / "lib" / "libhelper.so",
        "-Wl,-soname,libhelper.so")
    _cc(tmp_path, "good", """
        #include <math.h>
        extern int helper_value(void);
        extern void *PyLong_FromLong(long);          /* the interpreter provides the C API */
        extern void optional_hook(void) __attribute__((weak));
        double good(double x) { if (optional_hook) optional_hook(); PyLong_FromLong(1); return cos(x) + helper_value(); }
        """, pkg / "good.abi3.so", "-L%s" % (pkg / "lib"), "-lhelper", "-lm", "-Wl,-rpath,$ORIGIN/lib")
    _cc(tmp_path, "bad", """
        extern void mha_fwd_sparse_placeholder(void);   /* defined only in a source tree that was a placeholder */
        void bad(void) { mha_fwd_sparse_placeholder(); }
        """, pkg / "bad.abi3.so")
    return tmp_path


def test_a_planted_unresolved_symbol_fails_naming_library_and_symbol(package):
    site = _dist(package, "kernelpkg", ["kernelpkg/good.abi3.so", "kernelpkg/lib/libhelper.so", "kernelpkg/bad.abi3.so"])
    rc, res = _module(package, {"python": _python(package, site), "distributions": ["kernelpkg", "not-installed"]})
    assert rc != 0 and res["failed"]
    assert "kernelpkg/bad.abi3.so" in res["msg"] and "mha_fwd_sparse_placeholder" in res["msg"]
    assert "kernelpkg/good.abi3.so" not in res["msg"]
    assert res["checked"] == 3 and res["unresolved"] == 1
    by_path = dict((lib["path"], lib) for lib in res["libraries"])
    assert by_path["kernelpkg/good.abi3.so"]["unresolved"] == []
    assert by_path["kernelpkg/bad.abi3.so"]["unresolved"] == ["mha_fwd_sparse_placeholder"]


def test_rpath_weak_python_api_and_system_libraries_resolve(package):
    site = _dist(package, "kernelpkg", ["kernelpkg/good.abi3.so", "kernelpkg/lib/libhelper.so"])
    rc, res = _module(package, {"python": _python(package, site), "distributions": ["KernelPkg"]})
    assert rc == 0, res.get("msg")
    assert res["distributions"] == {"KernelPkg": "1.0"} and res["checked"] == 2 and res["unresolved"] == 0
    good = [lib for lib in res["libraries"] if lib["path"] == "kernelpkg/good.abi3.so"][0]
    assert set(good["needed"]) >= {"libhelper.so", "libm.so.6"} and good["undefined"] >= 3


def test_a_needed_library_found_nowhere_is_named(package, tmp_path):
    other = tmp_path / "gone"
    other.mkdir()
    _cc(tmp_path, "gone", "int gone_value(void) { return 1; }\n", other / "libgone.so", "-Wl,-soname,libgone.so.7")
    _cc(tmp_path, "needsgone", "extern int gone_value(void); int f(void) { return gone_value(); }\n",
        tmp_path / "site" / "kernelpkg" / "needs.abi3.so", "-L%s" % other, "-lgone")
    shutil.rmtree(str(other))
    site = _dist(package, "kernelpkg", ["kernelpkg/needs.abi3.so"])
    rc, res = _module(package, {"python": _python(package, site), "distributions": ["kernelpkg"]})
    assert rc != 0 and "libgone.so.7, found nowhere" in res["msg"] and "gone_value" in res["msg"]


def test_the_ignore_list_and_a_missing_distribution(package):
    site = _dist(package, "kernelpkg", ["kernelpkg/bad.abi3.so"])
    py = _python(package, site)
    rc, res = _module(package, {"python": py, "distributions": ["kernelpkg"], "ignore": ["mha_fwd_sparse_*"]})
    assert rc == 0 and res["unresolved"] == 0
    rc, res = _module(package, {"python": py, "distributions": ["sgl-kernel"]})
    assert rc != 0 and "none of the distributions sgl-kernel is installed" in res["msg"]


def test_elf_reader_on_the_system_c_library_and_non_elf_input(tmp_path):
    cache = _elf.ldconfig_cache(subprocess.run(["/sbin/ldconfig", "-p"], capture_output=True, text=True, check=False).stdout
                                if os.path.exists("/sbin/ldconfig") else "")
    libz = [p for p in cache.get("libz.so.1", []) if os.path.exists(p)]
    if not libz:
        pytest.skip("no libz.so.1 in ldconfig's cache")
    resolver = _elf.Resolver(system=cache)
    [entry] = _elf.check(libz[:1], resolver)
    assert entry["needed"] == ["libc.so.6"] and entry["unresolved"] == [] and entry["undefined"] > 10
    junk = tmp_path / "junk.so"
    junk.write_bytes(b"\x7fELF" + b"\x02\x01" + b"\0" * 10)
    with pytest.raises(_elf.ElfError, match="junk.so"):
        _elf.ElfObject(str(junk))
    junk.write_bytes(b"\x7fELF\x02\x01\x01" + b"\0" * 57 + b"\xff" * 64)
    with pytest.raises(_elf.ElfError, match="junk.so"):
        _elf.ElfObject(str(junk))
