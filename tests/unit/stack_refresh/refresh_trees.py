"""The real SGLang trees of the upstream bundle, unpacked once per test module, and small hand-made trees."""

import json
import os
import tarfile
import textwrap

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))
UPSTREAM = os.environ.get("BLACKWELL_UPSTREAM") or os.path.join(os.path.dirname(ROOT), "shared", "upstream")
CONTRACT = os.path.join(ROOT, "roles", "sglang_stack", "defaults", "main.yml")
SKIP_REASON = ("the upstream source bundle is absent (looked in %s; set BLACKWELL_UPSTREAM): the real SGLang trees "
               "are only there" % UPSTREAM)


def shipped():
    """The presets the collection ships: sglang_stack_presets of the stack contract."""
    import yaml
    with open(CONTRACT, encoding="utf-8") as fh:
        return yaml.safe_load(fh)["sglang_stack_presets"]


def have_bundle():
    return os.path.isfile(os.path.join(UPSTREAM, "manifest.json"))


def pins():
    """The bundle's pins: name -> {commit, date, tarball} (manifest.json)."""
    with open(os.path.join(UPSTREAM, "manifest.json"), encoding="utf-8") as fh:
        manifest = json.load(fh)
    return manifest["pins"]


def unpack(pin, dest):
    """Unpack the SGLang tarball of ``pin`` (original / current) under ``dest``; returns the tree's root."""
    with tarfile.open(os.path.join(UPSTREAM, pin["tarball"])) as tar:
        tar.extractall(dest, filter="data")
    return os.path.join(str(dest), "sglang")


def small_tree(base, dependencies, kernel_name="sglang-kernel", kernel_version="0.4.6.post1",
               kernel_build=("scikit-build-core>=0.10", "torch>=2.8.0", "wheel"), layout="python/sglang/kernels/aot",
               choices=None):
    """A minimal SGLang tree: python/pyproject.toml with ``dependencies``, a kernel tree with its own pyproject, and
    optionally server_args.py with ``choices`` ({LIST_NAME: [values]})."""
    root = os.path.join(str(base), "sglang")
    kdir = os.path.join(root, *layout.split("/"))
    os.makedirs(os.path.join(kdir, "python", "sgl_kernel"))
    with open(os.path.join(kdir, "python", "sgl_kernel", "__init__.py"), "w") as fh:
        fh.write("# blackwell.sglang test tree\n")
    with open(os.path.join(root, "python", "pyproject.toml"), "w") as fh:
        fh.write('[project]\nname = "sglang"\ndependencies = [\n%s]\n'
                 % "".join("  %s,\n" % json.dumps(d) for d in dependencies))
    with open(os.path.join(kdir, "pyproject.toml"), "w") as fh:
        fh.write('[build-system]\nrequires = [%s]\n\n[project]\nname = "%s"\nversion = "%s"\n'
                 % (", ".join(json.dumps(b) for b in kernel_build), kernel_name, kernel_version))
    with open(os.path.join(kdir, "CMakeLists.txt"), "w") as fh:
        fh.write(textwrap.dedent("""\
            cmake_minimum_required(VERSION 3.26)
            project(sgl-kernel LANGUAGES CXX CUDA)
            """))
    if choices:
        srt = os.path.join(root, "python", "sglang", "srt")
        os.makedirs(srt)
        with open(os.path.join(srt, "server_args.py"), "w") as fh:
            for name, values in choices.items():
                fh.write("%s = %r\n" % (name, list(values)))
    return root


SERVICE = {"kv_cache_dtype": "bf16", "moe_runner_backend": "flashinfer_cutlass", "fp4_gemm_backend": "flashinfer_cutlass"}


def commit_date(pin):
    """The commit date of a bundle pin (the second field of its ``git_log`` line)."""
    return pin["git_log"].split()[1]


def run_module(args, tmp_path, timeout=300):
    """plugins/modules/sglang_stack_refresh.py as Ansible runs it (ANSIBLE_MODULE_ARGS file); its JSON result."""
    import subprocess
    import sys
    path = os.path.join(str(tmp_path), "module-args.json")
    with open(path, "w") as fh:
        json.dump({"ANSIBLE_MODULE_ARGS": args}, fh)
    env = dict(os.environ, PYTHONPATH=os.path.join(ROOT, "collections"))
    proc = subprocess.run([sys.executable, os.path.join(ROOT, "plugins", "modules", "sglang_stack_refresh.py"), path],
                          env=env, capture_output=True, text=True, timeout=timeout, check=False)
    try:
        return json.loads(proc.stdout)
    except ValueError:
        raise AssertionError("no JSON from the module (rc %s): %s %s" % (proc.returncode, proc.stdout, proc.stderr))
