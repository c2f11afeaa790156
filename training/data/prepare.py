"""`python -m training prepare`: text in, token shards out.

DATA_DIR layout (everything of one preparation lives in one generation folder; meta.json, replaced
atomically and last, points at the current one, so a crash or an error never leaves a half-written
corpus behind and never touches the previous one):

    DATA_DIR/meta.json
    DATA_DIR/gen-<id>/tokenizer/            tokenizer files (Hugging Face format)
    DATA_DIR/gen-<id>/{train,val}_0000.bin  token ids, uint16 or uint32, raw little-endian
    DATA_DIR/.cache/                        datasets' cache (re-runs reuse tokenized pieces)
"""

from __future__ import annotations

import argparse
import ctypes
import hashlib
import json
import os
import shutil
import signal
import uuid
from pathlib import Path

import numpy as np

from training.data import prepare_lock
from training.data import tokenizer as tok
from training.data.dataset import FORMAT_VERSION, META_FILE
from training.data.ours import check_not_inside_a_run, check_not_text_of_ours, readable_by_prepare
from training.data.sources import (
    Sources,
    discover,
    keep_readable_text,
    peek_columns,
    structured_texts,
    text_file_pieces,
)
from training.elastic.preemption import exit_on_signals
from training.library_bars import no_datasets_bars
from trainstack.contract.cli import parse_tokenizer_spec
from trainstack.contract.errors import UserError, storage_error, storage_failure
from trainstack.contract.log import info
from trainstack.contract.paths import check_usable, kind_of

GOLDEN = 0.6180339887498949  # low-discrepancy sequence: val chunks spread evenly over the corpus


def _check_parquet(path: Path) -> None:
    """A file named .parquet that pyarrow cannot read: one line now, not datasets' traceback later."""
    import pyarrow.parquet as pq

    try:
        pq.read_schema(path)
    except (OSError, ValueError) as exc:  # pyarrow.ArrowInvalid is a ValueError
        raise UserError(f"{path} is not a readable parquet file ({str(exc).splitlines()[0] if str(exc) else exc!r}); "
                        "fix or remove it, or leave it out of --data") from None


def load_corpus(found: Sources, args, cache_dir: Path, stamp: str):
    """One `datasets.Dataset` with columns `text` and `end` (the row ends a document)."""
    import datasets

    for fmt, files in found.structured.items():
        for path in files:
            if fmt == "parquet":
                _check_parquet(path)
            columns = peek_columns(path, fmt)
            if columns is not None and args.text_column not in columns:
                raise UserError(f"{path} has no column '{args.text_column}' (columns: {', '.join(columns)}); "
                                "pass --text-column")
    features = datasets.Features({"text": datasets.Value("string"), "end": datasets.Value("bool")})
    parts = []
    try:
        with no_datasets_bars():  # "Generating train split: N examples" counts file pieces, not documents
            if found.text:
                parts.append(datasets.Dataset.from_generator(
                    text_file_pieces, cache_dir=str(cache_dir), features=features,
                    gen_kwargs={"files": [str(p) for p in found.text], "encoding": args.encoding, "stamp": stamp}))
            if found.structured:
                parts.append(datasets.Dataset.from_generator(
                    structured_texts, cache_dir=str(cache_dir), features=features,
                    gen_kwargs={"files": {k: [str(p) for p in v] for k, v in found.structured.items()},
                                "column": args.text_column, "stamp": stamp}))
    except Exception as exc:  # datasets wraps what the generators raise
        user_error = _wrapped_user_error(exc)
        if user_error is None:
            raise
        raise user_error from exc
    return datasets.concatenate_datasets(parts) if len(parts) > 1 else parts[0]


def _wrapped_user_error(exc: BaseException | None) -> UserError | None:
    while exc is not None and not isinstance(exc, UserError):
        exc = exc.__cause__ or exc.__context__
    return exc


# ---------------------------------------------------------------- shards
class ShardWriter:
    def __init__(self, folder: Path, split: str, dtype: np.dtype, shard_tokens: int):
        self.folder, self.split, self.dtype, self.shard_tokens = folder, split, dtype, shard_tokens
        self.shards: list[dict] = []
        self._file = None
        self._in_shard = 0

    def add(self, tokens: np.ndarray) -> None:
        while len(tokens):
            if self._file is None:
                name = f"{self.split}_{len(self.shards):04d}.bin"
                self._file = open(self.folder / name, "wb")  # noqa: SIM115 - kept open across add() calls
                self.shards.append({"file": f"{self.folder.name}/{name}", "tokens": 0})
                self._in_shard = 0
            piece = tokens[: self.shard_tokens - self._in_shard]
            piece.astype(self.dtype).tofile(self._file)
            self._in_shard += len(piece)
            self.shards[-1]["tokens"] += len(piece)
            tokens = tokens[len(piece):]
            if self._in_shard == self.shard_tokens:
                self.close()

    def close(self) -> None:
        if self._file is not None:
            self._file.flush()
            os.fsync(self._file.fileno())
            self._file.close()
            self._file = None

    @property
    def tokens(self) -> int:
        return sum(s["tokens"] for s in self.shards)


def val_chunks(n_chunks: int, val_fraction: float) -> set[int]:
    """Which chunks hold out validation data: spread evenly, chunk 0 always trains, and a corpus of
    two or more chunks always gets at least one (its last) for validation."""
    chosen = {i for i in range(n_chunks) if ((i + 1) * GOLDEN) % 1.0 < val_fraction}
    return chosen or ({n_chunks - 1} if n_chunks >= 2 else set())


def chunk_tokens(total: int, val_fraction: float) -> int:
    """Chunk length for the train/val split: about 16 validation chunks, between 256 and 1M tokens."""
    return int(min(max(total * val_fraction / 16, 256), 1 << 20))


# ---------------------------------------------------------------- the command
def _input_fingerprint(found: Sources, args, tokenizer_identity: str) -> str:
    entries = []
    for p in found.files():
        st = p.stat()
        entries.append([str(p.resolve()), st.st_size, st.st_mtime_ns])
    options = [args.text_column, args.encoding, args.val_fraction, args.token_dtype, args.seed, args.shard_tokens]
    blob = json.dumps([sorted(entries), tokenizer_identity, options], sort_keys=True)
    return hashlib.sha256(blob.encode()).hexdigest()[:16]


def _check_out_before_writing(sources: list[str], out: Path) -> None:
    """--out as a file, as the --data folder itself, or as a folder of other files: refused before the
    folder or its lock is made (the lock would otherwise be created among the user's files)."""
    for src in sources:
        if not any(ch in src for ch in "*?[") and Path(src).is_dir() and Path(src).resolve() == out.resolve():
            raise UserError(f"--out {out} is the --data directory; the prepared data needs a folder of its own: "
                            "pick a new --out")
        check_not_text_of_ours(src)
    check_not_inside_a_run(out, "--out")
    _existing_meta(out)


def _existing_meta(out: Path) -> dict | None:
    if not out.exists():
        return None
    if not out.is_dir():
        raise UserError(f"--out {out} is {kind_of(out) or 'a file'}; pick a directory for the prepared data")
    meta_path = out / META_FILE
    if not meta_path.is_file():
        if any(p for p in out.iterdir() if not _ours(p)):
            raise UserError(f"--out {out} already holds other files and no {META_FILE}; refusing to write into "
                            "it; pick an empty or new directory")
        return None
    try:
        meta = json.loads(meta_path.read_text())
    except (OSError, json.JSONDecodeError) as exc:
        raise UserError(f"{meta_path} is unreadable ({exc}); pick a new --out") from exc
    if not readable_by_prepare(meta):  # another tool's meta.json: prepare would replace it, or fail on it
        raise UserError(f"--out {out} holds a {META_FILE} that is not prepare's (no splits or tokenizer in it); "
                        "refusing to replace it; pick an empty or new directory")
    return meta


def _ours(path: Path) -> bool:
    """What `prepare` itself leaves in DATA_DIR, also when it was killed half-way."""
    return path.name in (".cache", f".{META_FILE}.tmp", prepare_lock.LOCK) or path.name.startswith("gen-")


def _token_dtype(requested: str, vocab_size: int) -> np.dtype:
    fits16 = vocab_size <= 2**16
    if requested == "uint16" and not fits16:
        raise UserError(f"a vocabulary of {vocab_size} tokens does not fit --token-dtype uint16 (at most 65536); "
                        "use --token-dtype uint32 or auto")
    if requested == "auto":
        return np.dtype(np.uint16 if fits16 else np.uint32)
    return np.dtype(requested)


def prepare(args: argparse.Namespace) -> Path:
    out = Path(args.out)
    check_usable(out, "--out")
    _check_out_before_writing(args.data, out)
    try:  # atomically: of two prepares starting at once, only the one that made it may remove it
        out.mkdir(parents=True)
        created = True
    except FileExistsError:
        created = False
    except OSError as exc:
        cause = storage_failure(exc)
        if cause is None:
            raise UserError(f"--out {out}: cannot create it ({exc.strerror or exc}); pick another --out") from exc
        raise storage_error(cause, f"the prepared data to {out}", "nothing was written") from exc

    def stop_now() -> None:
        """SIGTERM or Ctrl-C: unwinding through datasets' pool can deadlock on its queue locks, so stop
        its processes, drop a folder that only this run wrote, and exit (143 / 130). A half-written
        generation in an existing DATA_DIR is never referenced by meta.json and the next run clears it."""
        import multiprocess

        for child in multiprocess.active_children():
            child.kill()
        if created:
            shutil.rmtree(out, ignore_errors=True)

    try:
        with exit_on_signals(before_exit=stop_now, hard=True), prepare_lock.hold(out):
            try:
                return _prepare(args, out)
            except BaseException:
                if created:  # all in it is this run's: leave no half-written folder (or full disk) behind
                    shutil.rmtree(out, ignore_errors=True)  # while locked: a waiting prepare starts over
                raise
    except BaseException as exc:
        cause = None if isinstance(exc, UserError) else storage_failure(exc)
        if cause is None:
            raise
        kept = "nothing was left behind" if created else f"the data already in {out} is untouched"
        raise storage_error(cause, f"the prepared data to {out}", kept) from exc


_CHILDREN_DIE_WITH: int | None = None  # set while tokenizing: the pid whose forked children die with it


def _in_forked_child() -> None:
    """In each process forked while tokenizing (datasets' pool workers and its manager process).

    PR_SET_PDEATHSIG (Linux): the child gets SIGKILL when `prepare` dies, even by kill -9. And the
    default signal handling back: the parent's SIGTERM handler, inherited by fork, would only run
    after a whole batch is tokenized (Python handlers wait for the Rust call); Ctrl-C is for the
    parent, which then stops its children.
    """
    parent = _CHILDREN_DIE_WITH
    if parent is None or os.getppid() != parent:
        return
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # 1 = PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        return  # not Linux: the parent's signal handler is all there is
    if os.getppid() != parent:
        os._exit(1)  # the parent died before the request was made


os.register_at_fork(after_in_child=_in_forked_child)


def _prepare(args: argparse.Namespace, out: Path) -> Path:
    suffixes = {s if s.startswith(".") else f".{s}" for s in args.extensions.split(",") if s}
    found = discover(args.data, suffixes, out)
    found.warn_passed_over()
    keep_readable_text(found, args.encoding)
    if not found.files():
        raise UserError(f"no usable text in {' '.join(args.data)}: {found.why_empty()}; point --data at text "
                        "files (or widen --extensions, or pass --encoding)")

    trained_vocab = parse_tokenizer_spec(args.tokenizer)
    loaded = None if trained_vocab else tok.load(args.tokenizer)
    if trained_vocab is None:
        _token_dtype(args.token_dtype, len(loaded))
    elif args.token_dtype == "uint16" and trained_vocab > 2**16:
        _token_dtype(args.token_dtype, trained_vocab)
    identity = args.tokenizer if trained_vocab else tok.fingerprint(loaded)
    previous = _existing_meta(out)
    if previous is not None and previous["tokenizer"]["spec_identity"] != identity:
        raise UserError(f"{out} holds data from tokenizer '{previous['tokenizer']['spec']}', not '{args.tokenizer}'; "
                        "mixing token ids from different tokenizers is meaningless; use a new --out or "
                        f"--tokenizer {previous['tokenizer']['spec']}")
    fingerprint = _input_fingerprint(found, args, identity)
    if previous is not None and previous.get("input_fingerprint") == fingerprint and _shards_intact(out, previous):
        info(f"{out} is up to date ({previous['splits']['train']['tokens']:,} train tokens); nothing to do")
        return out

    import datasets

    out.mkdir(parents=True, exist_ok=True)
    corpus = load_corpus(found, args, out / ".cache", fingerprint)
    documents = int(sum(corpus["end"]))
    if documents == 0:
        raise UserError(f"the corpus in {' '.join(args.data)} is empty (no non-blank text); add text")
    if trained_vocab:
        info(f"training a byte-level BPE tokenizer with {trained_vocab} tokens on {documents} documents")
        tokenizer = tok.train((row["text"] for row in corpus), trained_vocab)
    else:
        tokenizer = loaded
    dtype = _token_dtype(args.token_dtype, len(tokenizer))

    eos = tokenizer.eos_token_id
    num_proc = min(args.num_proc or os.cpu_count() or 1, max(1, len(corpus)))
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")  # the worker processes parallelise instead

    def encode(batch):
        ids = tokenizer(batch["text"], add_special_tokens=False, verbose=False)["input_ids"]
        ids = [x + [eos] if end else x for x, end in zip(ids, batch["end"], strict=True)]
        return {"ids": ids, "n": [len(x) for x in ids]}

    # uint32 ids in the cache: half the disk of datasets' default int64 lists
    features = datasets.Features({"ids": datasets.Sequence(datasets.Value("uint32")), "n": datasets.Value("int64")})
    global _CHILDREN_DIE_WITH
    _CHILDREN_DIE_WITH = os.getpid()
    try:
        tokenized = corpus.map(encode, batched=True, batch_size=64, num_proc=num_proc if num_proc > 1 else None,
                               remove_columns=["text", "end"], features=features, desc="tokenizing")
    finally:
        _CHILDREN_DIE_WITH = None
    total = int(sum(tokenized["n"]))

    generation = out / f"gen-{uuid.uuid4().hex[:10]}"
    generation.mkdir()
    try:
        tokenizer.save_pretrained(generation / "tokenizer")
        # Identity of the tokenizer as saved (what train and exports load), not of the in-memory object.
        saved_identity = tok.fingerprint(tok.load(str(generation / "tokenizer")))
        splits = _write_shards(tokenized, total, generation, dtype, args)
    except BaseException:
        shutil.rmtree(generation, ignore_errors=True)  # only our own half-written generation
        raise
    meta = {
        "format_version": FORMAT_VERSION,
        "input_fingerprint": fingerprint,
        "dtype": dtype.name,
        "tokenizer": {"spec": args.tokenizer, "spec_identity": identity, "trained": bool(trained_vocab),
                      "dir": f"{generation.name}/tokenizer", "vocab_size": len(tokenizer), "eos_token_id": eos,
                      "fingerprint": saved_identity},
        "splits": splits,
        "documents": documents,
        "sources": [str(p) for p in found.files()],
    }
    tmp = out / f".{META_FILE}.tmp"
    tmp.write_text(json.dumps(meta, indent=1))
    os.replace(tmp, out / META_FILE)  # the commit point
    for stale in out.glob("gen-*"):  # the previous generation, and any a killed run left behind
        if stale != generation:
            shutil.rmtree(stale, ignore_errors=True)
    asked = (f" of the {trained_vocab:,} asked: BPE found no more pairs worth merging in this corpus"
             if trained_vocab and trained_vocab != len(tokenizer) else "")
    info(f"wrote {splits['train']['tokens']:,} train and {splits['val']['tokens']:,} validation tokens "
         f"({dtype.name}, vocabulary {len(tokenizer):,}{asked}) from {documents} documents to {out}")
    return out


def _write_shards(tokenized, total: int, folder: Path, dtype: np.dtype, args) -> dict:
    from tqdm import tqdm

    train = ShardWriter(folder, "train", dtype, args.shard_tokens)
    val = ShardWriter(folder, "val", dtype, args.shard_tokens)
    chunk = chunk_tokens(total, args.val_fraction)
    held_out = val_chunks(-(-total // chunk), args.val_fraction)
    position = 0
    with tqdm(total=total, unit="tok", unit_scale=True, desc="writing shards") as bar:
        for batch in tokenized.iter(batch_size=256):
            for ids in batch["ids"]:
                tokens = np.asarray(ids, dtype=np.int64)
                while len(tokens):
                    room = chunk - position % chunk
                    piece = tokens[:room]
                    (val if position // chunk in held_out else train).add(piece)
                    position += len(piece)
                    tokens = tokens[room:]
                bar.update(len(ids))
    train.close()
    val.close()
    return {"train": {"tokens": train.tokens, "shards": train.shards},
            "val": {"tokens": val.tokens, "shards": val.shards}}


def _shards_intact(out: Path, meta: dict) -> bool:
    itemsize = np.dtype(meta["dtype"]).itemsize
    for split in meta["splits"].values():
        for shard in split["shards"]:
            path = out / shard["file"]
            if not path.is_file() or path.stat().st_size != shard["tokens"] * itemsize:
                return False
    return (out / meta["tokenizer"]["dir"]).is_dir()
