"""`python -m training.launch`: torchrun, with what a Kubernetes Job needs from PID 1.

Same flags as `torchrun` (it is torch's own launcher underneath). The differences:
- Exit codes pass through. torchrun exits 1 whatever its workers did, so a Job's podFailurePolicy
  cannot tell bad input (the trainer exits 2: fail the Job now) from a preempted peer (75: restart
  me) from plain bugs. Here the first failed worker's exit code is the launcher's, and a SIGTERM
  that stops the launcher gives 128 + 15 = 143.
- The grace period holds. After SIGTERM, torchrun gives its workers 30 s before SIGKILL; our
  workers spend that time writing a checkpoint, which for GPT-2 XL on a network filesystem takes
  longer. TORCH_ELASTIC_SHUTDOWN_TIMEOUT (set by the chart from terminationGracePeriodSeconds) is
  honoured here also on torch releases that predate it.
- TORCH_DISABLE_SHARE_RDZV_TCP_STORE defaults to 1: with the shared store, a node that joins a
  running job waits forever in rendezvous (pytorch/pytorch#135712).
- A lost node leaves the rendezvous sooner. The survivors can re-form only once the rendezvous has
  dropped it, after keep_alive_max_attempt missed keep-alives of keep_alive_interval seconds; torch's
  5 s x 3 made that wait most of the time from a killed node to the next step (docs/BENCHMARKS.md). The
  keep-alives come from the node's agent, a small process apart from the trainer, so a trainer busy
  compiling or checkpointing does not delay them; 1 s x 3 still tolerates a 3 s stall of the agent, and
  a node dropped by mistake only rejoins at the next round. Any value given in --rdzv-conf wins.
- Workers of `-m training` are forked from a process that has imported torch and its compiler
  once, instead of each starting a new interpreter: a restart skips those imports
  (training/worker.py).
"""

from __future__ import annotations

import os
import sys

SIGTERM_EXIT = 143
RDZV_CONF_DEFAULTS = {"keep_alive_interval": "1", "keep_alive_max_attempt": "3"}


def with_rdzv_defaults(rdzv_conf: str) -> str:
    """--rdzv-conf with RDZV_CONF_DEFAULTS added for the keys it does not set."""
    given = {item.split("=", 1)[0].strip() for item in rdzv_conf.split(",") if "=" in item}
    missing = [f"{key}={value}" for key, value in RDZV_CONF_DEFAULTS.items() if key not in given]
    return ",".join(part for part in [rdzv_conf, *missing] if part)


def honour_shutdown_timeout() -> None:
    """Give workers max(torch's timeout, TORCH_ELASTIC_SHUTDOWN_TIMEOUT) seconds between SIGTERM and SIGKILL."""
    seconds = os.environ.get("TORCH_ELASTIC_SHUTDOWN_TIMEOUT")
    if not seconds:
        return
    from torch.distributed.elastic.multiprocessing import api

    original = api.PContext.close
    if getattr(original, "honours_shutdown_timeout", False):
        return

    def close(self, death_sig=None, timeout: int = 30):
        return original(self, death_sig, max(int(timeout), int(seconds)))

    close.honours_shutdown_timeout = True
    api.PContext.close = close


def main(argv: list[str] | None = None) -> int:
    os.environ.setdefault("TORCH_DISABLE_SHARE_RDZV_TCP_STORE", "1")
    import torch.distributed.run as torchrun
    from torch.distributed.elastic.multiprocessing.api import SignalException
    from torch.distributed.elastic.multiprocessing.errors import ChildFailedError

    from training.worker import warm_start

    if not hasattr(torchrun, "config_from_args_cold"):  # what torchrun.run starts: see training/worker.py
        torchrun.config_from_args_cold = torchrun.config_from_args
        torchrun.config_from_args = lambda args: warm_start(*torchrun.config_from_args_cold(args))

    args = torchrun.parse_args(sys.argv[1:] if argv is None else argv)
    args.rdzv_conf = with_rdzv_defaults(args.rdzv_conf)
    honour_shutdown_timeout()
    try:
        torchrun.run(args)
    except ChildFailedError as exc:
        _, failure = exc.get_first_failure()
        print(f"[trainstack] worker failed with exit code {failure.exitcode}", file=sys.stderr, flush=True)
        return failure.exitcode if failure.exitcode > 0 else 1
    except SignalException as exc:
        return 128 + int(exc.sigval)
    return 0


if __name__ == "__main__":
    from training.elastic.process_exit import exit_code, exit_now

    exit_now(exit_code(main))  # the pod ends sooner without the interpreter's teardown of torch
