#!/usr/bin/env bash
# The library check (blackwell.sglang.library_symbols) on the real CUDA wheels of the GPU machine: no false positive
set -uo pipefail
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/ansible_core-*.whl .whl/resolvelib-*.whl .whl/cryptography-*.whl .whl/cffi-*.whl .whl/pycparser-*.whl || exit 1
export PYTHONPATH=/tmp/site ANSIBLE_CONFIG=$PWD/ansible.cfg ANSIBLE_NOCOLOR=1 ANSIBLE_LOCAL_TEMP=/tmp/ans ANSIBLE_STDOUT_CALLBACK=ansible.builtin.minimal ANSIBLE_CALLBACKS_ENABLED=blackwell.sglang.preload
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
py=$(command -v python3)
for d in torch triton cupy-cuda13x nvidia-nccl-cu13 nvidia-cudnn-cu13 jaxlib; do
  s=$SECONDS
  python3 /tmp/site/bin/ansible localhost -c local -e "ansible_python_interpreter=$py" -m blackwell.sglang.library_symbols \
    -a "{\"python\": \"$py\", \"distributions\": [\"$d\"], \"library_dirs\": [\"/usr/local/cuda/lib64\"]}" > "$OUT/symbols-$d.json" 2>&1
  echo "$d rc=$? $((SECONDS-s))s $(python3 -c 'import json,sys; t=open(sys.argv[1]).read(); d=json.JSONDecoder().raw_decode(t[t.index("=> ")+3:])[0]; print("checked", d.get("checked"), "unresolved", d.get("unresolved"), (d.get("msg") or "")[:600])' "$OUT/symbols-$d.json")"
done
site=$(python3 -c 'import torch,os; print(os.path.dirname(os.path.dirname(torch.__file__)))')
echo "nm -D --undefined-only torch/lib/libtorch_cuda.so: $(nm -D --undefined-only "$site"/torch/lib/libtorch_cuda.so | wc -l) undefined"
nvidia-smi --query-gpu=name,compute_cap,driver_version --format=csv,noheader
