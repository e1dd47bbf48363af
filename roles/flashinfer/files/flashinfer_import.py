"""Import flashinfer and print JSON {"version": flashinfer.__version__, "seconds": import time}
(blackwell.sglang.flashinfer). On a host without a GPU the import still works: FlashInfer loads its CUDA
kernels lazily (JIT or cubin) on first use, not at import."""
import importlib
import json
import time


def main():
    start = time.monotonic()
    flashinfer = importlib.import_module("flashinfer")
    print(json.dumps({"version": getattr(flashinfer, "__version__", None),
                      "seconds": round(time.monotonic() - start, 2)}))


if __name__ == "__main__":
    main()
