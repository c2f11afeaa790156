"""The NCCL check in the training image (ncclCheck.runner trainer): an all-reduce across the Job's
pods, started by the job's own launcher and rendezvous, with the job's own NCCL environment.

Fails (exit 1, one line from rank 0) when the NCCL the image loads is not the one its GPUDirect
plugin was qualified with (NCCL_CHECK_EXPECTED_NCCL, the chart's gpuNetworking.<mode>.nccl),
when the sum comes back wrong, or when the bus bandwidth is below NCCL_CHECK_MIN_BUSBW GB/s.
NCCL_CHECK_BACKEND=gloo runs the same on CPUs (the chart's tests).
"""

from __future__ import annotations

import os
import sys
import time

_UNITS = {"": 1, "K": 2**10, "M": 2**20, "G": 2**30}


def parse_bytes(size: str) -> int:
    """nccl-tests' sizes: 1M, 512M, 8G."""
    size = size.strip().upper()
    unit = size[-1] if size[-1:] in _UNITS and not size[-1:].isdigit() else ""
    return int(size[: len(size) - len(unit)]) * _UNITS[unit]


def nccl_version_problem(loaded: tuple[int, ...], expected: str) -> str | None:
    """A one-line verdict when the loaded NCCL is not the expected major.minor[.patch]."""
    wanted = tuple(int(part) for part in expected.split("."))
    if tuple(loaded[: len(wanted)]) == wanted:
        return None
    return (f"NCCL check FAILED: the job loads NCCL {'.'.join(map(str, loaded))}, but its GPUDirect plugin is "
            f"qualified with NCCL {expected} (gpuNetworking.<mode>.nccl); a mismatch breaks or slows "
            "cross-node traffic")


def bus_bandwidth_gbps(size_bytes: int, seconds: float, world: int) -> float:
    """nccl-tests' all-reduce bus bandwidth: algbw x 2(n-1)/n."""
    return size_bytes / seconds * 2 * (world - 1) / world / 1e9


def main() -> int:
    import torch
    import torch.distributed as dist

    backend = os.environ.get("NCCL_CHECK_BACKEND", "nccl")
    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    if backend == "nccl":
        device = torch.device("cuda", int(os.environ["LOCAL_RANK"]))
        torch.cuda.set_device(device)
        expected = os.environ.get("NCCL_CHECK_EXPECTED_NCCL", "")
        problem = expected and nccl_version_problem(torch.cuda.nccl.version(), expected)
        if problem:
            print(problem, flush=True)
            return 1
    else:
        device = torch.device("cpu")
    dist.init_process_group(backend)
    size = parse_bytes(os.environ.get("NCCL_CHECK_BYTES", "512M"))
    iterations = int(os.environ.get("NCCL_CHECK_ITERATIONS", "20"))
    minimum = float(os.environ.get("NCCL_CHECK_MIN_BUSBW", "0"))

    check = torch.full((1024,), float(rank + 1), device=device)
    dist.all_reduce(check)
    if not torch.all(check == world * (world + 1) / 2):
        print(f"NCCL check FAILED: rank {rank} got a wrong all-reduce sum", flush=True)
        return 1
    buffer = torch.zeros(size // 4, dtype=torch.float32, device=device)
    for _ in range(3):  # warm-up: connections, channels
        dist.all_reduce(buffer)
    dist.barrier()
    started = time.perf_counter()
    for _ in range(iterations):
        dist.all_reduce(buffer)
    if backend == "nccl":
        torch.cuda.synchronize()
    seconds = (time.perf_counter() - started) / iterations
    busbw = bus_bandwidth_gbps(size, seconds, world)
    dist.destroy_process_group()
    if rank != 0:
        return 0
    version = ".".join(map(str, torch.cuda.nccl.version())) if backend == "nccl" else backend
    if busbw < minimum:
        print(f"NCCL check FAILED: all-reduce bus bandwidth {busbw:.4f} GB/s over {world} ranks ({version}), "
              f"below {minimum} GB/s", flush=True)
        return 1
    print(f"NCCL check PASSED: all-reduce bus bandwidth {busbw:.4f} GB/s over {world} ranks ({version})", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
