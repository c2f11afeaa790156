"""`prepare`: every input form, the shards it writes, tokenizers, dtypes, and reuse of finished work."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from tests.support.training_runs import cli
from training.data.dataset import TokenWindows, load_meta

TEXTS = [f"Document {i}: the quick brown fox jumps over the lazy dog. " * (3 + i % 5) for i in range(40)]


def prepare(*args: str) -> tuple[int, str, str]:
    return cli(["prepare", "--num-proc", "1", *args])


def read_tokens(meta, split: str) -> np.ndarray:
    return np.concatenate([np.fromfile(path, dtype=meta.dtype) for path, _ in meta.shards(split)]
                          or [np.zeros(0, dtype=meta.dtype)])


@pytest.fixture(scope="module")
def gpt2_style_tokenizer(tmp_path_factory):
    """A directory with only vocab.json + merges.txt, the file layout of the GPT-2 hub tokenizer."""
    from tokenizers import ByteLevelBPETokenizer

    folder = tmp_path_factory.mktemp("gpt2-tokenizer")
    bpe = ByteLevelBPETokenizer()
    bpe.train_from_iterator(TEXTS * 5, vocab_size=400, special_tokens=["<|endoftext|>"], show_progress=False)
    bpe.save_model(str(folder))
    return folder


def test_text_structured_and_glob_sources_in_one_corpus(tmp_path, gpt2_style_tokenizer):
    src = tmp_path / "src"
    (src / "nested").mkdir(parents=True)
    (src / "a.txt").write_text(TEXTS[0])
    (src / "nested" / "b.md").write_text(TEXTS[1])
    (src / "ignored.bin").write_bytes(b"\x00\x01")  # unknown suffix inside a directory: not picked up
    (tmp_path / "c.jsonl").write_text("\n".join(json.dumps({"body": t, "id": i}) for i, t in enumerate(TEXTS[2:6])))
    (tmp_path / "d.csv").write_text("body,id\n" + "\n".join(f'"{t}",{i}' for i, t in enumerate(TEXTS[6:9])))
    import pyarrow as pa
    import pyarrow.parquet as pq

    pq.write_table(pa.table({"body": TEXTS[9:12]}), tmp_path / "e.parquet")
    (tmp_path / "f.json").write_text(json.dumps([{"body": t} for t in TEXTS[12:14]]))
    (tmp_path / "globbed").mkdir()
    for i in range(2):
        (tmp_path / "globbed" / f"g{i}.txt").write_text(TEXTS[14 + i])

    code, out, err = prepare("--data", str(src), str(tmp_path / "c.jsonl"), str(tmp_path / "d.csv"),
                             str(tmp_path / "e.parquet"), str(tmp_path / "f.json"), str(tmp_path / "globbed" / "*.txt"),
                             "--text-column", "body", "--out", str(tmp_path / "data"),
                             "--tokenizer", str(gpt2_style_tokenizer))
    assert code == 0, err
    meta = load_meta(tmp_path / "data")
    assert meta.raw["documents"] == 16
    from transformers import GPT2TokenizerFast

    tok = GPT2TokenizerFast.from_pretrained(gpt2_style_tokenizer)
    assert meta.dtype == np.uint16 and meta.vocab_size == len(tok)

    # Every document, tokenized independently and followed by end-of-text, is in the shards exactly once.
    expected = sum(len(tok(t)["input_ids"]) + 1 for t in TEXTS[:16])
    train, val = read_tokens(meta, "train"), read_tokens(meta, "val")
    assert len(train) + len(val) == expected
    assert meta.split_tokens("train") == len(train) and len(val) > 0
    assert int((np.concatenate([train, val]) == tok.eos_token_id).sum()) == 16
    assert "quick brown fox" in tok.decode(train[:200])


def test_rerun_on_the_same_input_reuses_finished_work(tmp_path):
    (tmp_path / "a.txt").write_text("".join(TEXTS))
    args = ["--data", str(tmp_path / "a.txt"), "--out", str(tmp_path / "data"), "--tokenizer", "train:300"]
    assert prepare(*args)[0] == 0
    meta_before = (tmp_path / "data" / "meta.json").read_text()
    code, out, _ = prepare(*args)
    assert code == 0 and "up to date" in out
    assert (tmp_path / "data" / "meta.json").read_text() == meta_before

    # Changed input: a new generation replaces the old one atomically; the old folder is gone.
    tokens_before = json.loads(meta_before)["splits"]["train"]["tokens"] + json.loads(meta_before)["splits"]["val"]["tokens"]
    (tmp_path / "a.txt").write_text("".join(TEXTS) + "A new paragraph about something else entirely.\n")
    code, out, _ = prepare(*args)
    assert code == 0 and "up to date" not in out
    meta_after = json.loads((tmp_path / "data" / "meta.json").read_text())
    assert meta_after["splits"]["train"]["tokens"] + meta_after["splits"]["val"]["tokens"] > tokens_before
    generations = sorted(p.name for p in (tmp_path / "data").glob("gen-*"))
    assert len(generations) == 1 and generations[0] in (tmp_path / "data" / "meta.json").read_text()


def test_large_vocabulary_is_stored_as_uint32(tmp_path):
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers
    from transformers import GPT2TokenizerFast

    # A byte-level BPE vocabulary of 70,000 entries (256 bytes + filler): too large for uint16.
    alphabet = pre_tokenizers.ByteLevel.alphabet()
    vocab = {ch: i for i, ch in enumerate(sorted(alphabet))}
    vocab.update({f"filler{i}": len(vocab) + i for i in range(70_000 - len(vocab) - 1)})
    vocab["<|endoftext|>"] = len(vocab)
    backend = Tokenizer(models.BPE(vocab=vocab, merges=[]))
    backend.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    backend.decoder = decoders.ByteLevel()
    GPT2TokenizerFast(tokenizer_object=backend, eos_token="<|endoftext|>").save_pretrained(tmp_path / "tok")
    (tmp_path / "a.txt").write_text(TEXTS[0])

    code, _, err = prepare("--data", str(tmp_path / "a.txt"), "--out", str(tmp_path / "data"),
                           "--tokenizer", str(tmp_path / "tok"))
    assert code == 0, err
    meta = load_meta(tmp_path / "data")
    assert meta.dtype == np.uint32
    # The end-of-text id 69,999 needs more than 16 bits: in uint16 it would have wrapped to 4,463.
    tokens = np.concatenate([read_tokens(meta, "train"), read_tokens(meta, "val")])
    assert (tokens == 69_999).sum() == 1 and tokens.max() == 69_999

    code, _, err = prepare("--data", str(tmp_path / "a.txt"), "--out", str(tmp_path / "data16"),
                           "--tokenizer", str(tmp_path / "tok"), "--token-dtype", "uint16")
    assert code == 2
    assert err == ("error: a vocabulary of 70000 tokens does not fit --token-dtype uint16 (at most 65536); "
                   "use --token-dtype uint32 or auto\n")
    assert not (tmp_path / "data16").exists()


def test_windows_cover_the_split_without_overlap(data_dir):
    meta = load_meta(data_dir)
    windows = TokenWindows(meta.shards("train"), meta.dtype, block_size=32)
    assert len(windows) == (meta.split_tokens("train") - 1) // 32
    x, y = windows.batch([0, 1])
    assert x.shape == (2, 32) and (x[0, 1:] == y[0, :-1]).all() and (y[0, -1] == x[1, 0])


def test_a_killed_run_does_not_block_the_next_one(tmp_path):
    (tmp_path / "a.txt").write_text("".join(TEXTS))
    out = tmp_path / "data"
    (out / "gen-deadbeef00").mkdir(parents=True)  # what a SIGKILLed prepare leaves behind
    (out / "gen-deadbeef00" / "train_0000.bin").write_bytes(b"\0" * 10)
    (out / ".meta.json.tmp").write_text("{")
    code, _, err = prepare("--data", str(tmp_path / "a.txt"), "--out", str(out), "--tokenizer", "train:300")
    assert code == 0, err
    assert not (out / "gen-deadbeef00").exists()
    assert len(list(out.glob("gen-*"))) == 1


def test_a_big_file_is_read_in_pieces_with_one_end_of_text(tmp_path, monkeypatch, gpt2_style_tokenizer):
    import training.data.sources

    monkeypatch.setattr(training.data.sources, "CHUNK_CHARS", 2000)  # so a small file spans many pieces
    text = "".join(f"line {i}: {TEXTS[i % len(TEXTS)]}\n" for i in range(300))
    (tmp_path / "big.txt").write_text(text)
    code, _, err = prepare("--data", str(tmp_path / "big.txt"), "--out", str(tmp_path / "data"),
                           "--tokenizer", str(gpt2_style_tokenizer))
    assert code == 0, err
    meta = load_meta(tmp_path / "data")
    assert meta.raw["documents"] == 1
    from transformers import GPT2TokenizerFast

    tok = GPT2TokenizerFast.from_pretrained(gpt2_style_tokenizer)
    tokens = np.concatenate([read_tokens(meta, "train"), read_tokens(meta, "val")])
    assert int((tokens == tok.eos_token_id).sum()) == 1
    # Cutting at line ends changes nothing for a byte-level BPE that never merges across newlines.
    assert len(tokens) == len(tok(text)["input_ids"]) + 1


@pytest.mark.timeout(240)
@pytest.mark.parametrize("how", ["SIGINT", "SIGTERM", "SIGKILL"])
def test_killing_prepare_leaves_no_worker_processes(how, tmp_path, gpt2_style_tokenizer):
    """Kill only the parent (as a supervisor or `kill PID` would): its tokenizer processes must go too."""
    import signal
    import sys

    from testbed.processes import descendants, kill_tree, wait_for
    from tests.support.training_runs import spawn

    big = "".join(f"{i}: {TEXTS[i % len(TEXTS)]}\n" for i in range(60_000))  # ~10 MB: seconds to tokenize
    for i in range(4):
        (tmp_path / f"part{i}.txt").write_text(big)
    proc = spawn([sys.executable, "-m", "training", "prepare", "--data", str(tmp_path), "--out",
                  str(tmp_path / "data"), "--tokenizer", str(gpt2_style_tokenizer), "--num-proc", "2"],
                 tmp_path / "log")
    workers = []
    try:
        workers = wait_for(lambda: len(descendants(proc.pid)) >= 2 and descendants(proc.pid), 120,
                           "the tokenizer processes", poll=0.05)
        proc.send_signal(getattr(signal, how))
        code = proc.wait(timeout=60)
        assert code == {"SIGINT": 130, "SIGTERM": 143, "SIGKILL": -9}[how], (tmp_path / "log").read_text()[-2000:]
        wait_for(lambda: not any(alive(pid) for pid in workers), 30, f"workers {workers} to exit after {how}")
    finally:  # whatever happened, leave no processes of this test behind
        for pid in [proc.pid, *workers]:
            kill_tree(pid)
    if how != "SIGKILL":
        assert "Traceback" not in (tmp_path / "log").read_text()
        assert not (tmp_path / "data").exists(), "a first run that was stopped leaves nothing behind"


def alive(pid: int) -> bool:
    """Running (a zombie has exited; it only waits for its parent to read its status)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().split(")")[1].split()[0] != "Z"
    except OSError:
        return False
