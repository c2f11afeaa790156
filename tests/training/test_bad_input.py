"""Every bad input: one line on stderr (what is wrong, how to fix it), exit 2, nothing lost."""

from __future__ import annotations

import hashlib
import os
import resource
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from tests.training.helpers import REPO, cli, env, train


def one_line_error(result, *fragments: str) -> str:
    code, _, err = result
    progress_bar = ("it/s]", "examples/s]", "tok/s]")
    lines = [line for line in err.splitlines() if line and not line.startswith("[trainstack] warning")
             and not any(mark in line for mark in progress_bar)]
    assert code == 2, err
    assert len(lines) == 1 and lines[0].startswith("error: "), err
    for fragment in fragments:
        assert fragment in lines[0], lines[0]
    return lines[0]


def tree_digest(root: Path) -> str:
    digest = hashlib.sha256()
    for path in sorted(p for p in root.rglob("*") if p.is_file()):
        digest.update(str(path.relative_to(root)).encode() + path.read_bytes())
    return digest.hexdigest()


def prepare(*args: str):
    return cli(["prepare", "--num-proc", "1", *args])


def test_missing_path(tmp_path):
    one_line_error(prepare("--data", str(tmp_path / "nope"), "--out", str(tmp_path / "d")), "does not exist")
    one_line_error(prepare("--data", str(tmp_path / "*.txt"), "--out", str(tmp_path / "d")), "no files match")
    one_line_error(train(tmp_path / "nodata", tmp_path / "run"), "does not exist", "prepare")
    assert not (tmp_path / "d").exists() and not (tmp_path / "run").exists()


def test_empty_corpus(tmp_path):
    (tmp_path / "empty.txt").write_text("")
    (tmp_path / "blank.txt").write_text("  \n\n\t\n")
    one_line_error(prepare("--data", str(tmp_path), "--out", str(tmp_path / "d"), "--tokenizer", "train:300"),
                   "no usable text")


def test_binary_files_are_skipped_with_a_warning_and_an_error_if_nothing_is_left(tmp_path):
    (tmp_path / "blob.txt").write_bytes(b"\x7fELF\x00\x00\x01binary")
    result = prepare("--data", str(tmp_path / "blob.txt"), "--out", str(tmp_path / "d"), "--tokenizer", "train:300")
    assert "skipping" in result[2] and "binary file" in result[2]
    one_line_error(result, "no usable text")
    (tmp_path / "good.txt").write_text("Plenty of good text here. " * 50)
    code, _, err = prepare("--data", str(tmp_path / "blob.txt"), str(tmp_path / "good.txt"), "--out",
                           str(tmp_path / "d"), "--tokenizer", "train:300")
    assert code == 0 and f"skipping {tmp_path / 'blob.txt'}: binary file" in err


def test_unreadable_file_is_skipped_and_an_error_if_nothing_is_left(tmp_path):
    if os.geteuid() == 0:
        unreadable = Path("/proc/self/mem")  # root may read any file; reading this one fails with EIO
    else:
        unreadable = tmp_path / "secret.txt"
        unreadable.write_text("text")
        unreadable.chmod(0)
    (tmp_path / "good.txt").write_text("Plenty of good text here. " * 50)
    code, _, err = prepare("--data", str(unreadable), str(tmp_path / "good.txt"), "--out", str(tmp_path / "d"),
                           "--tokenizer", "train:300")
    assert code == 0 and f"skipping {unreadable}: unreadable" in err
    one_line_error(prepare("--data", str(unreadable), "--out", str(tmp_path / "d2"), "--tokenizer", "train:300"),
                   "no usable text")


def test_non_utf8_text_names_the_byte_and_the_fix(tmp_path):
    (tmp_path / "latin.txt").write_bytes("caf\u00e9 au lait, tr\u00e8s bien. ".encode("latin-1") * 30)
    result = prepare("--data", str(tmp_path / "latin.txt"), "--out", str(tmp_path / "d"), "--tokenizer", "train:300")
    assert "not valid utf-8 at byte 3; convert it to UTF-8 or pass --encoding" in result[2]
    one_line_error(result, "no usable text")
    code, _, err = prepare("--data", str(tmp_path / "latin.txt"), "--out", str(tmp_path / "d"),
                           "--tokenizer", "train:300", "--encoding", "latin-1")
    assert code == 0, err


def test_corpus_shorter_than_one_block(tmp_path):
    (tmp_path / "short.txt").write_text("Just a few words.")
    assert prepare("--data", str(tmp_path / "short.txt"), "--out", str(tmp_path / "d"), "--tokenizer", "train:300")[0] == 0
    one_line_error(train(tmp_path / "d", tmp_path / "run"), "fewer than one block", "--block-size")
    assert not list((tmp_path / "run").glob("checkpoints/*"))


def test_tokenizer_spec_and_load_errors(tmp_path):
    (tmp_path / "a.txt").write_text("text " * 100)
    one_line_error(prepare("--data", str(tmp_path), "--out", str(tmp_path / "d"), "--tokenizer", "train:abc"),
                   "VOCAB must be a whole number")
    one_line_error(prepare("--data", str(tmp_path), "--out", str(tmp_path / "d"), "--tokenizer", "train:100"),
                   "at least 257")
    one_line_error(prepare("--data", str(tmp_path), "--out", str(tmp_path / "d"),
                           "--tokenizer", str(tmp_path / "no-such-tokenizer")), "cannot load tokenizer", "train:VOCAB")


def test_missing_text_column(tmp_path):
    (tmp_path / "a.jsonl").write_text('{"body": "hello there"}\n')
    one_line_error(prepare("--data", str(tmp_path / "a.jsonl"), "--out", str(tmp_path / "d"), "--tokenizer", "train:300"),
                   "no column 'text'", "columns: body", "--text-column")


def test_unknown_preset_and_bad_numbers(data_dir, tmp_path):
    one_line_error(cli(["train", "--data", str(data_dir), "--out", str(tmp_path / "r"), "--preset", "gpt5"]),
                   "invalid choice: 'gpt5'", "--help")
    one_line_error(cli(["train", "--data", str(data_dir), "--out", str(tmp_path / "r"), "--max-steps", "0"]),
                   "--max-steps", "positive")
    one_line_error(train(data_dir, tmp_path / "r", "--n-embd", "100", "--n-head", "3"), "not divisible")


def test_data_dir_of_an_incompatible_tokenizer_is_refused_and_untouched(data_dir, tmp_path, corpus_dir):
    before = tree_digest(data_dir)
    one_line_error(prepare("--data", str(corpus_dir), "--out", str(data_dir), "--tokenizer", "train:300"),
                   "holds data from tokenizer 'train:512'", "new --out")
    assert tree_digest(data_dir) == before
    # A folder with unrelated files is never written into.
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "thesis.txt").write_text("precious")
    one_line_error(prepare("--data", str(corpus_dir), "--out", str(tmp_path / "mine"), "--tokenizer", "train:300"),
                   "refusing to write")
    assert [p.name for p in (tmp_path / "mine").iterdir()] == ["thesis.txt"]


def test_pretrained_model_with_another_tokenizer_is_refused(data_dir, corpus_dir, tmp_path):
    import shutil

    other = tmp_path / "other"
    one_file = sorted(corpus_dir.iterdir())[0]
    assert prepare("--data", str(one_file), "--out", str(other), "--tokenizer", "train:512")[0] == 0
    assert train(other, tmp_path / "pre", "--max-steps", "1")[0] == 0
    one_line_error(train(data_dir, tmp_path / "ft", "--init-from", str(tmp_path / "pre" / "export")),
                   "prepared with a different tokenizer", "re-run prepare with --tokenizer")
    # Weights without tokenizer files: the data's own trained tokenizer cannot be what they expect.
    weights = tmp_path / "weights-only"
    shutil.copytree(tmp_path / "pre" / "export", weights)
    for name in ("tokenizer.json", "tokenizer_config.json"):
        (weights / name).unlink()
    one_line_error(train(data_dir, tmp_path / "ft", "--init-from", str(weights)), "trained on your corpus")
    assert not (tmp_path / "ft").exists()


def test_run_dir_with_a_different_model_is_refused_and_untouched(data_dir, tmp_path):
    run = tmp_path / "run"
    assert train(data_dir, run, "--max-steps", "2", "--no-export")[0] == 0
    before = tree_digest(run / "checkpoints")
    one_line_error(train(data_dir, run, "--max-steps", "4", "--n-layer", "3"),
                   "different model configuration", "n_layer 2 there vs 3 now", "new --out")
    one_line_error(train(data_dir, run, "--max-steps", "4", "--global-batch-size", "16"), "--global-batch-size 8")
    assert tree_digest(run / "checkpoints") == before


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the CPU-only refusals")
def test_gpu_only_settings_on_a_cpu_machine(data_dir, tmp_path):
    one_line_error(train(data_dir, tmp_path / "r", "--device", "cuda"), "no CUDA GPU is visible", "--device cpu")
    one_line_error(train(data_dir, tmp_path / "r", "--precision", "fp16"), "needs a CUDA GPU")


@pytest.mark.timeout(180)
def test_a_batch_that_cannot_fit_in_memory(data_dir, tmp_path):
    """A real allocation failure (address space capped at 4 GiB), reported as advice, as a real process."""
    def cap_memory():
        resource.setrlimit(resource.RLIMIT_AS, (4 * 2**30, 4 * 2**30))

    result = subprocess.run([sys.executable, "-m", "training", "train", "--data", str(data_dir), "--out",
                             str(tmp_path / "run"), "--preset", "tiny", "--block-size", "32", "--batch-size", "40000",
                             "--max-steps", "1", "--no-progress"], env=env(), cwd=REPO, capture_output=True,
                            text=True, preexec_fn=cap_memory, timeout=170)
    one_line_error((result.returncode, result.stdout, result.stderr), "does not fit in device memory",
                   "lower --batch-size")
    assert "Traceback" not in result.stderr
