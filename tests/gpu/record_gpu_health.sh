#!/usr/bin/env bash
# Record gpu_health's verdict on a real GPU machine (the H200 device: no Ansible, Python 3.12, no network).
#
#   bash tests/gpu/record_gpu_health.sh            # from the repository root; results under $OUT (default ./out)
#
# Runs plugins/module_utils/_gpu_health.py directly (tests/gpu/gpu_health_record.py), then the gpu_health unit
# tests against the recording when pytest is there. To keep it as a fixture:
#   cp -r $OUT/gpu_health/h200_recorded tests/fixtures/gpu_health/
# (tests/unit/monitoring/test_gpu_health.py::test_h200_recorded_healthy_verdict then replays it through
# fake_nvidia_smi.py and expects the same healthy verdict).
set -u
cd "$(dirname "$0")/../.." || exit 1
OUT=${OUT:-$PWD/out}
dest=$OUT/gpu_health/h200_recorded
mkdir -p "$dest"
PY=${PYTHON:-python3}
echo "python: $($PY --version 2>&1); nvidia-smi: $(command -v nvidia-smi || echo none)"
timeout 300 "$PY" tests/gpu/gpu_health_record.py --out "$dest" --expected-gpu-count "${GPU_HEALTH_EXPECTED:-auto}" \
  2>&1 | tee "$dest/record.log"
rc=${PIPESTATUS[0]}
echo "record rc=$rc"
# A bounded-hang check on the real machine: a command that sleeps past its timeout is killed and reported.
timeout 60 "$PY" - <<'PY' 2>&1 | tee "$dest/timeout_check.log"
import sys, time
sys.path.insert(0, "tests/gpu")
import gpu_health_record as r
gh = r.load()
t = time.time()
res = gh.run_bounded(["sleep", "30"], 2)
print("timed_out=%s after %.1fs: %s" % (res.timed_out, time.time() - t, res.error))
PY
ls -l "$dest"
exit "$rc"
