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
- A node that is not the c10d store's host waits for it up to join_timeout. torch connects with its
  read_timeout (60 s unless --rdzv-conf sets it), then gives up with RendezvousConnectionError
  (torch/distributed/elastic/rendezvous/c10d_rendezvous_backend.py, _create_tcp_store, torch 2.13),
  so a pod that came up a minute before pod 0 failed the Job's backoff count. Here the connection
  is tried again until join_timeout has passed; store operations keep the read_timeout. A node whose
  store host went away after it had connected (pod 0 lost: connection reset, refused or closed)
  exits HOST_LOST, which the chart's podFailurePolicy ignores: the pod is replaced and waits for the
  new pod 0. Within a budget per Job of such exits with no new checkpoint between them
  (training/elastic/restart_budget.py): past it, 1, which counts. Any other rendezvous failure (a
  timeout against a live but slow host, say) keeps its
  exit code 1 and counts against backoffLimit.
- A store host that stops answering without closing the connection (a frozen or partitioned pod 0)
  would hang every store call for ever: TCPStore's own timeout does not fire on a silent socket.
  A store call that outlives 2 x read_timeout ends the launcher with HOST_LOST (it is PID 1, so
  its workers go with it); a store connection that does, with 1 if this node never reached the host.
- Which pod hosts the store comes from the Job's completion index (JOB_COMPLETION_INDEX, set by
  Kubernetes in an Indexed Job): index 0 hosts and never waits for anyone, every other index is a
  client. torch would guess from the endpoint's host name, and a wrong job.clusterDomain made pod 0
  a client of itself that waited join_timeout and failed. An is_host in --rdzv-conf wins.
- Workers of `-m training` are forked from a process that has imported torch and its compiler
  once, instead of each starting a new interpreter: a restart skips those imports
  (training/worker.py).
"""

from __future__ import annotations

import os
import sys
import threading
import time
from collections.abc import Mapping

from training.elastic import restart_budget

SIGTERM_EXIT = 143
# The store host (pod 0) went away after this node had joined: "restart me", like a peer's
# preemption (training/elastic/preemption.py PEER_PREEMPTED); the chart's podFailurePolicy ignores it.
HOST_LOST = 75
TORCH_JOIN_TIMEOUT_DEFAULT = 600  # DynamicRendezvousHandler's join_timeout when --rdzv-conf has none
RDZV_CONF_DEFAULTS = {"keep_alive_interval": "1", "keep_alive_max_attempt": "3"}
RUN: dict[str, str | None] = {"id": None}  # this launch's rendezvous id, once parsed


def with_rdzv_defaults(rdzv_conf: str) -> str:
    """--rdzv-conf with RDZV_CONF_DEFAULTS added for the keys it does not set."""
    given = {item.split("=", 1)[0].strip() for item in rdzv_conf.split(",") if "=" in item}
    missing = [f"{key}={value}" for key, value in RDZV_CONF_DEFAULTS.items() if key not in given]
    return ",".join(part for part in [rdzv_conf, *missing] if part)


def with_host_from_index(rdzv_conf: str, environ: Mapping[str, str]) -> str:
    """--rdzv-conf with is_host=1 on the Job's completion index 0 and is_host=0 elsewhere, unless it sets is_host."""
    index = environ.get("JOB_COMPLETION_INDEX", "").strip()
    given = {item.split("=", 1)[0].strip() for item in rdzv_conf.split(",") if "=" in item}
    if not index.isdigit() or "is_host" in given:
        return rdzv_conf
    return ",".join(part for part in [rdzv_conf, f"is_host={1 if int(index) == 0 else 0}"] if part)


_LOST_CONNECTION = ("connection reset", "connection refused", "broken pipe", "connection closed", "eof",
                    "failed to recv", "got 0 bytes", "socket closed")


def lost_connection(error: BaseException) -> bool:
    """Whether a rendezvous error comes from the store host's connection going away (reset, refused,
    closed), not from a timeout against a host that is still there."""
    seen: set[int] = set()
    cause: BaseException | None = error
    while cause is not None and id(cause) not in seen:
        seen.add(id(cause))
        if isinstance(cause, (ConnectionResetError, ConnectionRefusedError, BrokenPipeError, EOFError)):
            return True
        if not isinstance(cause, TimeoutError) and cause is not error:
            text = str(cause).lower()
            if "timeout" not in text and "timed out" not in text and any(word in text for word in _LOST_CONNECTION):
                return True
        cause = cause.__cause__ or cause.__context__
    return False


def exit_host_lost(reason: str) -> None:
    """HOST_LOST once this node had reached the store (pod 0 went silent); 1 (counted) if it never had."""
    if not StoreHost.connected:
        print(f"[trainstack] the rendezvous store host never answered: {reason}", file=sys.stderr, flush=True)
        os._exit(1)
    print(f"[trainstack] lost the rendezvous store host (pod 0): {reason}; exiting for a replacement pod",
          file=sys.stderr, flush=True)
    os._exit(restart_budget.spend(HOST_LOST, RUN["id"]))


def watchdog(seconds: float, what: str) -> threading.Timer:
    """A started timer that ends the launcher (exit_host_lost) unless cancelled within `seconds`."""
    timer = threading.Timer(seconds, exit_host_lost, [f"{what} has not answered for {seconds:.0f}s"])
    timer.daemon = True
    timer.start()
    return timer


def watch_store_calls() -> None:
    """End the launcher with HOST_LOST when a rendezvous store call outlives 2 x read_timeout."""
    from torch.distributed.elastic.rendezvous.c10d_rendezvous_backend import C10dRendezvousBackend

    original = C10dRendezvousBackend._call_store
    if getattr(original, "watched", False):
        return

    def call_store(self, store_op, *args, **kwargs):
        try:
            read_timeout = self._store.timeout.total_seconds()
        except (AttributeError, RuntimeError):
            read_timeout = 60.0
        timer = watchdog(2 * read_timeout, f"the store's {store_op}")
        try:
            return original(self, store_op, *args, **kwargs)
        finally:
            timer.cancel()

    call_store.watched = True
    C10dRendezvousBackend._call_store = call_store


def shutdown_timeout_problem(environ: Mapping[str, str]) -> str | None:
    """TORCH_ELASTIC_SHUTDOWN_TIMEOUT set to something torch cannot use: torchrun reads it with a bare
    int() (torch 2.13, torch/distributed/launcher/api.py, LaunchConfig.__post_init__), so a value set
    by hand that is not a whole number ended the launcher in a ValueError traceback with exit 1 (a
    failure the Job retries), and a negative one would make no sense as a grace period."""
    if "TORCH_ELASTIC_SHUTDOWN_TIMEOUT" not in environ:
        return None
    text = environ["TORCH_ELASTIC_SHUTDOWN_TIMEOUT"]
    try:
        if int(text) >= 0:
            return None
    except ValueError:
        pass
    return (f"TORCH_ELASTIC_SHUTDOWN_TIMEOUT={text!r} in the environment: must be a whole number of seconds >= 0 "
            "(the grace period between SIGTERM and SIGKILL for the workers); fix or unset it")


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


class StoreHost:
    """Whether this node has ever reached the c10d store (then a lost connection means a lost host)."""

    connected = False


def wait_for_store_host() -> None:
    """Retry torch's c10d store connection until the rendezvous' join_timeout has passed."""
    from torch.distributed.elastic.rendezvous import c10d_rendezvous_backend as backend
    from torch.distributed.elastic.rendezvous.api import RendezvousConnectionError

    original = backend._create_tcp_store
    if getattr(original, "waits_for_store_host", False):
        return

    def create_tcp_store(params):
        if params.get_as_bool("is_host"):
            return original(params)  # the host waits for no one: its failure to serve is final
        join_timeout = params.get_as_int("join_timeout", TORCH_JOIN_TIMEOUT_DEFAULT)
        deadline = time.monotonic() + join_timeout
        while True:
            # A listener that accepts and never answers would block the connection for ever; a
            # host that is merely not up yet makes each attempt last up to read_timeout or so.
            timer = watchdog(max(0.0, deadline - time.monotonic()) + 2 * params.get_as_int("read_timeout", 60),
                             f"the store at {params.endpoint}")
            try:
                store = original(params)
            except RendezvousConnectionError as error:
                if time.monotonic() >= deadline:
                    raise
                print(f"[trainstack] rendezvous store {params.endpoint} not reachable yet ({error.__cause__}); "
                      f"waiting up to join_timeout={join_timeout}s", file=sys.stderr, flush=True)
                time.sleep(min(5.0, max(0.0, deadline - time.monotonic())))
                continue
            finally:
                timer.cancel()
            StoreHost.connected = True
            return store

    create_tcp_store.waits_for_store_host = True
    backend._create_tcp_store = create_tcp_store


def main(argv: list[str] | None = None) -> int:
    problem = shutdown_timeout_problem(os.environ)
    if problem:
        print(f"error: {problem}", file=sys.stderr, flush=True)
        return 2  # bad input: a retry cannot fix it (trainstack/contract/errors.py NO_RETRY_EXIT)
    os.environ.setdefault("TORCH_DISABLE_SHARE_RDZV_TCP_STORE", "1")
    import torch.distributed.run as torchrun
    from torch.distributed.elastic.multiprocessing.api import SignalException
    from torch.distributed.elastic.multiprocessing.errors import ChildFailedError
    from torch.distributed.elastic.rendezvous.api import RendezvousConnectionError

    from training.worker import warm_start

    if not hasattr(torchrun, "config_from_args_cold"):  # what torchrun.run starts: see training/worker.py
        torchrun.config_from_args_cold = torchrun.config_from_args
        torchrun.config_from_args = lambda args: warm_start(*torchrun.config_from_args_cold(args))

    args = torchrun.parse_args(sys.argv[1:] if argv is None else argv)
    RUN["id"] = args.rdzv_id  # the restart budget's ledger key when the chart's TRAINSTACK_JOB_UID is absent
    args.rdzv_conf = with_rdzv_defaults(args.rdzv_conf)
    if args.rdzv_backend == "c10d":
        args.rdzv_conf = with_host_from_index(args.rdzv_conf, os.environ)
    honour_shutdown_timeout()
    wait_for_store_host()
    watch_store_calls()
    try:
        torchrun.run(args)
    except ChildFailedError as exc:
        _, failure = exc.get_first_failure()
        print(f"[trainstack] worker failed with exit code {failure.exitcode}", file=sys.stderr, flush=True)
        if failure.exitcode == HOST_LOST:  # a peer was preempted: restart me, within the Job's budget
            return restart_budget.spend(HOST_LOST, RUN["id"])
        return failure.exitcode if failure.exitcode > 0 else 1
    except SignalException as exc:
        return 128 + int(exc.sigval)
    except RendezvousConnectionError as error:
        if not StoreHost.connected or not lost_connection(error):
            raise  # never reached the host, or a slow host that is still there: a failure that counts
        print("[trainstack] lost the rendezvous store host (pod 0); exiting for a replacement pod",
              file=sys.stderr, flush=True)
        return restart_budget.spend(HOST_LOST, RUN["id"])
    return 0


if __name__ == "__main__":
    from training.elastic.process_exit import exit_code, exit_now

    exit_now(exit_code(main))  # the pod ends sooner without the interpreter's teardown of torch
