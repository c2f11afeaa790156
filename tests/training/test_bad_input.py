"""Every bad input: one line on stderr (what is wrong, how to fix it), exit 2, nothing lost."""

from __future__ import annotations

import hashlib
import json
import os
import re
import resource
import socket
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from tests.support.training_runs import REPO, TINY, cli, env, one_line_error, train
from training.data.dataset import load_meta


def tree_digest(root: Path) -> str:
    digest = hashlib.sha256()
    for path in sorted(p for p in root.rglob("*") if p.is_file()):
        digest.update(str(path.relative_to(root)).encode() + path.read_bytes())
    return digest.hexdigest()


def tree(root: Path) -> dict[str, str]:
    """Every file and folder under `root` (relative path -> content digest, or "dir"); {} when absent."""
    if not root.exists():
        return {}
    return {str(p.relative_to(root)): "dir" if p.is_dir() else hashlib.sha256(p.read_bytes()).hexdigest()
            for p in root.rglob("*")}


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
                           "--tokenizer", str(tmp_path / "no-such-tokenizer")), "no-such-tokenizer: no such directory")


def test_missing_text_column(tmp_path):
    (tmp_path / "a.jsonl").write_text('{"body": "hello there"}\n')
    one_line_error(prepare("--data", str(tmp_path / "a.jsonl"), "--out", str(tmp_path / "d"), "--tokenizer", "train:300"),
                   "no column 'text'", "columns: body", "--text-column")


def test_unknown_preset_and_bad_numbers(data_dir, tmp_path):
    one_line_error(cli(["train", "--data", str(data_dir), "--out", str(tmp_path / "r"), "--preset", "gpt5"]),
                   "invalid choice: 'gpt5'", "--help")
    one_line_error(cli(["train", "--data", str(data_dir), "--out", str(tmp_path / "r"), "--max-steps", "0"]),
                   "--max-steps", "a whole number >= 1")
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
                   "different model configuration", "n_layer 2 there vs 3 now", "new --out",
                   "resume it with --preset tiny --n-embd 64 --n-head 2 --block-size 32 (the shape it was started with)")
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
    assert not (tmp_path / "run").exists(), "a first run that failed leaves no run_config.json to refuse the fix"


# ---------------------------------------------------------------- every flag, refused at parse time
NO_DATA, NO_RUN = "/nonexistent/data", "/nonexistent/run"  # never reached: these cases fail before any file is read
TRAIN = ["train", "--data", NO_DATA, "--out", NO_RUN]
PREPARE = ["prepare", "--data", NO_DATA, "--out", NO_RUN]
SAMPLE = ["sample", NO_RUN]
PARSE_TIME_CASES = {
    # learning rates: NaN, infinity, negative, zero, out of range, and against each other
    "lr nan": (TRAIN + ["--lr", "nan"], "--lr: must be a finite number > 0 and <= 1, got 'nan'"),
    "lr inf": (TRAIN + ["--lr", "inf"], "--lr: must be a finite number"),
    "lr negative": (TRAIN + ["--lr", "-0.001"], "--lr: must be a finite number > 0"),
    "lr negative exponent": (TRAIN + ["--lr", "-1e-3"], "--lr: expected one argument"),
    "lr zero": (TRAIN + ["--lr", "0"], "--lr: must be a finite number > 0"),
    "lr above 1": (TRAIN + ["--lr", "3"], "--lr: must be a finite number <= 1, got 3"),
    "lr not a number": (TRAIN + ["--lr", "fast"], "--lr: must be a finite number > 0 and <= 1, got 'fast'"),
    "min-lr above lr": (TRAIN + ["--lr", "1e-4", "--min-lr", "1e-3"], "--min-lr 0.001 is above --lr 0.0001"),
    "min-lr negative": (TRAIN + ["--min-lr", "-1"], "--min-lr: must be a finite number >= 0"),
    # optimizer and model numbers
    "beta1 one": (TRAIN + ["--beta1", "1"], "--beta1: must be a finite number < 1, got 1"),
    "beta2 negative": (TRAIN + ["--beta2", "-0.1"], "--beta2: must be a finite number >= 0 and < 1"),
    "beta2 nan": (TRAIN + ["--beta2", "NaN"], "--beta2: must be a finite number"),
    "weight decay negative": (TRAIN + ["--weight-decay", "-0.1"], "--weight-decay: must be a finite number >= 0"),
    "grad clip negative": (TRAIN + ["--grad-clip", "-1"], "--grad-clip: must be a finite number >= 0"),
    "grad clip inf": (TRAIN + ["--grad-clip", "inf"], "--grad-clip: must be a finite number"),
    "dropout one": (TRAIN + ["--dropout", "1"], "--dropout: must be a finite number < 1"),
    "dropout negative": (TRAIN + ["--dropout", "-0.5"], "--dropout: must be a finite number >= 0"),
    "dropout nan": (TRAIN + ["--dropout", "nan"], "--dropout: must be a finite number"),
    "n-embd vs n-head": (TRAIN + ["--preset", "tiny", "--n-embd", "100", "--n-head", "3"], "not divisible"),
    "shape of a pretrained model": (TRAIN + ["--init-from", "gpt2", "--n-layer", "4"],
                                    "--n-layer cannot change a pretrained model's architecture"),
    "unknown preset": (TRAIN + ["--preset", "gpt5"], "invalid choice: 'gpt5'"),
    # steps, token counts, sizes, seeds
    "max-steps zero": (TRAIN + ["--max-steps", "0"], "--max-steps: must be a whole number >= 1, got 0"),
    "max-steps negative": (TRAIN + ["--max-steps", "-5"], "--max-steps: must be a whole number >= 1"),
    "max-steps float": (TRAIN + ["--max-steps", "1e3"], "--max-steps: must be a whole number >= 1, got '1e3'"),
    "max-steps huge": (TRAIN + ["--max-steps", "9" * 30], "--max-steps: must be a whole number <="),
    "warmup negative": (TRAIN + ["--warmup-steps", "-1"], "--warmup-steps: must be a whole number >= 0"),
    "batch zero": (TRAIN + ["--batch-size", "0"], "--batch-size: must be a whole number >= 1"),
    "global batch zero": (TRAIN + ["--global-batch-size", "0"], "--global-batch-size: must be a whole number >= 1"),
    "block size zero": (TRAIN + ["--block-size", "0"], "--block-size: must be a whole number >= 1"),
    "eval samples zero": (TRAIN + ["--eval-samples", "0"], "--eval-samples: must be a whole number >= 1"),
    "keep zero checkpoints": (TRAIN + ["--keep-checkpoints", "0"], "--keep-checkpoints: must be a whole number >= 1"),
    "checkpoint-every zero": (TRAIN + ["--checkpoint-every", "0"], "--checkpoint-every: must be a whole number >= 1"),
    "dist timeout zero": (TRAIN + ["--dist-timeout", "0"], "--dist-timeout: must be a whole number >= 1"),
    "seed negative": (TRAIN + ["--seed", "-1"], "--seed: must be a whole number >= 0 and <= 4294967295"),
    "seed above 32 bits": (TRAIN + ["--seed", str(2**32)], "--seed: must be a whole number <= 4294967295"),
    "empty --out": (["train", "--data", NO_DATA, "--out", ""], "--out: must be a path, got an empty string"),
    # prepare
    "val fraction zero": (PREPARE + ["--val-fraction", "0"], "--val-fraction: must be a finite number > 0 and < 1"),
    "val fraction one": (PREPARE + ["--val-fraction", "1"], "--val-fraction: must be a finite number"),
    "val fraction nan": (PREPARE + ["--val-fraction", "nan"], "--val-fraction: must be a finite number"),
    "num-proc zero": (PREPARE + ["--num-proc", "0"], "--num-proc: must be a whole number >= 1"),
    "shard tokens zero": (PREPARE + ["--shard-tokens", "0"], "--shard-tokens: must be a whole number >= 1"),
    "unknown encoding": (PREPARE + ["--encoding", "klingon"], "--encoding klingon: unknown encoding"),
    "tokenizer vocab word": (PREPARE + ["--tokenizer", "train:big"], "VOCAB must be a whole number"),
    "tokenizer vocab small": (PREPARE + ["--tokenizer", "train:10"], "at least 257"),
    "empty --data": (["prepare", "--data", "", "--out", NO_RUN], "--data: must be a path"),
    # sample
    "temperature negative": (SAMPLE + ["--temperature", "-1"], "--temperature: must be a finite number >= 0"),
    "temperature nan": (SAMPLE + ["--temperature", "nan"], "--temperature: must be a finite number"),
    "temperature inf": (SAMPLE + ["--temperature", "inf"], "--temperature: must be a finite number"),
    "top-k negative": (SAMPLE + ["--top-k", "-3"], "--top-k: must be a whole number >= 0"),
    "no new tokens": (SAMPLE + ["--max-new-tokens", "0"], "--max-new-tokens: must be a whole number >= 1"),
    "zero samples": (SAMPLE + ["--num-samples", "0"], "--num-samples: must be a whole number >= 1"),
    # bench and demo
    "bench vocabulary of one": (["bench", "--vocab-size", "1"], "--vocab-size: must be a whole number >= 2"),
    "bench heads": (["bench", "--preset", "tiny", "--block-size", "0"], "--block-size: must be a whole number >= 1"),
    "demo workers zero": (["demo", "--nproc", "0"], "--nproc: must be a whole number >= 1"),
}


@pytest.mark.parametrize("case", sorted(PARSE_TIME_CASES))
def test_flags_are_refused_in_one_line_before_any_work(case, tmp_path, monkeypatch):
    argv, expected = PARSE_TIME_CASES[case]
    monkeypatch.chdir(tmp_path)  # an empty --out would mean the current directory
    one_line_error(cli(argv), expected)
    assert not list(tmp_path.iterdir()) and not Path(NO_RUN).exists()


def test_parse_time_refusals_do_not_even_import_torch():
    """Exit 1 is "retry" for the Job; these must be exit 2 in the time it takes to start Python."""
    script = ("import sys\nfrom tests.support.training_runs import cli\n"
              f"codes = [cli(argv)[0] for argv in {[PARSE_TIME_CASES[c][0] for c in ('lr nan', 'min-lr above lr', 'n-embd vs n-head', 'unknown encoding')]!r}]\n"
              "assert codes == [2, 2, 2, 2], codes\nassert 'torch' not in sys.modules\n")
    result = subprocess.run([sys.executable, "-c", script], env=env(), cwd=REPO, capture_output=True, text=True,
                            timeout=60)
    assert result.returncode == 0, result.stderr


def test_the_api_for_the_cluster_config_checks_train_args_like_the_trainer():
    from trainstack.contract.cli import check_train_args, train_flags
    from trainstack.contract.errors import UserError

    flags = {f.flag: f for f in train_flags()}
    assert flags["--lr"].kind == "float" and flags["--max-steps"].kind == "int" and flags["--max-steps"].default == 1000
    assert flags["--no-export"].kind == "bool" and flags["--preset"].choices[0] == "gpt2"
    assert flags["--data"].required and not flags["--init-from"].required
    assert set(flags) >= {"--min-lr", "--beta2", "--keep-checkpoints", "--dist-timeout", "--compile"}
    assert check_train_args(["--data", NO_DATA, "--out", NO_RUN, "--lr", "3e-4"]).lr == 3e-4
    for case in ("lr nan", "min-lr above lr", "n-embd vs n-head", "unknown preset", "max-steps float"):
        argv, expected = PARSE_TIME_CASES[case]
        with pytest.raises(UserError, match=re.escape(expected)):
            check_train_args(argv[1:])
    with pytest.raises(UserError, match="unrecognized arguments: --lrr"):
        check_train_args(["--data", NO_DATA, "--out", NO_RUN, "--lrr", "1"])


# ---------------------------------------------------------------- RUN_DIR: nothing lost, nothing half-done
def corrupt(path: Path) -> None:
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0xFF
    path.write_bytes(bytes(data))


@pytest.fixture(scope="module")
def finished_run(data_dir, tmp_path_factory) -> Path:
    """A run with two checkpoints and an export, copied by the tests that damage it."""
    run = tmp_path_factory.mktemp("finished") / "run"
    code, _, err = train(data_dir, run, "--max-steps", "4", "--checkpoint-every", "2")
    assert code == 0, err
    return run


def copy_of(run: Path, tmp_path: Path) -> Path:
    import shutil

    shutil.copytree(run, tmp_path / "run")
    return tmp_path / "run"


def test_all_checkpoints_damaged_stops_instead_of_starting_over(finished_run, data_dir, tmp_path):
    run = copy_of(finished_run, tmp_path)
    for model in run.glob("checkpoints/step_*/model.pt"):
        corrupt(model)
    before = tree(run)
    line = one_line_error(train(data_dir, run, "--max-steps", "8"), "every checkpoint in", "is damaged",
                          "step_00000004: model.pt fails its checksum", "use a new --out")
    assert "step_00000002" in line
    assert tree(run) == before, "the damaged checkpoints and the good export are exactly as they were"


def test_an_export_without_checkpoints_is_not_overwritten_by_a_new_run(finished_run, data_dir, tmp_path):
    import shutil

    run = copy_of(finished_run, tmp_path)
    shutil.rmtree(run / "checkpoints")
    before = tree(run)
    one_line_error(train(data_dir, run, "--max-steps", "2"), "holds an export but no checkpoint", "new --out")
    assert tree(run) == before


def test_a_first_run_that_fails_leaves_no_trace_so_the_suggested_fix_works(data_dir, tmp_path):
    run = tmp_path / "runs" / "first"
    too_long = str(10 * (load_meta(data_dir).split_tokens("train")))
    one_line_error(train(data_dir, run, "--max-steps", "2", "--block-size", too_long),
                   "fewer than one block", "lower --block-size")
    assert not (tmp_path / "runs").exists(), "RUN_DIR (and the parent it created) are gone again"
    code, _, err = train(data_dir, run, "--max-steps", "2", "--block-size", "16", "--no-export")
    assert code == 0, err
    assert not (run / ".lock").exists()
    # A resumed run that fails later than validation keeps everything it had.
    before = tree(run)
    one_line_error(train(data_dir, run, "--max-steps", "4", "--block-size", "32"), "block_size 16 there vs 32 now")
    assert tree(run) == before


@pytest.mark.parametrize("where", ["root", "data dir", "inside data dir", "user folder", "a file"])
def test_out_must_be_a_place_for_a_run(where, data_dir, tmp_path):
    (tmp_path / "home").mkdir()
    (tmp_path / "home" / "thesis.tex").write_text("precious")
    (tmp_path / "notes.txt").write_text("precious")
    out, expected = {
        "root": ("/", "is the root of the file system"),
        "data dir": (data_dir, "is inside the data directory"),
        "inside data dir": (data_dir / "runs" / "a", "is inside the data directory"),
        "user folder": (tmp_path / "home", "already holds other files (thesis.tex)"),
        "a file": (tmp_path / "notes.txt", "is a file, not a directory"),
    }[where]
    before = tree(tmp_path), tree(data_dir)
    one_line_error(train(data_dir, Path(out), "--max-steps", "1"), expected)
    assert (tree(tmp_path), tree(data_dir)) == before


def test_a_run_dir_in_use_by_a_live_training_is_refused(data_dir, tmp_path):
    run = tmp_path / "run"
    assert train(data_dir, run, "--max-steps", "1", "--no-export")[0] == 0
    live = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        from training.run_dir.lock import _start_ticks

        owner = {"host": socket.gethostname(), "pid": live.pid, "start": _start_ticks(live.pid), "run_id": None,
                 "agent_pid": None, "since": "earlier", "token": "theirs"}
        (run / ".lock").write_text(json.dumps(owner))
        before = tree(run)
        one_line_error(train(data_dir, run, "--max-steps", "2"), "is in use by another training",
                       f"pid {live.pid} on {socket.gethostname()}", "another --out")
        assert tree(run) == before
    finally:
        live.kill()
        live.wait()
    # The same lock once its owner is dead: taken over with a warning, released at the end.
    code, _, err = train(data_dir, run, "--max-steps", "2", "--no-export")
    assert code == 0, err
    assert f"its owner pid {live.pid}" in err and "is gone" in err
    assert not (run / ".lock").exists()


def write_lock(run: Path, **owner) -> Path:
    run.mkdir(parents=True, exist_ok=True)
    base = {"host": "node-b", "pid": 4242, "start": "1", "run_id": None, "agent_pid": None, "since": "earlier",
            "token": "theirs"}
    (run / ".lock").write_text(json.dumps({**base, **owner}))
    return run / ".lock"


def test_lock_decisions_for_other_hosts_torchrun_restarts_and_dead_owners(tmp_path, monkeypatch, capsys):
    import threading

    from training.run_dir import lock as run_lock
    from trainstack.contract.errors import UserError

    monkeypatch.setattr(run_lock, "OBSERVE_S", 0.5)
    # Another host whose lock is still refreshed: a live training there.
    lock = write_lock(tmp_path / "a")
    stop = threading.Event()
    beat = threading.Thread(target=lambda: [os.utime(lock) for _ in iter(lambda: stop.wait(0.05), True)])
    beat.start()
    try:
        with pytest.raises(UserError, match="in use by another training, pid 4242 on node-b .*still being refreshed"):
            run_lock.RunLock.acquire(tmp_path / "a")
    finally:
        stop.set()
        beat.join()
    # ...and once it stops refreshing: its pod is gone; taken over with a warning.
    run_lock.RunLock.acquire(tmp_path / "a").release()
    assert "stopped refreshing it" in capsys.readouterr().err and not lock.exists()

    # The same torchrun run (an elastic restart, rank 0 now on another node): taken over at once, silently.
    monkeypatch.setenv("TORCHELASTIC_RUN_ID", "job-7")
    write_lock(tmp_path / "b", run_id="job-7")
    claimed = run_lock.RunLock.acquire(tmp_path / "b")
    assert json.loads((tmp_path / "b" / ".lock").read_text())["pid"] == os.getpid()
    claimed.release()
    # The same torchrun agent, after it restarted its failed worker (torchrun's default run id "none").
    monkeypatch.setenv("TORCHELASTIC_RUN_ID", "none")
    write_lock(tmp_path / "c", host=socket.gethostname(), pid=os.getpid(), start="0", agent_pid=os.getppid())
    run_lock.RunLock.acquire(tmp_path / "c").release()
    assert capsys.readouterr().err == ""
    # A reused pid is not its owner: the recorded start time differs, so the owner is dead.
    monkeypatch.delenv("TORCHELASTIC_RUN_ID")
    write_lock(tmp_path / "d", host=socket.gethostname(), pid=os.getpid(), start="0")
    run_lock.RunLock.acquire(tmp_path / "d").release()
    assert "is gone" in capsys.readouterr().err


# ---------------------------------------------------------------- a loss that is no longer a number
@pytest.fixture()
def blow_up_at(monkeypatch):
    """Make the weights NaN right after optimizer step `at` (a real divergence: every later forward is NaN);
    with sigterm=True the process also gets SIGTERM in that step, as from a spot reclaim."""
    import signal

    import training.trainer.setup

    def arm(at: int, sigterm: bool = False):
        class Diverging(training.trainer.setup.Stepper):
            calls = 0

            def step(self, batches):
                result = super().step(batches)
                Diverging.calls += 1
                if Diverging.calls == at:
                    with torch.no_grad():
                        next(self.model.parameters()).fill_(float("nan"))
                    if sigterm:
                        os.kill(os.getpid(), signal.SIGTERM)
                return result

        monkeypatch.setattr(training.trainer.setup, "Stepper", Diverging)

    return arm


@pytest.mark.parametrize("path", ["logged loss", "checkpoint", "sigterm", "final save and export"])
def test_a_diverged_run_stops_and_never_saves_nan_over_good_checkpoints(path, blow_up_at, finished_run,
                                                                         data_dir, tmp_path):
    run = copy_of(finished_run, tmp_path)  # checkpoints 2 and 4, and an export
    before = tree(run)
    flags = {
        "logged loss": ["--max-steps", "8", "--log-every", "1"],  # step 6 is logged as nan
        "checkpoint": ["--max-steps", "8", "--log-every", "100", "--checkpoint-every", "2"],  # saving 6 refuses
        "sigterm": ["--max-steps", "8", "--log-every", "100", "--checkpoint-every", "100"],
        "final save and export": ["--max-steps", "6", "--log-every", "100", "--checkpoint-every", "100"],
    }[path]
    blow_up_at(2 if path != "logged loss" else 1, sigterm=path == "sigterm")
    one_line_error(train(data_dir, run, *flags), "the loss became nan by step",
                   "the last finite checkpoint", "step_00000004 is kept", "lower --lr")
    assert tree(run) == before, "no checkpoint, export or log of the diverged steps replaced anything"


def test_pretrained_weights_that_are_not_numbers_stop_at_the_first_step(finished_run, data_dir, tmp_path):
    from safetensors.torch import load_file, save_file

    pretrained = tmp_path / "pretrained"
    import shutil

    shutil.copytree(finished_run / "export", pretrained)
    weights = load_file(pretrained / "model.safetensors")
    weights["transformer.ln_f.weight"][:] = float("inf")
    save_file(weights, pretrained / "model.safetensors", metadata={"format": "pt"})
    one_line_error(train(data_dir, tmp_path / "ft", "--init-from", str(pretrained), "--max-steps", "4"),
                   "the loss became nan by step 1", "no checkpoint was written")
    assert not (tmp_path / "ft").exists()


# ---------------------------------------------------------------- full or read-only storage
def run_with_file_size_limit(argv: list[str], limit_bytes: int):
    """A real process whose writes beyond `limit_bytes` per file fail with EFBIG, as on a full volume."""
    import signal

    def limit():
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # so the write fails instead of killing the process
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit_bytes, limit_bytes))

    result = subprocess.run([sys.executable, "-m", "training", *argv], env=env(), cwd=REPO, capture_output=True,
                            text=True, preexec_fn=limit, timeout=170)
    return result.returncode, result.stdout, result.stderr


@pytest.mark.timeout(180)
def test_a_checkpoint_that_cannot_be_written_keeps_the_previous_one(finished_run, data_dir, tmp_path):
    run = copy_of(finished_run, tmp_path)
    before = tree(run)
    model_bytes = (run / "checkpoints" / "step_00000004" / "model.pt").stat().st_size
    result = run_with_file_size_limit(["train", "--data", str(data_dir), "--out", str(run), *TINY, "--max-steps", "6",
                                       "--checkpoint-every", "2"], model_bytes // 2)
    one_line_error(result, "cannot write the checkpoint of step 6", "File too large",
                   "the previous checkpoint", "step_00000004 is untouched", "free space")
    assert "Traceback" not in result[2]
    assert tree(run) == before, "no temporary checkpoint left, nothing else changed"


@pytest.mark.timeout(180)
def test_prepare_that_cannot_write_keeps_the_data_it_had(data_dir, corpus_dir, tmp_path):
    import shutil

    data = tmp_path / "data"
    shutil.copytree(data_dir, data, ignore=shutil.ignore_patterns(".cache"))
    (tmp_path / "more.txt").write_text("A new document that changes the corpus. " * 4000)
    before = tree(data)
    result = run_with_file_size_limit(["prepare", "--data", str(corpus_dir), str(tmp_path / "more.txt"), "--out",
                                       str(data), "--tokenizer", "train:512", "--num-proc", "1"], 64 * 1024)
    one_line_error(result, f"cannot write the prepared data to {data}", "File too large",
                   f"the data already in {data} is untouched")
    assert {k: v for k, v in tree(data).items() if not k.startswith(".cache")} == before


NAMESPACE_SCRIPT = r'''
import json, os, subprocess, sys, shutil, hashlib
from pathlib import Path
mount, run_src, data, out = Path(sys.argv[1]), sys.argv[2], sys.argv[3], {}
def tree(root):
    return {str(p.relative_to(root)): "dir" if p.is_dir() else hashlib.sha256(p.read_bytes()).hexdigest()
            for p in Path(root).rglob("*")}
def train(run):
    r = subprocess.run([sys.executable, "-m", "training", "train", "--data", data, "--out", str(run), *sys.argv[4:]],
                       capture_output=True, text=True)
    return [r.returncode, r.stdout, r.stderr]
used = sum(-(-p.stat().st_size // 4096) * 4096 for p in Path(run_src).rglob("*") if p.is_file())
subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={used + 200 * 1024}", "tmpfs", str(mount)], check=True)
run = mount / "run"
shutil.copytree(run_src, run)
os.utime(run / "export" / "config.json", ns=(0, 0))  # an earlier session's export: the finished run exports again
before = tree(run)
out["full"] = train(run) + [tree(run) == before]
subprocess.run(["mount", "-o", "remount,ro", str(mount)], check=True)
out["read-only"] = train(run) + [tree(run) == before]
print(json.dumps(out))
'''


@pytest.mark.timeout(180)
def test_export_on_a_full_disk_and_a_read_only_volume(finished_run, data_dir, tmp_path):
    """A real full tmpfs (ENOSPC) and a real read-only remount (EROFS), in a user and mount namespace."""
    import shutil

    if not shutil.which("unshare") or subprocess.run(["unshare", "-rm", "true"], capture_output=True).returncode:
        pytest.skip("needs user namespaces (unshare -rm) to mount a small tmpfs without root")
    (tmp_path / "mnt").mkdir()
    script = tmp_path / "in_namespace.py"
    script.write_text(NAMESPACE_SCRIPT)
    # The run is finished (step 4 of 4) and its export older than its checkpoint: `train` only exports again,
    # which needs room for a second export.
    result = subprocess.run(["unshare", "-rm", sys.executable, str(script), str(tmp_path / "mnt"), str(finished_run),
                             str(data_dir), *TINY, "--max-steps", "4"], env=env(), cwd=REPO, capture_output=True,
                            text=True, timeout=170)
    assert result.returncode == 0, result.stderr
    outcome = json.loads(result.stdout.splitlines()[-1])
    *full, unchanged = outcome["full"]
    one_line_error(full, "cannot write the export to", "No space left on device", "the previous export is untouched")
    assert unchanged, "the checkpoints and the previous export are exactly as they were"
    *read_only, unchanged = outcome["read-only"]
    one_line_error(read_only, "Read-only file system", "make the volume writable")
    assert unchanged


# ---------------------------------------------------------------- what `prepare` reads
def gzip_text(path: Path, text: str) -> None:
    import gzip

    path.write_bytes(gzip.compress(text.encode()))


def make_inputs(root: Path, case: str) -> list[str]:
    """Files for one case of PREPARE_CASES; returns the --data arguments."""
    import bz2
    import lzma

    import pyarrow as pa
    import pyarrow.parquet as pq
    import zstandard

    doc = "Some ordinary prose about rivers and mountains, long enough to tokenize. " * 20
    if case == "json values that are not text":
        rows = [{"text": doc}, {"text": 987654321}, {"text": None}, {"text": ["a", "list"]}, "{broken json",
                {"body": "no text field"}, {"text": doc}]
        (root / "a.jsonl").write_text("\n".join(r if isinstance(r, str) else json.dumps(r) for r in rows))
        return [str(root / "a.jsonl")]
    if case == "json array with a non-object":
        (root / "a.json").write_text(json.dumps([{"text": doc}, 42, {"text": doc}]))
        return [str(root / "a.json")]
    if case == "csv with ragged rows":
        (root / "a.csv").write_text(f'id,text\n1,"{doc}"\n2,"{doc}",extra\n3\n4,"{doc}"\n')
        return [str(root / "a.csv")]
    if case == "parquet column of numbers":
        pq.write_table(pa.table({"text": [1, 2, 3]}), root / "a.parquet")
        return [str(root / "a.parquet")]
    if case == "json column of numbers only":
        (root / "a.jsonl").write_text("\n".join(json.dumps({"text": i}) for i in range(5)))
        return [str(root / "a.jsonl")]
    if case in ("compressed and suffixless files", "the same by glob"):
        src = root / "src"
        (src / "debian").mkdir(parents=True)
        (src / ".git").mkdir()
        for name in ("LICENSE", "COPYING", "debian/copyright"):
            (src / name).write_text(f"{name}: {doc}")
        gzip_text(src / "a.txt.gz", "gzip " + doc)
        (src / "b.md.bz2").write_bytes(bz2.compress(("bzip2 " + doc).encode()))
        (src / "NOTICE.xz").write_bytes(lzma.compress(("xz " + doc).encode()))
        (src / "d.txt.zst").write_bytes(zstandard.ZstdCompressor().compress(("zstd " + doc).encode()))
        gzip_text(src / "e.jsonl.gz", json.dumps({"text": "jsonl in gzip " + doc}))
        (src / ".git" / "HEAD").write_text("ref: refs/heads/main\n")  # hidden: never read
        (src / "tool").write_bytes(b"\x7fELF\x02\x01\x01\x00" + bytes(range(256)))  # an executable: counted
        (src / "notes.c").write_text("int main(void) { return 0; }\n")  # not in --extensions
        return [str(src)] if case == "compressed and suffixless files" else [str(src / "*")]
    if case == "a damaged gzip file":
        gzip_text(root / "good.txt.gz", doc)
        (root / "bad.txt.gz").write_bytes(gzip.compress(doc.encode())[:40])
        return [str(root / "good.txt.gz"), str(root / "bad.txt.gz")]
    if case == "nothing usable, and why":
        src = root / "src"
        src.mkdir()
        (src / "main.c").write_text("int main(void) { return 0; }\n")
        (src / "tool").write_bytes(b"\x7fELF\x00")
        (src / ".env").write_text("SECRET=1\n")
        (src / "empty.txt").write_text("\n\n")
        return [str(src)]
    raise AssertionError(case)


import gzip  # noqa: E402 - used by make_inputs' damaged-archive case

# case: (exit code, the error line or warnings expected on stderr, documents in the corpus)
PREPARE_CASES = {
    "json values that are not text": (0, ["skipping 1 row(s) of {root}/a.jsonl whose 'text' is a number, not text (line 2)",
                                          "whose 'text' is null, not text (line 3)", "whose 'text' is a list, not text (line 4)",
                                          "skipping 1 row(s) of {root}/a.jsonl that are not valid JSON (line 5)",
                                          "without a 'text' field (line 6)"], 2),
    "json array with a non-object": (0, ["skipping 1 row(s) of {root}/a.json that are not JSON objects (item 2)"], 2),
    "csv with ragged rows": (0, ["skipping 2 row(s) of {root}/a.csv whose number of fields differs from the "
                                 "header's 2 (line 3, 4)"], 2),
    "parquet column of numbers": (2, ["column 'text' of {root}/a.parquet holds int64, not text", "--text-column"], 0),
    "json column of numbers only": (2, ["{root}/a.jsonl has no text in column 'text'", "--text-column"], 0),
    "compressed and suffixless files": (0, [], 8),
    "the same by glob": (0, [], 7),  # a glob without ** does not descend into debian/
    "a damaged gzip file": (0, ["skipping {root}/bad.txt.gz: not a valid .gz file"], 1),
    "nothing usable, and why": (2, ["no usable text in {root}/src: 1 binary, 1 empty, 1 hidden, 1 without a suffix "
                                    "from --extensions (.md,.py,.rst,.text,.txt)"], 0),
}


@pytest.mark.parametrize("case", list(PREPARE_CASES))
def test_prepare_inputs(case, tmp_path):
    code, expected, documents = PREPARE_CASES[case]
    (tmp_path / "in").mkdir()
    data_args = make_inputs(tmp_path / "in", case)
    before = tree(tmp_path / "in")
    result = prepare("--data", *data_args, "--out", str(tmp_path / "data"), "--tokenizer", "train:300")
    expected = [e.format(root=tmp_path / "in") for e in expected]
    if code == 2:
        one_line_error(result, *expected)
        assert not (tmp_path / "data").exists()
    else:
        assert result[0] == 0, result[2]
        for line in expected:
            assert line in result[2], result[2]
        meta = load_meta(tmp_path / "data")
        assert meta.raw["documents"] == documents
        import numpy as np
        from transformers import AutoTokenizer

        tokenizer = AutoTokenizer.from_pretrained(meta.tokenizer_dir)
        text = tokenizer.decode(np.concatenate([np.fromfile(p, dtype=meta.dtype) for split in ("train", "val")
                                                for p, _ in meta.shards(split)]).tolist())
        for never in ("987654321", "None", "['a', 'list']", "broken json", "refs/heads", "ELF", "int main"):
            assert never not in text, never
    assert tree(tmp_path / "in") == before


def test_prepare_never_reads_its_own_output_inside_the_source_folder(tmp_path):
    src = tmp_path / "src"
    src.mkdir()
    (src / "a.txt").write_text("Plenty of good text here. " * 50)
    args = ["--data", str(src), "--out", str(src / "prepared"), "--tokenizer", "train:300"]
    assert prepare(*args)[0] == 0
    (src / "b.txt").write_text("More text, so the corpus changes. " * 50)
    assert prepare(*args)[0] == 0
    assert load_meta(src / "prepared").raw["sources"] == [str(src / "a.txt"), str(src / "b.txt")]


# ---------------------------------------------------------------- offline: hub names fail in seconds
@pytest.mark.timeout(120)
@pytest.mark.parametrize("offline", ["hub unreachable", "HF_HUB_OFFLINE"])
def test_a_hub_name_without_network_fails_in_seconds(offline, data_dir, tmp_path):
    """Measured: about 4 minutes of retries per name before; now the time it takes to import transformers."""
    import time

    from testbed.processes import free_port

    hub_env = {**env(), "HF_HOME": str(tmp_path / "hf-home")}  # an empty cache: the name was never downloaded
    hub_env.pop("HF_HUB_OFFLINE", None)
    if offline == "HF_HUB_OFFLINE":
        hub_env["HF_HUB_OFFLINE"] = "1"
    else:
        hub_env["HF_ENDPOINT"] = f"http://127.0.0.1:{free_port()}"  # nothing listens there: refused at once
    (tmp_path / "a.txt").write_text("Plenty of good text here. " * 50)
    commands = {
        "--tokenizer": ["prepare", "--data", str(tmp_path / "a.txt"), "--out", str(tmp_path / "d"), "--tokenizer", "gpt2"],
        "--init-from": ["train", "--data", str(data_dir), "--out", str(tmp_path / "r"), "--init-from", "gpt2"],
        "evaluate's MODEL": ["evaluate", "gpt2", "--data", str(tmp_path / "a.txt"), "--device", "cpu"],  # re-check 10
    }
    for flag, argv in commands.items():
        began = time.monotonic()
        result = subprocess.run([sys.executable, "-m", "training", *argv], env=hub_env, cwd=REPO,
                                capture_output=True, text=True, timeout=100)
        seconds = time.monotonic() - began
        one_line_error((result.returncode, result.stdout, result.stderr),
                       f"{flag} gpt2 is a Hugging Face hub name and is not in the local cache, so it needs the "
                       "network", "pass a local directory")
        assert seconds < 45, f"{flag}: {seconds:.1f}s"  # ~3 s on an idle machine; 236 s before (retries)
    assert not (tmp_path / "d").exists() and not (tmp_path / "r").exists()


def test_a_missing_local_directory_is_not_taken_for_a_hub_name(data_dir, tmp_path):
    one_line_error(train(data_dir, tmp_path / "r", "--init-from", "./runs/old/export"),
                   "--init-from ./runs/old/export: no such directory")
    one_line_error(prepare("--data", str(data_dir / "meta.json"), "--out", str(tmp_path / "d"), "--tokenizer",
                           str(tmp_path / "tok")), "no such directory")
    assert not (tmp_path / "r").exists() and not (tmp_path / "d").exists()


# ---------------------------------------------------------------- sample: any prompt, any valid setting
@pytest.mark.parametrize("settings", [
    ["--prompt", "def " * 200, "--max-new-tokens", "40"],  # prompt alone is longer than the 32-token window
    ["--prompt", "x", "--max-new-tokens", "70"],  # the output outgrows the window
    ["--temperature", "0"],  # greedy
    ["--temperature", "1e-300", "--top-k", "0"],
    ["--temperature", "1e300", "--top-k", "100000", "--num-samples", "3"],
    ["--prompt", ""],
])
def test_sample_any_prompt_length_and_setting(settings, finished_run):
    code, out, err = cli(["sample", str(finished_run), "--max-new-tokens", "8", *settings])
    assert code == 0, err
    assert "Traceback" not in err and out.count("-" * 40) == (3 if "--num-samples" in settings else 1)


def test_sample_prints_no_deprecation_warnings(finished_run):
    """A fresh process (transformers warns once per process): transformers 5 renamed the key/value cache
    argument to `cache`, and each sample printed three lines of FutureWarning about past_key_values."""
    result = subprocess.run([sys.executable, "-m", "training", "sample", str(finished_run), "--max-new-tokens", "4"],
                            env=env(), cwd=REPO, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert "deprecated" not in result.stderr and "Warning" not in result.stderr, result.stderr


def test_greedy_sampling_is_deterministic_and_matches_the_export(finished_run, tmp_path):
    import shutil

    shutil.copytree(finished_run, tmp_path / "run", ignore=shutil.ignore_patterns("export"))
    greedy = ["--prompt", "def " * 50, "--temperature", "0", "--max-new-tokens", "12"]
    from_export = cli(["sample", str(finished_run / "export"), *greedy])
    from_checkpoint = cli(["sample", str(tmp_path / "run"), *greedy, "--seed", "7"])
    assert from_export[0] == from_checkpoint[0] == 0
    assert from_export[1] == from_checkpoint[1]


def test_a_model_that_cannot_fit_is_refused_before_it_is_allocated(data_dir, tmp_path):
    one_line_error(train(data_dir, tmp_path / "run", "--n-layer", "100000", "--n-embd", "128"),
                   "a model of 19.83B parameters needs about 295 GiB", "choose a smaller model")
    assert not (tmp_path / "run").exists()
