"""Print {name: installed version or null} as JSON for the distributions in argv (blackwell.sglang.flashinfer).

Reads importlib.metadata only: nothing is imported, so it is fast and works without a GPU.
"""
from importlib import metadata
import json
import sys


def version(name):
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return None


print(json.dumps({name: version(name) for name in sys.argv[1:]}, sort_keys=True))
