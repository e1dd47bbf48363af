"""A bytecode cache for modules imported from zip archives, on the test machines only (a ``.pth`` hook).

Ansible runs every module as an AnsiballZ payload: the module and its module_utils in a zip archive that Python
imports with zipimport, which neither reads nor writes ``.pyc`` files. So each module run, on every task of every
host, compiles ``ansible.module_utils.basic`` and the forty-odd modules it imports once more (docs/benchmarks.md: the
stat module's run in a sandbox container, 0.209 CPU-s without this hook, 0.170 with it). The suite runs tens of
thousands of module runs on 2 cores. This hook keeps the code objects that zipimport compiles, keyed by the SHA-256
of the source bytes, the interpreter's version and its optimization level, so each distinct source is compiled once
per machine.

Where it is installed: tests/sandbox/build-image.sh puts it into the sandbox image's system Python (the hosts of the
Molecule scenarios, ``make sandbox`` and tests/bench), and ``make venv`` into the dev venv (the interpreter of the
unit tests' local hosts). Never on a real host: no role installs it, and the release venvs do not see the system
site-packages.

The result is what zipimport would have compiled: the same ``compile()`` of the same bytes, with the code objects'
file name set to the current archive's path (tracebacks name the payload that ran). A cache file that cannot be
read, or is not valid marshal data, is compiled again and rewritten; a directory that cannot be written (a module
run as another user) leaves the import uncached. Files are written to a temporary name and renamed, so concurrent
module runs never read a partial entry.
"""

import marshal
import os
import sys
import zipimport

_CODE = type(compile("", "<empty>", "exec"))


def _with_filename(code, filename):
    """``code`` and the code objects nested in its constants, with ``co_filename`` set to ``filename``."""
    consts = tuple(_with_filename(c, filename) if isinstance(c, _CODE) else c for c in code.co_consts)
    return code.replace(co_filename=filename, co_consts=consts)


def install(directory):
    """Route zipimport's compiles through the cache in ``directory`` (created 0700 on first write).

    A no-op on an interpreter whose zipimport has no ``_compile_source`` (its private compile step; CPython 3.8 to
    3.13 have it) and when already installed.
    """
    compile_source = getattr(zipimport, "_compile_source", None)
    if compile_source is None or getattr(compile_source, "blackwell_cache", None) is not None:
        return
    # what else decides the compiled code: the interpreter's build and its -O level
    tag = "%s-%x-O%d" % (sys.implementation.cache_tag, sys.hexversion, sys.flags.optimize)

    def cached_compile_source(pathname, source):
        import hashlib  # only when a zip import compiles: interpreter start-up stays as cheap as without the hook

        entry = os.path.join(directory, "%s.%s" % (hashlib.sha256(source).hexdigest(), tag))
        try:
            with open(entry, "rb") as handle:
                return _with_filename(marshal.load(handle), pathname)
        except (OSError, EOFError, ValueError, TypeError):
            pass
        code = compile_source(pathname, source)
        try:
            os.makedirs(directory, mode=0o700, exist_ok=True)
            temporary = "%s.%d.tmp" % (entry, os.getpid())
            with open(temporary, "wb") as handle:
                marshal.dump(code, handle)
            os.replace(temporary, entry)
        except (OSError, ValueError):
            pass
        return code

    cached_compile_source.blackwell_cache = directory
    zipimport._compile_source = cached_compile_source
