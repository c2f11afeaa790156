"""`python -m training train`: one training run, read top to bottom.

`run` sets up the process group and claims RUN_DIR; `_train` is the loop: the start state
(trainer/setup.py: model, run settings, data, resume), the step, and the cadences, each owned by
its component: logging (trainer/progress.py), evaluation (trainer/evaluation.py), checkpoints and
their upload to --snapshot-uri (trainer/checkpointing.py), the stop on SIGTERM (elastic/preemption.py).
"""

from __future__ import annotations

import argparse
import functools
import os
from pathlib import Path

import torch

from training.checkpoints import snapshots
from training.compile_cache import background
from training.compile_cache.plan import CompilePlan
from training.data.dataset import DataMeta, SampleOrder, load_meta, micro_batches, rank_samples
from training.elastic import distributed
from training.elastic.distributed import DistInfo
from training.elastic.heartbeat import PeerWatchdog
from training.elastic.preemption import PreemptionWatcher, exit_on_signals
from training.model.export import export_model, looks_intact
from training.observability import metrics, recorder, wandb_logger
from training.run_dir.claim import RunDirClaim, check_location
from training.trainer import announce, distill, setup
from training.trainer.checkpointing import Checkpointing, agree_on_checkpoint
from training.trainer.evaluation import Evaluator, validation_tokens
from training.trainer.optim import Schedule, set_lr
from training.trainer.progress import Console, TrainLog
from training.trainer.step import Stepper, resolve_precision
from trainstack.contract.config import TrainConfig
from trainstack.contract.errors import UserError
from trainstack.contract.log import info as log_info
from trainstack.contract.paths import check_usable


def run(args: argparse.Namespace) -> int:
    """Returns the process exit code (0 done or preempted here; PEER_PREEMPTED for a peer's eviction)."""
    cfg = TrainConfig.from_args(args)
    dist_info = distributed.init(cfg.runtime.device, cfg.runtime.dist_timeout)
    run_dir = Path(cfg.out)
    claim = None
    watchdog = PeerWatchdog(dist_info.rank, dist_info.world_size, cfg.runtime.peer_timeout).start() \
        if dist_info.is_distributed else None
    try:
        with exit_on_signals():  # the training loop has its own handlers (PreemptionWatcher)
            background.checked_switch()
            check_usable(Path(cfg.data), "--data")
            check_usable(run_dir, "--out")
            if cfg.snapshot.uri:
                snapshots.local_form(cfg.snapshot.uri)  # file://OTHERHOST/... refused before RUN_DIR is made
            data = load_meta(cfg.data)
            check_location(run_dir, data.root)
            _check_not_own_source(cfg, run_dir)
            claim = distributed.on_main(lambda: RunDirClaim(run_dir), dist_info)
            return _train(cfg, dist_info, data, run_dir, claim)
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


def _train(cfg: TrainConfig, dist_info: DistInfo, data: DataMeta, run_dir: Path, claim: RunDirClaim | None) -> int:
    precision = resolve_precision(cfg.runtime.precision, dist_info.device)
    wandb_logger.check(cfg.wandb)  # --wandb-*: package and key, before anything is written
    torch.manual_seed(cfg.runtime.seed)  # identical initial weights on every rank
    store = snapshots.prepare(cfg.snapshot, run_dir, Path(cfg.data), dist_info)  # an empty RUN_DIR resumes from it
    latest = agree_on_checkpoint(run_dir, dist_info)
    if latest is not None and latest.step >= cfg.optim.max_steps:
        return _nothing_left_to_train(cfg, data, run_dir, dist_info, latest, store)
    # model, run settings, data, resumed state
    start = setup.prepare(cfg, data, run_dir, dist_info, latest, restored_from=_restored_from(store))
    stepper, eval_stepper = setup.steppers(cfg, start, precision, dist_info)
    schedule = Schedule(cfg.optim.lr, cfg.optim.floor_lr, cfg.optim.warmup, cfg.optim.max_steps)
    order = SampleOrder(len(start.train_windows), start.run_config.seed)  # the run's order, whatever --seed says now
    if latest is not None and dist_info.is_main:
        _announce_schedule_change(start.resumed_schedule, schedule, start.step)
    tokens_per_step, n_params = start.global_batch * start.block_size, metrics.count_params(start.model)
    flops_token = _flops_per_token(start, n_params)

    # TensorBoard, RUN_DIR/metrics.jsonl, loss.png and W&B (training/observability/recorder.py)
    writer = recorder.open_recorder(run_dir, cfg, tokens_per_step, start=dict(
        step=start.step, max_steps=cfg.optim.max_steps, world_size=dist_info.world_size, device=str(dist_info.device),
        precision=precision, params=n_params, global_batch=start.global_batch, block_size=start.block_size,
        val_tokens=validation_tokens(start.val_windows, cfg.cadence.eval_samples),
    )) if dist_info.is_main else None
    if writer is not None and claim is not None:
        claim.on_undo(writer.rollback)  # a failed start puts metrics.jsonl and loss.png back as they were
    uploader = snapshots.start_uploader(store, run_dir, cfg.cadence.keep_checkpoints,
                                        writer.metrics.event) if dist_info.is_main else None
    saves = Checkpointing(cfg, run_dir, dist_info, start.model, start.optimizer, claim=claim, uploader=uploader,
                          trainer_state={"run_config": start.run_config.to_dict(), "schedule": vars(schedule)},
                          start_step=start.step)  # a resume starts the --checkpoint-every-minutes timer afresh
    if dist_info.is_main:  # before the progress bar, so the bar does not swallow it
        log_info(f"training {n_params / 1e6:.1f}M parameters{announce.vocabulary_note(data.vocab_size)} on "
                 f"{dist_info.world_size} worker(s) ({dist_info.device.type}, {precision}); global batch "
                 f"{start.global_batch} x {start.block_size} tokens; steps {start.step} -> {cfg.optim.max_steps}; "
                 "losses are cross-entropy in nats per token")
        if start.teacher is not None:
            log_info(distill.describe(cfg.distill.teacher, start.teacher.config, start.model.config))
        announce.warn_repeated_passes(data, cfg, tokens_per_step)
    console = Console(cfg, start.step, dist_info)
    compiling = CompilePlan(cfg.runtime.compile, run_dir, dist_info.device, start.step, cfg.optim.max_steps,
                            dist_info.is_main, say=console.emit,
                            agree=functools.partial(distributed.broadcast_object, info=dist_info),
                            behind_eager=functools.partial(_behind_eager, start, cfg, precision, dist_info),
                            launches=dist_info.local_rank == 0,
                            max_over_ranks=functools.partial(distributed.max_over_ranks, info=dist_info),
                            rank=dist_info.rank)
    compiling.prepare(start.model)  # in place, so DDP's module and the eager evaluation see it
    log = TrainLog(cfg, run_dir, dist_info, writer, console, schedule, tokens_per_step, flops_token,
                   distilling=start.teacher is not None)
    evaluator = Evaluator(cfg, start.val_windows, eval_stepper, dist_info)
    completed, watcher, step = False, PreemptionWatcher(), start.step
    try:
        while step < cfg.optim.max_steps:
            set_lr(start.optimizer, schedule.lr_at(step))
            mine = rank_samples(step, start.global_batch, dist_info.rank, dist_info.world_size)
            batches = functools.partial(_batches, start.train_windows, order, mine, cfg.optim.batch_size)
            compiling.before_step()
            loss_sum, grad_norm = _first_step_guard(stepper, batches, step == start.step, cfg, start.block_size)
            saves.nonfinite_loss |= ~torch.isfinite(loss_sum)
            step += 1
            log.add(loss_sum, len(mine))
            if compile_s := compiling.after_step(step, start.model):  # the compile is left out of the ETA
                log.leave_out_step(compile_s)
                console.exclude(compile_s)
            if log.due(step):
                log.report(step, stepper, grad_norm)
            if evaluator.due(step):
                evaluator.run(step, writer, console)
            stop = distributed.all_reduce_max(watcher.signalled, dist_info)
            if saves.due(step, stop):
                seconds = saves.save(step, wait=stop or step == cfg.optim.max_steps)
                if dist_info.is_main:
                    saves.record(writer, seconds, step)
                log.exclude(seconds)  # checkpoint time is reported separately, not as step time
            console.update()
            if stop:
                code = watcher.exit_code()
                console.close()  # the last word: no bar redrawn under the stop message
                console.emit(f"rank {dist_info.rank}: stop requested; checkpoint of step {step} saved; "
                             f"exiting with {code}", force=True)
                return code
        completed = True
    finally:
        saves.wait()  # a write in flight finishes before anything else (it may be the only copy)
        compiling.close()  # a background compile does not outlive the run
        watcher.restore()
        console.close()
        if writer is not None:
            writer.close()
        if uploader is not None and not completed:
            uploader.wait(cfg.snapshot.wait)  # SIGTERM or a failure: the last checkpoint reaches the store

    if dist_info.is_main and cfg.runtime.export:
        path = export_model(start.model.to_hf(), run_dir)
        log_info(f"exported the model to {path} (load it with AutoModelForCausalLM.from_pretrained)")
        if uploader is not None:
            uploader.submit_export(path)
    distributed.barrier(dist_info)
    if uploader is not None:
        uploader.wait(cfg.snapshot.wait)
    return 0


def _nothing_left_to_train(cfg: TrainConfig, data: DataMeta, run_dir: Path, dist_info: DistInfo, latest,
                           store) -> int:
    """Resuming at or past --max-steps: said once, and RUN_DIR left as it is (no step, no record in
    metrics.jsonl, no new plot or TensorBoard file). Only an export that is wanted and is missing or
    older than the checkpoint (trained with --no-export, or its write failed on a full disk and an
    earlier session's export stayed) is written again, from the checkpoint."""
    export_due = cfg.runtime.export and not _export_is_current(run_dir, latest)
    # the run's settings are checked before the line that promises an export
    start = setup.prepare(cfg, data, run_dir, dist_info, latest, restored_from=_restored_from(store)) \
        if export_due else None
    if dist_info.is_main:
        done = ("; writing its export (missing, damaged, or older than that checkpoint)" if export_due
                else "; RUN_DIR is left as it is")
        log_info(f"the run is already at step {latest.step}, at or past --max-steps {cfg.optim.max_steps}: there is "
                 f"nothing left to train{done}; raise --max-steps to train on")
    if start is not None and dist_info.is_main:
        path = export_model(start.model.to_hf(), run_dir)
        log_info(f"exported the model to {path} (load it with AutoModelForCausalLM.from_pretrained)")
        uploader = snapshots.start_uploader(store, run_dir, cfg.cadence.keep_checkpoints, events=None)
        if uploader is not None:
            uploader.submit_export(path)
            uploader.wait(cfg.snapshot.wait)
    distributed.barrier(dist_info)
    return 0


def _restored_from(store) -> str | None:
    """The --snapshot-uri an empty RUN_DIR was restored from at this start, if it was."""
    return store.uri if store is not None and store.restored_step is not None else None


def _export_is_current(run_dir: Path, latest) -> bool:
    """RUN_DIR/export was written after the checkpoint `latest` (the end of a run saves, then exports)
    and is not visibly damaged (`sample` and `evaluate` send the user here to write a damaged one again)."""
    try:
        exported = (run_dir / "export" / "config.json").stat().st_mtime_ns
        saved = (latest.path / "manifest.json").stat().st_mtime_ns
    except OSError:
        return False
    return exported >= saved and looks_intact(run_dir / "export")


def _check_not_own_source(cfg: TrainConfig, run_dir: Path) -> None:
    """The weights a run starts from cannot live in the directory it writes (its export would replace them)."""
    out = run_dir.resolve()
    for flag, source in (("--distill-from", cfg.distill.teacher), ("--init-from", cfg.model.init_from)):
        if not source or not Path(source).exists():
            continue  # a hub name
        where = Path(source).resolve()
        if where == out or out in where.parents:
            raise UserError(f"{flag} {source} is this run's own --out {run_dir} (its checkpoints and export would "
                            f"replace what {flag} reads); give the new run another --out")
        # The source's run directory (the source itself, or the run an export lies in): a run nested in
        # it would mix its files with that run's, and that run's retention and export would reach them.
        owner = next((d for d in (where, *where.parents) if (d / "run_config.json").is_file()), None)
        if owner is not None and owner in out.parents:
            raise UserError(f"--out {run_dir} is inside the run directory {owner} that {flag} {source} comes from; "
                            "give the new run an --out of its own, outside it")


def _batches(windows, order: SampleOrder, mine: list[int], batch_size: int) -> list:
    """This rank's micro-batches of the step (built inside the first step's out-of-memory guard)."""
    return [windows.batch([order.window_of(g) for g in mb]) for mb in micro_batches(mine, batch_size)]


def _behind_eager(start: setup.Start, cfg: TrainConfig, precision: str,
                  dist_info: DistInfo) -> tuple[dict | None, str | None]:
    """Asked when `auto` decides to compile a cold CPU start: what the child would compile, and how it would
    get a core beside this node's ranks (background.spare)."""
    local_ranks = int(os.environ.get("LOCAL_WORLD_SIZE", dist_info.world_size))
    return (_background_compile(start, cfg, precision, dist_info),
            background.spare(local_ranks, torch.get_num_threads()))


def _background_compile(start: setup.Start, cfg: TrainConfig, precision: str, dist_info: DistInfo) -> dict | None:
    """What a cold compile builds behind eager steps (compile_cache/background.py): the model and a step's
    micro-batch sizes on each kind of rank (an uneven global batch gives ranks different ones; every node's
    child builds them all). Distillation compiles its own step around a teacher: it compiles in line."""
    if start.teacher is not None:
        return None
    sequences = []
    for rank in range(dist_info.world_size):
        mine = rank_samples(start.step, start.global_batch, rank, dist_info.world_size)
        sizes = list(dict.fromkeys(len(mb) for mb in micro_batches(mine, cfg.optim.batch_size)))
        if sizes not in sequences:
            sequences.append(sizes)
    if not background.fits(start.model.config, max(max(sizes) for sizes in sequences), start.block_size):
        return None  # no room for a second model beside this one: compile in line
    return background.spec(start.model.config, dist_info.device, precision, sequences, start.block_size)


def _flops_per_token(start: setup.Start, n_params: int) -> float:
    config = start.model.config
    flops = metrics.flops_per_token(n_params, config.n_layer, config.n_embd, start.block_size)
    if start.teacher is not None:
        flops += distill.teacher_flops_per_token(start.teacher, start.block_size)
    return flops


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


def _first_step_guard(stepper: Stepper, make_batches, first: bool, cfg: TrainConfig, block_size: int):
    """Turn an out-of-memory on the first step (building its batches included) into advice; later OOMs
    are real bugs and propagate."""
    try:
        return stepper.step(make_batches())
    except Exception as exc:
        if not first or not _out_of_memory(exc):
            raise
        raise UserError(f"a micro-batch of {cfg.optim.batch_size} x {block_size} tokens does not fit in device memory "
                        "(the allocation failed); lower --batch-size (the global batch is kept by gradient "
                        "accumulation) or --block-size, then run the same command again") from None


def _announce_schedule_change(saved: dict | None, schedule: Schedule, step: int) -> None:
    """A longer (or shorter) --max-steps stretches the cosine: the learning rate at the resume step changes."""
    if not saved or saved == vars(schedule):
        return
    before = Schedule(**saved)
    now, was = f"{schedule.lr_at(step):.3g}", f"{before.lr_at(step):.3g}"
    effect = (f"the lr at step {step} is now {now} instead of {was}" if now != was
              else f"the lr at step {step} stays {now}; the steps after it follow the new schedule")
    fields = (("max steps", before.max_steps, schedule.max_steps), ("lr", before.lr, schedule.lr),
              ("min lr", before.min_lr, schedule.min_lr), ("warmup", before.warmup_steps, schedule.warmup_steps))
    changed = ", ".join(f"{name} {was:g} -> {now:g}" for name, was, now in fields if was != now)
    log_info(f"the learning-rate schedule changed on resume ({changed}): {effect}")
