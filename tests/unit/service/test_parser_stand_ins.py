"""sglang_server_args' stand-in modules, run for real: the module's introspection script under a real Python, against
a small package tree shaped like SGLang d55f1c28e2 next to transformers 5 (no SGLang code, no torchvision):

- ``import sglang`` itself imports torchvision (sglang/__init__.py -> sglang.srt.utils.common), so the stand-in must
  apply to the package import, not only to ``sglang.srt.server_args``;
- a library that asks ``importlib.util.find_spec`` whether torchvision is there and, told yes, reads attributes of
  attributes (``InterpolationMode.NEAREST_EXACT``), imports deeper submodules (``torchvision.transforms.v2``) and
  parses ``torchvision.__version__`` (transformers 5's image_utils and image_processing_auto);
- the parser module registers an image processor whose library class refuses to work when that probe said no
  (transformers 5's AutoImageProcessor, which SGLang registers at import time).

The torchvision on the path fails to import as PyPI's CUDA build does next to CPU torch.
"""

import json
import sys
import textwrap

import ansible_run

TREE = {
    "torchvision/__init__.py": """
        raise RuntimeError("operator torchvision::nms does not exist")
    """,
    "imagelib/__init__.py": """
        import importlib.util

        HAS_TORCHVISION = importlib.util.find_spec("torchvision") is not None
        if HAS_TORCHVISION:
            import torchvision
            from torchvision.transforms import InterpolationMode
            from torchvision.transforms.v2 import functional as tv_functional

            MODES = {0: InterpolationMode.NEAREST_EXACT, 2: InterpolationMode.BILINEAR}
            VERSION = tuple(int(part) for part in torchvision.__version__.split("."))
            RESIZE = tv_functional.resize


        class AutoImageProcessor:
            registered = []

            @classmethod
            def register(cls, name):
                if not HAS_TORCHVISION:
                    raise ImportError("AutoImageProcessor requires the Torchvision library but it was not found")
                cls.registered.append(name)
    """,
    "sglang/__init__.py": """
        from sglang.srt.utils import common  # noqa: F401

        __version__ = "0.0.0.dev0+gd55f1c28e2"
    """,
    "sglang/srt/__init__.py": "",
    "sglang/srt/utils/__init__.py": """
        from sglang.srt.utils import common  # noqa: F401
    """,
    "sglang/srt/utils/common.py": """
        from torchvision.io import decode_jpeg  # noqa: F401
    """,
    "sglang/srt/server_args.py": """
        import imagelib

        imagelib.AutoImageProcessor.register("janus_pro")


        class ServerArgs:
            @staticmethod
            def add_cli_args(parser):
                parser.add_argument("--model-path", type=str)
                parser.add_argument("--kv-cache-dtype", choices=["auto", "bf16", "fp8_e4m3"], default="auto")
    """,
}


def fake_venv_python(tmp_path):
    """A python that sees the tree above first on its path (and nothing of the test's own directories)."""
    tree = tmp_path / "site"
    for rel, text in TREE.items():
        path = tree / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text).lstrip())
    python = tmp_path / "python"
    python.write_text("#!/bin/sh\nPYTHONPATH='%s' exec '%s' \"$@\"\n" % (tree, sys.executable))
    python.chmod(0o755)
    return str(python)


def run(tmp_path, stub_modules):
    return ansible_run.module_file("sglang_server_args", {
        "python": fake_venv_python(tmp_path), "args": ["--model-path", "/srv/models/m", "--kv-cache-dtype", "bf16"],
        "stub_modules": stub_modules}, tmp_path, timeout=60)


def test_the_stand_in_covers_the_package_import_and_the_probes_of_a_library(tmp_path):
    result = run(tmp_path, ["torchvision"])
    assert not result.get("failed"), json.dumps(result)[:2000]
    assert result["method"] == "ServerArgs.add_cli_args"
    assert result["version"] == "0.0.0.dev0+gd55f1c28e2"
    assert result["stubbed_modules"] == ["torchvision"]
    assert result["flags"]["--kv-cache-dtype"]["choices"] == ["auto", "bf16", "fp8_e4m3"]
    assert result["validated"]


def test_without_the_stand_in_the_parser_is_not_read_and_torchvision_is_named(tmp_path):
    result = run(tmp_path, [])
    assert result["failed"] is True
    assert "cannot read the installed SGLang's argument parser" in result["msg"]
    assert any("import sglang" in e and "torchvision" in e for e in result["errors"]), result["errors"]
