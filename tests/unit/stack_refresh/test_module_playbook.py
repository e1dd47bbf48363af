"""The module as Ansible runs it: playbooks/stack_refresh.yml through ansible-playbook on the real current tree
(the preset file written into the inventory's group_vars/all, idempotent, check mode, never over another file, and
selected through the stack contract by sglang_stack_preset), git checkouts at a ref, and bad input naming the
option."""

import json
import os
import subprocess
import sys

import pytest
import yaml

import ansible_run
import refresh_trees as rt

NAME = "20260818_d55f1c28e2"


def _stack_dir(tmp_path):
    """group_vars/all of an empty inventory (tmp_path/inventory, one host: localhost)."""
    out = tmp_path / "inventory" / "group_vars" / "all"
    out.mkdir(parents=True)
    (tmp_path / "inventory" / "hosts.ini").write_text("localhost ansible_connection=local\n")
    return out


def _contract_pins(tmp_path, preset):
    """ansible-playbook on the inventory of _stack_dir: the stack contract's pins with sglang_stack_preset: preset
    (rc, the pins written out by the play or None, the output)."""
    dest = tmp_path / "contract-pins.json"
    if dest.exists():
        dest.unlink()
    play = [{"name": "The contract's pins", "hosts": "localhost", "gather_facts": False,
             "roles": ["blackwell.sglang.sglang_stack"],
             "tasks": [{"name": "Write them out", "ansible.builtin.copy": {"dest": str(dest), "mode": "0644", "content": (
                 "{{ {'pins': sglang_stack_pins, 'ref': sglang_stack_sglang_ref, 'torch': sglang_stack_torch_version,"
                 " 'cuda': sglang_stack_cuda_version, 'fi': sglang_stack_flashinfer_version} | to_json }}")}}]}]
    (tmp_path / "contract.yml").write_text(json.dumps(play))
    res = ansible_run.playbook(tmp_path / "contract.yml", tmp_path, inventory=tmp_path / "inventory" / "hosts.ini",
                               extra_vars={"sglang_stack_preset": preset}, python=sys.executable)
    return res.rc, (json.loads(dest.read_text()) if dest.exists() else None), res.out


def _play(tmp_path, extra, check=False):
    res = ansible_run.playbook(os.path.join(rt.ROOT, "playbooks", "stack_refresh.yml"), tmp_path, extra_vars=extra,
                               check=check, timeout=600)
    return res.rc, res.out


@pytest.fixture(name="current", scope="module")
def fixture_current(tmp_path_factory):
    if not rt.have_bundle():
        pytest.skip(rt.SKIP_REASON)
    pin = rt.pins()["current"]
    return rt.unpack(pin, tmp_path_factory.mktemp("current")), pin["commit"], rt.commit_date(pin)


@pytest.mark.slow
def test_playbook_writes_the_stack_once(tmp_path, current):
    root, commit, date = current
    stacks = _stack_dir(tmp_path)
    extra = {"stack_refresh_src": root, "stack_refresh_commit": commit, "stack_refresh_commit_date": date,
             "stack_refresh_stack_dir": str(stacks), "stack_refresh_base": "original_20260307",
             "stack_refresh_source_cache": rt.UPSTREAM,
             "stack_refresh_service": {"fp4_gemm_backend": "flashinfer_cutlass"}}
    rc, out = _play(tmp_path, extra, check=True)
    assert rc == 0, out[-4000:]
    assert not (stacks / ("stack_%s.yml" % NAME)).exists(), "check mode wrote the file"
    assert "changed=1" in out
    rc, out = _play(tmp_path, extra)
    assert rc == 0, out[-4000:]
    assert "changed=1" in out
    written = yaml.safe_load((stacks / ("stack_%s.yml" % NAME)).read_text())["sglang_stack_preset_" + NAME]
    hand = rt.shipped()["current"]
    assert dict((k, written[k]) for k in hand) == hand
    for needle in ("sgl_kernel 0.3.21 -> 0.4.6.post1", "torch 2.12.0.dev20260307+cu130 -> 2.13.0+cu130",
                   "source repo-triton v3.7.1 (CMakeLists.txt:66): missing from the cache",
                   "source repo-flashmla 05e26647fe840b8baedae486c2d86d5ce4efeb7c (cmake/flashmla.cmake:3): in the "
                   "cache at another revision", "source repo-cutlass 57e3cfb47a2d9e0d46eb6335c3dc411498efa198 "
                   "(CMakeLists.txt:50): in the cache", "patch sm120_only: applies",
                   "sglang_stack_preset: " + NAME):
        assert needle in out, needle
    # the same tree again: the same bytes, no change; against another base the header differs, the stack not
    rc, out = _play(tmp_path, extra)
    assert rc == 0 and "changed=0" in out, out[-4000:]
    rc, out = _play(tmp_path, dict(extra, stack_refresh_base="current"))
    assert rc == 0 and "changed=0" in out, out[-4000:]
    assert "Changes against stack original_20260307" in (stacks / ("stack_%s.yml" % NAME)).read_text()
    # the same name with other content: refused, the file left alone
    before = (stacks / ("stack_%s.yml" % NAME)).read_text()
    rc, out = _play(tmp_path, dict(extra, stack_refresh_service={"fp4_gemm_backend": "flashinfer_cudnn"}))
    assert rc != 0 and "exists with other content; a stack file is never overwritten" in out, out[-4000:]
    assert (stacks / ("stack_%s.yml" % NAME)).read_text() == before
    # the inventory now holds the preset: sglang_stack_preset selects its pins through the stack contract
    rc, shown, out = _contract_pins(tmp_path, NAME)
    assert rc == 0 and shown is not None, out[-4000:]
    assert shown["pins"] == written
    assert (shown["ref"], shown["torch"], shown["cuda"], shown["fi"]) == (
        commit, "2.13.0+cu130", "13.0", "0.6.17")
    # a shipped preset still comes from the collection; an unknown name fails, naming every preset there is
    rc, shown, out = _contract_pins(tmp_path, "original_20260307")
    assert rc == 0 and shown["ref"] == rt.shipped()["original_20260307"]["sglang_ref"], out[-4000:]
    rc, shown, out = _contract_pins(tmp_path, "nosuch")
    assert rc != 0 and shown is None, out[-4000:]
    assert 'sglang_stack_preset is "nosuch"' in out, out[-4000:]
    assert "(original_20260307, current, %s)" % NAME in out, out[-4000:]
    # the new preset as the base of the next refresh: the same tree changes nothing against it
    rc, out = _play(tmp_path, dict(extra, stack_refresh_base=NAME, stack_refresh_name="again"))
    assert rc == 0 and "changed=1" in out, out[-4000:]
    again = (stacks / "stack_again.yml").read_text()
    assert "# Changes against stack %s:\nsglang_stack_preset_again:\n" % NAME in again, again[:2000]
    assert yaml.safe_load(again)["sglang_stack_preset_again"] == written


def _git(cwd, *args, date=None):
    env = dict(os.environ, GIT_AUTHOR_NAME="t", GIT_AUTHOR_EMAIL="t@t", GIT_COMMITTER_NAME="t",
               GIT_COMMITTER_EMAIL="t@t")
    if date:
        env.update(GIT_AUTHOR_DATE=date, GIT_COMMITTER_DATE=date)
    return subprocess.run(["git"] + list(args), cwd=str(cwd), env=env, check=True, capture_output=True,
                          text=True).stdout.strip()


def test_git_checkout_is_read_at_the_ref(tmp_path):
    deps = ["torch==2.13.0", "torchaudio==2.11.0", "flashinfer_python==0.6.17", "sglang-kernel==0.4.6.post1"]
    root = rt.small_tree(tmp_path, deps)
    _git(root, "init", "-q")
    _git(root, "add", "-A")
    _git(root, "commit", "-qm", "first", date="2026-11-30T10:00:00+00:00")
    first = _git(root, "rev-parse", "HEAD")
    # the next commit (and an uncommitted edit) move torch on: the ref decides what is read
    text = (tmp_path / "sglang" / "python" / "pyproject.toml").read_text()
    pyproject = tmp_path / "sglang" / "python" / "pyproject.toml"
    pyproject.write_text(text.replace("torch==2.13.0", "torch==2.14.0").replace("torchaudio==2.11.0", "torchaudio==2.10.0"))
    _git(root, "commit", "-qam", "second", date="2026-12-01T10:00:00+00:00")
    pyproject.write_text(text)  # uncommitted: never read
    stacks = _stack_dir(tmp_path)
    result = rt.run_module({"src": root, "ref": first, "stack_dir": str(stacks), "service": rt.SERVICE,
                            "patches": [], "presets": rt.shipped()}, tmp_path)
    assert result.get("failed") is not True, result
    assert result["commit"] == first and result["name"] == "20261130_" + first[:10]
    assert result["stack"]["torch"] == "2.13.0+cu130" and result["changed"] is True
    assert os.path.isfile(result["path"])
    assert any(line.startswith("sglang_ref d55f1c28e2 -> %s" % first[:10]) for line in result["report_lines"])
    # HEAD (not the working tree): torchaudio 2.10 does not pair with torch 2.14: refused, naming the cause
    result = rt.run_module({"src": root, "stack_dir": str(stacks), "service": rt.SERVICE, "patches": [],
                            "presets": rt.shipped()}, tmp_path)
    assert result.get("failed") is True and result["msg"].startswith("refused: the tree's pins cannot be satisfied")
    assert any("torchaudio==2.10.0, which has no release for its torch==2.14.0" in c for c in result["causes"]), result


@pytest.mark.parametrize("args, needle", [
    ({"ref": "main"}, "ref: "),
    ({"commit": ""}, "commit: required for a plain directory"),
    ({"commit_date": ""}, "commit_date: required for a plain directory"),
    ({"commit": "abc"}, "commit must be a full 40-digit"),
    ({"base": "nosuch"}, "base: no stack 'nosuch': not a preset of the collection (current, original_20260307)"),
    ({"name": "current"}, "name: current is a preset the collection ships"),
    ({"service": {"kv_cache": "bf16"}}, "service: unknown key(s) kv_cache"),
    ({"overrides": {"torch": {"version": "2.13.0"}}}, "overrides.torch.reason is empty"),
    ({"cuda": "cu130"}, "cuda must be a CUDA major.minor"),
    ({"name": "My Stack"}, "name must be lower-case"),
    ({"stack_dir": "/nonexistent/dir"}, "stack_dir: /nonexistent/dir is not a directory"),
], ids=["ref-without-git", "no-commit", "no-date", "short-commit", "unknown-base", "shipped-name", "service-key", "override-reason",
        "cuda", "name", "stack-dir"])
def test_bad_input_names_the_option(tmp_path, args, needle):
    root = rt.small_tree(tmp_path, ["torch==2.13.0", "torchaudio==2.11.0", "flashinfer_python==0.6.17",
                                    "sglang-kernel==0.4.6.post1"])
    full = {"src": root, "commit": "0123456789abcdef0123456789abcdef01234567", "commit_date": "2026-12-01",
            "stack_dir": str(_stack_dir(tmp_path)), "patches": [], "presets": rt.shipped()}
    full.update(args)
    result = rt.run_module(full, tmp_path)
    assert result.get("failed") is True and "Traceback" not in json.dumps(result), result
    assert needle in result["msg"], result["msg"]
