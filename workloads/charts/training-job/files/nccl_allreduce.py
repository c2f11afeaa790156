"""The NCCL check in the training image (ncclCheck.runner trainer): an all-reduce across the Job's
pods, started by the job's own launcher and rendezvous, with the job's own NCCL environment.

Fails (exit 1, one line) when the NCCL the process actually runs is not the one the chart pairs
with the GPUDirect plugin (NCCL_CHECK_EXPECTED_NCCL, the chart's gpuNetworking.<mode>.nccl), when
NCCL chose another network than the plugin's (NCCL_CHECK_EXPECTED_NET: a silent fallback to
sockets), when a plugin file its environment names is missing (PLUGIN_FILE_VARS), when the sum
comes back wrong, or when the bus bandwidth is below NCCL_CHECK_MIN_BUSBW GB/s.
NCCL_CHECK_BACKEND=gloo runs the same on CPUs (the chart's tests).

The runtime version is read from the libnccl mapped into this process (/proc/self/maps), through
its own ncclGetVersion: torch.cuda.nccl.version() is the NCCL torch was compiled against
(torch/csrc/cuda/nccl.cpp version()), whichever library is loaded. The network comes from NCCL's
own "Using network <name>" line, which NCCL_DEBUG=INFO writes to NCCL_DEBUG_FILE.

Each rank first prints its locked-memory limit (ulimit -l): on EFA, libfabric pins its buffers, and a
small limit fails NCCL's first call with "(-12) Cannot allocate memory" (the EKS stack raises it on
the EFA nodes, trainstack/infra/aws/efa_node_config.py); the line says which limit the pod really got.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import re
import resource
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


def loaded_nccl(maps: str) -> str | None:
    """The path of the libnccl this process has mapped (the contents of /proc/self/maps), if any."""
    for line in maps.splitlines():
        path = line.split(maxsplit=5)[-1] if len(line.split()) >= 6 else ""
        if re.search(r"/libnccl\.so(\.[0-9]+)*$", path):
            return path
    return None


def runtime_nccl_version(library: str) -> tuple[int, int, int]:
    """ncclGetVersion of that library: major*10000 + minor*100 + patch since NCCL 2.9 (nccl.h NCCL_VERSION)."""
    code = ctypes.c_int()
    if ctypes.CDLL(library).ncclGetVersion(ctypes.byref(code)) != 0:
        raise RuntimeError(f"ncclGetVersion failed in {library}")
    return code.value // 10000, code.value % 10000 // 100, code.value % 100


def network_problem(debug_log: str, expected: str) -> str | None:
    """A one-line verdict when NCCL's "Using network <name>" lines name another network than `expected`."""
    used = set(re.findall(r"Using network (\S+)", debug_log))
    if used and all(name.lower().startswith(expected.lower()) for name in used):
        return None
    return (f"NCCL check FAILED: NCCL used network {', '.join(sorted(used)) or 'unknown (no NCCL_DEBUG=INFO line)'}, "
            f"not the GPUDirect plugin's {expected}: the plugin did not load, so traffic fell back to sockets")


# Files NCCL opens by the path an env var gives, from the node's plugin installer (gIB's transport and
# tuner configuration on A3 Ultra / A4). NCCL may go on without them (sockets, default tuning) or fail
# deep inside the first collective; checked before NCCL starts, so a missing file is named outright.
PLUGIN_FILE_VARS = ("NCCL_NET_PLUGIN", "NCCL_TUNER_CONFIG_PATH")


def in_loader_cache(name: str = "nccl-net") -> bool:
    """Whether the dynamic loader finds lib<name>.so outside LD_LIBRARY_PATH too (ld.so.cache, as dlopen
    does): a plugin installed there loads although no LD_LIBRARY_PATH directory holds it."""
    return ctypes.util.find_library(name) is not None


def missing_plugin_file(environ: dict[str, str]) -> str | None:
    """A one-line verdict when an env var in PLUGIN_FILE_VARS names an absolute path that is not there, or,
    with a GPUDirect network expected and no NCCL_NET_PLUGIN, when no LD_LIBRARY_PATH directory holds
    the default plugin name libnccl-net.so (NCCL's plugin lookup, src/plugin/net.cc)."""
    for name in PLUGIN_FILE_VARS:
        path = environ.get(name, "")
        if path.startswith("/") and not os.path.isfile(path):
            return (f"NCCL check FAILED: {name}={path} does not exist in the pod: the node's NCCL plugin installer "
                    "did not put it there (check its DaemonSet's logs, and that the image it runs ships this file)")
    directories = [d for d in environ.get("LD_LIBRARY_PATH", "").split(":") if d]
    if environ.get("NCCL_CHECK_EXPECTED_NET") and not environ.get("NCCL_NET_PLUGIN") and directories and not any(
            os.path.isfile(os.path.join(d, "libnccl-net.so")) for d in directories) and not in_loader_cache():
        return (f"NCCL check FAILED: no libnccl-net.so in LD_LIBRARY_PATH ({':'.join(directories)}), so NCCL "
                f"cannot load the {environ['NCCL_CHECK_EXPECTED_NET']} plugin and would fall back to sockets")
    return None


def locked_memory_limit() -> str:
    """The soft RLIMIT_MEMLOCK of this process, as `ulimit -l` would say it (KiB) or "unlimited"."""
    soft, _ = resource.getrlimit(resource.RLIMIT_MEMLOCK)
    return "unlimited" if soft == resource.RLIM_INFINITY else f"{soft // 1024} KiB"


def bus_bandwidth_gbps(size_bytes: int, seconds: float, world: int) -> float:
    """nccl-tests' all-reduce bus bandwidth: algbw x 2(n-1)/n."""
    return size_bytes / seconds * 2 * (world - 1) / world / 1e9


def nccl_problem(debug_file: str) -> tuple[str | None, str]:
    """(verdict or None, "NCCL <version> from <path>") for the NCCL this process runs."""
    with open("/proc/self/maps") as maps:
        library = loaded_nccl(maps.read())
    if library is None:
        return "NCCL check FAILED: no libnccl is mapped into the process after an NCCL all-reduce", "no NCCL"
    loaded = runtime_nccl_version(library)
    version = f"NCCL {'.'.join(map(str, loaded))} from {library}"
    print(f"[nccl-check] runs {version}", flush=True)
    expected = os.environ.get("NCCL_CHECK_EXPECTED_NCCL", "")
    problem = expected and nccl_version_problem(loaded, expected)
    if problem:
        return f"{problem} ({library})", version
    expected_net = os.environ.get("NCCL_CHECK_EXPECTED_NET", "")
    if expected_net:
        try:
            with open(debug_file) as log:
                text = log.read()
        except OSError:
            text = ""
        problem = network_problem(text, expected_net)
    return problem or None, version


def main() -> int:
    import torch
    import torch.distributed as dist

    backend = os.environ.get("NCCL_CHECK_BACKEND", "nccl")
    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    print(f"[nccl-check] rank {rank}: locked-memory limit (ulimit -l) {locked_memory_limit()}", flush=True)
    debug_file = f"/tmp/nccl-check-debug.{os.getpid()}.log"
    if backend == "nccl":
        problem = missing_plugin_file(dict(os.environ))
        if problem:
            print(f"rank {rank}: {problem}", flush=True)
            return 1
        device = torch.device("cuda", int(os.environ["LOCAL_RANK"]))
        torch.cuda.set_device(device)
        os.environ.setdefault("NCCL_DEBUG", "INFO")
        os.environ["NCCL_DEBUG_FILE"] = debug_file  # read back below; NCCL opens it at its first call
    else:
        device = torch.device("cpu")
    dist.init_process_group(backend)
    size = parse_bytes(os.environ.get("NCCL_CHECK_BYTES", "512M"))
    iterations = int(os.environ.get("NCCL_CHECK_ITERATIONS", "20"))
    minimum = float(os.environ.get("NCCL_CHECK_MIN_BUSBW", "0"))

    check = torch.full((1024,), float(rank + 1), device=device)
    dist.all_reduce(check)  # NCCL creates its communicator here: the library and network are now fixed
    version = backend
    if backend == "nccl":
        problem, version = nccl_problem(debug_file)
        if problem:
            print(f"rank {rank}: {problem}", flush=True)
            return 1
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
    if busbw < minimum:
        print(f"NCCL check FAILED: all-reduce bus bandwidth {busbw:.4f} GB/s over {world} ranks ({version}), "
              f"below {minimum} GB/s", flush=True)
        return 1
    print(f"NCCL check PASSED: all-reduce bus bandwidth {busbw:.4f} GB/s over {world} ranks ({version})", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
