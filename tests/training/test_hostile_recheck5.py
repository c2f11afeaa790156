"""Issue 21, fifth re-check: what round 4's fixes left open or refused wrongly: prepare into a run,
links into another run, another tool's run_config.json, an export link, credentials that are not files."""

from __future__ import annotations

import os
import shutil

import pytest

from tests.support.training_runs import cli, one_line_error, train
from tests.training.test_bad_input import tree
from tests.training.test_hostile_inputs import listing


@pytest.mark.parametrize("inner", ["checkpoints/step_00000002/d", "export/d", "d"])
def test_prepare_into_a_run_is_refused(finished_run, tmp_path, inner):
    """c24/c25b: the run's next start deleted the prepared data."""
    (tmp_path / "corpus.txt").write_text("some text to prepare\n" * 50)
    before = tree(finished_run)
    one_line_error(cli(["prepare", "--data", str(tmp_path / "corpus.txt"), "--out", str(finished_run / inner),
                        "--tokenizer", "train:300"]), f"is inside the run directory {finished_run}")
    assert tree(finished_run) == before


def test_checkpoints_linked_into_another_run_is_refused(data_dir, finished_run, tmp_path):
    """e23: retention deleted the other run's steps."""
    other = tmp_path / "other"
    shutil.copytree(finished_run, other)
    run = tmp_path / "run"
    shutil.copytree(finished_run, run)
    shutil.rmtree(run / "checkpoints")
    (run / "checkpoints").symlink_to(other / "checkpoints")
    before = tree(other)
    one_line_error(train(data_dir, run, "--max-steps", "8", "--keep-checkpoints", "1", "--checkpoint-every", "2"),
                   f"is a link into the run {other}", "remove the link")
    assert tree(other) == before


def test_checkpoints_linked_to_a_plain_folder_is_used(data_dir, tmp_path):
    """A link to a bigger disk is legitimate: only a link into another run is refused."""
    elsewhere = tmp_path / "big-disk" / "ckpts"
    elsewhere.mkdir(parents=True)
    run = tmp_path / "run"
    run.mkdir()
    (run / "checkpoints").symlink_to(elsewhere)
    code, _, err = train(data_dir, run, "--max-steps", "2", "--checkpoint-every", "2")
    assert code == 0, err
    assert (elsewhere / "step_00000002").is_dir()


def test_another_tools_run_config_above_out_is_not_a_run(data_dir, tmp_path):
    """c06: any run_config.json above --out was taken for a run directory."""
    (tmp_path / "proj").mkdir()
    (tmp_path / "proj" / "run_config.json").write_text('{"lr": 0.1}')
    code, _, err = train(data_dir, tmp_path / "proj" / "runs" / "a", "--max-steps", "1")
    assert code == 0, err


def test_an_export_link_is_refused_and_left_as_it_is(data_dir, finished_run, tmp_path):
    """c08/e24: the link was replaced by a folder and left behind as .export-previous-*."""
    run = tmp_path / "run"
    shutil.copytree(finished_run, run)
    elsewhere = tmp_path / "exports"
    shutil.move(run / "export", elsewhere)
    (run / "export").symlink_to(elsewhere)
    before = listing(run)
    one_line_error(train(data_dir, run, "--max-steps", "6"), f"{run / 'export'} is a symbolic link", "remove it")
    assert listing(run) == before and (run / "export").is_symlink()


@pytest.mark.parametrize("kind", ["/dev/zero", "fifo"])
def test_credentials_that_are_not_a_file_are_one_line(data_dir, tmp_path, monkeypatch, kind):
    """c40/c41: /dev/zero ended in a MemoryError, a pipe without a writer hung."""
    path = kind
    if kind == "fifo":
        path = str(tmp_path / "creds")
        os.mkfifo(path)
    monkeypatch.setenv("GCSFS_EXPERIMENTAL_ZB_HNS_SUPPORT", "false")
    monkeypatch.setenv("GOOGLE_APPLICATION_CREDENTIALS", path)
    one_line_error(train(data_dir, tmp_path / "run", "--max-steps", "1", "--snapshot-uri", "gs://bucket/run"),
                   f"GOOGLE_APPLICATION_CREDENTIALS={path} cannot be used (it is a")
    assert not (tmp_path / "run").exists()


def test_a_meta_json_above_out_that_is_a_device_is_not_read(data_dir, tmp_path):
    """e21/e22: is_prepared_data read a linked /dev/zero until memory ran out."""
    (tmp_path / "proj").mkdir()
    (tmp_path / "proj" / "meta.json").symlink_to("/dev/zero")
    code, _, err = train(data_dir, tmp_path / "proj" / "run", "--max-steps", "1")
    assert code == 0, err


@pytest.mark.parametrize("content", ['{"lr": 0.1}', "[1, 2]", "lr: 0.1", '{"model": "bert-base-uncased"}', '"hi"',
                                     "null", ""])
def test_another_tools_run_config_in_out_is_not_replaced(data_dir, tmp_path, content):
    """Re-checks 6 N and 7 P: train took it for an earlier start's and replaced it."""
    out = tmp_path / "run2"
    out.mkdir()
    (out / "run_config.json").write_text(content)
    one_line_error(train(data_dir, out, "--max-steps", "1"), "holds a run_config.json that train did not write")
    assert (out / "run_config.json").read_text() == content


@pytest.mark.parametrize("content", ['{"name": "x"}', "[1, 2]", '{"splits": 5, "tokenizer": {"spec_identity": "x"}}',
                                     '{"splits": {}, "tokenizer": {"spec_identity": "x"}}'])
def test_prepare_onto_another_tools_meta_json_is_one_line(tmp_path, content):
    """Re-check 6 O: KeyError / TypeError tracebacks."""
    (tmp_path / "corpus.txt").write_text("some text to prepare\n" * 50)
    out = tmp_path / "proj"
    out.mkdir()
    (out / "meta.json").write_text(content)
    one_line_error(cli(["prepare", "--data", str(tmp_path / "corpus.txt"), "--out", str(out), "--tokenizer",
                        "train:300"]), "holds a meta.json that is not prepare's")
    assert (out / "meta.json").read_text() == content


@pytest.mark.parametrize("beside", ["checkpoints/epoch=1.ckpt", "export/", "model_config.json"])
def test_another_tools_run_config_beside_its_own_files_is_not_replaced(data_dir, tmp_path, beside):
    """Re-check 8 P2: another tool's checkpoints/, export/ or model_config.json counted as a run's."""
    out = tmp_path / "r"
    (out / beside).parent.mkdir(parents=True, exist_ok=True)
    if not beside.endswith("/"):
        (out / beside).write_text('{"architectures": ["BertModel"]}')
    (out / "run_config.json").write_text('{"lr": 0.1}')
    one_line_error(train(data_dir, out, "--max-steps", "1"), "holds a run_config.json that train did not write")
    assert (out / "run_config.json").read_text() == '{"lr": 0.1}'


def test_a_tensorboard_link_into_another_run_is_refused(data_dir, finished_run, tmp_path):
    """Re-check 8 U: this run's event files landed in the other run's folder."""
    out = tmp_path / "r"
    out.mkdir()
    (out / "tensorboard").symlink_to(finished_run / "tensorboard")
    before = listing(finished_run)
    one_line_error(train(data_dir, out, "--max-steps", "1"), f"is a link into the run {finished_run}")
    assert listing(finished_run) == before


@pytest.mark.parametrize("beside", [("checkpoints/step_100", "x"),
                                    ("model_config.json", '{"model_type": "gpt2", "n_layer": 12}')])
def test_what_train_never_writes_does_not_make_a_folder_a_run(data_dir, tmp_path, beside):
    """Re-check 9 P3: a file checkpoints/step_100, or another GPT-2 tool's model_config.json."""
    out = tmp_path / "r"
    (out / beside[0]).parent.mkdir(parents=True, exist_ok=True)
    (out / beside[0]).write_text(beside[1])
    (out / "run_config.json").write_text('{"lr": 0.1}')
    one_line_error(train(data_dir, out, "--max-steps", "1"), "holds a run_config.json that train did not write")
    assert (out / "run_config.json").read_text() == '{"lr": 0.1}'


@pytest.mark.parametrize("name", ["checkpoints", "tensorboard"])
def test_a_link_into_a_run_with_a_damaged_run_config_is_refused(data_dir, finished_run, tmp_path, name):
    """Re-check 9 V: the link check asked only for a readable run_config.json; retention then deleted the
    other run's step."""
    other = tmp_path / "other"
    shutil.copytree(finished_run, other)
    (other / "run_config.json").write_text("garbage")
    (other / "tensorboard").mkdir(exist_ok=True)
    out = tmp_path / "r"
    out.mkdir()
    (out / name).symlink_to(other / name)
    before = tree(other)
    one_line_error(train(data_dir, out, "--max-steps", "1"), f"is a link into the run {other}")
    assert tree(other) == before


@pytest.mark.parametrize("name, target", [("tensorboard", "nowhere"), ("checkpoints", "nowhere"),
                                          ("tensorboard", "a-file")])
def test_a_folder_link_that_is_not_a_folder_is_one_line(data_dir, tmp_path, name, target):
    """Re-check 9 W: FileExistsError tracebacks."""
    (tmp_path / "a-file").write_text("x")
    out = tmp_path / "r"
    out.mkdir()
    (out / name).symlink_to(tmp_path / target)
    one_line_error(train(data_dir, out, "--max-steps", "1"), f"{out / name} is a link to", "which is not a folder")


@pytest.mark.parametrize("name", ["checkpoints", "tensorboard"])
def test_a_folder_link_train_cannot_write_into_is_one_line_before_training(data_dir, tmp_path, name):
    """Re-check 10 W: a link to /proc/self trained, then died at the first checkpoint with a traceback and
    left run_config.json and metrics.jsonl behind."""
    out = tmp_path / "r"
    out.mkdir()
    (out / name).symlink_to("/proc/self")
    one_line_error(train(data_dir, out, "--max-steps", "2", "--checkpoint-every", "1"),
                   f"{out / name} is a link to /proc/self, where train cannot write")
    assert sorted(p.name for p in out.iterdir()) == [name]


@pytest.mark.parametrize("content", ["[]", "1", '"x"', "null"])
def test_credentials_json_that_is_not_an_object_is_one_line(data_dir, tmp_path, monkeypatch, content):
    """Re-check 10 X: an AttributeError traceback."""
    creds = tmp_path / "c.json"
    creds.write_text(content)
    monkeypatch.setenv("GCSFS_EXPERIMENTAL_ZB_HNS_SUPPORT", "false")
    monkeypatch.setenv("GOOGLE_APPLICATION_CREDENTIALS", str(creds))
    one_line_error(train(data_dir, tmp_path / "run", "--max-steps", "1", "--snapshot-uri", "gs://bucket/run"),
                   f"GOOGLE_APPLICATION_CREDENTIALS={creds} cannot be used")


@pytest.mark.parametrize("name, inside", [("checkpoints", ""), ("tensorboard", ".cache")])
def test_a_folder_link_into_the_prepared_data_is_refused(data_dir, tmp_path, name, inside):
    """Re-check 11 Y: checkpoints and event files were written into the data directory."""
    data = tmp_path / "data"
    shutil.copytree(data_dir, data)
    (data / ".cache").mkdir(exist_ok=True)
    before = listing(data)
    out = tmp_path / "r"
    out.mkdir()
    (out / name).symlink_to(data / inside)
    one_line_error(train(data, out, "--max-steps", "1", "--checkpoint-every", "1"),
                   f"is a link into the prepared data directory {data}")
    assert listing(data) == before


def test_credentials_nested_past_the_parser_are_one_line(data_dir, tmp_path, monkeypatch):
    """Re-check 11 X: a RecursionError traceback."""
    creds = tmp_path / "c.json"
    creds.write_text("[" * 200000 + "]" * 200000)
    monkeypatch.setenv("GCSFS_EXPERIMENTAL_ZB_HNS_SUPPORT", "false")
    monkeypatch.setenv("GOOGLE_APPLICATION_CREDENTIALS", str(creds))
    one_line_error(train(data_dir, tmp_path / "run", "--max-steps", "1", "--snapshot-uri", "gs://bucket/run"),
                   f"GOOGLE_APPLICATION_CREDENTIALS={creds} cannot be used")
