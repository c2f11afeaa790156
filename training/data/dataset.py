"""Reading the token shards written by `prepare`, and the world-size-independent batch order.

The sample order is a pure function of (seed, global sample index): the batch of optimizer step `s`
is samples [s*G, (s+1)*G) of that order, where G is the global batch size. Rank r of W takes every
W-th sample of it. So the data position is just the step, and a run resumed with a different number
of workers sees exactly the same batches.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from training.contract.errors import UserError

META_FILE = "meta.json"
FORMAT_VERSION = 1


@dataclass(frozen=True)
class DataMeta:
    root: Path
    raw: dict

    @property
    def vocab_size(self) -> int:
        return int(self.raw["tokenizer"]["vocab_size"])

    @property
    def tokenizer_dir(self) -> Path:
        return self.root / self.raw["tokenizer"]["dir"]

    @property
    def tokenizer_fingerprint(self) -> str:
        return self.raw["tokenizer"]["fingerprint"]

    @property
    def eos_token_id(self) -> int:
        return int(self.raw["tokenizer"]["eos_token_id"])

    @property
    def dtype(self) -> np.dtype:
        return np.dtype(self.raw["dtype"])

    def split_tokens(self, split: str) -> int:
        return int(self.raw["splits"][split]["tokens"])

    def shards(self, split: str) -> list[tuple[Path, int]]:
        return [(self.root / s["file"], int(s["tokens"])) for s in self.raw["splits"][split]["shards"]]


def load_meta(data_dir: str | Path) -> DataMeta:
    root = Path(data_dir)
    if not root.exists():
        raise UserError(f"data directory {root} does not exist; create it with "
                        f"`python -m training prepare --data <text> --out {root}`")
    path = root / META_FILE
    if not path.is_file():
        raise UserError(f"{root} is not a prepared data directory (no {META_FILE}); run "
                        f"`python -m training prepare --data <text> --out {root}` first")
    try:
        raw = json.loads(path.read_text())
    except (OSError, json.JSONDecodeError) as exc:
        raise UserError(f"{path} is unreadable ({exc}); re-run `python -m training prepare` into a new --out") from exc
    if raw.get("format_version") != FORMAT_VERSION:
        raise UserError(f"{root} was written by an incompatible version of `prepare` "
                        f"(format {raw.get('format_version')}, need {FORMAT_VERSION}); re-run prepare")
    return DataMeta(root=root, raw=raw)


class TokenWindows:
    """Non-overlapping windows of block_size + 1 tokens (inputs plus shifted targets) over the shards."""

    def __init__(self, shards: list[tuple[Path, int]], dtype: np.dtype, block_size: int):
        self.block_size = block_size
        self.arrays = []
        counts = []
        for path, n_tokens in shards:
            if not path.is_file():
                raise UserError(f"token shard {path} is missing; re-run `python -m training prepare`")
            if path.stat().st_size != n_tokens * dtype.itemsize:
                raise UserError(f"token shard {path} has the wrong size (truncated copy?); "
                                "re-run `python -m training prepare`")
            self.arrays.append(np.memmap(path, dtype=dtype, mode="r", shape=(n_tokens,)))
            counts.append(max(0, (n_tokens - 1) // block_size))
        self.ends = np.cumsum(counts)

    def __len__(self) -> int:
        return int(self.ends[-1]) if len(self.ends) else 0

    def window(self, index: int) -> np.ndarray:
        shard = int(np.searchsorted(self.ends, index, side="right"))
        start_of_shard = int(self.ends[shard - 1]) if shard else 0
        offset = (index - start_of_shard) * self.block_size
        return self.arrays[shard][offset: offset + self.block_size + 1]

    def batch(self, indices: list[int]) -> tuple[torch.Tensor, torch.Tensor]:
        rows = np.stack([self.window(i) for i in indices]).astype(np.int64)
        tokens = torch.from_numpy(rows)
        return tokens[:, :-1].contiguous(), tokens[:, 1:].contiguous()


class SampleOrder:
    """A fresh seeded permutation of all windows per epoch; global sample g -> window index."""

    def __init__(self, n_windows: int, seed: int):
        self.n = n_windows
        self.seed = seed
        self._epoch = -1
        self._perm: np.ndarray | None = None

    def window_of(self, global_index: int) -> int:
        epoch, pos = divmod(global_index, self.n)
        if epoch != self._epoch:
            self._perm = np.random.default_rng([self.seed, epoch]).permutation(self.n)
            self._epoch = epoch
        return int(self._perm[pos])


def rank_samples(step: int, global_batch: int, rank: int, world_size: int) -> list[int]:
    """Global sample indices this rank trains on at optimizer step `step` (strided over ranks)."""
    first = step * global_batch
    return list(range(first + rank, first + global_batch, world_size))


def micro_batches(samples: list[int], batch_size: int) -> list[list[int]]:
    return [samples[i: i + batch_size] for i in range(0, len(samples), batch_size)]
