#!/usr/bin/env bash
# Sourced by tests/run-suite.sh and tests/bench/fleet_converge.sh: busy_cpu prints the machine's busy CPU seconds since
# boot, whole seconds (/proc/stat's user, nice, system, irq, softirq and steal: every process, the containers'
# included, as they share this kernel). Two readings subtracted give the CPU a stretch of work used on all cores.
busy_cpu() { awk -v hz="$(getconf CLK_TCK)" '/^cpu /{printf "%d", ($2 + $3 + $4 + $7 + $8 + $9) / hz}' /proc/stat; }
