"""Stage tags of playbooks/site.yml and playbooks/rollout.yml, checked through ansible-playbook's own selection.

``ansible-playbook --list-tags`` must list every stage tag; ``--list-tasks --tags <stage>`` must select the tasks of
that stage's roles and of no other stage's roles (the selection of every stage is computed from one ``--list-tasks``
listing by Ansible's rule, which two real ``--tags`` runs confirm: twelve runs would take a minute). Besides the stage tags, two tags run on any selection:

* ``always`` on the preflight (its facts) and on the staging of the release directory (the release id and paths every
  later stage reads), skippable with ``--skip-tags preflight`` / ``--skip-tags release``;
* the probe gate runs with ``service``: `current` never moves to a release whose FP4 probe did not run and pass.

site.yml composes with ``import_role`` (of sglang_converge, which imports the stage roles): the listing shows the
role's own tasks, so the test reads the role of each selected task. rollout.yml imports sglang_rollout, whose stages
are ``include_role`` of sglang_converge's task files: the listing shows the include task only, so the test maps each
selected include to its stage role through the YAML (playbook and chain-role task files, read by
tests/unit/_playbook_standins.py), and checks statically that every include passes its tags on with ``apply``
(without it the role's tasks are skipped under ``--tags``) and that every rescue task is ``always`` (a rollback must
never be filtered out). The chain roles' own tasks (sglang_converge, sglang_rollout: what the playbooks held before)
count as the playbook's. Runs on the controller only (no host is contacted).
"""

from __future__ import annotations

import re

import pytest

import _playbook_standins as standins
import ansible_run

SITE = "playbooks/site.yml"
ROLLOUT = "playbooks/rollout.yml"
INVENTORY = "inventories/sandbox"
STAGES = ("preflight", "toolchain", "torch", "flashinfer", "sglang", "kernel", "probe", "service", "model", "gateway",
          "monitoring", "manifest")
# Roles whose tasks run on any --tags selection (tagged `always` by the playbooks): the preflight, the release
# staging, and sglang_model's read-only service_env hand-over (it runs only when the model role ran, docs/model.md).
ALWAYS_ROLES = {"preflight", "sglang_release", "sglang_model"}
# Stage tag -> roles whose tasks carry that tag (the role's entry points the playbooks call with it).
EXPECTED = {
    "preflight": {"preflight", "sglang_monitoring", "sglang_service"},   # + health gate, multi-node check
    "toolchain": {"cuda_toolchain"},
    "torch": {"torch_nightly"},
    "flashinfer": {"flashinfer"},
    "sglang": {"sglang_source"},
    "kernel": {"sgl_kernel_sm120"},
    "probe": {"fp4_probe"},
    # going live: probe + gate, check, switch, GPU policy, the unit, the manifest (rollout: drain/undrain too)
    "service": {"fp4_probe", "sglang_service", "sglang_release", "sglang_monitoring"},
    "model": {"sglang_model"},
    "gateway": {"sglang_gateway"},
    "monitoring": {"sglang_monitoring"},
    "manifest": {"sglang_release"},
}
# rollout.yml differs: its service stage drains and undrains the worker at the gateways and sets no GPU policy.
ROLLOUT_EXPECTED = dict(EXPECTED, service={"fp4_probe", "sglang_service", "sglang_release", "sglang_gateway"})
# rollout.yml's recovery (its rescue and the multi-node return block) is `always`: it calls any role.
RECOVERY_BLOCK = "Return a multi-node server with a failed member as one"
PLAYBOOK_LINE = re.compile(r"^playbook: (\S+)$")
TASK_LINE = re.compile(r"^ {6}(?:(?P<role>[\w.]+) : )?(?P<name>.*?)\tTAGS: \[(?P<tags>[^\]]*)\]$")


def _ansible_playbook(playbook, *args):
    proc = ansible_run.playbook(playbook, inventory=INVENTORY, args=args, env={"ANSIBLE_FORCE_COLOR": "0"})
    assert proc.returncode == 0, proc
    return proc.stdout


def _parse_listing(out):
    """{playbook: [(role or None, task name, frozenset(tags))]} of an --list-tasks output."""
    listing, current = {}, None
    for line in out.splitlines():
        match = PLAYBOOK_LINE.match(line)
        if match:
            current = listing.setdefault(match.group(1), [])
            continue
        match = TASK_LINE.match(line)
        if match and current is not None:
            role = match.group("role")
            role = role.rsplit(".", 1)[-1] if role else None
            tags = frozenset(t.strip() for t in match.group("tags").split(",") if t.strip())
            # the chain roles' own tasks are the playbook's (they held them before the chain became roles)
            current.append((None if role in standins.CHAIN_ROLES else role, match.group("name"), tags))
    return listing


def _selected(listing, stage):
    """The tasks ``--tags <stage>`` selects, by Ansible's rule for these playbooks' tags (no never/all/tagged):
    a task runs when it carries the stage tag or `always`. test_selection_rule_matches_ansible checks this rule
    against ansible-playbook's own selection."""
    return {playbook: [t for t in tasks if stage in t[2] or "always" in t[2]] for playbook, tasks in listing.items()}


@pytest.fixture(scope="module", name="listing")
def fixture_listing():
    """{playbook: [(role, name, tags)]} of every task (``--list-tasks`` without --tags)."""
    return _parse_listing(_ansible_playbook(SITE, ROLLOUT, "--list-tasks"))


@pytest.fixture(scope="module", name="selections")
def fixture_selections(listing):
    """{stage: {playbook: [(role, name, tags)]}}."""
    return {stage: _selected(listing, stage) for stage in STAGES}


@pytest.mark.parametrize("stage", ["kernel", "service"])
def test_selection_rule_matches_ansible(listing, stage):
    """ansible-playbook --list-tasks --tags <stage> lists exactly the tasks _selected computes (one build stage, and
    the stage with the most roles)."""
    real = _parse_listing(_ansible_playbook(SITE, ROLLOUT, "--list-tasks", "--tags", stage))
    assert real == _selected(listing, stage)
    assert sum(len(t) for t in real.values()) < sum(len(t) for t in listing.values())


def _tasks(path):
    """Every task mapping of a playbook as (section, ancestors' names, inherited tags, task); section is 'rescue'
    inside a rescue; inherited tags are those of the enclosing blocks (a block's tags reach every task in it, also
    the tasks of a role included there)."""
    found = []

    def walk(tasks, section, ancestors, inherited):
        for task in tasks or []:
            found.append((section, ancestors, inherited, task))
            for key in ("block", "rescue", "always"):
                if key in task:
                    walk(task[key], "rescue" if "rescue" in (section, key) else key, ancestors + (task.get("name"),),
                         inherited | frozenset(task.get("tags") or ()))

    for play in standins.static_plays(path):
        walk(play.get("tasks"), "tasks", (), frozenset(play.get("tags") or ()))
    return found


def _recovery_names(path):
    """Names of the tasks of the rescue sections and of the multi-node return block."""
    return {task.get("name") for section, ancestors, _inherited, task in _tasks(path)
            if section == "rescue" or RECOVERY_BLOCK in ancestors or task.get("name") == RECOVERY_BLOCK}


def _include_roles(path):
    """{task name: role name} of a playbook's include_role tasks (an include of sglang_converge's task file: the
    stage role that file calls)."""
    found = {}
    for _section, _ancestors, _inherited, task in _tasks(path):
        if "ansible.builtin.include_role" in task:
            _key, _args, role, entry = standins.role_call(task)
            found[task["name"]] = standins.converge_stage_role(entry) if role == "sglang_converge" else role
    return found


def test_list_tags_has_every_stage():
    out = _ansible_playbook(SITE, ROLLOUT, "--list-tags")
    per_playbook = {}
    current = None
    for line in out.splitlines():
        match = PLAYBOOK_LINE.match(line)
        if match:
            current = per_playbook.setdefault(match.group(1), set())
        elif "TASK TAGS: [" in line and current is not None:
            current.update(t.strip() for t in line.split("TASK TAGS: [", 1)[1].rstrip("]").split(",") if t.strip())
    assert set(per_playbook) == {SITE, ROLLOUT}, out
    for playbook, tags in per_playbook.items():
        assert set(STAGES) <= tags, "%s lacks the stage tags %s" % (playbook, sorted(set(STAGES) - tags))


@pytest.mark.parametrize("stage", STAGES)
def test_site_stage_selects_its_roles(selections, stage):
    includes = _include_roles(SITE)
    tasks = [(role or includes.get(name), name, tags) for role, name, tags in selections[stage][SITE]]
    tagged = {role for role, name, tags in tasks if role and stage in tags}
    assert tagged == EXPECTED[stage], "--tags %s selects the tasks of %s" % (stage, sorted(tagged))
    # the work of the stage's roles is selected, not only their argument-spec validation (which is always tagged)
    for role in EXPECTED[stage]:
        work = [name for r, name, tags in tasks if r == role and stage in tags and not name.startswith("Validating arguments")]
        assert work, "--tags %s lists no task of %s beyond its argument validation" % (stage, role)
    # everything else selected runs because it is `always`, and only the preflight and release staging are
    others = {role for role, name, tags in tasks
              if role and stage not in tags and not name.startswith("Validating arguments")}
    assert others <= ALWAYS_ROLES, "--tags %s also runs %s" % (stage, sorted(others - ALWAYS_ROLES))
    assert all("always" in tags for role, name, tags in tasks if stage not in tags)


def test_site_kernel_runs_only_the_kernel_build_after_the_common_steps(selections):
    roles = [role for role, name, tags in selections["kernel"][SITE] if role and not name.startswith("Validating arguments")]
    assert set(roles) == {"preflight", "sglang_release", "sgl_kernel_sm120"} | (ALWAYS_ROLES & set(roles))
    assert not {"cuda_toolchain", "torch_nightly", "flashinfer", "sglang_source", "fp4_probe", "sglang_service"} & set(roles)


@pytest.mark.parametrize("stage", STAGES)
def test_rollout_stage_selects_its_role_includes(selections, stage):
    includes = _include_roles(ROLLOUT)
    tasks = selections[stage][ROLLOUT]
    recovery = _recovery_names(ROLLOUT)
    roles = {includes[name] for role, name, tags in tasks if name in includes and stage in tags and name not in recovery}
    assert roles == ROLLOUT_EXPECTED[stage], "rollout.yml --tags %s selects the includes of %s" % (stage, sorted(roles))
    others = {includes[name] for role, name, tags in tasks if name in includes and stage not in tags and name not in recovery}
    assert others <= ALWAYS_ROLES, "rollout.yml --tags %s also runs %s" % (stage, sorted(others))


@pytest.mark.parametrize("path", [SITE, ROLLOUT])
def test_every_include_role_applies_its_tags(path):
    """An include_role's own tags select only the include: `apply` must hand the same tags to the role's tasks."""
    checked = 0
    for _section, _ancestors, inherited, task in _tasks(path):
        args = task.get("ansible.builtin.include_role")
        if args is None:
            continue
        checked += 1
        own = task.get("tags") or []
        assert own or inherited, "%s: include %r has no tags" % (path, task["name"])
        applied = (args.get("apply") or {}).get("tags") or []
        assert applied == own, "%s: include %r: apply.tags %r differ from its tags %r" % (path, task["name"], applied, own)
    assert checked > 0


def test_rollout_recovery_runs_on_any_selection():
    """The rescue and the multi-node return block run whatever --tags selected (a rollback is never filtered out)."""
    rescue = [(inherited, task) for section, _ancestors, inherited, task in _tasks(ROLLOUT) if section == "rescue"]
    assert len(rescue) >= 8
    for inherited, task in rescue:
        assert "always" in set(task.get("tags") or ()) | inherited, "rescue task %r is not tagged always" % task["name"]
    group = [task for _section, _ancestors, _inherited, task in _tasks(ROLLOUT) if task.get("name") == RECOVERY_BLOCK]
    assert len(group) == 1 and "always" in group[0].get("tags", []), "the multi-node return block is not tagged always"
