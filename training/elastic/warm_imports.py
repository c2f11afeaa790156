"""What every trainer process imports, imported once by the node agent's fork server (training/worker.py).

A worker forked from that server starts with torch, its compiler and transformers already imported,
most of a cold restart's start-up (docs/BENCHMARKS.md, bench/recovery.py). The server then forks every worker, so nothing
here may start a thread or touch CUDA: a CUDA context, even one made only to count devices, is not
usable in a forked child. While these imports run, the CUDA entry points raise; an import that needs
them is left to the worker itself (`skipped`).
"""

from __future__ import annotations

import contextlib
import importlib
import os

import torch

MODULES = (
    "training.trainer.train",         # numpy, torch.distributed, DDP and the trainer's own modules
    "training.trainer.distill",
    "torch._dynamo",                  # what any torch optimizer imports, and torch.compile
    "torch._dynamo.repro.after_dynamo",
    "torch._inductor.compile_fx",     # what torch.compile's default backend imports
    "transformers.models.gpt2.configuration_gpt2",  # GPT2Config, the model's configuration
)


class CudaTouched(RuntimeError):
    pass


@contextlib.contextmanager
def cuda_forbidden():
    """Make the Python entry points that initialise CUDA raise for the duration."""
    def refuse(*args, **kwargs):
        raise CudaTouched("CUDA initialised while preloading")

    entry_points = [(torch._C, name) for name in ("_cuda_getDeviceCount", "_cuda_init") if hasattr(torch._C, name)]
    saved = [(owner, name, getattr(owner, name)) for owner, name in [*entry_points, (torch.cuda, "_lazy_init")]]
    try:
        for owner, name, _ in saved:
            setattr(owner, name, refuse)
        yield
    finally:
        for owner, name, original in saved:
            setattr(owner, name, original)


def preload() -> dict[str, str]:
    """Import MODULES; those that could not be imported here, with why (the worker imports them itself)."""
    skipped = {}
    # While set, torch.cuda.is_available() asks NVML instead of initialising CUDA: safe before a fork.
    # The workers inherit this process's environment, so it is put back as it was.
    nvml_check = os.environ.get("PYTORCH_NVML_BASED_CUDA_CHECK")
    os.environ["PYTORCH_NVML_BASED_CUDA_CHECK"] = "1"
    try:
        with cuda_forbidden():
            for module in MODULES:
                try:
                    importlib.import_module(module)
                except Exception as exc:  # noqa: BLE001 - the worker imports it again and reports a real failure
                    skipped[module] = f"{type(exc).__name__}: {exc}"
            pick_vector_isa()
    finally:
        if nvml_check is None:
            del os.environ["PYTORCH_NVML_BASED_CUDA_CHECK"]
        else:
            os.environ["PYTORCH_NVML_BASED_CUDA_CHECK"] = nvml_check
    return skipped


def pick_vector_isa() -> None:
    """On a CPU node, Inductor's choice of vector instruction set, made once here for every worker.

    Before its first CPU kernel, Inductor builds a test program per candidate instruction set (or
    finds it in the compiler's cache) and loads each in a child Python (torch/_inductor/cpu_vec_isa.py,
    `VecISA.check_build`), keeping the answer for the process (`pick_vec_isa` is functools.cache'd). A
    worker forked from here inherits the answer, so a restart's first step no longer waits for those
    six child processes (docs/BENCHMARKS.md, recovery). Subprocesses only: no thread, no CUDA. Any
    failure leaves the choice to the worker, as before. Skipped for `--compile off`.
    """
    if torch.cuda.is_available():  # NVML-based while preloading; GPU nodes compile Triton kernels
        return
    if os.environ.get("TRAINSTACK_PRELOAD_PICKS_ISA") == "0":  # --compile off (training/worker.py)
        return
    with contextlib.suppress(Exception):
        from torch._inductor.cpu_vec_isa import pick_vec_isa

        pick_vec_isa()


skipped = preload()
