"""Locate the CUDA toolkit tree the NVIDIA pip wheels installed (blackwell.sglang.cuda_toolchain).

Run with the venv's python; argv: the wheel distribution names. Prints JSON:
  {"home": "<dir holding bin/nvcc>" or null, "dists": {name: version or null}}
CUDA 13 wheels share one tree (site-packages/nvidia/cu13: bin, include, include/cccl, lib, nvvm); the nvcc
wheel's RECORD tells where its bin/nvcc landed, so no path is guessed.
"""
from importlib import metadata
import json
import os
import sys


def main(names):
    dists, home = {}, None
    for name in names:
        try:
            dist = metadata.distribution(name)
        except metadata.PackageNotFoundError:
            dists[name] = None
            continue
        dists[name] = dist.version
        for entry in dist.files or []:
            parts = entry.parts
            if len(parts) >= 2 and parts[-2:] == ("bin", "nvcc"):
                home = os.path.dirname(os.path.dirname(os.path.realpath(str(dist.locate_file(entry)))))
    print(json.dumps({"home": home, "dists": dists}, sort_keys=True))


if __name__ == "__main__":
    main(sys.argv[1:])
