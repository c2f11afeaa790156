"""A newcomer's first hour (issue 30): what the commands say, asserted on their output.

One real resume of the shared finished run (progress bar on, output merged as a terminal shows it) covers
the console; the rest reads the finished run or calls the one function that words a line.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

from tests.support.training_runs import REPO, TINY, cli, env, one_line_error


@pytest.fixture(scope="module")
def resumed(finished_run, data_dir, tmp_path_factory) -> tuple[Path, str]:
    """The finished run (step 2) copied and resumed to step 4 with the progress bar, as a terminal shows it."""
    run = tmp_path_factory.mktemp("resumed") / "run"
    shutil.copytree(finished_run, run)
    flags = [f for f in TINY if f != "--no-progress"]
    result = subprocess.run([sys.executable, "-m", "training", "train", "--data", str(data_dir), "--out", str(run),
                             *flags, "--max-steps", "4"], env=env(), cwd=REPO, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, timeout=300)
    assert result.returncode == 0, result.stdout
    return run, result.stdout


def test_the_start_line_is_a_line_of_its_own_with_units_and_the_vocabulary(resumed, data_dir):
    _, out = resumed
    [banner] = [line for line in out.splitlines() if "parameters" in line and "worker" in line]
    assert banner.startswith("[trainstack] training "), banner  # not appended to a progress bar
    assert "losses are cross-entropy in nats per token" in banner
    assert "with the data's 512-token vocabulary; GPT-2's 124M and up count 50,257" in banner


def test_a_resume_says_what_changed_and_counts_workers_in_english(resumed):
    _, out = resumed
    assert "saved by 1 worker, now 1)" in out
    assert "the learning-rate schedule changed on resume (max steps 2 -> 4):" in out  # lr, min lr, warmup: same


def test_every_validation_loss_says_what_it_was_measured_on(resumed):
    run, out = resumed
    [line] = [line for line in out.splitlines() if "| val loss" in line]
    assert " nats/token on 512 tokens (16 windows of 32) |" in line, line  # --eval-samples 16 x block 32
    code, report, err = cli(["report", str(run)])
    assert code == 0, err
    assert "nats/token at step 4, on 512 tokens (16 windows of 32)" in report


def test_the_plot_legend_says_what_validation_was_measured_on(resumed, monkeypatch):
    from matplotlib.figure import Figure

    from training.observability.plots import draw

    drawn = []
    monkeypatch.setattr(Figure, "savefig", lambda fig, path, **_: (drawn.append(fig), Path(path).write_bytes(b"")))
    draw(resumed[0])
    labels = drawn[0].axes[0].get_legend_handles_labels()[1]
    assert "validation loss (on 512 tokens (16 windows of 32))" in labels


def test_library_bars_stay_off_the_console(resumed):
    _, out = resumed
    assert "Writing model shards" not in out and "Loading weights" not in out
    assert "exported the model to" in out


def test_the_bar_is_not_drawn_again_under_the_stop_message(capsys):
    from training.trainer.progress import Console

    cfg = SimpleNamespace(runtime=SimpleNamespace(progress=True), optim=SimpleNamespace(max_steps=10))
    console = Console(cfg, 0, SimpleNamespace(is_main=True))
    console.update()
    console.close()
    capsys.readouterr()
    console.emit("rank 0: stop requested; checkpoint of step 1 saved; exiting with 0", force=True)
    console.close()
    captured = capsys.readouterr()
    assert captured.out == "rank 0: stop requested; checkpoint of step 1 saved; exiting with 0\n"
    assert captured.err == ""  # no bar after it


def test_sample_says_what_it_sampled_from(finished_run, tmp_path):
    code, out, err = cli(["sample", str(finished_run), "--max-new-tokens", "3"])
    assert code == 0, err
    assert f"[trainstack] sampling from the export {finished_run / 'export'}" in err
    assert "sampling from" not in out and "Loading weights" not in err
    no_export = tmp_path / "run"
    shutil.copytree(finished_run, no_export, ignore=shutil.ignore_patterns("export"))
    code, _, err = cli(["sample", str(no_export), "--max-new-tokens", "3"])
    assert code == 0, err
    assert "[trainstack] sampling from checkpoint of step 2 (" in err


def test_a_resume_without_the_shape_flags_names_them(finished_run, data_dir):
    from tests.training.test_bad_input import tree_digest

    before = tree_digest(finished_run)
    one_line_error(cli(["train", "--data", str(data_dir), "--out", str(finished_run), "--max-steps", "4",
                        "--compile", "off", "--no-progress"]),
                   "resume it with --preset tiny --n-embd 64 --n-head 2 --block-size 32 (the shape it was started with)")
    assert tree_digest(finished_run) == before


def test_the_shape_flags_are_the_fewest_that_give_the_shape():
    from training.run_dir.config import shape_flags

    assert shape_flags({"n_layer": 2, "n_embd": 128, "n_head": 4, "block_size": 128, "vocab_size": 512}) == "--preset tiny"
    assert shape_flags({"n_layer": 12, "n_embd": 768, "n_head": 12, "block_size": 256}) == "--preset gpt2 --block-size 256"


def test_a_batch_far_beyond_memory_is_one_line_before_anything_is_allocated(data_dir, tmp_path):
    out = tmp_path / "run"
    line = one_line_error(cli(["train", "--data", str(data_dir), "--out", str(out), *TINY, "--max-steps", "1",
                               "--batch-size", "1000000000"]),
                          "--batch-size 1,000,000,000: a micro-batch of 1,000,000,000 x 32 tokens needs at least",
                          "the largest that could fit is about --batch-size")
    largest = int(line.rsplit("--batch-size ", 1)[1].split()[0].replace(",", ""))
    assert 1000 < largest < 1_000_000_000
    assert not out.exists() or not any(out.iterdir())


def test_a_small_corpus_says_the_vocabulary_it_made(tmp_path):
    text = tmp_path / "notes.txt"
    text.write_text("the quick brown fox jumps over the lazy dog. " * 40)
    code, out, err = cli(["prepare", "--data", str(text), "--out", str(tmp_path / "data"), "--tokenizer",
                          "train:4096", "--num-proc", "1"])
    assert code == 0, err
    made = int(out.split("vocabulary ")[1].split()[0].replace(",", ""))
    assert made < 4096
    assert f"vocabulary {made:,} of the 4,096 asked: BPE found no more pairs worth merging in this corpus)" in out
    assert "Generating train split" not in out + err


def test_max_steps_that_pass_over_a_small_corpus_hundreds_of_times_warn(capsys):
    from training.trainer.announce import warn_repeated_passes

    data = SimpleNamespace(split_tokens=lambda split: 23_075)
    warn_repeated_passes(data, SimpleNamespace(optim=SimpleNamespace(max_steps=5000)), 8 * 1024)
    err = capsys.readouterr().err
    assert ("--max-steps 5,000 x 8,192 tokens per step passes over the 23,075 training tokens about 1,775 times"
            in err and "use --max-steps 28" in err), err
    warn_repeated_passes(data, SimpleNamespace(optim=SimpleNamespace(max_steps=300)), 1024)
    assert capsys.readouterr().err == ""  # 13 passes: nothing to say


def test_distill_says_teacher_student_and_layer_map():
    from training.trainer.distill import describe

    teacher = SimpleNamespace(n_layer=12, n_embd=768, n_head=12)
    line = describe("runs/teacher", teacher, SimpleNamespace(n_layer=4, n_embd=768, n_head=12))
    assert line == ("distilling teacher runs/teacher (12 layers x 768 wide, 12 heads) into a student of 4 layers x "
                    "768 wide, 12 heads, its layers copied from the teacher's (student<-teacher: 0<-0, 1<-4, 2<-7, "
                    "3<-11), embeddings and final LayerNorm too")
    narrow = describe("gpt2", teacher, SimpleNamespace(n_layer=6, n_embd=384, n_head=6))
    assert narrow.endswith("its weights random (another width than the teacher's)")
