"""Issue 21 items 5 and 9: damaged inputs found before the first step, and damaged artefacts read
by evaluate, sample and report: one line each, never a traceback."""

from __future__ import annotations

import gzip
import json
import shutil

import pytest

from tests.support.training_runs import one_line_error, train
from tests.training.test_bad_input import prepare, tree


# ---------------------------------------------------------------- 5: damaged inputs
def _gz(text: str) -> bytes:
    return gzip.compress(text.encode())


CORRUPT_ARCHIVES = {
    "flipped.txt.gz": lambda blob: blob[:20] + bytes(b ^ 0xFF for b in blob[20:40]) + blob[40:],
    "truncated.txt.gz": lambda blob: blob[: len(blob) // 2],
    "bad-crc.txt.gz": lambda blob: blob[:-8] + b"\x00\x00\x00\x00" + blob[-4:],
    "header-only.txt.gz": lambda blob: blob[:10],
}


@pytest.mark.parametrize("name", sorted(CORRUPT_ARCHIVES))
def test_a_corrupt_gzip_is_named_and_skipped(tmp_path, name):
    text = "Words that compress well, over and over again. " * 400
    src = tmp_path / "src"
    src.mkdir()
    (src / name).write_bytes(CORRUPT_ARCHIVES[name](_gz(text)))
    result = prepare("--data", str(src / name), "--out", str(tmp_path / "d"), "--tokenizer", "train:300")
    assert f"skipping {src / name}" in result[2], result[2]
    one_line_error(result, "no usable text")
    (src / "good.txt").write_text(text)
    code, _, err = prepare("--data", str(src), "--out", str(tmp_path / "d"), "--tokenizer", "train:300")
    assert code == 0, err
    assert f"skipping {src / name}" in err


@pytest.fixture
def damaged_data(data_dir, tmp_path):
    copy = tmp_path / "data"
    shutil.copytree(data_dir, copy)
    return copy


def _meta(data, **tokenizer):
    meta = json.loads((data / "meta.json").read_text())
    meta["tokenizer"].update(tokenizer)
    (data / "meta.json").write_text(json.dumps(meta))


@pytest.mark.parametrize("content", [b"garbage", b"{}", b"\x00\x01\x02", b'{"model": {"type": "BPE"}}'])
def test_a_damaged_tokenizer_in_the_data_is_found_before_the_first_step(damaged_data, tmp_path, content):
    meta = json.loads((damaged_data / "meta.json").read_text())
    tok = damaged_data / meta["tokenizer"]["dir"]
    for extra in ("vocab.json", "merges.txt"):
        (tok / extra).unlink(missing_ok=True)
    (tok / "tokenizer.json").write_bytes(content)
    one_line_error(train(damaged_data, tmp_path / "run", "--max-steps", "2"), "tokenizer")
    assert not (tmp_path / "run").exists()


@pytest.mark.parametrize("changes, fragment", [
    ({"vocab_size": -5}, "vocab_size is -5"),
    ({"vocab_size": 0}, "vocab_size is 0"),
    ({"vocab_size": "512"}, "vocab_size is '512'"),
    ({"vocab_size": 1.5}, "vocab_size is 1.5"),
    ({"vocab_size": None}, "vocab_size is None"),
    ({"vocab_size": 100}, "tokens but"),
    ({"eos_token_id": 10**6}, "eos_token_id"),
    ({"eos_token_id": -1}, "eos_token_id"),
])
def test_a_damaged_vocabulary_in_meta_json_is_one_line(damaged_data, tmp_path, changes, fragment):
    _meta(damaged_data, **changes)
    one_line_error(train(damaged_data, tmp_path / "run", "--max-steps", "2"), fragment)
    assert not (tmp_path / "run").exists()


def test_token_ids_beyond_the_vocabulary_are_found_before_the_first_step(damaged_data, tmp_path):
    import numpy as np

    meta = json.loads((damaged_data / "meta.json").read_text())
    shard = damaged_data / meta["splits"]["train"]["shards"][0]["file"]
    tokens = np.fromfile(shard, dtype=meta["dtype"])
    tokens[len(tokens) // 2] = meta["tokenizer"]["vocab_size"] + 7
    tokens.tofile(shard)
    one_line_error(train(damaged_data, tmp_path / "run", "--max-steps", "2"), str(shard),
                   f"token id {meta['tokenizer']['vocab_size'] + 7}", "beyond the vocabulary")
    assert not (tmp_path / "run").exists()


@pytest.mark.parametrize("edit", ["splits", "dtype", "shard-tokens", "array"])
def test_a_malformed_meta_json_is_one_line(damaged_data, tmp_path, edit):
    meta = json.loads((damaged_data / "meta.json").read_text())
    if edit == "splits":
        del meta["splits"]["val"]
    elif edit == "dtype":
        meta["dtype"] = "float64"
    elif edit == "shard-tokens":
        meta["splits"]["train"]["shards"][0]["tokens"] = "many"
    else:
        meta = [meta]
    (damaged_data / "meta.json").write_text(json.dumps(meta))
    before = tree(damaged_data)
    one_line_error(train(damaged_data, tmp_path / "run", "--max-steps", "2"), "meta.json")
    assert tree(damaged_data) == before


# ---------------------------------------------------------------- 9: damaged artefacts
@pytest.fixture(scope="module")
def exported_run(data_dir, tmp_path_factory):
    run = tmp_path_factory.mktemp("exported") / "run"
    assert train(data_dir, run, "--max-steps", "2", "--checkpoint-every", "2")[0] == 0
    return run


DAMAGE = {
    "truncated-weights": lambda e: (e / "model.safetensors").write_bytes((e / "model.safetensors").read_bytes()[:1000]),
    "empty-weights": lambda e: (e / "model.safetensors").write_bytes(b""),
    "garbage-weights": lambda e: (e / "model.safetensors").write_bytes(b"\xff" * 4096),
    "garbage-config": lambda e: (e / "config.json").write_bytes(b"\x00not json{"),
    "config-list": lambda e: (e / "config.json").write_text("[1, 2, 3]"),
    "garbage-tokenizer": lambda e: (e / "tokenizer.json").write_bytes(b"garbage"),
    # re-check 8 (T): AutoTokenizer built an empty tokenizer from tokenizer_config.json alone
    "no-tokenizer-json": lambda e: (e / "tokenizer.json").unlink(),
    # re-check 8 and 9: a config.json that loads, but not this export's model
    "another-model-type": lambda e: _edit_config(e, model_type="bert"),
    "no-model-type": lambda e: _edit_config(e, model_type=None),
    "larger-vocabulary": lambda e: _edit_config(e, vocab_size=_config(e)["vocab_size"] + 200),
    "wider-model": lambda e: _edit_config(e, n_embd=_config(e)["n_embd"] * 2),
    "fewer-layers": lambda e: _edit_config(e, n_layer=1),
}


def _config(export) -> dict:
    return json.loads((export / "config.json").read_text())


def _edit_config(export, **changes):
    config = _config(export)
    config.update(changes)
    (export / "config.json").write_text(json.dumps({k: v for k, v in config.items() if v is not None}))


@pytest.fixture
def damaged_run(exported_run, tmp_path, request):
    run = tmp_path / "run"
    shutil.copytree(exported_run, run)
    DAMAGE[request.param](run / "export")
    return run


@pytest.mark.parametrize("damaged_run", sorted(DAMAGE), indirect=True)
def test_a_damaged_export_is_one_line_and_its_run_falls_back_to_the_checkpoint(data_dir, damaged_run):
    from tests.support.training_runs import cli

    export = damaged_run / "export"
    for command in (["evaluate", str(export), "--data", str(data_dir), "--max-windows", "2"],
                    ["sample", str(export), "--max-new-tokens", "3"]):
        one_line_error(cli(command), f"the export {export} is damaged", "run directory")
    code, out, err = cli(["evaluate", str(damaged_run), "--data", str(data_dir), "--max-windows", "2"])
    assert code == 0 and "perplexity" in out, err
    assert "is damaged" in err and "newest intact checkpoint" in err
    code, out, err = cli(["sample", str(damaged_run), "--max-new-tokens", "3"])
    assert code == 0, err


@pytest.mark.parametrize("damaged_run", ["truncated-weights"], indirect=True)
def test_a_damaged_export_without_a_checkpoint_says_why_not(data_dir, damaged_run):
    from tests.support.training_runs import cli

    shutil.rmtree(damaged_run / "checkpoints")
    one_line_error(cli(["evaluate", str(damaged_run), "--data", str(data_dir)]), "is damaged",
                   "no intact checkpoint to fall back to")


@pytest.mark.parametrize("prompt", ["caf\udce9", "\udcff\udcfe", "ok \udc80 then"])
def test_a_prompt_that_is_not_utf8(exported_run, prompt):
    from tests.support.training_runs import cli

    one_line_error(cli(["sample", str(exported_run), "--prompt", prompt, "--max-new-tokens", "2"]),
                   "--prompt", "not UTF-8")


@pytest.mark.parametrize("garbage", [b"\xff\xfe\x00binary\x80\n", b'{"tag": "train/loss", "step": "x", "value": 1}\n',
                                     b'{"event": "start", "time": "noon", "max_steps": "many"}\n',
                                     b'{"tag": "a", "step": 1, "value": [1]}\n', b"[1,2]\n" + bytes(range(256))])
def test_report_on_a_metrics_file_with_garbage(exported_run, tmp_path, garbage):
    from tests.support.training_runs import cli

    run = tmp_path / "run"
    shutil.copytree(exported_run, run)
    with open(run / "metrics.jsonl", "ab") as f:
        f.write(garbage)
    (run / "wandb_run.json").write_bytes(b"\xff garbage")
    for flags in ([], ["--json"]):
        code, out, err = cli(["report", str(run), *flags])
        assert code == 0, err
        assert "Traceback" not in err


# ---------------------------------------------------------------- re-check cases 3 and 5
def _truncated_parquet(path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    pq.write_table(pa.table({"text": ["some words " * 50] * 20}), path)
    path.write_bytes(path.read_bytes()[:200])


@pytest.mark.parametrize("damage", [
    lambda p: p.write_text("notparquet\n"),
    lambda p: p.write_bytes(b""),
    _truncated_parquet,
])
def test_a_damaged_parquet_file_is_one_line_and_nothing_is_written(tmp_path, damage):
    src = tmp_path / "x.parquet"
    damage(src)
    one_line_error(prepare("--data", str(src), "--out", str(tmp_path / "d"), "--tokenizer", "train:300"),
                   "x.parquet is not a readable parquet file")
    assert not (tmp_path / "d").exists()


@pytest.mark.parametrize("make", [lambda p: p.mkdir(), lambda p: p.symlink_to(p.parent / "nowhere")])
def test_a_run_config_that_is_not_a_file_is_one_line_and_the_run_is_untouched(data_dir, exported_run, tmp_path, make):
    run = tmp_path / "run"
    shutil.copytree(exported_run, run)
    (run / "run_config.json").unlink()
    make(run / "run_config.json")
    before = sorted(str(p.relative_to(run)) for p in run.rglob("*"))
    one_line_error(train(data_dir, run, "--max-steps", "4"), "run_config.json is", "remove it")
    assert sorted(str(p.relative_to(run)) for p in run.rglob("*")) == before


@pytest.mark.parametrize("damaged_run", ["larger-vocabulary", "wider-model"], indirect=True)
def test_a_config_that_does_not_match_the_weights_is_one_line_without_transformers_report(data_dir, damaged_run):
    """In a process of its own: transformers' load report goes to the stderr it saw at import."""
    import subprocess
    import sys

    from tests.support.training_runs import env

    export = damaged_run / "export"
    r = subprocess.run([sys.executable, "-m", "training", "evaluate", str(export), "--data", str(data_dir),
                        "--max-windows", "2", "--device", "cpu"], capture_output=True, text=True, env=env(), timeout=300)
    one_line_error((r.returncode, r.stdout, r.stderr), f"the export {export} is damaged", "does not match")


@pytest.mark.parametrize("garbage", [b"{", b"\xff\xfe", b"[1, 2]", b""])
def test_a_damaged_model_config_is_rewritten_on_resume_with_a_warning(data_dir, exported_run, tmp_path, garbage):
    """Re-check 18: never left damaged in silence (sample reads it to rebuild the model of a checkpoint)."""
    run = tmp_path / "run"
    shutil.copytree(exported_run, run)
    good = json.loads((run / "model_config.json").read_text())
    (run / "model_config.json").write_bytes(garbage)
    code, _, err = train(data_dir, run, "--max-steps", "4")
    assert code == 0, err
    assert "model_config.json is damaged" in err
    assert json.loads((run / "model_config.json").read_text())["n_layer"] == good["n_layer"]


@pytest.mark.parametrize("extra", [1, 50000])
def test_evaluate_on_data_with_a_larger_vocabulary_than_the_model_is_refused(data_dir, exported_run, tmp_path, extra):
    """Re-check 17: train refuses such data; evaluate does too."""
    from tests.support.training_runs import cli

    data = tmp_path / "data"
    shutil.copytree(data_dir, data)
    meta = json.loads((data / "meta.json").read_text())
    meta["tokenizer"]["vocab_size"] += extra
    (data / "meta.json").write_text(json.dumps(meta))
    one_line_error(cli(["evaluate", str(exported_run / "export"), "--data", str(data), "--max-windows", "2"]),
                   "has a vocabulary of")


# ---------------------------------------------------------------- fresh sweep: more damage in a RUN_DIR
def _files(root):
    return {str(p.relative_to(root)): p.read_bytes() for p in root.rglob("*") if p.is_file()}


@pytest.mark.parametrize("content, fragment", [
    (b"\xff\xfe\x00garbage", "is unreadable"),  # binary: was a UnicodeDecodeError traceback
    (None, "block_size is '32', not int"),        # a string where train writes a number: was "--block-size 32, not 32"
    ('{"model": 1}', "is unreadable"),
])
def test_a_damaged_run_config_is_one_line_and_the_run_is_untouched(data_dir, exported_run, tmp_path, content, fragment):
    run = tmp_path / "run"
    shutil.copytree(exported_run, run)
    path = run / "run_config.json"
    if content is None:
        config = json.loads(path.read_text())
        path.write_text(json.dumps({**config, "block_size": str(config["block_size"])}))
    else:
        path.write_bytes(content if isinstance(content, bytes) else content.encode())
    before = _files(run)
    line = one_line_error(train(data_dir, run, "--max-steps", "4"), f"{path} is", fragment, "use a new --out")
    assert "not 32;" not in line
    assert _files(run) == before


@pytest.mark.parametrize("content", [b"\xda\x01binary", b"[1]", b'"a string"'])
def test_a_damaged_snapshot_owner_file_in_run_dir_is_not_a_traceback(data_dir, exported_run, tmp_path, content):
    """RUN_DIR/snapshot_run.json (the run's id for --snapshot-uri) that is not a JSON object: was a
    UnicodeDecodeError or AttributeError traceback; the run takes a new id, as it would without one."""
    run = tmp_path / "run"
    shutil.copytree(exported_run, run)
    (run / "snapshot_run.json").write_bytes(content)
    code, out, err = train(data_dir, run, "--max-steps", "4", "--snapshot-uri", f"file://{tmp_path / 'snaps'}")
    assert code == 0 and "Traceback" not in err, err
    assert isinstance(json.loads((run / "snapshot_run.json").read_text())["run_uid"], str)


def _rewrite_consistently(step_dir, name, state):
    """Replace one file of a checkpoint and its manifest entry: the checksums pass, the content is wrong."""
    import hashlib

    import torch

    torch.save(state, step_dir / name)
    blob = (step_dir / name).read_bytes()
    manifest = json.loads((step_dir / "manifest.json").read_text())
    manifest["files"][name] = {"bytes": len(blob), "sha256": hashlib.sha256(blob).hexdigest()}
    (step_dir / "manifest.json").write_text(json.dumps(manifest))


@pytest.mark.parametrize("name, state", [("trainer.pt", {"x": 1}), ("trainer.pt", {"step": 7, "rng": []}),
                                         ("model.pt", {"nope": 1}), ("optimizer.pt", [1, 2])])
def test_a_checkpoint_that_passes_its_checksums_but_is_not_trains_is_one_line(data_dir, exported_run, tmp_path,
                                                                             name, state):
    run = tmp_path / "run"
    shutil.copytree(exported_run, run)
    step_dir = run / "checkpoints" / "step_00000002"
    _rewrite_consistently(step_dir, name, state)
    before = _files(run)
    one_line_error(train(data_dir, run, "--max-steps", "4"), f"checkpoint {step_dir} passes its checksums but does "
                   "not hold what train saves", "move it aside")
    assert _files(run) == before


@pytest.mark.parametrize("damage", ["a file", "garbage", "missing"])
def test_a_damaged_run_tokenizer_is_written_again_on_resume_not_found_at_the_export(data_dir, exported_run, tmp_path,
                                                                                  damage):
    """RUN_DIR/tokenizer as a file: the resume trained to the end, then the export failed in a traceback."""
    run = tmp_path / "run"
    shutil.copytree(exported_run, run)
    good = _files(run / "tokenizer")
    shutil.rmtree(run / "tokenizer")
    if damage == "a file":
        (run / "tokenizer").write_text("x")
    elif damage == "garbage":
        (run / "tokenizer").mkdir()
        (run / "tokenizer" / "tokenizer.json").write_text("garbage")
    code, _, err = train(data_dir, run, "--max-steps", "4")
    assert code == 0 and "Traceback" not in err, err
    assert f"{run / 'tokenizer'} is missing, damaged or not the files of the run's tokenizer" in err
    assert _files(run / "tokenizer") == good and (run / "export" / "config.json").is_file()


def test_the_oldest_damaged_checkpoint_does_not_promise_a_previous_one(data_dir, exported_run, tmp_path):
    from tests.support.training_runs import cli

    run = tmp_path / "run"
    shutil.copytree(exported_run, run, ignore=shutil.ignore_patterns("export"))
    steps = sorted((run / "checkpoints").iterdir())
    for step in steps:
        (step / "manifest.json").write_bytes(b"\xff\xfe")
    result = cli(["evaluate", str(run), "--data", str(data_dir), "--max-windows", "2"])
    one_line_error(result, "no intact checkpoint")
    warnings = [line for line in result[2].splitlines() if "is damaged" in line]
    assert len(warnings) == len(steps) and warnings[-1].endswith("; there is no earlier one"), result[2]
    assert all(line.endswith("falling back to the previous one") for line in warnings[:-1]), result[2]


def _misfit(step_dir):
    """model.pt rewritten with every tensor cut to one row, manifest and all: the checksums pass."""
    import torch

    state = torch.load(step_dir / "model.pt", weights_only=True)
    _rewrite_consistently(step_dir, "model.pt", {k: v[:1] if v.dim() else v for k, v in state.items()})


def test_evaluate_skips_a_checkpoint_that_passes_its_checksums_but_does_not_fit(data_dir, exported_run, tmp_path):
    """Re-check v06: the newest checkpoint holds wrong shapes; evaluate and sample use the intact previous
    one, with a warning naming the misfit, and touch nothing."""
    from tests.support.training_runs import cli

    run = tmp_path / "run"
    shutil.copytree(exported_run, run)
    shutil.rmtree(run / "export")
    newest = run / "checkpoints" / "step_00000004"
    shutil.copytree(run / "checkpoints" / "step_00000002", newest)
    _misfit(newest)
    before = _files(run)
    code, out, err = cli(["evaluate", str(run), "--data", str(data_dir), "--max-windows", "2"])
    assert code == 0 and "perplexity" in out, err
    assert f"checkpoint {newest} passes its checksums but does not fit" in err and "size mismatch" in err, err
    assert "Traceback" not in err
    code, out, err = cli(["sample", str(run), "--max-new-tokens", "3"])
    assert code == 0, err
    assert _files(run) == before


def test_evaluate_with_no_checkpoint_that_fits_is_one_line(data_dir, exported_run, tmp_path):
    from tests.support.training_runs import cli

    run = tmp_path / "run"
    shutil.copytree(exported_run, run)
    shutil.rmtree(run / "export")
    _misfit(run / "checkpoints" / "step_00000002")
    before = _files(run)
    one_line_error(cli(["evaluate", str(run), "--data", str(data_dir)]), f"no checkpoint of {run} fits the run's model",
                   "size mismatch", "they stay untouched")
    assert _files(run) == before
