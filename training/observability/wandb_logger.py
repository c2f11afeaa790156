"""--wandb-project: rank 0 logs the run's scalars and configuration to Weights & Biases.

The same scalars TensorBoard gets (the recorder fans each one out), grouped per step and plotted
against a `step` metric, so a resumed run that repeats a few steps still draws one line. The W&B run
id is kept in RUN_DIR/wandb_run.json: a resumed run (also on a new node, also restored from
--snapshot-uri) continues the same W&B run. The group defaults to the job's id (torchrun's
--rdzv-id, which the chart sets to the release), so every restart and node of a job lands in one
group. The API key comes only from the environment (WANDB_API_KEY; the chart reads it from a Secret).
"""

from __future__ import annotations

import importlib.util
import json
import os
import uuid
from pathlib import Path

from trainstack.contract.config import WandbConfig
from trainstack.contract.errors import UserError
from trainstack.contract.log import info, warn

RUN_FILE = "wandb_run.json"


def check(settings: WandbConfig) -> None:
    """Bad W&B settings are one line before anything starts (every rank runs this; only rank 0 logs)."""
    if not settings.enabled:
        return
    if importlib.util.find_spec("wandb") is None:
        raise UserError("--wandb-project needs the wandb package; from a checkout .venv/bin/pip install -e '.[wandb]' "
                        "(or pip install wandb), "
                        "or drop --wandb-project")
    if settings.mode == "online" and not os.environ.get("WANDB_API_KEY"):
        raise UserError("--wandb-mode online needs WANDB_API_KEY in the environment (the chart takes it from a "
                        "Secret); set it, or use --wandb-mode offline")


def default_group(run_dir: Path) -> str:
    job = os.environ.get("TORCHELASTIC_RUN_ID", "")
    return job if job and job != "none" else Path(run_dir).resolve().name


class WandbLogger:
    def __init__(self, settings: WandbConfig, run_dir: Path, config: dict):
        import wandb

        saved = _read(run_dir / RUN_FILE)
        run_id = saved.get("id") or uuid.uuid4().hex[:12]  # W&B ids: lowercase letters and digits
        group = settings.group or default_group(run_dir)
        if not saved:
            tmp = run_dir / f"{RUN_FILE}.tmp"
            tmp.write_text(json.dumps({"id": run_id, "project": settings.project, "group": group}))
            os.replace(tmp, run_dir / RUN_FILE)
        self.run = None
        try:
            self.run = wandb.init(project=settings.project, entity=settings.entity, group=group, id=run_id,
                                  resume="allow", name=Path(run_dir).resolve().name, dir=str(run_dir),
                                  mode=settings.mode, config=_plain(config),
                                  settings=wandb.Settings(console="off", silent=True))
        except Exception as exc:  # the network or W&B's service: training goes on without it
            warn(f"W&B logging is off for this run: wandb.init failed ({type(exc).__name__}: "
                 f"{str(exc).splitlines()[0][:200] if str(exc) else ''})")
            return
        self.run.define_metric("step")
        self.run.define_metric("*", step_metric="step")
        info(f"W&B: project {settings.project}, group {group}, run {run_id} ({settings.mode})")
        self._step: int | None = None
        self._row: dict[str, float] = {}

    def add_scalar(self, tag: str, value: float, step: int) -> None:
        if self.run is None:
            return
        if self._step is not None and step != self._step:
            self.flush()
        self._step = step
        self._row[tag] = float(value)

    def flush(self) -> None:
        if self.run is not None and self._row:
            self.run.log({"step": self._step, **self._row})
            self._row = {}

    def close(self) -> None:
        if self.run is not None:
            self.flush()
            self.run.finish()


def _read(path: Path) -> dict:
    try:
        return json.loads(path.read_text())
    except (OSError, json.JSONDecodeError):
        return {}


def _plain(config: dict) -> dict:
    return {k: (v if isinstance(v, (int, float, str, bool, type(None), list)) else str(v)) for k, v in config.items()}
