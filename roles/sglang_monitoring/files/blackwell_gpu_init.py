# -*- coding: utf-8 -*-
# Installed by blackwell.sglang.sglang_monitoring: gpu_health's module_utils (_gpu.py, _gpu_health.py) as a package
# for the nvidia-smi textfile collector (blackwell_sglang_textfile.py gpu).
