"""blackwell.sglang.venv_facts: the one venv metadata reader (module_utils._venv_metadata) as tasks call it.

The "venv" is this test interpreter with a temporary site directory of real dist-info folders put first on
PYTHONPATH, as in test_venv_stamp.py; the module runs as Ansible runs it (a process with its arguments file).
"""

import json
import os
import pathlib
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parents[3]
MODULE = ROOT / "plugins" / "modules" / "venv_facts.py"


def _dist(site, name, version, requires=()):
    info = site / ("%s-%s.dist-info" % (name.replace("-", "_").replace(".", "_"), version))
    info.mkdir(parents=True)
    meta = ["Metadata-Version: 2.1", "Name: %s" % name, "Version: %s" % version]
    meta += ["Requires-Dist: %s" % req for req in requires]
    (info / "METADATA").write_text("\n".join(meta) + "\n")
    (info / "RECORD").write_text(info.name + "/METADATA,,\n")


def _module(tmp_path, site, args):
    path = tmp_path / "args.json"
    path.write_text(json.dumps({"ANSIBLE_MODULE_ARGS": args}))
    env = dict(os.environ, PYTHONPATH="%s:%s" % (site, ROOT / "collections"))
    proc = subprocess.run([sys.executable, str(MODULE), str(path)], env=env, capture_output=True, text=True,
                          timeout=120, check=False)
    return json.loads(proc.stdout)


def test_versions_requires_and_pep503_names(tmp_path):
    site = tmp_path / "site"
    _dist(site, "Demo_SGLang", "0.5.9", requires=["demo-torch==2.9.1", 'demo-test; extra == "test"'])
    _dist(site, "zope.demo", "1.2")
    result = _module(tmp_path, site, {"python": sys.executable, "versions": ["demo-sglang", "Demo.Absent"],
                                      "requires": ["demo_sglang", "demo-absent"]})
    assert result["changed"] is False
    assert result["versions"] == {"demo-sglang": "0.5.9", "demo-absent": None}
    assert result["requires"] == {"demo-sglang": ["demo-torch==2.9.1", 'demo-test; extra == "test"'], "demo-absent": None}
    # every distribution, under its PEP 503 name (dots too, as the release manifest and the audit compare them)
    assert result["distributions"]["demo-sglang"] == "0.5.9" and result["distributions"]["zope-demo"] == "1.2"
    assert result["python_version"] == "%d.%d.%d" % sys.version_info[:3]
    assert result["stamp"] is None and "torch" not in result


def test_stamp_file_is_returned_parsed_or_null(tmp_path):
    site = tmp_path / "site"
    site.mkdir()
    stamp = tmp_path / "stamp.json"
    stamp.write_text(json.dumps({"commit": "abc", "torch": None}))
    assert _module(tmp_path, site, {"python": sys.executable, "stamp": str(stamp)})["stamp"] == {"commit": "abc", "torch": None}
    stamp.write_text("not json")
    assert _module(tmp_path, site, {"python": sys.executable, "stamp": str(stamp)})["stamp"] is None


def test_torch_build_without_torch_is_empty(tmp_path):
    # an isolated interpreter sees no torch: -I drops PYTHONPATH and user site, -S the site-packages
    wrapper = tmp_path / "python"
    wrapper.write_text("#!/bin/sh\nexec %s -I -S \"$@\"\n" % sys.executable)
    wrapper.chmod(0o755)
    result = _module(tmp_path, tmp_path, {"python": str(wrapper), "torch_build": True})
    assert result["torch"] == {} and "torch" not in result["distributions"]


def test_torch_build_is_read_from_version_py_without_importing_torch(tmp_path):
    site = tmp_path / "site"
    _dist(site, "torch", "2.11.0+cu130")
    (site / "torch").mkdir()
    # torch's own layout of torch/version.py; the __init__ would fail if anything imported the package
    (site / "torch" / "__init__.py").write_text("raise RuntimeError('torch was imported')\n")
    (site / "torch" / "version.py").write_text(
        "from typing import Optional\n__all__ = ['__version__', 'debug', 'cuda', 'git_version', 'hip']\n"
        "__version__ = '2.11.0+cu130'\ndebug = False\ncuda: Optional[str] = '13.0'\n"
        "git_version = '70d99e998b7b2b5d5f5f7ba0a4d4fc0e4d3d1c2f'\nhip: Optional[str] = None\n")
    result = _module(tmp_path, site, {"python": sys.executable, "torch_build": True})
    assert result["torch"] == {"version": "2.11.0+cu130", "cuda": "13.0"}
    # a CPU build: cuda is None
    (site / "torch" / "version.py").write_text("__version__ = '2.13.0+cpu'\ncuda = None\n")
    assert _module(tmp_path, site, {"python": sys.executable, "torch_build": True})["torch"] == {"version": "2.13.0+cpu", "cuda": None}
    # no version.py (a broken install): reported, the module does not fail
    (site / "torch" / "version.py").unlink()
    result = _module(tmp_path, site, {"python": sys.executable, "torch_build": True})
    assert not result.get("failed") and "version.py" in result["torch"]["error"]


def test_missing_interpreter_fails_naming_it(tmp_path):
    result = _module(tmp_path, tmp_path, {"python": str(tmp_path / "no" / "python")})
    assert result["failed"] and "%s does not exist" % (tmp_path / "no" / "python") in result["msg"]
