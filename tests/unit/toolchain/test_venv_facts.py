"""blackwell.sglang.venv_facts: the one venv metadata reader (module_utils._venv_metadata) as tasks call it.

The "venv" is this test interpreter with a temporary site directory of real dist-info folders put first on
PYTHONPATH, as in test_venv_stamp.py; the module runs as Ansible runs it (a process with its arguments file).
"""

import json
import pathlib
import re
import sys

import ansible_run

ROOT = pathlib.Path(__file__).resolve().parents[3]


def _dist(site, name, version, requires=()):
    info = site / ("%s-%s.dist-info" % (name.replace("-", "_").replace(".", "_"), version))
    info.mkdir(parents=True)
    meta = ["Metadata-Version: 2.1", "Name: %s" % name, "Version: %s" % version]
    meta += ["Requires-Dist: %s" % req for req in requires]
    (info / "METADATA").write_text("\n".join(meta) + "\n")
    (info / "RECORD").write_text(info.name + "/METADATA,,\n")


def _module(tmp_path, site, args):
    return ansible_run.module_file("venv_facts", args, tmp_path, pythonpath=[site])


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


FIXTURES = ROOT / "tests" / "fixtures" / "sglang_source"


def _pip_stand_in(tmp_path, rc=0, out=None, err=""):
    """This interpreter, except ``-m pip``: that prints a recorded dry-run report (or an error) and logs its argv."""
    (tmp_path / "pip-out.txt").write_text(out if out is not None else (FIXTURES / "pip-report-sglang-0.5.9-full.json").read_text())
    (tmp_path / "pip-err.txt").write_text(err)
    wrapper = tmp_path / "python"
    wrapper.write_text('#!/bin/sh\nif [ "$1" = -m ] && [ "$2" = pip ]; then echo "$@" > %s; cat %s; cat %s >&2; exit %d; fi\n'
                       'exec %s "$@"\n' % (tmp_path / "pip-argv.txt", tmp_path / "pip-out.txt",
                                           tmp_path / "pip-err.txt", rc, sys.executable))
    wrapper.chmod(0o755)
    return str(wrapper)


def test_the_sglang_install_plan_the_dry_run_and_the_drift_of_the_protected_set(tmp_path):
    """Field report B19: SGLang's dependencies are installed under constraints, never replacing torch."""
    site = tmp_path / "site"
    requires = json.loads((FIXTURES / "sglang-0.5.9-requires.json").read_text())
    _dist(site, "sglang", "0.5.9", requires=requires)
    _dist(site, "torch", "2.13.0+cpu")
    _dist(site, "numpy", "1.26.4")
    python = _pip_stand_in(tmp_path)
    result = _module(tmp_path, site, {
        "python": python, "select_requirements": {"of": "sglang", "excludes": ["timm"]},
        "compare_to": {"torch": "2.12.0.dev20260307+cu130", "numpy": "1.0", "flashinfer-python": "0.6.5"},
        "pip_dry_run": ["-r", "/state/requirements.txt", "-c", "/state/constraints.txt"]})
    plan = result["requirements_plan"]
    assert plan["constraints"] == ["torch==2.13.0+cpu"]          # sglang itself is not pinned, numpy not protected
    names = [re.match(r"[A-Za-z0-9._-]+", r).group(0).lower() for r in plan["requirements"]]
    assert "timm" not in names and not {"torch", "torchvision", "torchaudio", "sgl-kernel"} & set(names)
    assert "numpy" in names
    assert {e["reason"] for e in plan["excluded"]} >= {"protected", "excluded"} and plan["extras_skipped"] > 0
    # the recorded resolution pulls torchvision in through timm: refused before anything is installed
    dry = result["pip_dry_run"]
    assert dry["rc"] == 0 and dry["check"]["verdict"] == "protected_package_changed"
    assert dry["check"]["changes"][0]["text"] == "install torchvision 0.28.0 (required by timm)"
    assert (tmp_path / "pip-argv.txt").read_text().split() == [
        "-m", "pip", "install", "--dry-run", "--quiet", "--report", "-",
        "-r", "/state/requirements.txt", "-c", "/state/constraints.txt"]
    drift = result["protected_drift"]
    assert drift["verdict"] == "torch_replaced" and drift["torch"] == "2.12.0.dev20260307+cu130"
    assert [c["text"] for c in drift["changes"]] == ["flashinfer-python 0.6.5 -> removed",
                                                     "torch 2.12.0.dev20260307+cu130 -> 2.13.0+cpu"]


def test_a_dry_run_pip_cannot_resolve_and_a_bad_selection(tmp_path):
    site = tmp_path / "site"
    _dist(site, "sglang", "0.5.9", requires=["numpy>=2"])
    python = _pip_stand_in(tmp_path, rc=1, out="", err="ERROR: ResolutionImpossible: for help visit ...")
    result = _module(tmp_path, site, {"python": python, "pip_dry_run": ["-r", "r.txt"], "protected": ["torch"]})
    assert result["pip_dry_run"]["rc"] == 1 and result["pip_dry_run"]["check"] is None
    assert "ResolutionImpossible" in result["pip_dry_run"]["stderr"]
    bad = _module(tmp_path, site, {"python": python, "select_requirements": {"of": "sglang", "mode": "bogus"}})
    assert bad["failed"] and bad["msg"].startswith("select_requirements: dependencies must be 'all', 'none'")
