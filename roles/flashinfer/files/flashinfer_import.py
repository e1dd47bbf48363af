"""Import flashinfer and print JSON {"version": flashinfer.__version__, "seconds": import time}
(blackwell.sglang.flashinfer). On a host without a GPU the import still works: FlashInfer loads its CUDA
kernels lazily (JIT or cubin) on first use, not at import."""
import json
import time

start = time.monotonic()
import flashinfer  # noqa: E402

print(json.dumps({"version": getattr(flashinfer, "__version__", None),
                  "seconds": round(time.monotonic() - start, 2)}))
