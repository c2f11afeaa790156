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

from trainstack.contract.errors import UserError

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
    if not root.is_dir():  # "no meta.json" and `prepare --out FILE` would be wrong about a file
        if root.name == META_FILE:
            raise UserError(f"--data {root} is the {META_FILE} of prepared data, not its directory; pass "
                            f"--data {root.parent}")
        raise UserError(f"--data {root} is a file, not a prepared data directory; run `python -m training prepare "
                        f"--data {root} --out <a new directory>` and pass that directory as --data")
    path = root / META_FILE
    if not path.is_file():
        raise UserError(f"{root} is not a prepared data directory (no {META_FILE}); run "
                        f"`python -m training prepare --data <text> --out {root}` first")
    try:
        raw = json.loads(path.read_text())
    except (OSError, json.JSONDecodeError) as exc:
        raise UserError(f"{path} is unreadable ({exc}); re-run `python -m training prepare` into a new --out") from exc
    if not isinstance(raw, dict):
        raise UserError(f"{path} holds {type(raw).__name__}, not the object `prepare` writes; the file is damaged; "
                        "re-run `python -m training prepare` into a new --out")
    if raw.get("format_version") != FORMAT_VERSION:
        version = raw.get("format_version")
        raise UserError(f"{root} was written by an incompatible version of `prepare` "
                        f"(format {version}, need {FORMAT_VERSION}); re-run prepare")
    _check_fields(path, raw)
    return DataMeta(root=root, raw=raw)


def _check_fields(path: Path, raw: dict) -> None:
    """The numbers a run depends on, as prepare writes them (a damaged or edited meta.json fails here,
    not as an index error deep in the first step)."""
    def bad(what: str) -> UserError:
        return UserError(f"{path}: {what}; the file is damaged or was edited; re-run `python -m training prepare` "
                         "into a new --out")

    tok = raw.get("tokenizer")
    if not isinstance(tok, dict):
        raise bad("no tokenizer section")
    vocab = tok.get("vocab_size")
    if not isinstance(vocab, int) or isinstance(vocab, bool) or not 2 <= vocab <= 2**32:
        raise bad(f"tokenizer.vocab_size is {vocab!r}, not a whole number from 2 to 2^32")
    eos = tok.get("eos_token_id")
    if not isinstance(eos, int) or isinstance(eos, bool) or not 0 <= eos < vocab:
        raise bad(f"tokenizer.eos_token_id is {eos!r}, not a token id below the vocabulary size {vocab}")
    if raw.get("dtype") not in ("uint16", "uint32"):
        raise bad(f"dtype is {raw.get('dtype')!r}, not uint16 or uint32")
    if raw["dtype"] == "uint16" and vocab > 2**16:
        raise bad(f"a vocabulary of {vocab} does not fit the uint16 token ids it says are stored")
    if not isinstance(tok.get("dir"), str) or not isinstance(tok.get("fingerprint"), str):
        raise bad("tokenizer.dir or tokenizer.fingerprint is missing")
    splits = raw.get("splits")
    for split in ("train", "val"):
        part = splits.get(split) if isinstance(splits, dict) else None
        shards = part.get("shards") if isinstance(part, dict) else None
        if not isinstance(shards, list) or not all(
                isinstance(s, dict) and isinstance(s.get("file"), str) and isinstance(s.get("tokens"), int)
                and not isinstance(s.get("tokens"), bool) and s["tokens"] >= 0 for s in shards):
            raise bad(f"the {split} split's shard list is missing or malformed")
        if not isinstance(part.get("tokens"), int) or part["tokens"] != sum(s["tokens"] for s in shards):
            raise bad(f"the {split} split's token count does not add up over its shards")


# Up to this many tokens the shards are scanned for ids beyond the vocabulary before the first step
# (a fraction of a second); larger corpora are checked batch by batch as they are read.
SCAN_TOKENS = 1 << 28


def check_data(meta: DataMeta, windows: list[TokenWindows]) -> None:
    """What a run needs of DATA_DIR beyond meta.json: a tokenizer that loads (the export saves it at
    the very end), no larger than the vocabulary, and token ids within it."""
    from training.data import tokenizer

    loaded = tokenizer.load(str(meta.tokenizer_dir), "--data")
    if len(loaded) > meta.vocab_size:
        raise UserError(f"{meta.tokenizer_dir} has {len(loaded)} tokens but {meta.root / META_FILE} says the vocabulary "
                        f"is {meta.vocab_size}; the data directory is damaged; re-run `python -m training prepare`")
    if sum(w.tokens for w in windows) <= SCAN_TOKENS:
        for w in windows:
            w.check_ids()


def _beyond_vocabulary(path: Path, token: int, vocab_size: int) -> UserError:
    return UserError(f"token shard {path} holds token id {token}, beyond the vocabulary of {vocab_size} in "
                     f"{META_FILE}; the data directory is damaged; re-run `python -m training prepare` into a new --out")


class TokenWindows:
    """Non-overlapping windows of block_size + 1 tokens (inputs plus shifted targets) over the shards."""

    def __init__(self, shards: list[tuple[Path, int]], dtype: np.dtype, block_size: int,
                 vocab_size: int | None = None):
        self.block_size = block_size
        self.vocab_size = vocab_size  # ids at or above it are refused (a damaged shard or meta.json)
        self.paths = [path for path, _ in shards]
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

    @property
    def tokens(self) -> int:
        return sum(len(a) for a in self.arrays)

    def check_ids(self) -> None:
        """Scan every shard for ids beyond the vocabulary (in pieces: memory stays flat)."""
        if self.vocab_size is None:
            return
        for path, array in zip(self.paths, self.arrays, strict=True):
            for start in range(0, len(array), 1 << 24):
                top = int(array[start: start + (1 << 24)].max(initial=0))
                if top >= self.vocab_size:
                    raise _beyond_vocabulary(path, top, self.vocab_size)

    def batch(self, indices: list[int]) -> tuple[torch.Tensor, torch.Tensor]:
        rows = np.stack([self.window(i) for i in indices]).astype(np.int64)
        if self.vocab_size is not None and rows.size and int(rows.max()) >= self.vocab_size:
            shard = self.paths[int(np.searchsorted(self.ends, indices[int(rows.max(axis=1).argmax())], side="right"))]
            raise _beyond_vocabulary(shard, int(rows.max()), self.vocab_size)
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
