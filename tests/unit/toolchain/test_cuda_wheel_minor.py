"""Field report B08 through cuda_toolchain's own task: every CUDA wheel must share the requested major.minor
(the resolver lets nvidia-cuda-nvcc float to 13.2 while the runtime stays at 13.0, and ptxas and the headers
then disagree). The real task of roles/cuda_toolchain/tasks/install_pip.yml runs once per case in one play."""

import json

import ansible_run

TASK = "Check nvcc was found and every CUDA wheel shares CUDA {{ sglang_stack_cuda_version }}"
CASES = {
    "mixed": ("13.0", {"nvidia-cuda-nvcc": "13.2.78", "nvidia-cuda-runtime": "13.0.96", "nvidia-nvvm": None}),
    "clean": ("13.0", {"nvidia-cuda-nvcc": "13.0.88", "nvidia-cuda-runtime": "13.0.96", "nvidia-cuda-cccl": "13.0.85",
                       "nvidia-cuda-crt": "13.0.88+local", "nvidia-nvvm": "13.0.88"}),
    "prefix_trap": ("13.1", {"nvidia-nvvm": "13.10.1", "nvidia-cuda-nvcc": "13.1.80"}),
}


def test_cuda_wheels_of_another_minor_or_missing_fail_naming_them(tmp_path):
    tasks = []
    for case, (version, dists) in CASES.items():
        task = ansible_run.role_task("cuda_toolchain", "install_pip.yml", TASK)
        task.pop("when")
        task["vars"].update({"sglang_stack_cuda_version": version,
                             "__cuda_toolchain_wheels": {"home": "/opt/cuda-wheels", "dists": dists}})
        tasks.append(dict(task, register="case_" + case, ignore_errors=True))
    tasks.append({"name": "record", "ansible.builtin.copy": {
        "dest": str(tmp_path / "cases.json"), "mode": "0644",
        "content": "{{ {%s} | to_json }}" % ", ".join(
            "'%s': {'failed': case_%s.failed | default(false), 'msg': case_%s.msg | default('')}" % (c, c, c)
            for c in CASES)}})
    res = ansible_run.play(tmp_path, tasks)
    assert res.ok, res
    cases = json.loads((tmp_path / "cases.json").read_text())
    assert cases["mixed"]["failed"] is True
    assert "CUDA wheels must all be 13.0.*" in cases["mixed"]["msg"]
    assert '"nvidia-cuda-nvcc": "13.2.78"' in cases["mixed"]["msg"] and '"nvidia-nvvm": null' in cases["mixed"]["msg"]
    assert "nvidia-cuda-runtime" not in cases["mixed"]["msg"]
    assert cases["clean"]["failed"] is False
    # 13.1 must not be confused with 13.10 (a string-prefix trap)
    assert cases["prefix_trap"]["failed"] is True and '"nvidia-nvvm": "13.10.1"' in cases["prefix_trap"]["msg"]
    assert "nvidia-cuda-nvcc" not in cases["prefix_trap"]["msg"]
