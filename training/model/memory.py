"""Refuse a model that cannot fit before allocating it (a typo like --n-layer 10000 would otherwise
take the machine's memory, or the node's, for minutes before failing)."""

from __future__ import annotations

import os
from pathlib import Path

import torch

from trainstack.contract.errors import UserError

BYTES_PER_PARAM = 16  # fp32 weights, gradients and AdamW's two moments; activations come on top


# A container's memory limit and usage: cgroup v2, then v1
CGROUP_MEMORY = (("/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory.current"),
                 ("/sys/fs/cgroup/memory/memory.limit_in_bytes", "/sys/fs/cgroup/memory/memory.usage_in_bytes"))

def parameters(config) -> int:
    """GPT-2's parameter count from its configuration (embeddings tied with the output layer)."""
    d, layers = config.n_embd, config.n_layer
    per_layer = 12 * d * d + 13 * d  # attention (4 d^2) and MLP (8 d^2) weights, biases and two LayerNorms
    return (config.vocab_size + config.n_positions) * d + layers * per_layer + 2 * d


def device_memory(device: torch.device) -> int | None:
    """Bytes this process can use at most: the GPU's memory, or RAM capped by a container limit."""
    if device.type == "cuda":
        return torch.cuda.get_device_properties(device).total_memory
    try:
        total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        return None
    for limit_file, _ in CGROUP_MEMORY:
        try:
            text = Path(limit_file).read_text().strip()
        except OSError:
            continue
        if text.isdigit():
            total = min(total, int(text))
    return total


def memory_free() -> int | None:
    """Bytes that a new process could still take: the machine's MemAvailable, capped by the cgroup's limit
    less its usage (the first of CGROUP_MEMORY's versions that is there)."""
    free = None
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemAvailable:"):
                free = int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    for limit_file, usage_file in CGROUP_MEMORY:
        try:
            limit, usage = Path(limit_file).read_text().strip(), Path(usage_file).read_text().strip()
        except OSError:
            continue
        if limit.isdigit() and usage.isdigit():
            room = int(limit) - int(usage)
            free = room if free is None else min(free, room)
        break
    return free


def check_fits(config, device: torch.device, flags: str) -> None:
    available = device_memory(device)
    needed = parameters(config) * BYTES_PER_PARAM
    if available is not None and needed > available:
        raise UserError(f"{flags}: a model of {parameters(config) / 1e9:.2f}B parameters needs about "
                        f"{needed / 2**30:.0f} GiB for weights, gradients and optimizer state, more than this "
                        f"{device.type.upper()}'s {available / 2**30:.0f} GiB; choose a smaller model")


def bytes_per_sequence(config, block_size: int) -> int:
    """A lower bound on what one sequence of a micro-batch takes: its token ids and targets (int64, on the
    host), one bf16 hidden state per layer kept for the backward pass, and its bf16 logits."""
    return block_size * (2 * 8 + 2 * config.n_layer * config.n_embd + 2 * config.vocab_size)


def check_batch_fits(config, device: torch.device, batch_size: int, block_size: int) -> None:
    """Refuse a --batch-size that cannot fit even by the lower bound, before anything is allocated."""
    available = device_memory(device)
    if available is None:
        return
    per_sequence = bytes_per_sequence(config, block_size)
    room = available - parameters(config) * BYTES_PER_PARAM
    if room <= 0 or batch_size * per_sequence <= room:
        return  # a model that does not fit at all is check_fits' to refuse, in its own words
    largest = room // per_sequence
    advice = (f"the largest that could fit is about --batch-size {largest:,} (the global batch is kept by "
              "gradient accumulation)" if largest else "choose a smaller model or --block-size")
    raise UserError(f"--batch-size {batch_size:,}: a micro-batch of {batch_size:,} x {block_size} tokens needs at "
                    f"least {batch_size * per_sequence / 2**30:,.0f} GiB, more than this {device.type.upper()}'s "
                    f"{available / 2**30:,.0f} GiB; {advice}")
