# -*- coding: utf-8 -*-
# Apache-2.0 (see LICENSE)
"""NCCL all_reduce smoke test across N local GPUs with a hard timeout.

Why: on PCIe boxes with ACS redirect or a translated IOMMU, tensor-parallel SGLang hangs on the first all_reduce
right after NCCL's "Init COMPLETE", with GPUs pinned at 100 % and no error (field report B28). A bounded test
finds that before the service does. Run it with the service venv's python:

    python nccl_allreduce_smoke.py --gpus 2 --timeout 60 [--size-mb 64]

Prints one JSON line ``{"verdict": ..., ...}`` and exits 0 (ok), 2 (wrong result), 3 (timeout: ``nccl_p2p_hang``;
GPUs may need a reset or reboot) or 1 (error). Environment (NCCL_P2P_DISABLE, NCCL_DEBUG, ...) is passed through,
so the same test can compare P2P on and off. Changes nothing on the host.
"""

import argparse
import json
import multiprocessing as mp
import os
import socket
import sys
import time


def _free_port():
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _sweep(torch, dist, world, sweep_kib):
    """All-reduce each size once (field report N19: old NCCL crashes only at >= 512 KiB on PCIe Blackwell).

    Stops at the first failure: after an illegal memory access the CUDA context is unusable."""
    sizes = []
    expected = world * (world + 1) / 2.0
    for kib in sweep_kib:
        numel = kib * 1024 // 4
        try:
            x = torch.full((numel,), float(dist.get_rank() + 1), device="cuda", dtype=torch.float32)
            dist.all_reduce(x)
            torch.cuda.synchronize()
            ok = bool(torch.all(x == expected).item())
            sizes.append({"bytes": kib * 1024, "ok": ok} if ok else
                         {"bytes": kib * 1024, "ok": False, "error": "wrong values"})
        except Exception as exc:  # the crash is the finding
            sizes.append({"bytes": kib * 1024, "ok": False, "error": "%s: %s" % (type(exc).__name__, exc)})
            break
    return sizes


def _worker(rank, world, port, size_mb, iters, queue, sweep_kib=()):
    sizes = []
    try:
        import torch
        import torch.distributed as dist

        os.environ["MASTER_ADDR"] = "127.0.0.1"
        os.environ["MASTER_PORT"] = str(port)
        torch.cuda.set_device(rank)
        dist.init_process_group("nccl", rank=rank, world_size=world, device_id=torch.device("cuda", rank))
        sizes = _sweep(torch, dist, world, sweep_kib)
        if sizes and not sizes[-1]["ok"]:
            queue.put({"rank": rank, "error": sizes[-1]["error"], "sizes": sizes})
            return
        numel = size_mb * 1024 * 1024 // 4
        x = torch.full((numel,), float(rank + 1), device="cuda", dtype=torch.float32)
        start = time.time()
        dist.all_reduce(x)
        torch.cuda.synchronize()
        first = time.time() - start
        expected = world * (world + 1) / 2.0
        ok = bool(torch.all(x == expected).item())
        start = time.time()
        for _iteration in range(iters):
            dist.all_reduce(x)
        torch.cuda.synchronize()
        per_iter = (time.time() - start) / max(1, iters)
        # ring all-reduce bus bandwidth (nccl-tests convention): 2 (n-1)/n x bytes / time
        busbw = 2.0 * (world - 1) / world * numel * 4 / per_iter / 1e9 if per_iter > 0 else None
        queue.put({"rank": rank, "ok": ok, "first_s": round(first, 4), "iter_ms": round(per_iter * 1e3, 3),
                   "busbw_gbps": round(busbw, 2) if busbw else None, "device": torch.cuda.get_device_name(rank),
                   "sizes": sizes})
        dist.destroy_process_group()
    except Exception as exc:  # reported to the parent, which decides the verdict
        queue.put({"rank": rank, "error": "%s: %s" % (type(exc).__name__, exc), "sizes": sizes})


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", maxsplit=1)[0])
    parser.add_argument("--gpus", type=int, default=2)
    parser.add_argument("--timeout", type=float, default=60.0, help="seconds for the whole test")
    parser.add_argument("--size-mb", type=int, default=64)
    parser.add_argument("--iters", type=int, default=20)
    parser.add_argument("--sweep-kib", default="256,512,1024,4096,16384,65536",
                        help="comma-separated sizes (KiB) all-reduced once each before the timed run; '' = none")
    args = parser.parse_args(argv)
    sweep = [int(v) for v in str(args.sweep_kib).split(",") if v.strip()]
    env = dict((k, v) for k, v in os.environ.items() if k.startswith("NCCL_"))
    result = {"gpus": args.gpus, "timeout_s": args.timeout, "size_mb": args.size_mb, "nccl_env": env}
    try:
        import torch
        result["torch"] = torch.__version__
        result["nccl"] = ".".join(str(v) for v in torch.cuda.nccl.version())
        available = torch.cuda.device_count()
    except Exception as exc:
        result.update(verdict="error", error="torch/CUDA unavailable: %s" % exc)
        print(json.dumps(result))
        return 1
    if available < args.gpus:
        result.update(verdict="error", error="%d GPU(s) visible, %d needed" % (available, args.gpus))
        print(json.dumps(result))
        return 1
    ctx = mp.get_context("spawn")
    queue = ctx.Queue()
    port = _free_port()
    procs = [ctx.Process(target=_worker, args=(r, args.gpus, port, args.size_mb, args.iters, queue, sweep),
                         daemon=True)
             for r in range(args.gpus)]
    start = time.time()
    for proc in procs:
        proc.start()
    ranks = []
    deadline = start + args.timeout
    while len(ranks) < args.gpus and time.time() < deadline:
        try:
            ranks.append(queue.get(timeout=max(0.1, min(1.0, deadline - time.time()))))
        except Exception:
            if all(not p.is_alive() for p in procs) and queue.empty():
                break
    for proc in procs:
        proc.join(timeout=max(0.0, deadline - time.time()))
    hung = [i for i, p in enumerate(procs) if p.is_alive()]
    for proc in procs:
        if proc.is_alive():
            proc.kill()
    result["elapsed_s"] = round(time.time() - start, 2)
    result["ranks"] = sorted(ranks, key=lambda r: r["rank"])
    merged = {}
    for rank_result in ranks:
        for entry in rank_result.get("sizes") or []:
            have = merged.setdefault(entry["bytes"], {"bytes": entry["bytes"], "ok": True})
            if not entry["ok"]:
                have.update(ok=False, error=entry.get("error"))
    result["sizes"] = [merged[b] for b in sorted(merged)]
    errors = [r for r in ranks if "error" in r]
    if hung or len(ranks) < args.gpus and not errors:
        result.update(verdict="nccl_p2p_hang", hung_ranks=hung,
                      advice="all_reduce did not finish in %ss: set NCCL_P2P_DISABLE=1 for the service, check "
                             "ACS/IOMMU (iommu=pt); GPUs left at 100%% util need a reset or reboot" % args.timeout)
        print(json.dumps(result))
        return 3
    if errors:
        result.update(verdict="error", error="; ".join(r["error"] for r in errors))
        print(json.dumps(result))
        return 1
    if not all(r["ok"] for r in ranks):
        result["verdict"] = "wrong_result"
        print(json.dumps(result))
        return 2
    result["verdict"] = "ok"
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
