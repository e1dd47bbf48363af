"""blackwell.sglang.preload (plugins/callback/preload.py): every filter and the action plugin load in the main
process, and a task using one of our filters then costs what a task with builtin filters does.

ansible-playbook runs for real on localhost with the shipped ansible.cfg (which enables the callback) and with the
callback left out. Timing is compared within one run only (a collection-filter assert against a builtin one of the
same play), never against a fixed number of seconds.
"""

import importlib
import pathlib
import re

import ansible_run
from ansible_run import ROOT

FILTER_DIR = pathlib.Path(ROOT) / "plugins" / "filter"


def defined_filters():
    names = []
    for path in sorted(FILTER_DIR.glob("*.py")):
        module = importlib.import_module("ansible_collections.blackwell.sglang.plugins.filter." + path.stem)
        names.extend(module.FilterModule().filters())
    return names


def play(tmp_path, callbacks):
    tasks = [{"name": "warm-up", "ansible.builtin.debug": {"msg": "first task"}}]
    for i in range(4):
        tasks.append({"name": "builtin-%d" % i, "ansible.builtin.assert": {
            "that": "_values | dict2items | length == 2", "quiet": True}})
        tasks.append({"name": "ours-%d" % i, "ansible.builtin.assert": {
            "that": "_values | blackwell.sglang.input_problems('positive') | length == 0", "quiet": True}})
    proc = ansible_run.play(tmp_path, tasks, name="p", vars={"_values": {"a": 1, "b": 2}}, args=["-vvv"],
                            env={"ANSIBLE_CALLBACKS_ENABLED": callbacks, "PROFILE_TASKS_TASK_OUTPUT_LIMIT": "all"})
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    times = {m.group(1): float(m.group(2)) for m in re.finditer(r"^(builtin-\d|ours-\d) -+ ([0-9.]+)s$", proc.stdout, re.M)}
    assert len(times) == 8, proc.stdout[-3000:]
    return proc.stdout, times


def total(times, prefix):
    return sum(v for k, v in times.items() if k.startswith(prefix))


def test_the_shipped_config_enables_it():
    text = (pathlib.Path(ROOT) / "ansible.cfg").read_text()
    assert re.search(r"^callbacks_enabled = .*blackwell\.sglang\.preload", text, re.M)
    assert "blackwell.sglang.preload" in (pathlib.Path(ROOT) / "molecule" / "_shared" / "config.yml").read_text()


def test_every_filter_and_the_action_plugin_load_in_the_main_process(tmp_path):
    out, _times = play(tmp_path, "ansible.posix.profile_tasks,blackwell.sglang.preload")
    match = re.search(r"blackwell\.sglang\.preload: (\d+) plugins loaded in [0-9.]+ s(.*)$", out, re.M)
    assert match, out[:3000]
    actions = len(list((pathlib.Path(ROOT) / "plugins" / "action").glob("[!_]*.py")))
    assert int(match.group(1)) == len(defined_filters()) + actions and actions >= 1
    assert "not found" not in match.group(2)


def test_a_task_with_our_filter_then_costs_what_a_builtin_one_does(tmp_path):
    _out, with_preload = play(tmp_path, "ansible.posix.profile_tasks,blackwell.sglang.preload")
    _out, without = play(tmp_path, "ansible.posix.profile_tasks")
    # without the callback each worker imports our filters again: clearly dearer than the builtin asserts beside it
    assert total(without, "ours") > total(without, "builtin") + 0.2, without
    # with it, within noise of them (0.25 s over the whole play is a wide margin for that noise)
    assert total(with_preload, "ours") < total(with_preload, "builtin") + 0.25, with_preload
