#!/usr/bin/env bash
# Copyright: blackwell.sglang contributors
# Apache-2.0 (see LICENSE)
# Reproduce tests/fixtures/fp4/h200_sm90_probe.json on a GPU machine (run from the repository root).
#   PROBE_PYTHON  venv python with torch (default /opt/torch/.venv/bin/python3)
#   WHEELS        directory of wheels to install into /tmp/site first (flashinfer-python and its
#                 pure-Python deps, optionally ansible-core for the module path); skipped when absent
#   OUT           where results go (default /tmp/fp4out)
set -uo pipefail
OUT=${OUT:-/tmp/fp4out}
PY=${PROBE_PYTHON:-/opt/torch/.venv/bin/python3}
WHEELS=${WHEELS:-.whl-fp4}
mkdir -p "$OUT"
if [ -d "$WHEELS" ]; then
  "$PY" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site "$WHEELS"/*.whl || exit 3
  export PYTHONPATH=/tmp/site
fi
nvidia-smi -L | tee "$OUT/nvidia-smi.txt"
timeout 300 "$PY" - <<'PYEOF' 2>&1 | tee "$OUT/imports.txt"
import torch
print("torch", torch.__version__, "cuda", torch.version.cuda, "cc", torch.cuda.get_device_capability())
try:
    import flashinfer
    print("flashinfer", flashinfer.__version__)
except Exception as exc:
    print("flashinfer import failed:", type(exc).__name__, exc)
PYEOF
echo "== benchmark (runner shipped like the module does) =="
timeout 900 "$PY" tests/bench/fp4_probe_bench.py --python "$PY" --out "$OUT/h200_sm90_probe.json" 2>&1 | tee "$OUT/bench.log"
if [ -x /tmp/site/bin/ansible ]; then
  echo "== module through ansible (AnsiballZ) =="
  t0=$(date +%s)
  LC_ALL=C.UTF-8 ANSIBLE_CONFIG="$PWD/ansible.cfg" ANSIBLE_CALLBACK_RESULT_FORMAT=json \
    timeout 900 "$PY" /tmp/site/bin/ansible localhost -i localhost, -c local \
    -e "ansible_python_interpreter=$PY" -m blackwell.sglang.fp4_kernel_probe \
    -a "{\"python\": \"$PY\", \"environment\": {\"PYTHONPATH\": \"/tmp/site\"}}" > "$OUT/module_run.json" 2>"$OUT/module_run.err"
  echo "ansible rc=$? wall_s=$(( $(date +%s) - t0 ))" | tee "$OUT/module_run.rc"
  tail -c 600 "$OUT/module_run.err"
fi
if [ -n "${RUN_TESTS:-}" ]; then
  echo "== unit tests (fp4) on this machine =="
  timeout 400 "$PY" -m pytest -q -p no:cacheprovider tests/unit/fp4 -k "${PYTEST_K:-}" 2>&1 | tail -15 | tee "$OUT/pytest.txt"
fi
