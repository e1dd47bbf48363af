"""Stage the kernel build's FetchContent sources from a source cache (blackwell.sglang.sgl_kernel_sm120).

Usage: stage_sources.py <dependencies.json | -> <staging dir>
  dependencies.json (``-``: read from stdin): the ``dependencies`` list of blackwell.sglang.sgl_kernel_sources (with a cache); entries
  with ``used: false`` (never configured) are skipped.
Prints JSON ``{"dirs": {name: directory}, "copied": [names], "in_place": [names], "cmake_args": ["-D<variable>=<dir>"]}``.

A tarball is unpacked into ``<staging>/<name>`` (its single top-level directory stripped). A cached directory is
used in place (read-only is fine) unless the build writes into it (``writes_into`` set: mscclpp at build time,
FlashMLA at configure time) or another dependency is placed inside it; then it is copied to ``<staging>/<name>``,
so the cache itself is never written and every build starts from pristine sources. A dependency declared with
``SOURCE_DIR ${other_SOURCE_DIR}/sub`` (the current pin's FlashMLA cutlass) is unpacked into that place of the
other's staged copy. The staging directory is recreated on every run. Exit 2 with a message on bad input.
"""
import json
import os
import shutil
import sys
import tarfile


def _strip_members(tf, top):
    out = []
    for m in tf.getmembers():
        name = m.name.lstrip("./")
        if top:
            if name == top or not name.startswith(top + "/"):
                continue
            name = name[len(top) + 1:]
        parts = name.split("/")
        if not name or name.startswith("/") or ".." in parts:
            continue
        if (m.issym() or m.islnk()) and m.linkname.startswith("/"):
            continue  # a link out of the tree
        if not (m.isfile() or m.isdir() or m.issym() or m.islnk()):
            continue  # no devices or fifos from an archive
        m.name = name
        if m.islnk() and top and m.linkname.startswith(top + "/"):
            m.linkname = m.linkname[len(top) + 1:]
        out.append(m)
    return out


def unpack(path, dest, top=None):
    with tarfile.open(path) as tf:
        if not top:
            names = {m.name.lstrip("./").split("/")[0] for m in tf.getmembers() if m.name.lstrip("./")}
            top = names.pop() if len(names) == 1 else None
        members = _strip_members(tf, top)
        os.makedirs(dest, exist_ok=True)
        kwargs = {"filter": "tar"} if hasattr(tarfile, "data_filter") else {}
        tf.extractall(dest, members=members, **kwargs)


def main(argv):
    if len(argv) != 3:
        sys.stderr.write(__doc__)
        return 2
    if argv[1] == "-":
        deps = json.load(sys.stdin)
    else:
        with open(argv[1]) as f:
            deps = json.load(f)
    deps = [d for d in deps if d.get("used", True)]  # declared but never configured: nothing to stage
    staging = os.path.abspath(argv[2])
    if os.path.exists(staging):
        shutil.rmtree(staging)
    os.makedirs(staging)
    hosts = {d["inside"]["name"] for d in deps if d.get("inside")}
    dirs, copied, in_place = {}, [], []
    # parents before the trees placed inside them
    for dep in sorted(deps, key=lambda d: 1 if d.get("inside") else 0):
        name, path, kind = dep["name"], dep.get("cache_path"), dep.get("cache_kind")
        if not path:
            sys.stderr.write("stage_sources.py: %s is not in the cache\n" % name)
            return 2
        inside = dep.get("inside")
        if inside:
            if inside["name"] not in dirs or inside["name"] not in copied:
                sys.stderr.write("stage_sources.py: %s goes inside %s, which is not staged\n" % (name, inside["name"]))
                return 2
            dest = os.path.join(dirs[inside["name"]], inside["subdir"])
            if os.path.isdir(dest):
                shutil.rmtree(dest)
        else:
            dest = os.path.join(staging, name)
        if kind == "tarball":
            unpack(path, dest, dep.get("cache_top"))
            copied.append(name)
        elif dep.get("writes_into") or name in hosts or inside:
            shutil.copytree(path, dest, symlinks=True)
            copied.append(name)
        else:
            dest = path
            in_place.append(name)
        dirs[name] = dest
    cmake_args = ["-D%s=%s" % (d["variable"], dirs[d["name"]]) for d in deps]
    print(json.dumps({"dirs": dirs, "copied": copied, "in_place": in_place, "cmake_args": cmake_args}, sort_keys=True))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
