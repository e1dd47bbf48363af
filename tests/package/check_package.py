"""Build the collection tarball, check what it ships, install it into a clean path and syntax-check its playbooks.

Run by ``make package`` (part of ``make lint``)::

    .venv/bin/python tests/package/check_package.py [--keep]

Steps, each one failing the run with a message that names the file or rule:

1. ``ansible-galaxy collection build`` of this checkout into a temporary directory.
2. The tarball's file list: only the top-level entries a user needs (``ALLOWED_TOP``), no development or test files
   (``tests/``, ``molecule/``, ``.ci/``, hidden files, caches, the podman sandbox, vault files), and everything a user
   needs is there (every role with its argument specs, every module, the playbooks, ``meta/`` with the
   execution-environment file and the requirements files it names).
3. ``MANIFEST.json``'s dependencies are exactly the other collections the shipped roles, playbooks, plugins and
   example inventory use (module keys, filters, lookups, connections, Python imports): none missing, none unused.
   Every ``version_added`` of a shipped plugin is at most the collection's version; no ``example.invalid`` link.
4. ``ansible-galaxy collection install --offline`` of the dependencies (from the copies this controller has, e.g. the
   ``ansible`` package's bundle: no network) and then of the tarball into an empty directory.
5. ``ansible-playbook --syntax-check blackwell.sglang.<name>`` for every shipped playbook, with the shipped example
   inventory, ``ANSIBLE_COLLECTIONS_PATH`` set to that directory only, no scan of ``sys.path`` and an empty
   ``ansible.cfg`` (the checkout's own collections link and config are out of reach: cwd is the temporary directory).

Exit status 0 when everything holds, 1 with one line per finding otherwise. Wall time is printed.
"""

from __future__ import annotations

import argparse
import fnmatch
import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time

import yaml
from packaging.version import Version

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))

# What a user of the collection gets (galaxy.yml's build_ignore keeps the rest out).
ALLOWED_TOP = {
    "MANIFEST.json", "FILES.json", "README.md", "LICENSE", "CHANGELOG.md",
    "changelogs", "docs", "inventories", "meta", "playbooks", "plugins", "roles",
}
# Paths (relative to the collection root) that must never ship: fnmatch patterns, '*' spans '/'.
FORBIDDEN = [
    "tests", "tests/*", "molecule", "molecule/*", ".ci", ".ci/*", "collections", "collections/*",
    "Makefile", "ansible.cfg", "pytest.ini", "requirements-dev.txt",
    "inventories/sandbox", "inventories/sandbox/*", "playbooks/sandbox_*",
    "*/__pycache__", "*/__pycache__/*", "*.pyc", "*vault.yml", "*vault.yaml", "*/benchmark-results*",
    "changelogs/fragments", "changelogs/fragments/*",
    # the dated measurement notes of tests/bench (docs/benchmarks.md, which ships, summarises them)
    "docs/benchmarks", "docs/benchmarks/*",
]
# Files the build_ignore patterns must keep out even though none exists in this checkout today.
MUST_BE_IGNORED = [
    "inventories/blackwell/group_vars/all/vault.yml",
    "inventories/blackwell/benchmark-results/run.json",
    "tests/unit/conftest.py",
    "molecule/default/molecule.yml",
    ".ci/run",
    "docs/benchmarks/noop-1host-20991231-ssh.md",
]
OWN = ("ansible.builtin", "ansible.legacy", "blackwell.sglang")
NAME = r"[a-z][a-z0-9_]*"
# Uses of another collection's content: a module/action key of a task, a filter or test, a lookup/query, a
# connection, a callback, a Python import.
USE_PATTERNS = [
    re.compile(r"^\s*(?:-\s+)?(%s)\.(%s)\.%s\s*:" % (NAME, NAME, NAME), re.M),
    re.compile(r"(?:\||\bis\s+(?:not\s+)?)\s*(%s)\.(%s)\.%s\b" % (NAME, NAME, NAME)),
    re.compile(r"\b(?:lookup|query|q)\(\s*['\"](%s)\.(%s)\.%s" % (NAME, NAME, NAME)),
    re.compile(r"\b(?:ansible_connection|connection|ansible_become_method)\s*[:=]\s*['\"]?(%s)\.(%s)\.%s" % (NAME, NAME, NAME)),
    re.compile(r"\bansible_collections\.(%s)\.(%s)\b" % (NAME, NAME)),
]
TEXT_SUFFIXES = (".yml", ".yaml", ".py", ".j2", ".cfg", ".ini", ".md", ".json", ".txt", ".sh")


def run(argv, env=None, cwd=None):
    """Run argv; return (rc, combined output)."""
    proc = subprocess.run(argv, env=env, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                          universal_newlines=True, timeout=300, check=False)
    return proc.returncode, proc.stdout


def tool(name):
    """The ansible CLI next to this Python (the venv's), else the one on PATH."""
    here = os.path.join(os.path.dirname(sys.executable), name)
    return here if os.access(here, os.X_OK) else (shutil.which(name) or name)


def strip_yaml_comments(text):
    """Drop whole-line and trailing YAML comments (prose naming a module is not a use of it)."""
    out = []
    for line in text.splitlines():
        if line.lstrip().startswith("#"):
            continue
        out.append(re.sub(r"\s+#\s.*$", "", line))
    return "\n".join(out)


def collections_used(members, read):
    """{ 'ns.coll': [paths...] } of other collections used by the shipped content."""
    used = {}
    for path in members:
        if not path.startswith(("roles/", "playbooks/", "plugins/", "inventories/")):
            continue
        if not path.endswith((".yml", ".yaml", ".py", ".j2")):
            continue
        text = read(path)
        if path.endswith((".yml", ".yaml")):
            text = strip_yaml_comments(text)
        for pattern in USE_PATTERNS:
            for match in pattern.finditer(text):
                fqcn = "%s.%s" % match.group(1, 2)
                if fqcn not in OWN:
                    used.setdefault(fqcn, []).append(path)
    return used


def check_tarball(tar_path, galaxy):
    """Findings about the tarball's contents (a list of strings, empty when all is well)."""
    findings = []
    with tarfile.open(tar_path) as tar:
        names = [m.name.rstrip("/") for m in tar.getmembers()]
        files = {m.name: m for m in tar.getmembers() if m.isfile()}

        def read(path):
            return tar.extractfile(files[path]).read().decode("utf-8", "replace")

        manifest = json.loads(read("MANIFEST.json"))

        unwanted = {}   # reason -> paths (one finding per reason, a few paths named)
        for name in names:
            top = name.split("/", 1)[0]
            if top not in ALLOWED_TOP:
                unwanted.setdefault("top-level entry %r is not in ALLOWED_TOP (add it to build_ignore)" % top, []).append(name)
            if any(part.startswith(".") for part in name.split("/")):
                unwanted.setdefault("hidden paths", []).append(name)
            for pattern in FORBIDDEN:
                if fnmatch.fnmatchcase(name, pattern):
                    unwanted.setdefault("development/test content or an operator's data (%r)" % pattern, []).append(name)
                    break
        for reason, paths in sorted(unwanted.items()):
            findings.append("ships %d path(s) of %s: %s" % (len(paths), reason, ", ".join(paths[:3]) + (", ..." if len(paths) > 3 else "")))

        required = ["README.md", "LICENSE", "meta/runtime.yml", "meta/execution-environment.yml",
                    "playbooks/site.yml", "playbooks/rollout.yml", "inventories/blackwell/hosts.yml"]
        for role in sorted(os.listdir(os.path.join(REPO, "roles"))):
            tasks = os.path.join(REPO, "roles", role, "tasks")
            if os.path.isdir(tasks):
                # every task file (the contract role has only tasks_from entry points, no main.yml)
                required += ["roles/%s/tasks/%s" % (role, name) for name in sorted(os.listdir(tasks))
                             if name.endswith(".yml")] + ["roles/%s/meta/argument_specs.yml" % role]
        for module in sorted(os.listdir(os.path.join(REPO, "plugins", "modules"))):
            if module.endswith(".py"):
                required.append("plugins/modules/" + module)
        if "meta/execution-environment.yml" in files:
            ee_deps = (yaml.safe_load(read("meta/execution-environment.yml")) or {}).get("dependencies") or {}
            for kind in ("python", "system"):
                if ee_deps.get(kind):
                    required.append(ee_deps[kind])
            if not ee_deps.get("python"):
                findings.append("meta/execution-environment.yml names no Python requirements file")
        for path in required:
            if path not in files:
                findings.append("does not ship %s" % path)

        declared = set((manifest["collection_info"].get("dependencies") or {}).keys())
        if declared != set((galaxy.get("dependencies") or {}).keys()):
            findings.append("MANIFEST.json dependencies %s differ from galaxy.yml's" % sorted(declared))
        used = collections_used(sorted(files), read)
        for fqcn in sorted(set(used) - declared):
            findings.append("%s is used by %s but is not a dependency in galaxy.yml" % (fqcn, ", ".join(sorted(set(used[fqcn]))[:3])))
        for fqcn in sorted(declared - set(used)):
            findings.append("galaxy.yml depends on %s but nothing shipped uses it (test-only: tests/requirements.yml)" % fqcn)

        version = Version(str(galaxy["version"]))
        for path in sorted(files):
            if not path.endswith(TEXT_SUFFIXES):
                continue
            text = read(path)
            if "example.invalid" in text:
                findings.append("%s links to example.invalid" % path)
            if path.startswith("plugins/"):
                for match in re.finditer(r"version_added:\s*['\"]?([0-9][0-9.]*)", text):
                    if Version(match.group(1)) > version:
                        findings.append("%s: version_added %s is newer than the collection (%s)" % (path, match.group(1), version))
    return findings, sorted(files), manifest


def check_build_ignore(galaxy):
    """Paths that must never ship are matched by a build_ignore pattern (ansible-galaxy matches with fnmatch)."""
    patterns = galaxy.get("build_ignore") or []
    findings = []
    for path in MUST_BE_IGNORED:
        parts = path.split("/")
        prefixes = ["/".join(parts[:i]) for i in range(1, len(parts) + 1)]
        if not any(fnmatch.fnmatch(prefix, pattern) for prefix in prefixes for pattern in patterns):
            findings.append("galaxy.yml build_ignore does not keep out %s" % path)
    return findings


def local_collection_path(fqcn, env):
    """Directory of an installed copy of fqcn on this controller (e.g. the ansible package's bundle), or None."""
    rc, out = run([tool("ansible-galaxy"), "collection", "list", fqcn, "--format", "json"], env=env, cwd=REPO)
    if rc != 0:
        return None
    try:
        listing = json.loads(out[out.index("{"):])
    except ValueError:
        return None
    for root, found in listing.items():
        if fqcn in found:
            return os.path.join(root, *fqcn.split("."))
    return None


def install_and_syntax_check(work, tar_path, manifest, shipped):
    """Install into work/collections (nothing else on the collections path) and syntax-check every playbook."""
    findings = []
    coll_root = os.path.join(work, "collections")
    cfg = os.path.join(work, "ansible.cfg")
    with open(cfg, "w", encoding="utf-8") as handle:
        handle.write("[defaults]\ncollections_path = %s\ncollections_scan_sys_path = false\n" % coll_root)
    env = dict(os.environ, ANSIBLE_CONFIG=cfg, ANSIBLE_COLLECTIONS_PATH=coll_root, ANSIBLE_COLLECTIONS_SCAN_SYS_PATH="false",
               ANSIBLE_LOCAL_TEMP=os.path.join(work, "tmp"), ANSIBLE_NOCOLOR="1", ANSIBLE_FORCE_COLOR="0")
    galaxy_cli = tool("ansible-galaxy")
    lookup_env = {k: v for k, v in os.environ.items() if not k.startswith("ANSIBLE_COLLECTIONS_")}
    for fqcn in sorted(manifest["collection_info"].get("dependencies") or {}):
        source = local_collection_path(fqcn, lookup_env)
        if source is None:
            findings.append("dependency %s: no local copy to install offline (ansible-galaxy collection install %s)" % (fqcn, fqcn))
            continue
        rc, out = run([galaxy_cli, "collection", "install", "--offline", "-p", coll_root, source], env=env, cwd=work)
        if rc != 0:
            findings.append("installing the dependency %s from %s failed:\n%s" % (fqcn, source, out))
    rc, out = run([galaxy_cli, "collection", "install", "--offline", "-p", coll_root, tar_path], env=env, cwd=work)
    if rc != 0:
        return findings + ["ansible-galaxy collection install of the tarball failed:\n%s" % out]
    installed = os.path.join(coll_root, "ansible_collections", "blackwell", "sglang")
    playbooks = sorted(os.path.basename(p)[:-len(".yml")] for p in shipped
                       if p.startswith("playbooks/") and p.endswith(".yml") and p.count("/") == 1)
    argv = [tool("ansible-playbook"), "-i", os.path.join(installed, "inventories", "blackwell"), "--syntax-check"]
    argv += ["blackwell.sglang.%s" % name for name in playbooks]
    rc, out = run(argv, env=env, cwd=work)
    if rc != 0:
        findings.append("ansible-playbook --syntax-check of the installed playbooks failed:\n%s" % out)
    else:
        checked = re.findall(r"^playbook: (\S+)$", out, re.M)
        if len(checked) != len(playbooks) or not all(p.startswith(installed + os.sep) for p in checked):
            findings.append("syntax-check did not check the installed playbooks %s, output:\n%s" % (playbooks, out))
        print("syntax-checked from %s: %s" % (installed, ", ".join("blackwell.sglang." + p for p in playbooks)))
    return findings


def main():
    """Entry point; see the module docstring."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--keep", action="store_true", help="keep the temporary directory and print it")
    args = parser.parse_args()
    start = time.monotonic()
    with open(os.path.join(REPO, "galaxy.yml"), encoding="utf-8") as handle:
        galaxy = yaml.safe_load(handle)
    work = tempfile.mkdtemp(prefix="blackwell-sglang-package-")
    try:
        findings = check_build_ignore(galaxy)
        rc, out = run([tool("ansible-galaxy"), "collection", "build", "--output-path", os.path.join(work, "dist"), REPO], cwd=REPO)
        if rc != 0:
            findings.append("ansible-galaxy collection build failed:\n%s" % out)
        else:
            tar_path = os.path.join(work, "dist", "blackwell-sglang-%s.tar.gz" % galaxy["version"])
            content, shipped, manifest = check_tarball(tar_path, galaxy)
            findings += content
            print("built %s: %d files, %d KiB" % (os.path.basename(tar_path), len(shipped), os.path.getsize(tar_path) // 1024))
            findings += install_and_syntax_check(work, tar_path, manifest, shipped)
    finally:
        if args.keep:
            print("kept %s" % work)
        else:
            shutil.rmtree(work, ignore_errors=True)
    took = time.monotonic() - start
    for finding in findings:
        print("package: " + finding, file=sys.stderr)
    print("package check: %s in %.1f s" % ("FAILED (%d findings)" % len(findings) if findings else "ok", took))
    return 1 if findings else 0


if __name__ == "__main__":
    sys.exit(main())
