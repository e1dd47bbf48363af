#!/usr/bin/env bash
# What one task costs on this machine (a measurement, not a test): the fixed prices a no-op converge pays
# for its drift checks. One fresh sandbox host (SSH with pipelining, as inventories/sandbox), one playbook of
#   - 20 module runs of the same builtin module (ansible.builtin.stat),
#   - 20 controller-only tasks (assert) and 20 skipped tasks,
#   - 11 modules used twice each: the first use also builds the module's AnsiballZ payload on the controller (once
#     per ansible-playbook run and module), the second does not,
# and the module's own time in the container (AnsiballZ_stat.py run there 20 times, kept with
# ANSIBLE_KEEP_REMOTE_FILES). With TASK_KINDS_TSV=<file> from a no-op rerun (tests/bench/noop_ratio.sh keeps one), it
# also prices that rerun: module runs x module cost + distinct modules x build cost + controller and skipped tasks.
# Writes docs/benchmarks/task-cost-<date>.md (OUT_MD to override). A few minutes; needs `make deps image`.
# The container is bw-cost-1: never run two at once (on the lab machine: molecule-locked bash -c '...' _ -s cost-bench).
set -euo pipefail
cd "$(dirname "$0")/../.."
ROOT=$PWD
ANSIBLE_PLAYBOOK=${ANSIBLE_PLAYBOOK:-$ROOT/.venv/bin/ansible-playbook}
IMAGE=${BLACKWELL_SANDBOX_IMAGE:-localhost/blackwell-sandbox:bookworm}
CONNECTION=ssh
WORK=$(mktemp -d /tmp/cost-bench.XXXXXX)
OUT=${OUT_MD:-$ROOT/docs/benchmarks/task-cost-$(date -u +%Y%m%d).md}
RERUN_TSV=${TASK_KINDS_TSV:-}
export ANSIBLE_COLLECTIONS_PATH=$ROOT/collections ANSIBLE_CONFIG=$ROOT/ansible.cfg
export ANSIBLE_CACHE_PLUGIN_CONNECTION=$WORK/facts ANSIBLE_CALLBACK_PLUGINS=$ROOT/tests/bench/callback_plugins
export ANSIBLE_CALLBACKS_ENABLED=blackwell.sglang.preload,task_kinds
NAME=bw-cost
# shellcheck source=tests/bench/sandbox_hosts.sh
. "$ROOT/tests/bench/sandbox_hosts.sh"
trap 'bench_down "$NAME" 1' EXIT
KEY=$(bash "$ROOT/tests/sandbox/ssh-setup.sh" "$IMAGE")
bench_inventory "$WORK/inv.yml" cost "$NAME" 1 >/dev/null
bench_up cost "$NAME" 1

MODULES="ansible.builtin.ping: {}
ansible.builtin.file: {path: /etc/hostname}
ansible.builtin.getent: {database: passwd, key: root}
ansible.builtin.slurp: {src: /etc/hostname}
ansible.builtin.find: {paths: /etc, patterns: hostname}
ansible.builtin.command: {argv: [/bin/true]}
ansible.builtin.systemd_service: {name: systemd-journald.service}
blackwell.sglang.host_facts: {stat_paths: {x: /etc}}
blackwell.sglang.managed_files: {directories: [{path: /etc, mode: '0755'}]}
blackwell.sglang.venv_stamp: {path: /nonexistent.json}
blackwell.sglang.gpu_health: {kernel_log_source: none}"
{
  echo "- hosts: all"
  echo "  gather_facts: false"
  echo "  tasks:"
  echo "    - {name: warm-up, ansible.builtin.stat: {path: /etc/hostname}}"
  for i in $(seq 1 20); do echo "    - {name: module-$i, ansible.builtin.stat: {path: /etc/hostname}}"; done
  for i in $(seq 1 20); do echo "    - {name: controller-$i, ansible.builtin.assert: {that: [1 == 1], quiet: true}}"; done
  for i in $(seq 1 20); do echo "    - {name: skipped-$i, ansible.builtin.stat: {path: /etc/hostname}, when: false}"; done
  n=0
  while IFS= read -r mod; do
    n=$((n + 1))
    for use in first second; do echo "    - {name: 'build-$n-$use', $mod, check_mode: true}"; done
  done <<< "$MODULES"
} > "$WORK/cost.yml"

TASK_KINDS_TSV=$WORK/cost.tsv "$ANSIBLE_PLAYBOOK" -i "$WORK/inv.yml" "$WORK/cost.yml" > "$WORK/cost.log" 2>&1 \
  || { tail -30 "$WORK/cost.log" >&2; exit 1; }
# the module's own time: the same stat payload run in the container (no SSH, no controller)
ANSIBLE_KEEP_REMOTE_FILES=1 ANSIBLE_PIPELINING=0 "$ROOT/.venv/bin/ansible" -i "$WORK/inv.yml" all -m ansible.builtin.stat \
  -a path=/etc/hostname > "$WORK/keep.log" 2>&1 || { tail -20 "$WORK/keep.log" >&2; exit 1; }
remote=$(podman exec "$NAME-1" bash -c 'f=$(ls -d ~/.ansible/tmp/*/AnsiballZ_stat.py | head -1)
  s=$(date +%s%N); for i in $(seq 20); do /usr/bin/python3 "$f" >/dev/null; done; e=$(date +%s%N)
  echo $(( (e - s) / 20000000 ))')
python_start=$(podman exec "$NAME-1" bash -c 's=$(date +%s%N); for i in $(seq 20); do /usr/bin/python3 -c pass; done
  e=$(date +%s%N); echo $(( (e - s) / 20000000 ))')

python3 - "$WORK/cost.tsv" "$RERUN_TSV" "$remote" "$python_start" > "$WORK/table.md" <<'PY'
import statistics
import sys

rows = [line.rstrip("\n").split("\t") for line in open(sys.argv[1], encoding="utf-8")]
by_name = {r[6]: float(r[3]) for r in rows}
med = lambda prefix: statistics.median(v for k, v in by_name.items() if k.startswith(prefix + "-") and "build" not in k)
module, controller, skipped = med("module"), med("controller"), med("skipped")
builds = sorted((by_name["build-%d-first" % i] - by_name["build-%d-second" % i], i)
                for i in range(1, 12) if "build-%d-first" % i in by_name)
build = statistics.median(b for b, _ in builds)
remote_s, start_s = int(sys.argv[3]) / 1000.0, int(sys.argv[4]) / 1000.0
print("| price | median (s) | how measured |")
print("|---|---|---|")
print("| a module run on the host (stat), task time | %.3f | 20 identical tasks |" % module)
print("| of which the module itself in the container | %.3f | AnsiballZ_stat.py run 20 times there (python start alone %.3f s): "
      "AnsiballZ imports ansible's module_utils from its zip and compiles them on every run |" % (remote_s, start_s))
print("| building a module's payload, first use per run | %.3f | first minus second use of 11 modules (range %.2f-%.2f) |"
      % (build, builds[0][0], builds[-1][0]))
print("| a controller-only task (assert) | %.3f | 20 tasks |" % controller)
print("| a skipped task | %.3f | 20 tasks |" % skipped)
if sys.argv[2]:
    rerun = [line.rstrip("\n").split("\t") for line in open(sys.argv[2], encoding="utf-8")]
    count = {k: sum(1 for r in rerun if r[2] == k) for k in ("module", "controller", "skipped")}
    took = {k: sum(float(r[3]) for r in rerun if r[2] == k) for k in ("module", "controller", "skipped")}
    distinct = len({r[4] for r in rerun if r[2] == "module"})
    priced = count["module"] * module + distinct * build + count["controller"] * controller + count["skipped"] * skipped
    print()
    print("The no-op rerun of %s, priced: %d module tasks x %.2f s + %d distinct modules x %.2f s + %d controller tasks x "
          "%.3f s + %d skipped x %.3f s = **%.0f s** of task time (measured there: %.0f s; module tasks %.0f s, controller "
          "%.0f s, skipped %.0f s). Module tasks that read a venv or run a command cost more than a stat."
          % (sys.argv[2].rsplit("/", 1)[-1], count["module"], module, distinct, build, count["controller"], controller,
             count["skipped"], skipped, priced, sum(took.values()), took["module"], took["controller"], took["skipped"]))
PY

cat > "$OUT" <<MD
# What a task costs, $(date -u +%Y-%m-%d)

Machine: $(nproc) cores, $(free -g | awk '/Mem:/{print $2}') GiB RAM, $(. /etc/os-release; echo "$PRETTY_NAME"), load average before $(uptime | sed -E 's/.*load average: //').
Commit: $(git rev-parse --short HEAD). ansible-core $("$ROOT/.venv/bin/python" -c 'import ansible.release as r; print(r.__version__)'), controller Python $("$ROOT/.venv/bin/python" -c 'import platform; print(platform.python_version())'), host Python $(podman exec "$NAME-1" /usr/bin/python3 -c 'import platform; print(platform.python_version())').
One sandbox host of $IMAGE over SSH (pipelining, ControlPersist; tests/sandbox/ssh-proxy.sh). Script: tests/bench/task_cost.sh.

$(cat "$WORK/table.md")
MD
cat "$OUT"
echo "logs: $WORK"
