"""Everything the training loop starts from: the model, the run's fixed settings, the data, the resumed state.

Validated before anything is written to RUN_DIR where it can be: the model's shape, the block size,
the global batch against the world size, the token windows of both splits.
"""

from __future__ import annotations

import os
import pickle
import shutil
from dataclasses import dataclass
from pathlib import Path

import torch
from torch.nn.parallel import DistributedDataParallel

from training.checkpoints.checkpoint import Checkpoint
from training.data.dataset import DataMeta, TokenWindows, check_data
from training.elastic.distributed import DistInfo
from training.model.build import (
    MODEL_CONFIG,
    config_for,
    create_gpt,
    load_model_config,
    load_pretrained,
    resolve_shape,
    save_model_config,
    shape_of,
)
from training.model.memory import check_batch_fits, check_fits
from training.run_dir.config import RunConfig, check_tokenizer_matches_model, load_or_create_run_config
from training.trainer import distill
from training.trainer.checkpointing import restore_rng
from training.trainer.optim import make_optimizer
from training.trainer.step import Stepper
from trainstack.contract.config import TrainConfig
from trainstack.contract.errors import UserError
from trainstack.contract.log import info as log_info
from trainstack.contract.log import warn


@dataclass
class Start:
    model: torch.nn.Module
    teacher: torch.nn.Module | None  # --distill-from: frozen, on the device
    optimizer: torch.optim.Optimizer
    run_config: RunConfig  # fixed at the run's first start (RUN_DIR/run_config.json)
    block_size: int
    train_windows: TokenWindows
    val_windows: TokenWindows
    step: int = 0  # the resumed checkpoint's step
    resumed_schedule: dict | None = None  # the schedule the resumed checkpoint was trained with

    @property
    def global_batch(self) -> int:
        return self.run_config.global_batch_size


def prepare(cfg: TrainConfig, data: DataMeta, run_dir: Path, dist_info: DistInfo, latest: Checkpoint | None,
            restored_from: str | None = None) -> Start:
    device = dist_info.device
    saved_config = run_dir / MODEL_CONFIG
    # --distill-from (training/trainer/distill.py): a frozen teacher, and a student cut from it
    teacher = distill.load_teacher(cfg.distill, data, device) if cfg.distill.enabled else None
    model, config = _choose_model(cfg, data, teacher, latest, saved_config)
    block_size = cfg.model.block_size or config.n_positions
    if block_size > config.n_positions:
        raise UserError(f"--block-size {block_size} exceeds the model's {config.n_positions} positions; "
                        f"use --block-size {config.n_positions} or less")
    check_batch_fits(config, device, cfg.optim.batch_size, block_size)  # before run_config.json is written
    init_from = cfg.model.init_from or (f"distill:{cfg.distill.teacher}" if teacher else "")
    wanted = RunConfig(model=shape_of(config), block_size=block_size,
                       tokenizer_fingerprint=data.tokenizer_fingerprint,
                       global_batch_size=cfg.optim.global_batch_size or cfg.optim.batch_size * dist_info.world_size,
                       seed=cfg.runtime.seed, init_from=init_from)
    _check_global_batch(wanted.global_batch_size, dist_info)
    run_config = load_or_create_run_config(run_dir, wanted, explicit_global_batch=cfg.optim.global_batch_size,
                                           write=dist_info.is_main, resuming=latest is not None,
                                           restored_from=restored_from)
    _check_global_batch(run_config.global_batch_size, dist_info)
    if dist_info.is_main and (latest is None or not _readable_model_config(saved_config)):
        if latest is not None and saved_config.exists():
            warn(f"{saved_config} is damaged; writing it again from this run's model configuration")
        save_model_config(config, saved_config)  # without a checkpoint, one left by a killed start is stale
    train_windows, val_windows = _windows(data, block_size)

    if model is None:
        check_fits(config, device, f"--preset {cfg.model.preset} with n_layer {config.n_layer}, n_embd {config.n_embd}")
        model = create_gpt(config)
    model.to(device)
    optimizer = make_optimizer(model, cfg.optim.lr, cfg.optim.weight_decay, cfg.optim.betas)
    start = Start(model, teacher, optimizer, run_config, block_size, train_windows, val_windows)
    if latest is not None:
        _resume(start, latest, cfg, dist_info)
    if dist_info.is_main:
        # a stale one (killed start) is replaced; on a resume, a damaged one too (the export reads it at the
        # end), from the data's tokenizer, which run_config.json's fingerprint has just matched
        _copy_tokenizer(data.tokenizer_dir, run_dir / "tokenizer", resuming=latest is not None)
    return start


def steppers(cfg: TrainConfig, start: Start, precision: str, dist_info: DistInfo) -> tuple[Stepper, Stepper]:
    """The training step (DDP across workers; distillation's with a teacher) and the evaluation one, which
    stays eager: the model is compiled in place (training/compile_cache/plan.py)."""
    device, model = dist_info.device, start.model
    step_model = model
    if dist_info.is_distributed:
        step_model = DistributedDataParallel(step_model, device_ids=[device.index] if device.type == "cuda" else None)
    make_stepper = Stepper if start.teacher is None else distill.stepper_factory(start.teacher, cfg.distill,
                                                                                  cfg.runtime.compile)
    stepper = make_stepper(step_model, start.optimizer, device, precision, cfg.optim.grad_clip, dist_info.world_size,
                           start.global_batch)
    evaluator = Stepper(model, start.optimizer, device, precision, 0.0, dist_info.world_size, start.global_batch,
                        eager=True)
    return stepper, evaluator


def _readable_model_config(path: Path) -> bool:
    """RUN_DIR/model_config.json is there and loads (a damaged one is rewritten, never trusted)."""
    if not path.is_file():
        return False
    try:
        load_model_config(path)
    except Exception:  # noqa: BLE001 - transformers raises its own types (and JSON's, OSError) for a damaged file
        return False
    return True


def _choose_model(cfg: TrainConfig, data: DataMeta, teacher, latest: Checkpoint | None, saved_config: Path):
    """(model or None when it is built later from its configuration, the configuration)."""
    if (cfg.model.init_from or teacher is not None) and latest is not None and _readable_model_config(saved_config):
        # Resuming a fine-tune: the checkpoint has the weights and RUN_DIR the architecture, so a
        # restarted pod does not fetch the pretrained model again.
        return None, load_model_config(saved_config)
    if cfg.model.init_from:
        model = load_pretrained(cfg.model.init_from)
        check_tokenizer_matches_model(data, model.config, cfg.model.init_from)
        return model, model.config
    if teacher is not None:
        model = distill.make_student(teacher, cfg.model, cfg.distill)
        return model, model.config
    m = cfg.model
    shape = resolve_shape(m.preset, m.n_layer, m.n_embd, m.n_head, m.block_size)
    return None, config_for(shape, data.vocab_size, m.dropout, data.eos_token_id)


def _windows(data: DataMeta, block_size: int) -> tuple[TokenWindows, TokenWindows]:
    train_windows = TokenWindows(data.shards("train"), data.dtype, block_size, data.vocab_size)
    if len(train_windows) == 0:
        raise UserError(f"the training split has {data.split_tokens('train')} tokens, fewer than one block of "
                        f"{block_size + 1}; add more text or lower --block-size")
    val_windows = TokenWindows(data.shards("val"), data.dtype, block_size, data.vocab_size)
    check_data(data, [train_windows, val_windows])  # before the first step: the export needs the tokenizer
    if len(val_windows) == 0:
        warn(f"the validation split has {data.split_tokens('val')} tokens, fewer than one block; "
             "validation is skipped (prepare with a larger --val-fraction to enable it)")
    return train_windows, val_windows


def _resume(start: Start, latest: Checkpoint, cfg: TrainConfig, dist_info: DistInfo) -> None:
    # A checkpoint whose files match their manifest but are not what train saves (rewritten, manifest
    # and all, by hand or by another program) would end in a KeyError or a load_state_dict traceback.
    try:
        states = latest.load()
        start.model.load_state_dict(states["model"])
        start.optimizer.load_state_dict(states["optimizer"])
        start.step = states["trainer"]["step"]
        if start.step != latest.step:
            raise ValueError(f"its trainer state is at step {start.step!r}")
        restore_rng(states["trainer"]["rng"], dist_info, cfg.runtime.seed, start.step)
    except (pickle.UnpicklingError, EOFError, KeyError, TypeError, ValueError, RuntimeError, AttributeError) as exc:
        reason = str(exc).strip().splitlines()[0][:200] if str(exc).strip() else ""
        raise UserError(f"checkpoint {latest.path} passes its checksums but does not hold what train saves "
                        f"({type(exc).__name__}: {reason}); move it aside to resume from the previous one, or use a "
                        "new --out") from exc
    if dist_info.is_main:
        saved_by = len(states["trainer"]["rng"])
        log_info(f"resumed from {latest.path} (step {start.step}, saved by {saved_by} "
                 f"worker{'s' if saved_by != 1 else ''}, now {dist_info.world_size})")
        start.resumed_schedule = states["trainer"].get("schedule")


def _check_global_batch(global_batch: int, dist_info: DistInfo) -> None:
    if global_batch < dist_info.world_size:
        raise UserError(f"global batch of {global_batch} sequences is smaller than the {dist_info.world_size} "
                        "workers; raise --global-batch-size or run fewer workers")


def _copy_tokenizer(source: Path, target: Path, resuming: bool = False) -> None:
    """RUN_DIR/tokenizer: the data's tokenizer (what a killed start left, or a damaged one, is replaced whole)."""
    target.parent.mkdir(parents=True, exist_ok=True)
    if target.exists() and not target.is_symlink() and target.is_dir() and _same_files(source, target):
        return
    if resuming:
        warn(f"{target} is missing, damaged or not the files of the run's tokenizer; writing it again from {source} "
             "(the same tokenizer: the data matches the run's tokenizer fingerprint)")
    tmp = target.with_name(f".{target.name}-{os.getpid()}.tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    shutil.copytree(source, tmp)
    if target.is_dir() and not target.is_symlink():
        shutil.rmtree(target)
    elif target.exists() or target.is_symlink():
        target.unlink()
    os.rename(tmp, target)


def _same_files(a: Path, b: Path) -> bool:
    files = sorted(p.relative_to(a) for p in a.rglob("*") if p.is_file())
    return files == sorted(p.relative_to(b) for p in b.rglob("*") if p.is_file()) and all(
        (a / f).read_bytes() == (b / f).read_bytes() for f in files)
