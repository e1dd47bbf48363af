"""sglang_release `tasks_from: rollback` / `switch` through real ansible-playbook runs on localhost.

An automatic rollback (sglang_release_rollback_reason set, as in the rescue of playbooks/rollout.yml) marks the
release it leaves as failed and removes `previous`, so a later plain rollback cannot swap the host back onto the
failed release; an operator rollback (no reason) still swaps `current` and `previous`; `switch` clears the marker.

The release tree (releases/A, releases/B, current -> B, previous -> A) is built by hand under tmp_path and the role
runs as the current user (sglang_release_owner/group), so no root is needed. Each release has the manifest.json
sglang_release writes, with its own model (A: M1, B: M2): the rollback publishes the model of the release it returns
to; a release whose manifest records no model is refused unless sglang_release_rollback_unrecorded_model=configured.
"""

import grp
import json
import os
import pwd

import pytest

import ansible_run

MARKER = "ROLLED_BACK"

PLAY = """
- name: Run one entry point of sglang_release
  hosts: localhost
  gather_facts: false
  tasks:
    - name: Run the entry point
      ansible.builtin.include_role:
        name: blackwell.sglang.sglang_release
        tasks_from: "{{ entry_point }}"
"""

pytestmark = pytest.mark.slow


MODELS = {
    "A": {"path": "/srv/models/m1@" + "1" * 40, "revision": "1" * 40, "source": "hub", "repository": "acme/m1",
          "manifest_digest": "d1" * 32, "service_env": {"HF_HUB_OFFLINE": "1"}},
    "B": {"path": "acme/m2", "revision": "", "source": None, "repository": None, "manifest_digest": None,
          "service_env": None},
}


# the service settings each release was rendered with (A: none, as in a manifest written before manifests recorded
# them; B: its settings), and B's probe result (probe.json; A has none)
SERVICE = {"A": None, "B": {"kv_cache_dtype": "fp8_e4m3", "fp4_gemm_backend": "flashinfer_cutlass",
                            "moe_runner_backend": "", "render_fp4_flags": False}}
PROBE_B = {"skipped": False, "recommended": {"fp4_gemm_backend": "flashinfer_cudnn", "moe_runner_backend": None}}


def _manifest(root, rel, model):
    """releases/<rel>/manifest.json as sglang_release writes it (the parts a rollback reads)."""
    manifest = {"schema": 1, "release": {"id": rel, "dir": str(root / "releases" / rel)}, "model": model}
    if SERVICE[rel] is not None:
        manifest["service"] = {"kv_cache_dtype": "bf16", "settings": SERVICE[rel]}
        (root / "releases" / rel / "probe.json").write_text(json.dumps(PROBE_B))
    (root / "releases" / rel / "manifest.json").write_text(json.dumps(manifest, indent=2))


@pytest.fixture
def tree(tmp_path):
    """<tmp>/sglang/releases/{A,B}, current -> B (the new release), previous -> A (the one before)."""
    root = tmp_path / "sglang"
    for rel in ("A", "B"):
        (root / "releases" / rel).mkdir(parents=True)
        (root / "releases" / rel / "release-key.json").write_text('{"id": "%s"}\n' % rel)
        _manifest(root, rel, MODELS[rel])
    os.symlink(str(root / "releases" / "B"), str(root / "current"))
    os.symlink(str(root / "releases" / "A"), str(root / "previous"))
    return root


def _target(root, link):
    path = root / link
    return os.path.basename(os.readlink(str(path))) if os.path.islink(str(path)) else None


def _run(tmp_path, root, entry_point, play=PLAY, **extra):
    """Run the entry point; return (rc, {task name: result}, stats, raw stdout)."""
    pb = tmp_path / "play.yml"
    pb.write_text(play)
    # the json callback replaces ansible.cfg's callbacks_enabled too: no profile_tasks text in the JSON
    env = {"LC_ALL": "C.UTF-8", "ANSIBLE_STDOUT_CALLBACK": "ansible.builtin.json",
           "ANSIBLE_CALLBACKS_ENABLED": "ansible.builtin.json"}
    vars_ = dict(extra, entry_point=entry_point, sglang_stack_root=str(root),
                 sglang_release_owner=pwd.getpwuid(os.getuid()).pw_name,
                 sglang_release_group=grp.getgrgid(os.getgid()).gr_name)
    proc = ansible_run.playbook(pb, tmp_path, extra_vars=vars_, env=env)
    try:
        out = json.loads(proc.stdout)
    except ValueError:
        raise AssertionError("no JSON from ansible-playbook (rc %d):\n%s\n%s"
                             % (proc.returncode, proc.stdout[-3000:], proc.stderr[-3000:]))
    tasks = {}
    for task in out["plays"][0]["tasks"]:
        name = task["task"]["name"].split(" : ", 1)[-1]
        tasks[name] = task["hosts"]["localhost"]
    return proc.returncode, tasks, out["stats"]["localhost"], proc.stdout


def _failure(tasks):
    failed = [res for res in tasks.values() if res.get("failed")]
    assert len(failed) == 1, tasks
    return failed[0]["msg"]


def _auto_rollback(tmp_path, root):
    return _run(tmp_path, root, "rollback", sglang_release_rollback_reason="rollout: Run the health checks: exit 1")


def test_automatic_rollback_marks_the_failed_release_and_removes_previous(tmp_path, tree):
    rc, tasks, stats, _stdout = _auto_rollback(tmp_path, tree)
    assert rc == 0, tasks
    assert _target(tree, "current") == "A"
    assert not os.path.lexists(str(tree / "previous"))
    marker = tree / "releases" / "B" / MARKER
    data = json.loads(marker.read_text())
    assert data["reason"] == "rollout: Run the health checks: exit 1"
    assert data["release"] == "B" and data["returned_to"] == "A" and data["host"] == "localhost"
    assert data["rolled_back_at"].endswith("Z") and data["rolled_back_at"][:2] == "20"
    assert oct(marker.stat().st_mode & 0o777) == "0o644"
    assert not (tree / "releases" / "A" / MARKER).exists()
    assert tasks["Mark the release rolled back from as failed (automatic rollback)"]["changed"] is True
    # `previous` (which named B) was removed, not pointed at B again
    assert tasks["Keep the release rolled back from as `previous` (operator rollback) or remove `previous` (automatic"
                 " rollback)"]["changed"] is True
    assert stats["failures"] == 0


def test_plain_rollback_after_an_automatic_one_refuses_and_changes_nothing(tmp_path, tree):
    assert _auto_rollback(tmp_path, tree)[0] == 0
    before = (tree / "releases" / "B" / MARKER).read_text()
    rc, tasks, stats, _stdout = _run(tmp_path, tree, "rollback")
    assert rc != 0
    msg = _failure(tasks)
    assert "nothing to roll back to on localhost" in msg
    assert "-e sglang_release_rollback_to=<release id>" in msg
    assert "%s/releases/" % tree in msg
    assert stats["changed"] == 0
    assert _target(tree, "current") == "A"
    assert not os.path.lexists(str(tree / "previous"))
    assert (tree / "releases" / "B" / MARKER).read_text() == before


def test_rollback_to_the_failed_release_needs_allow_failed(tmp_path, tree):
    assert _auto_rollback(tmp_path, tree)[0] == 0
    rc, tasks, stats, _stdout = _run(tmp_path, tree, "rollback", sglang_release_rollback_to="B")
    assert rc != 0
    msg = _failure(tasks)
    assert "refusing to roll localhost back to release B" in msg
    assert "reason: rollout: Run the health checks: exit 1" in msg
    assert "sglang_release_rollback_allow_failed=true" in msg
    assert stats["changed"] == 0
    assert _target(tree, "current") == "A"

    rc, tasks, stats, _stdout = _run(tmp_path, tree, "rollback", sglang_release_rollback_to="B",
                                     sglang_release_rollback_allow_failed=True)
    assert rc == 0, tasks
    assert _target(tree, "current") == "B"
    assert _target(tree, "previous") == "A"      # an operator rollback: the release left becomes `previous`
    # the operator vouched for B: its marker goes, so a later automatic rollback may return to it
    assert not (tree / "releases" / "B" / MARKER).exists()


def test_hand_written_marker_is_shown_as_the_reason(tmp_path, tree):
    (tree / "releases" / "A" / MARKER).write_text("bad build, do not use\n")
    rc, tasks, dummy_stats, _stdout = _run(tmp_path, tree, "rollback")
    assert rc != 0
    assert "(reason: bad build, do not use)" in _failure(tasks)
    assert _target(tree, "current") == "B" and _target(tree, "previous") == "A"


def test_operator_rollback_swaps_current_and_previous(tmp_path, tree):
    rc, tasks, stats, _stdout = _run(tmp_path, tree, "rollback")
    assert rc == 0, tasks
    assert (_target(tree, "current"), _target(tree, "previous")) == ("A", "B")
    assert not (tree / "releases" / "B" / MARKER).exists()
    assert stats["changed"] == 2                  # current and previous
    rc, tasks, dummy_stats, _stdout = _run(tmp_path, tree, "rollback")
    assert rc == 0, tasks
    assert (_target(tree, "current"), _target(tree, "previous")) == ("B", "A")   # twice: back where it was


def test_switch_refuses_a_marked_release_until_allowed_then_clears_the_marker(tmp_path, tree):
    assert _auto_rollback(tmp_path, tree)[0] == 0
    release_b = str(tree / "releases" / "B")
    rc, tasks, stats, _stdout = _run(tmp_path, tree, "switch", sglang_release_dir=release_b)
    assert rc != 0
    msg = _failure(tasks)
    assert "refusing to make release B live" in msg and "rollout: Run the health checks: exit 1" in msg, msg
    assert "sglang_release_rollback_allow_failed=true" in msg
    assert stats["changed"] == 0 and _target(tree, "current") == "A"
    assert (tree / "releases" / "B" / MARKER).exists()

    rc, tasks, stats, _stdout = _run(tmp_path, tree, "switch", sglang_release_dir=release_b,
                                     sglang_release_rollback_allow_failed=True)
    assert rc == 0, tasks
    done = "Remove the failed-rollout marker from the release made live (allowed again)"
    assert tasks[done]["changed"] is True
    assert not (tree / "releases" / "B" / MARKER).exists()
    assert (_target(tree, "current"), _target(tree, "previous")) == ("B", "A")

    rc, tasks, stats, _stdout = _run(tmp_path, tree, "switch", sglang_release_dir=release_b)   # unmarked: no change
    assert rc == 0, tasks
    assert tasks[done]["changed"] is False
    assert stats["changed"] == 0


# ------------------------------------------------------------------------------------- the model of the release

RECORD = "Record the rollback (the release returned to, and the model it recorded, are the stack contract's from here on)"
CHOOSE = "Choose the release to return to and refuse a missing one, a failed one or one whose model is not recorded"


def _rolled_back(tasks):
    return tasks[RECORD]["ansible_facts"]["sglang_release_rolled_back"]


def _published_model(tasks):
    return tasks[RECORD].get("ansible_facts", {}).get("sglang_stack_model_path")


def test_rollback_publishes_the_model_the_release_returned_to_recorded(tmp_path, tree):
    rc, tasks, _stats, _stdout = _run(tmp_path, tree, "rollback", sglang_stack_model_path="/configured/now")
    assert rc == 0, tasks
    model = _rolled_back(tasks)["model"]
    assert model == dict(MODELS["A"], recorded=True, problem=None), model
    assert _published_model(tasks) == MODELS["A"]["path"]        # not the configured /configured/now
    rc, tasks, _stats, _stdout = _run(tmp_path, tree, "rollback")  # and back: B's Hub id, no environment recorded
    assert rc == 0, tasks
    model = _rolled_back(tasks)["model"]
    assert (model["recorded"], model["path"], model["service_env"], model["revision"]) == (True, "acme/m2", None, None)
    assert _published_model(tasks) == "acme/m2"


def test_rollback_publishes_the_service_settings_and_probe_the_release_returned_to_recorded(tmp_path, tree):
    # A's manifest predates the settings and A has no probe.json: both null (the configured ones stay), said so
    rc, tasks, _stats, _stdout = _run(tmp_path, tree, "rollback")
    assert rc == 0, tasks
    rolled = _rolled_back(tasks)
    assert rolled["service"] is None and rolled["probe"] is None, rolled
    served = tasks["Say which model the release returned to is served with"]["msg"]
    assert "it records no service settings: the configured ones are rendered" in served, served
    assert served.endswith("no probe result in it (probe.json): the backends are chosen without one"), served
    # back to B: its settings as recorded, its own probe result
    rc, tasks, _stats, _stdout = _run(tmp_path, tree, "rollback")
    assert rc == 0, tasks
    assert _rolled_back(tasks)["service"] == SERVICE["B"] and _rolled_back(tasks)["probe"] == PROBE_B
    served = tasks["Say which model the release returned to is served with"]["msg"]
    assert served.endswith("with the service settings it recorded (fp4_gemm_backend=flashinfer_cutlass, "
                           "kv_cache_dtype=fp8_e4m3, moe_runner_backend=, render_fp4_flags=false) and its own probe "
                           "result"), served


@pytest.mark.parametrize("settings", [
    "not a mapping", {"kv_cache_dtype": "bf16"}, dict(SERVICE["B"], render_fp4_flags="yes"),
    dict(SERVICE["B"], fp4_gemm_backend=None)])
def test_service_settings_not_of_the_recorded_shape_count_as_not_recorded(tmp_path, tree, settings):
    manifest = json.loads((tree / "releases" / "A" / "manifest.json").read_text())
    manifest["service"] = {"kv_cache_dtype": "bf16", "settings": settings}
    (tree / "releases" / "A" / "manifest.json").write_text(json.dumps(manifest))
    rc, tasks, _stats, _stdout = _run(tmp_path, tree, "rollback")
    assert rc == 0 and _rolled_back(tasks)["service"] is None, tasks


@pytest.mark.parametrize("write, why", [
    (None, "cannot be read"),                                            # no manifest.json at all
    ('{"schema": 1, "release": {"id": "A"}}', "records no model"),       # written before manifests recorded it
    ('{"schema": 1, "model": {"path": ""}}', "records no model"),
    ('{"schema": 1, "model": ', "is not valid JSON"),
    ("[1, 2]", "is not a JSON object"),
    (b'{"model": {"path": "/srv/\xff"}}', "is not UTF-8: byte 0xff at offset 25"),
])
def test_rollback_to_a_release_without_a_recorded_model_is_refused_until_told(tmp_path, tree, write, why):
    target = tree / "releases" / "A" / "manifest.json"
    target.unlink()
    if isinstance(write, bytes):
        target.write_bytes(write)
    elif write is not None:
        target.write_text(write)
    rc, tasks, stats, _stdout = _run(tmp_path, tree, "rollback", sglang_stack_model_path="/configured/now")
    assert rc != 0
    msg = _failure(tasks)
    assert "refusing to roll localhost back to release A: the model it served is not known" in msg, msg
    assert why in msg and str(target) in msg, msg
    assert "with the model configured now (/configured/now)" in msg, msg
    assert "-e sglang_release_rollback_unrecorded_model=configured" in msg, msg
    assert stats["changed"] == 0
    assert (_target(tree, "current"), _target(tree, "previous")) == ("B", "A")      # nothing moved


def test_told_to_serve_the_configured_model_the_rollback_goes_ahead(tmp_path, tree):
    (tree / "releases" / "A" / "manifest.json").write_text('{"schema": 1, "release": {"id": "A"}}')
    why = "records no model"
    rc, tasks, _stats, _stdout = _run(tmp_path, tree, "rollback", sglang_stack_model_path="/configured/now",
                                      sglang_release_rollback_unrecorded_model="configured")
    assert rc == 0, tasks
    assert (_target(tree, "current"), _target(tree, "previous")) == ("A", "B")
    model = _rolled_back(tasks)["model"]
    assert model["recorded"] is False and why in model["problem"], model
    said = json.dumps(tasks[CHOOSE].get("warnings"))   # the module's warning
    assert "served with the configured model /configured/now" in said, said
    assert _published_model(tasks) == "/configured/now"


def test_a_bad_unrecorded_model_choice_fails_before_anything_moves(tmp_path, tree):
    rc, tasks, stats, stdout = _run(tmp_path, tree, "rollback", sglang_release_rollback_unrecorded_model="inventory")
    assert rc != 0
    assert "sglang_release_rollback_unrecorded_model" in stdout and "refuse, configured" in stdout, stdout[-2000:]
    assert stats["changed"] == 0 and _target(tree, "current") == "B"
