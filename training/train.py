"""`python -m training train`: the orchestration of one training run.

Reads top to bottom: set up the process group, validate data and run directory, build the model,
resume from the newest intact checkpoint, loop (step, log, evaluate, checkpoint, watch for SIGTERM),
export. The components live in their own modules: data, checkpoint, step, optim, metrics,
preemption, run_config, export.
"""

from __future__ import annotations

import argparse
import os
import random
import shutil
import time
from pathlib import Path

import numpy as np
import torch
from torch.nn.parallel import DistributedDataParallel

from training import checkpoint, distill, distributed, metrics, recorder, snapshots, wandb_logger
from training.checkpoint_writer import BackgroundCheckpointer
from training.data import (
    DataMeta,
    SampleOrder,
    TokenWindows,
    check_data,
    load_meta,
    micro_batches,
    rank_samples,
)
from training.distributed import DistInfo
from training.errors import UserError
from training.export import export_model
from training.heartbeat import PeerWatchdog
from training.log import info as log_info
from training.log import warn
from training.memory import check_fits
from training.model import (
    MODEL_CONFIG,
    config_for,
    create_gpt,
    load_model_config,
    load_pretrained,
    resolve_shape,
    save_model_config,
    shape_of,
)
from training.optim import Schedule, make_optimizer, set_lr
from training.paths import check_usable
from training.preemption import PreemptionWatcher, exit_on_signals
from training.run_config import RunConfig, check_tokenizer_matches_model, load_or_create_run_config
from training.run_dir import RunDirClaim, check_location
from training.step import Stepper, resolve_compile, resolve_precision


def run(args: argparse.Namespace) -> int:
    """Returns the process exit code (0 done or preempted here; PEER_PREEMPTED for a peer's eviction)."""
    dist_info = distributed.init(args.device, args.dist_timeout)
    run_dir = Path(args.out)
    claim = None
    watchdog = PeerWatchdog(dist_info.rank, dist_info.world_size, args.peer_timeout).start() \
        if dist_info.is_distributed else None
    try:
        with exit_on_signals():  # the training loop has its own handlers (PreemptionWatcher)
            check_usable(Path(args.data), "--data")
            check_usable(run_dir, "--out")
            data = load_meta(args.data)
            check_location(run_dir, data.root)
            _check_not_own_source(args, run_dir)
            claim = distributed.on_main(lambda: RunDirClaim(run_dir), dist_info)
            return _train(args, dist_info, data, run_dir, claim)
    except BaseException:
        if claim is not None:
            claim.undo()  # a start that saved nothing leaves RUN_DIR as it found it
        raise
    finally:
        if watchdog is not None:
            watchdog.stop()
        if claim is not None:
            claim.release()
        distributed.shutdown()


def _train(args: argparse.Namespace, dist_info: DistInfo, data: DataMeta, run_dir: Path,
           claim: RunDirClaim | None) -> int:
    device = dist_info.device
    precision = resolve_precision(args.precision, device)
    wandb_logger.check(args)  # --wandb-*: package and key, before anything is written

    # ---- model configuration and the run's fixed settings (validated before anything is written)
    torch.manual_seed(args.seed)  # identical initial weights on every rank
    store = snapshots.prepare(args, run_dir, dist_info)  # --snapshot-uri: an empty RUN_DIR resumes from it
    latest = _agree_on_checkpoint(run_dir, dist_info)
    saved_config = run_dir / MODEL_CONFIG
    # --distill-from (training/distill.py): a frozen teacher, and a student cut from it
    teacher = distill.load_teacher(args, data, device) if getattr(args, "distill_from", None) else None
    if (args.init_from or teacher is not None) and latest is not None and saved_config.is_file():
        # Resuming a fine-tune: the checkpoint has the weights and RUN_DIR the architecture, so a
        # restarted pod does not fetch the pretrained model again.
        config = load_model_config(saved_config)
        model = None
    elif args.init_from:
        model = load_pretrained(args.init_from)
        check_tokenizer_matches_model(data, model.config, args.init_from)
        config = model.config
    elif teacher is not None:
        model = distill.make_student(teacher, args)
        config = model.config
    else:
        shape = resolve_shape(args.preset, args.n_layer, args.n_embd, args.n_head, args.block_size)
        config = config_for(shape, data.vocab_size, args.dropout, data.eos_token_id)
        model = None
    block_size = args.block_size or config.n_positions
    if block_size > config.n_positions:
        raise UserError(f"--block-size {block_size} exceeds the model's {config.n_positions} positions; "
                        f"use --block-size {config.n_positions} or less")
    wanted = RunConfig(model=shape_of(config), block_size=block_size,
                       tokenizer_fingerprint=data.tokenizer_fingerprint,
                       global_batch_size=args.global_batch_size or args.batch_size * dist_info.world_size,
                       seed=args.seed, init_from=args.init_from or (f"distill:{args.distill_from}" if teacher else ""))
    _check_global_batch(wanted.global_batch_size, dist_info)
    run_config = load_or_create_run_config(run_dir, wanted, explicit_global_batch=args.global_batch_size,
                                           write=dist_info.is_main, resuming=latest is not None)
    global_batch = run_config.global_batch_size
    _check_global_batch(global_batch, dist_info)
    if dist_info.is_main and (latest is None or not saved_config.is_file()):
        save_model_config(config, saved_config)  # without a checkpoint, one left by a killed start is stale

    train_windows = TokenWindows(data.shards("train"), data.dtype, block_size, data.vocab_size)
    if len(train_windows) == 0:
        raise UserError(f"the training split has {data.split_tokens('train')} tokens, fewer than one block of "
                        f"{block_size + 1}; add more text or lower --block-size")
    val_windows = TokenWindows(data.shards("val"), data.dtype, block_size, data.vocab_size)
    check_data(data, [train_windows, val_windows])  # before the first step: the export needs the tokenizer
    if len(val_windows) == 0:
        warn(f"the validation split has {data.split_tokens('val')} tokens, fewer than one block; "
             "validation is skipped (prepare with a larger --val-fraction to enable it)")

    # ---- model, optimizer, resume
    if model is None:
        check_fits(config, device, f"--preset {args.preset} with n_layer {config.n_layer}, n_embd {config.n_embd}")
        model = create_gpt(config)
    model.to(device)
    optimizer = make_optimizer(model, args.lr, args.weight_decay, (args.beta1, args.beta2))
    start_step = 0
    if latest is not None:
        states = latest.load()
        model.load_state_dict(states["model"])
        optimizer.load_state_dict(states["optimizer"])
        start_step = states["trainer"]["step"]
        _restore_rng(states["trainer"]["rng"], dist_info, args.seed, start_step)
        if dist_info.is_main:
            log_info(f"resumed from {latest.path} (step {start_step}, "
                     f"saved by {len(states['trainer']['rng'])} workers, now {dist_info.world_size})")
            resumed_schedule = states["trainer"].get("schedule")
        del states
        if dist_info.is_main and start_step >= args.max_steps:
            log_info(f"the run is already at step {start_step}, at or past --max-steps {args.max_steps}: there is "
                     "nothing left to train" + ("" if args.no_export else " (the export is written again)")
                     + "; raise --max-steps to train on")
    elif dist_info.is_main:
        _copy_tokenizer(data.tokenizer_dir, run_dir / "tokenizer")  # a stale one (killed start) is replaced

    step_model = torch.compile(model) if resolve_compile(args.compile) else model
    if dist_info.is_distributed:
        step_model = DistributedDataParallel(step_model, device_ids=[device.index] if device.type == "cuda" else None)
    make_stepper = Stepper if teacher is None else distill.stepper_factory(teacher, args)  # teacher bound
    stepper = make_stepper(step_model, optimizer, device, precision, args.grad_clip, dist_info.world_size, global_batch)
    eval_stepper = Stepper(model, optimizer, device, precision, 0.0, dist_info.world_size, global_batch)
    schedule = Schedule(lr=args.lr, min_lr=args.min_lr if args.min_lr is not None else args.lr / 10,
                        warmup_steps=args.warmup_steps if args.warmup_steps is not None else max(1, args.max_steps // 50),
                        max_steps=args.max_steps)
    order = SampleOrder(len(train_windows), run_config.seed)  # the run's data order, whatever --seed says now
    if latest is not None and dist_info.is_main:
        _announce_schedule_change(resumed_schedule, schedule, start_step)
    tokens_per_step = global_batch * block_size
    n_params = metrics.count_params(model)
    flops_token = metrics.flops_per_token(n_params, config.n_layer, config.n_embd, block_size)
    if teacher is not None:
        flops_token += distill.teacher_flops_per_token(teacher, block_size)
    peak = metrics.peak_flops(device)

    nonfinite_loss = torch.zeros((), dtype=torch.bool, device=device)  # any step since the start; no sync per step

        # Rank 0 writes; periodic checkpoints in the background, the last one and the one before a stop
    # (SIGTERM) synchronously, so the process exits only with its last step on disk.
    saver = BackgroundCheckpointer(run_dir, args.keep_checkpoints) if dist_info.is_main else None

    def save(step: int, wait: bool) -> float:
        """Seconds the training loop spent on it (the background write is not counted)."""
        began = time.perf_counter()
        _stop_if_diverged(model, nonfinite_loss, step, run_dir, args, dist_info)  # never a NaN checkpoint
        rng = distributed.gather_objects(_rng_state(device), dist_info)
        if saver is not None:
            trainer = {"step": step, "rng": rng, "run_config": run_config.to_dict(), "schedule": vars(schedule)}
            saver.save(step, {"model": model.state_dict(), "optimizer": optimizer.state_dict(), "trainer": trainer},
                       wait=wait)
            claim.saved = True  # from now on a failure must not undo RUN_DIR (the write may be in flight)
            if uploader is not None:
                uploader.submit_checkpoint(step)  # to --snapshot-uri once it commits, in the background
        distributed.barrier(dist_info)
        return time.perf_counter() - began

    # ---- the loop
    # TensorBoard, RUN_DIR/metrics.jsonl, loss.png and W&B (training/recorder.py)
    writer = recorder.open_recorder(run_dir, args, tokens_per_step, start=dict(
        step=start_step, max_steps=args.max_steps, world_size=dist_info.world_size, device=str(device),
        precision=precision, params=n_params, global_batch=global_batch, block_size=block_size,
    )) if dist_info.is_main else None
    if writer is not None and claim is not None:
        claim.on_undo(writer.rollback)  # a failed start puts metrics.jsonl and loss.png back as they were
    uploader = snapshots.start_uploader(store, run_dir, args.keep_checkpoints,
                                        writer.metrics.event) if dist_info.is_main else None
    completed = False
    progress = _progress_bar(start_step, args, dist_info)
    watcher = PreemptionWatcher()
    step = start_step
    loss_acc = torch.zeros((), device=device)
    samples_acc = 0
    window_start, window_steps = time.perf_counter(), 0
    if dist_info.is_main:
        log_info(f"training {n_params / 1e6:.1f}M parameters on {dist_info.world_size} "
                 f"worker(s) ({device.type}, {precision}); global batch {global_batch} x {block_size} tokens; "
                 f"steps {start_step} -> {args.max_steps}")
    try:
        while step < args.max_steps:
            set_lr(optimizer, schedule.lr_at(step))
            mine = rank_samples(step, global_batch, dist_info.rank, dist_info.world_size)
            def batches(mine=mine):
                return [train_windows.batch([order.window_of(g) for g in mb])
                        for mb in micro_batches(mine, args.batch_size)]

            loss_sum, grad_norm = _first_step_guard(stepper, batches, step == start_step, args, block_size)
            nonfinite_loss |= ~torch.isfinite(loss_sum)
            step += 1
            window_steps += 1
            loss_acc += loss_sum
            samples_acc += len(mine)

            if step % args.log_every == 0 or step == args.max_steps:
                total_loss, total_samples = distributed.all_reduce_sum([loss_acc.item(), samples_acc], dist_info)
                elapsed = time.perf_counter() - window_start
                tok_s = window_steps * tokens_per_step / elapsed
                per_device = tok_s / dist_info.world_size
                util = metrics.mfu(per_device, flops_token, peak)
                train_loss = total_loss / total_samples
                if not np.isfinite(train_loss):
                    raise _diverged(str(train_loss), step, run_dir, args)
                parts = stepper.pop_parts() if teacher is not None else {}  # distill/kd, distill/lm, distill/cos
                if dist_info.is_main:
                    for tag, value in parts.items():
                        writer.add_scalar(tag, value, step)
                    writer.add_scalar("train/loss", train_loss, step)
                    writer.add_scalar("train/lr", schedule.lr_at(step - 1), step)
                    writer.add_scalar("train/grad_norm", float(grad_norm), step)
                    writer.add_scalar("perf/tokens_per_s", tok_s, step)
                    writer.add_scalar("perf/step_ms", 1000 * elapsed / window_steps, step)
                    if util is not None:
                        writer.add_scalar("perf/mfu", util, step)
                    line = (f"step {step}/{args.max_steps} | loss {train_loss:.4f} | lr {schedule.lr_at(step - 1):.2e} "
                            f"| {tok_s:,.0f} tok/s | {1000 * elapsed / window_steps:.0f} ms/step"
                            + (f" | mfu {100 * util:.1f}%" if util is not None else ""))
                    _emit(progress, line, train_loss, tok_s)
                loss_acc.zero_()
                samples_acc = 0
                window_start, window_steps = time.perf_counter(), 0

            if len(val_windows) and (step % args.eval_every == 0 or step == args.max_steps):
                val_loss = _evaluate(eval_stepper, val_windows, args.eval_samples, args.batch_size, dist_info)
                if dist_info.is_main:
                    writer.add_scalar("val/loss", val_loss, step)
                    writer.add_scalar("val/perplexity", float(np.exp(min(val_loss, 50.0))), step)
                    _emit(progress, f"step {step} | val loss {val_loss:.4f} | val perplexity "
                                    f"{np.exp(min(val_loss, 50.0)):.2f}")

            stop = distributed.all_reduce_max(watcher.signalled, dist_info)
            if stop or step % args.checkpoint_every == 0 or step == args.max_steps:
                seconds = save(step, wait=stop or step == args.max_steps)
                if dist_info.is_main:
                    writer.add_scalar("perf/checkpoint_s", seconds, step)
                    if saver.last_write_s is not None:
                        writer.add_scalar("perf/checkpoint_write_s", saver.last_write_s, step)
                    writer.flush()
                window_start += seconds  # checkpoint time is reported separately, not as step time
            if progress is not None:
                progress.update(1)
            if stop:
                code = watcher.exit_code()
                _emit(progress, f"rank {dist_info.rank}: stop requested; checkpoint of step {step} saved; "
                                f"exiting with {code}", force=True)
                return code
        completed = True
    finally:
        if saver is not None:
            saver.wait()  # a write in flight finishes before anything else (it may be the only copy)
        watcher.restore()
        if progress is not None:
            progress.close()
        if writer is not None:
            writer.close()
        if uploader is not None and not completed:
            uploader.wait(args.snapshot_wait)  # SIGTERM or a failure: the last checkpoint reaches the store

    if dist_info.is_main and not args.no_export:
        path = export_model(model.to_hf(), run_dir)
        log_info(f"exported the model to {path} (load it with AutoModelForCausalLM.from_pretrained)")
        if uploader is not None:
            uploader.submit_export(path)
    distributed.barrier(dist_info)
    if uploader is not None:
        uploader.wait(args.snapshot_wait)
    return 0


def _check_not_own_source(args, run_dir: Path) -> None:
    """The weights a run starts from cannot live in the directory it writes (its export would replace them)."""
    out = run_dir.resolve()
    for flag in ("--distill-from", "--init-from"):
        source = getattr(args, flag[2:].replace("-", "_"), None)
        if not source or not Path(source).exists():
            continue  # a hub name
        where = Path(source).resolve()
        if where == out or out in where.parents:
            raise UserError(f"{flag} {source} is this run's own --out {run_dir} (its checkpoints and export would "
                            f"replace what {flag} reads); give the new run another --out")


def _check_global_batch(global_batch: int, dist_info: DistInfo) -> None:
    if global_batch < dist_info.world_size:
        raise UserError(f"global batch of {global_batch} sequences is smaller than the {dist_info.world_size} "
                        "workers; raise --global-batch-size or run fewer workers")


# How torch's CPU allocator words an allocation failure (CUDA raises torch.OutOfMemoryError).
OUT_OF_MEMORY_MESSAGES = ("not enough memory", "can't allocate memory", "Cannot allocate memory")


def _out_of_memory(exc: BaseException) -> bool:
    """An allocation failure anywhere in the chain: torch's (CUDA, CPU), numpy's or Python's MemoryError
    (torch.compile and the DDP wrapper raise their own types around it)."""
    seen = set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        if isinstance(exc, (torch.OutOfMemoryError, MemoryError)):
            return True
        if isinstance(exc, RuntimeError) and any(text in str(exc) for text in OUT_OF_MEMORY_MESSAGES):
            return True
        exc = exc.__cause__ or exc.__context__
    return False


def _first_step_guard(stepper: Stepper, make_batches, first: bool, args, block_size: int):
    """Turn an out-of-memory on the first step (building its batches included) into advice; later OOMs
    are real bugs and propagate."""
    try:
        return stepper.step(make_batches())
    except Exception as exc:
        if not first or not _out_of_memory(exc):
            raise
        raise UserError(f"a micro-batch of {args.batch_size} x {block_size} tokens does not fit in device memory "
                        "(the allocation failed); lower --batch-size (the global batch is kept by gradient "
                        "accumulation) or --block-size, then run the same command again") from None


@torch.no_grad()
def _evaluate(stepper: Stepper, windows: TokenWindows, samples: int, batch_size: int, dist_info: DistInfo) -> float:
    """Mean loss over a fixed set of validation windows (the first `samples`), shared out across ranks."""
    stepper.model.eval()
    n = min(len(windows), samples)
    mine = list(range(dist_info.rank, n, dist_info.world_size))
    total = 0.0
    for mb in micro_batches(mine, batch_size):
        x, y = windows.batch(mb)
        total += stepper.forward_loss(x.to(dist_info.device), y.to(dist_info.device)).item() * len(mb)
    stepper.model.train()
    loss_sum, count = distributed.all_reduce_sum([total, float(len(mine))], dist_info)
    return loss_sum / max(count, 1.0)


def _agree_on_checkpoint(run_dir: Path, dist_info: DistInfo) -> checkpoint.Checkpoint | None:
    """Rank 0 picks the newest intact checkpoint and every rank resumes from that one.

    Each rank choosing for itself could split the job: on NFS (EFS, Filestore) a directory renamed
    a moment ago on one node may not be listed yet on another.
    """
    chosen = distributed.on_main(lambda: checkpoint.resume_point(run_dir), dist_info)
    step = distributed.broadcast_object(chosen.step if chosen else None, dist_info)
    if step is None or dist_info.is_main:
        return chosen
    return checkpoint.wait_for_step(run_dir, step)


def _stop_if_diverged(model: torch.nn.Module, nonfinite_loss: torch.Tensor, step: int, run_dir: Path, args,
                      dist_info: DistInfo) -> None:
    """Before a checkpoint (periodic, SIGTERM or final): refuse to save weights that are no longer numbers."""
    finite = torch.stack([torch.isfinite(p).all() for p in model.parameters()]).all()
    bad = bool(nonfinite_loss) or not bool(finite)
    if distributed.all_reduce_max(bad, dist_info):
        raise _diverged("nan", step, run_dir, args)


def _diverged(loss: str, step: int, run_dir: Path, args) -> UserError:
    last = checkpoint.latest_valid(run_dir, announce=False)
    kept = f"the last finite checkpoint {last.path} is kept" if last else "no checkpoint was written"
    return UserError(f"the loss became {loss} by step {step}; stopped without saving ({kept}); lower --lr "
                     f"(now {args.lr:g}), lengthen --warmup-steps or keep --grad-clip on, then run again "
                     "(it resumes from the last finite checkpoint)")


def _announce_schedule_change(saved: dict | None, schedule: Schedule, step: int) -> None:
    """A longer (or shorter) --max-steps stretches the cosine: the learning rate at the resume step changes."""
    if not saved or saved == vars(schedule):
        return
    before = Schedule(**saved)
    log_info(f"the learning-rate schedule changed on resume (max steps {before.max_steps} -> {schedule.max_steps}, "
             f"lr {before.lr:g} -> {schedule.lr:g}, min lr {before.min_lr:g} -> {schedule.min_lr:g}, warmup "
             f"{before.warmup_steps} -> {schedule.warmup_steps}): the lr at step {step} is now "
             f"{schedule.lr_at(step):.3g} instead of {before.lr_at(step):.3g}")


def _rng_state(device: torch.device) -> dict:
    # Plain lists and tensors only: checkpoints load with torch.load(weights_only=True).
    kind, keys, pos, has_gauss, cached = np.random.get_state()
    state = {"python": random.getstate(), "numpy": (kind, keys.tolist(), pos, has_gauss, cached),
             "torch": torch.get_rng_state()}
    if device.type == "cuda":
        state["cuda"] = torch.cuda.get_rng_state(device)
    return state


def _restore_rng(states: list[dict], dist_info: DistInfo, seed: int, step: int) -> None:
    """Each rank gets its own RNG state back; after a world-size change, a fresh per-rank seed."""
    if len(states) == dist_info.world_size:
        state = states[dist_info.rank]
        random.setstate(state["python"])
        kind, keys, pos, has_gauss, cached = state["numpy"]
        np.random.set_state((kind, np.asarray(keys, dtype=np.uint32), pos, has_gauss, cached))
        torch.set_rng_state(state["torch"])
        if "cuda" in state and dist_info.device.type == "cuda":
            torch.cuda.set_rng_state(state["cuda"], dist_info.device)
    else:
        derived = hash((seed, step, dist_info.rank)) % (2**31)
        random.seed(derived)
        np.random.seed(derived)
        torch.manual_seed(derived)


def _copy_tokenizer(source: Path, target: Path) -> None:
    """RUN_DIR/tokenizer: the data's tokenizer (a new run's; what a killed start left is replaced whole)."""
    target.parent.mkdir(parents=True, exist_ok=True)
    if target.exists() and not target.is_symlink() and target.is_dir() and _same_files(source, target):
        return
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


def _progress_bar(start_step: int, args, dist_info: DistInfo):
    if not dist_info.is_main or args.no_progress:
        return None
    from tqdm import tqdm

    return tqdm(total=args.max_steps, initial=start_step, desc="train", unit="step", dynamic_ncols=True,
                mininterval=1.0)


def _emit(progress, line: str, loss: float | None = None, tok_s: float | None = None, force: bool = False) -> None:
    if progress is None:
        print(line, flush=True)
        return
    progress.write(line)
    if loss is not None:
        progress.set_postfix(loss=f"{loss:.3f}", tok_s=f"{tok_s:,.0f}", refresh=False)
    if force:
        progress.refresh()
