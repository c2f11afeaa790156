"""Process-group setup: one process, or many under torchrun (NCCL on GPU, gloo on CPU)."""

from __future__ import annotations

import contextlib
import datetime
import os
import re
import sys
import tempfile
from dataclasses import dataclass

import torch
import torch.distributed as dist

from trainstack.contract.errors import UserError


@dataclass(frozen=True)
class DistInfo:
    rank: int
    local_rank: int
    world_size: int
    device: torch.device

    @property
    def is_main(self) -> bool:
        return self.rank == 0

    @property
    def is_distributed(self) -> bool:
        return self.world_size > 1


# A gloo group over the same ranks, for the per-step stop flag: an NCCL all-reduce of a GPU tensor
# followed by .item() would make the host wait for the GPU every step. None: the default group is gloo.
_HOST_GROUP = None


def pick_device(preference: str, local_rank: int = 0) -> torch.device:
    if preference == "cuda" or (preference == "auto" and torch.cuda.is_available()):
        if not torch.cuda.is_available():
            raise UserError("--device cuda was requested but no CUDA GPU is visible; use --device cpu or auto")
        return torch.device("cuda", local_rank % torch.cuda.device_count())
    return torch.device("cpu")


def init(device_preference: str = "auto", timeout_s: int = 600) -> DistInfo:
    """Join the torchrun job if there is one; otherwise run as a single process."""
    world_size, rank, local_rank = launch_environment(os.environ)
    device = pick_device(device_preference, local_rank)
    if device.type == "cuda":
        torch.cuda.set_device(device)
    if world_size > 1 and not dist.is_initialized():
        global _HOST_GROUP
        backend = "nccl" if device.type == "cuda" else "gloo"
        timeout = datetime.timedelta(seconds=timeout_s)
        with _rendezvous_errors(world_size, rank, timeout_s):
            dist.init_process_group(backend=backend, timeout=timeout,
                                    device_id=device if device.type == "cuda" else None)
        _HOST_GROUP = dist.new_group(backend="gloo", timeout=timeout) if backend == "nccl" else None
    return DistInfo(rank=rank, local_rank=local_rank, world_size=world_size, device=device)


@contextlib.contextmanager
def _rendezvous_errors(world_size: int, rank: int, timeout_s: int):
    """The rendezvous's failures as one line. c10d's resolver writes a warning to stderr each second
    while MASTER_ADDR does not resolve (torch 2.13, torch/csrc/distributed/c10d/socket.cpp); that
    output is held in a file and written out unless the rendezvous fails in c10d (its cause is then
    in the line)."""
    where = f"MASTER_ADDR={os.environ.get('MASTER_ADDR')} MASTER_PORT={os.environ.get('MASTER_PORT')}"
    sys.stderr.flush()
    saved = os.dup(2)
    failed = None
    with tempfile.TemporaryFile() as held:
        os.dup2(held.fileno(), 2)
        try:
            yield
        except dist.DistError as exc:
            failed = exc
        finally:
            os.dup2(saved, 2)
            os.close(saved)
            held.seek(0)
            text = held.read().decode(errors="replace")
            if failed is None:
                sys.stderr.write(text)
    if failed is None:
        return
    if isinstance(failed, dist.DistStoreError):
        raise UserError(f"only {_joined(str(failed))} of WORLD_SIZE={world_size} workers joined at {where} within "
                        f"--dist-timeout {timeout_s}s; start every worker (torchrun --nnodes/--nproc-per-node "
                        "does), or unset WORLD_SIZE for one process") from None
    cause = str(failed).strip().splitlines()[-1] if str(failed).strip() else type(failed).__name__
    if rank == 0:
        raise UserError(f"rank 0 could not open the rendezvous at {where} ({cause}); pick a free MASTER_PORT, "
                        "or unset WORLD_SIZE for one process") from None
    lookup = "; the name does not resolve" if "gai error" in text else ""
    raise UserError(f"rank {rank} could not reach rank 0 at {where} within --dist-timeout {timeout_s}s{lookup}; "
                    "check MASTER_ADDR and MASTER_PORT and that rank 0 is running, or unset WORLD_SIZE for one "
                    "process") from None


def _joined(message: str) -> str:
    """'1' from c10d's 'Timed out after 21 seconds waiting for clients. 1/2 clients joined.'"""
    match = re.search(r"(\d+)/\d+ clients joined", message)
    return match.group(1) if match else "some"


def _env_int(env, name: str, default: int, low: int, high: int | None, why: str) -> int:
    text = env.get(name, "").strip()
    if not text:
        return default
    try:
        value = int(text)
    except ValueError:
        value = None
    if value is None or value < low or (high is not None and value > high):
        raise UserError(f"{name}={env.get(name)!r} in the environment: {why}; torchrun sets it for each worker, so "
                        f"unset it (one process) or start with `torchrun --nproc-per-node N -m training ...`")
    return value


def launch_environment(env) -> tuple[int, int, int]:
    """WORLD_SIZE, RANK and LOCAL_RANK as torchrun sets them, with LOCAL_WORLD_SIZE, MASTER_ADDR and
    MASTER_PORT (torch 2.13, torch/distributed/elastic/agent/server/local_elastic_agent.py, the worker
    environment); values set by hand are checked here instead of failing inside init_process_group."""
    world_size = _env_int(env, "WORLD_SIZE", 1, 1, None, "must be a whole number >= 1")
    rank = _env_int(env, "RANK", 0, 0, world_size - 1, f"must be a whole number from 0 to WORLD_SIZE-1 ({world_size - 1})")
    local_world = _env_int(env, "LOCAL_WORLD_SIZE", world_size, 1, world_size,
                           f"must be a whole number from 1 to WORLD_SIZE ({world_size})")
    local_rank = _env_int(env, "LOCAL_RANK", 0, 0, local_world - 1,
                          f"must be a whole number from 0 to LOCAL_WORLD_SIZE-1 ({local_world - 1})")
    if world_size > 1:
        missing = [name for name in ("MASTER_ADDR", "MASTER_PORT") if not env.get(name, "").strip()]
        if missing:
            raise UserError(f"WORLD_SIZE={world_size} but {' and '.join(missing)} {'are' if len(missing) > 1 else 'is'} not set: the workers cannot find "
                            "each other; start with `torchrun --nproc-per-node N -m training ...`, or unset WORLD_SIZE "
                            "for one process")
        _env_int(env, "MASTER_PORT", 0, 1, 65535, "must be a port number from 1 to 65535")
    return world_size, rank, local_rank


def shutdown() -> None:
    global _HOST_GROUP
    if dist.is_initialized():
        dist.destroy_process_group()  # every group, the host group too
    _HOST_GROUP = None


def all_reduce_max(flag: bool, info: DistInfo) -> bool:
    """True when any rank says True (used every step to agree on stopping at the same step)."""
    return max_over_ranks(int(flag), info) > 0


def max_over_ranks(value: int, info: DistInfo) -> int:
    """The largest of every rank's small integer (a state code, as all_reduce_max's flag)."""
    if not info.is_distributed:
        return value
    t = torch.tensor([float(value)])  # on the host: no wait for the GPU's queued work
    dist.all_reduce(t, op=dist.ReduceOp.MAX, group=_HOST_GROUP)
    return int(t.item())


def all_reduce_sum(values: list[float], info: DistInfo) -> list[float]:
    if not info.is_distributed:
        return values
    t = torch.tensor(values, dtype=torch.float64, device=info.device)
    dist.all_reduce(t, op=dist.ReduceOp.SUM)
    return t.tolist()


def gather_objects(obj, info: DistInfo) -> list:
    """Every rank's `obj`, in rank order, on every rank (small objects only: RNG states)."""
    if not info.is_distributed:
        return [obj]
    out: list = [None] * info.world_size
    dist.all_gather_object(out, obj)
    return out


def broadcast_object(obj, info: DistInfo):
    """Rank 0's `obj` on every rank."""
    if not info.is_distributed:
        return obj
    box = [obj]
    dist.broadcast_object_list(box, src=0)
    return box[0]


def barrier(info: DistInfo) -> None:
    if info.is_distributed:
        dist.barrier()


def on_main(fn, info: DistInfo):
    """fn() on rank 0 only (None elsewhere). A UserError there is raised on every rank, so no rank is
    left waiting in a collective for a rank 0 that has already given up."""
    result, error = None, None
    if info.is_main:
        try:
            result = fn()
        except UserError as exc:
            error = exc
    message = broadcast_object(None if error is None else str(error), info)
    if error is not None:
        raise error
    if message is not None:
        raise UserError(message)
    return result
