"""The `train` settings as typed, frozen parts, built once from the parsed flags (`TrainConfig.from_args`).

Each component takes the part it owns: the optimizer and schedule `optim`, the loop's cadences
`cadence`, the object-store mirror `snapshot`, W&B `wandb`, distillation `distill`. Plain Python, like
the rest of the contract: the Pulumi program reads the same parts (`TrainConfig.from_args` of
`check_train_args`) without torch.
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from types import MappingProxyType


@dataclass(frozen=True)
class ModelChoice:
    """What to build: a preset (sizes overridden by --n-*), pretrained weights, or a teacher's student."""

    preset: str
    n_layer: int | None
    n_embd: int | None
    n_head: int | None
    block_size: int | None  # None: the model's context length
    dropout: float
    init_from: str | None


@dataclass(frozen=True)
class OptimConfig:
    """Batch, optimizer and learning-rate schedule."""

    batch_size: int  # sequences per process per micro-step
    global_batch_size: int | None  # None: batch size x the first start's world size
    max_steps: int
    lr: float
    min_lr: float | None  # None: lr / 10
    warmup_steps: int | None  # None: 2% of max steps
    weight_decay: float
    betas: tuple[float, float]
    grad_clip: float

    @property
    def floor_lr(self) -> float:
        return self.min_lr if self.min_lr is not None else self.lr / 10

    @property
    def warmup(self) -> int:
        return self.warmup_steps if self.warmup_steps is not None else max(1, self.max_steps // 50)


@dataclass(frozen=True)
class Cadence:
    """How often the loop logs, evaluates and checkpoints, and how much of each."""

    log_every: int
    eval_every: int
    eval_samples: int
    checkpoint_every: int
    keep_checkpoints: int
    checkpoint_every_minutes: float = 0.0  # 0: the step cadence alone

    def due(self, every: int, step: int, max_steps: int) -> bool:
        return step % every == 0 or step == max_steps


@dataclass(frozen=True)
class RuntimeConfig:
    """Where and how the processes run."""

    seed: int
    device: str
    precision: str
    compile: str
    dist_timeout: int
    peer_timeout: int
    export: bool
    progress: bool


@dataclass(frozen=True)
class SnapshotConfig:
    """--snapshot-uri: the object-store mirror of RUN_DIR."""

    uri: str | None
    wait: int  # seconds the end of training or a SIGTERM waits for uploads


@dataclass(frozen=True)
class WandbConfig:
    project: str | None
    entity: str | None
    group: str | None
    mode: str  # online, offline or disabled

    @property
    def enabled(self) -> bool:
        return bool(self.project) and self.mode != "disabled"


@dataclass(frozen=True)
class DistillConfig:
    """--distill-from: the teacher and the weights of the three loss terms."""

    teacher: str | None
    alpha_kd: float
    alpha_lm: float
    alpha_cos: float
    temperature: float

    @property
    def enabled(self) -> bool:
        return bool(self.teacher)


@dataclass(frozen=True)
class TrainConfig:
    data: str
    out: str
    model: ModelChoice
    optim: OptimConfig
    cadence: Cadence
    runtime: RuntimeConfig
    snapshot: SnapshotConfig
    wandb: WandbConfig
    distill: DistillConfig
    flags: MappingProxyType  # every parsed flag by name, as the run's record (W&B's config) shows them

    @classmethod
    def from_args(cls, args: argparse.Namespace) -> TrainConfig:
        """From `train`'s (or `distill`'s) parsed and checked flags (contract.cli.check_values).

        A flag the namespace lacks (one built by hand, or by a caller older than the flag) takes the
        train parser's default: the one place the typed config gets its defaults, so adding a flag
        cannot break a caller with an AttributeError.
        """
        a = argparse.Namespace(**{**_train_defaults(), **vars(args)})
        return cls(
            data=a.data, out=a.out,
            model=ModelChoice(a.preset, a.n_layer, a.n_embd, a.n_head, a.block_size, a.dropout, a.init_from),
            optim=OptimConfig(a.batch_size, a.global_batch_size, a.max_steps, a.lr, a.min_lr, a.warmup_steps,
                              a.weight_decay, (a.beta1, a.beta2), a.grad_clip),
            cadence=Cadence(a.log_every, a.eval_every, a.eval_samples, a.checkpoint_every, a.keep_checkpoints,
                            a.checkpoint_every_minutes),
            runtime=RuntimeConfig(a.seed, a.device, a.precision, a.compile, a.dist_timeout, a.peer_timeout,
                                  export=not a.no_export, progress=not a.no_progress),
            snapshot=SnapshotConfig(a.snapshot_uri, a.snapshot_wait),
            wandb=WandbConfig(a.wandb_project, a.wandb_entity, a.wandb_group, a.wandb_mode),
            distill=DistillConfig(a.distill_from, a.alpha_kd, a.alpha_lm, a.alpha_cos, a.temperature),
            flags=MappingProxyType(dict(vars(a))),
        )



def _train_defaults() -> dict:
    from trainstack.contract.cli import train_flags  # the parser is the source of every default

    return {flag.dest: flag.default for flag in train_flags()}
