"""Shared pieces of the benchmarks: the prepared corpus, the model, our training loop, the machine.

The loop in `OurLoop` is the body of `training/trainer/train.py`'s loop for one process (learning rate,
this rank's samples, micro-batches from the token windows, `Stepper.step`, a host sync every
`log_every` steps), built from the same functions, so timing it times what `train` runs.
"""

from __future__ import annotations

import copy
import json
import os
import platform
import statistics
import subprocess
import sys
import sysconfig
import time
from dataclasses import dataclass
from pathlib import Path

import torch

from training.data.dataset import SampleOrder, TokenWindows, load_meta, micro_batches, rank_samples
from training.model.build import config_for, create_gpt, create_model, resolve_shape
from training.trainer.optim import Schedule, make_optimizer, set_lr
from training.trainer.step import Stepper, resolve_compile, resolve_precision

ROOT = Path(__file__).resolve().parent.parent
CACHE = ROOT / "bench" / ".cache"
RESULTS = ROOT / "bench" / "results"
CPU = torch.device("cpu")

# `python -m training train` defaults (trainstack/contract/cli.py), for one process.
LR, WEIGHT_DECAY, BETAS, GRAD_CLIP, LOG_EVERY, SEED = 6e-4, 0.1, (0.9, 0.95), 1.0, 10, 1337


def stdlib_corpus() -> str:
    """The corpus `make demo` uses: the Python standard library's own top-level modules."""
    return str(Path(sysconfig.get_paths()["stdlib"]) / "*.py")


def prepared_data(out: Path | None = None, vocab: int = 8192) -> Path:
    """A DATA_DIR made by `python -m training prepare` (our real data path); re-runs reuse it."""
    out = out or CACHE / f"stdlib-bpe{vocab}"
    cmd = [sys.executable, "-m", "training", "prepare", "--data", stdlib_corpus(), "--out", str(out),
           "--tokenizer", f"train:{vocab}"]
    done = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"prepare failed ({done.returncode}): {done.stderr.strip()[-2000:]}")
    return out


@dataclass
class Setup:
    """One model size on one prepared corpus: config, the initial weights and the training windows."""

    name: str
    config: object
    block_size: int
    windows: TokenWindows
    init_state: dict

    def fresh_model(self):
        """transformers' GPT2LMHeadModel with the initial weights (the HF Trainer peer)."""
        model = create_model(copy.deepcopy(self.config))
        model.load_state_dict(self.init_state)
        model.train()
        return model

    def fresh_gpt(self):
        """The model `train` trains (training/model/gpt.py), with the same initial weights."""
        model = create_gpt(copy.deepcopy(self.config))
        model.load_state_dict(self.init_state)
        model.train()
        return model


def make_setup(data_dir: Path, name: str, preset: str = "tiny", n_layer=None, n_embd=None, n_head=None,
               block_size=None, seed: int = SEED) -> Setup:
    """The model `train` builds for these flags: same config, same seed, hence the same initial weights."""
    data = load_meta(data_dir)
    shape = resolve_shape(preset, n_layer, n_embd, n_head, block_size)
    config = config_for(shape, data.vocab_size, 0.0, data.eos_token_id)
    block = block_size or config.n_positions
    torch.manual_seed(seed)
    model = create_gpt(config)
    init_state = {k: v.clone() for k, v in model.state_dict().items()}
    windows = TokenWindows(data.shards("train"), data.dtype, block)
    return Setup(name=name, config=config, block_size=block, windows=windows, init_state=init_state)


def default_schedule(max_steps: int, lr: float = LR) -> Schedule:
    """`train`'s defaults: warmup 2% of the steps (at least 1), cosine down to lr / 10."""
    return Schedule(lr=lr, min_lr=lr / 10, warmup_steps=max(1, max_steps // 50), max_steps=max_steps)


class TimedLoop:
    """A training loop driven one optimizer step per `step()` call."""

    def step(self) -> None:
        raise NotImplementedError

    def run(self, steps: int) -> list[float]:
        """`steps` steps; the seconds each took."""
        took = []
        for _ in range(steps):
            began = time.perf_counter()
            self.step()
            took.append(time.perf_counter() - began)
        return took


class OurLoop(TimedLoop):
    """train.py's loop body for one process, one optimizer step per `step()` call, at `train`'s
    defaults for this device (precision and compile "auto") unless told otherwise."""

    def __init__(self, model, windows: TokenWindows, max_steps: int, batch_size: int, seed: int = SEED,
                 global_batch: int | None = None, precision: str = "auto", compile: str = "auto",
                 device: torch.device = CPU, make_stepper=Stepper):
        """`model` already on `device`; `make_stepper` is Stepper or what train.py uses in its place
        (distill.stepper_factory), called with Stepper's arguments."""
        self.windows, self.batch_size = windows, batch_size
        self.global_batch = global_batch or batch_size
        self.model = model
        self.optimizer = make_optimizer(model, LR, WEIGHT_DECAY, BETAS)
        self.precision = resolve_precision(precision, device)
        self.compiled = resolve_compile(compile)
        step_model = torch.compile(model) if self.compiled else model
        self.stepper = make_stepper(step_model, self.optimizer, device, self.precision, GRAD_CLIP, 1,
                                    self.global_batch)
        self.loss_acc = torch.zeros((), device=device)
        self.schedule = default_schedule(max_steps)
        self.order = SampleOrder(len(windows), seed)
        self.since_log, self.done = 0, 0
        self.losses: list[tuple[int, float]] = []  # (step, mean loss since the previous log line)

    def step(self) -> None:
        step = self.done
        set_lr(self.optimizer, self.schedule.lr_at(step))
        mine = rank_samples(step, self.global_batch, 0, 1)
        batches = [self.windows.batch([self.order.window_of(g) for g in mb])
                   for mb in micro_batches(mine, self.batch_size)]
        loss_sum, _grad_norm = self.stepper.step(batches)
        self.loss_acc += loss_sum
        self.since_log += len(mine)
        self.done += 1
        if self.done % LOG_EVERY == 0 or self.done == 1:  # train.py syncs with the device when it logs
            self.losses.append((self.done, self.loss_acc.item() / self.since_log))
            self.loss_acc.zero_()
            self.since_log = 0


def logits_loss(model, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    logits = model(input_ids=x)
    logits = getattr(logits, "logits", logits)  # GPT2LMHeadModel's output object, or our tensor
    return torch.nn.functional.cross_entropy(logits.view(-1, logits.size(-1)), y.view(-1))


@torch.no_grad()
def eval_loss(model, windows: TokenWindows, n: int = 16, batch_size: int = 8, loss_of=logits_loss) -> float:
    """Mean next-token loss on the last `n` windows (a fixed set every trainer sees the same way)."""
    model.eval()
    idx = list(range(len(windows) - n, len(windows)))
    total = sum(loss_of(model, *windows.batch(mb)).item() * len(mb) for mb in micro_batches(idx, batch_size))
    model.train()
    return total / n


def median(values: list[float]) -> float:
    return float(statistics.median(values))


def spread(values: list[float]) -> dict:
    return {"median": median(values), "min": min(values), "max": max(values), "runs": [round(v, 4) for v in values]}


def machine() -> dict:
    model = "unknown"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    import transformers

    return {"cpu": model, "cores": os.cpu_count(), "torch_threads": torch.get_num_threads(),
            "torch": torch.__version__, "transformers": transformers.__version__,
            "python": platform.python_version(), "load_avg_1m": round(os.getloadavg()[0], 2)}


def write_result(name: str, result: dict, path: str | None) -> Path:
    target = Path(path) if path else RESULTS / f"{name}.json"
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(json.dumps(result, indent=1) + "\n")
    return target

