"""--wandb-*: offline mode writes the run into RUN_DIR/wandb; read back from W&B's own record file."""

from __future__ import annotations

import json

import pytest

from tests.support.training_runs import losses, one_line_error, train
from tests.support.wandb_files import history, wandb_records
from training.observability import wandb_logger


def test_offline_run_holds_the_metrics_and_config_and_a_resume_continues_it(data_dir, tmp_path, monkeypatch):
    monkeypatch.delenv("TORCHELASTIC_RUN_ID", raising=False)
    run = tmp_path / "run"
    flags = ["--wandb-project", "trainstack-test", "--wandb-mode", "offline", "--eval-every", "2", "--no-export"]
    code, out, err = train(data_dir, run, "--max-steps", "4", "--checkpoint-every", "2", *flags)
    assert code == 0, err
    saved = json.loads((run / wandb_logger.RUN_FILE).read_text())
    assert saved["group"] == "run" and saved["project"] == "trainstack-test"
    (first,) = list((run / "wandb").glob(f"offline-run-*-{saved['id']}"))
    records = list(wandb_records(first / f"run-{saved['id']}.wandb"))
    (meta,) = [r.run for r in records if r.WhichOneof("record_type") == "run"]
    assert (meta.run_id, meta.project, meta.run_group) == (saved["id"], "trainstack-test", "run")
    config = {u.key: json.loads(u.value_json) for u in meta.config.update}
    assert config["max_steps"] == 4 and config["tokens_per_step"] == 8 * 32 and config["world_size"] == 1
    rows = history(records)
    for tag in ("train/loss", "train/lr", "train/grad_norm", "perf/tokens_per_s", "val/loss", "val/perplexity"):
        tensorboard = losses(run, tag)
        assert tensorboard, tag
        for step, value in tensorboard.items():
            assert rows[step][tag] == pytest.approx(value, rel=1e-6), (tag, step)

    code, out, err = train(data_dir, run, "--max-steps", "6", "--checkpoint-every", "2", *flags,
                           "--wandb-group", "ignored-on-resume")
    assert code == 0, err
    runs = sorted((run / "wandb").glob("offline-run-*"))
    assert len(runs) == 2 and all(p.name.endswith(saved["id"]) for p in runs), "the same W&B run id continues"
    resumed = history(wandb_records(runs[-1] / f"run-{saved['id']}.wandb"))
    assert sorted(s for s, row in resumed.items() if "train/loss" in row) == [5, 6]


def test_wandb_bad_input(data_dir, tmp_path, monkeypatch):
    monkeypatch.delenv("WANDB_API_KEY", raising=False)
    one_line_error(train(data_dir, tmp_path / "run", "--wandb-project", "p"),
                   "--wandb-mode online needs WANDB_API_KEY", "--wandb-mode offline")
    real_find_spec = wandb_logger.importlib.util.find_spec
    monkeypatch.setattr(wandb_logger.importlib.util, "find_spec",
                        lambda name, *a: None if name == "wandb" else real_find_spec(name, *a))
    one_line_error(train(data_dir, tmp_path / "run", "--wandb-project", "p", "--wandb-mode", "offline"),
                   "needs the wandb package", "pip install -e '.[wandb]'")
    assert not (tmp_path / "run").exists(), "refused before anything is written"
