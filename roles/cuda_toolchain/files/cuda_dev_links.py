"""Give the CUDA wheel tree the links a toolkit install has, in one call (blackwell.sglang.cuda_toolchain).

argv: <home> [--check]. Creates ``<home>/lib64 -> lib`` (nvcc.profile links from $TOP/lib64) and, for every
``lib/lib<name>.so.<major>``, the unversioned development link ``lib<name>.so -> lib<name>.so.<major>`` that CMake's
find_library and JIT builds look for. A link pointing elsewhere is replaced; a regular file in the way is an error
(nothing is overwritten). With --check nothing is written and the links that would change are reported.
Prints JSON {"changed": [link paths], "error": str or null}; exits 1 on an error.
One call instead of a find task plus a file task per library: a round trip per link on every converge.
"""
import json
import os
import re
import sys

VERSIONED = re.compile(r"^lib[A-Za-z0-9_.+-]+\.so\.[0-9]+$")


def ensure(path, target, check, changed):
    if os.path.islink(path):
        if os.readlink(path) == target:
            return
    elif os.path.lexists(path):
        raise OSError("%s exists and is not a link (wanted a link to %s)" % (path, target))
    changed.append(path)
    if check:
        return
    if os.path.islink(path):
        os.unlink(path)
    os.symlink(target, path)


def main(argv):
    home, check = argv[0], "--check" in argv[1:]
    changed = []
    try:
        ensure(os.path.join(home, "lib64"), "lib", check, changed)
        lib = os.path.join(home, "lib")
        for name in sorted(os.listdir(lib)):
            if VERSIONED.match(name):
                ensure(os.path.join(lib, re.sub(r"\.so\.[0-9]+$", ".so", name)), name, check, changed)
    except OSError as exc:
        print(json.dumps({"changed": changed, "error": str(exc)}))
        return 1
    print(json.dumps({"changed": changed, "error": None}))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
