"""The expected duration a benchmark level prints when it starts (``__sglang_benchmark_eta`` of
roles/sglang_benchmark/vars/main.yml, evaluated as level.yml evaluates it): prompts x output tokens / the baseline's
output tok/s at the level's concurrency, linear in log2(concurrency) between baseline points and flat beyond them;
null without a baseline."""

import json
import os

import ansible_run

ROLE_VARS = os.path.join(os.path.dirname(__file__), "..", "..", "..", "roles", "sglang_benchmark", "vars", "main.yml")
POINTS = [{"max_concurrency": 1, "output_throughput": 172}, {"max_concurrency": 64, "output_throughput": 2100}]
CASES = {
    # 16 prompts x 1024 tokens at 172 tok/s = 95.3 s -> 96
    "first_point": (1, 16, 1024, POINTS, 96),
    # log2 8 is half of log2 64: 172 + (2100 - 172) / 2 = 1136 tok/s; 16 x 1024 / 1136 = 14.4 -> 15
    "between": (8, 16, 1024, POINTS, 15),
    "beyond_the_last": (128, 512, 1024, POINTS, 250),
    "below_the_first": (1, 10, 100, [{"max_concurrency": 4, "output_throughput": 50}], 20),
    "unsorted_points": (8, 16, 1024, list(reversed(POINTS)), 15),
    "no_baseline": (2, 10, 100, None, None),
}


def test_level_eta_from_the_baseline_points(tmp_path):
    tasks = [{"name": "the role's vars", "ansible.builtin.include_vars": {"file": os.path.abspath(ROLE_VARS)}}]
    for case, (conc, prompts, output_len, points, _want) in CASES.items():
        task = {"name": "keep " + case, "ansible.builtin.set_fact": {"eta_" + case: "{{ __sglang_benchmark_eta }}"}}
        task["vars"] = {"sglang_benchmark_level": {"max_concurrency": conc, "num_prompts": prompts},
                        "sglang_benchmark_output_len": output_len}
        if points is not None:
            task["vars"]["sglang_benchmark_baseline"] = {"points": points}
        tasks.append(task)
    tasks.append({"name": "record", "ansible.builtin.copy": {
        "dest": str(tmp_path / "eta.json"), "mode": "0644",
        "content": "{{ {%s} | to_json }}" % ", ".join("'%s': eta_%s" % (c, c) for c in CASES)}})
    res = ansible_run.play(tmp_path, tasks)
    assert res.ok, res
    assert json.loads((tmp_path / "eta.json").read_text()) == {case: want[-1] for case, want in CASES.items()}
