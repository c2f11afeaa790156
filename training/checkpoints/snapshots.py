"""--snapshot-uri: checkpoints, the export and the run's record copied to object storage while training.

The bucket mirrors RUN_DIR, so `aws s3 sync` / `gcloud storage rsync` of it back gives a run directory:

    URI/checkpoints/step_XXXXXXXX/{model,optimizer,trainer}.pt, uploaded_by.json, manifest.json
    URI/export/...  (+ manifest.json)     URI/run_config.json, model_config.json, tokenizer/, ...
    URI/metrics.jsonl, loss.png           URI/snapshot_run.json (which run owns this URI)

Writing (rank 0, a background thread): after a checkpoint commits locally its files are hard-linked
aside (retention may delete the original meanwhile), verified against their manifest, uploaded, and
the unchanged manifest is written last: a checkpoint without manifest.json in the bucket is
incomplete and never read. The queue is bounded: when the store is slower than the checkpoint
cadence, a newer checkpoint replaces the oldest waiting one. Failures are retried with exponential
backoff and reported, never fatal. Retention deletes only checkpoints marked as written by this run
(uploaded_by.json, written first), and only the files it wrote.

Reading: when RUN_DIR has no intact checkpoint, the newest complete one in the bucket is downloaded,
verified against its manifest (a corrupted object falls back to the previous checkpoint) and renamed
into place like a local save; the run's small files come with it.

Credentials come from the environment as fsspec's s3fs and gcsfs find them (IRSA, Workload Identity,
AWS_* variables, GOOGLE_APPLICATION_CREDENTIALS); `file://` works for tests and shared mounts.

Long on purpose: the writer and the reader share the bucket's layout (manifests, the ownership
mark, staging names); kept in one module so the two sides cannot drift apart.
"""

from __future__ import annotations

import collections
import contextlib
import json
import logging
import os
import shutil
import threading
import time
import uuid
import warnings
from dataclasses import dataclass
from pathlib import Path

from training.checkpoints import checkpoint
from training.elastic import distributed
from trainstack.contract.cli_integrations import SNAPSHOT_SCHEMES, check_snapshot_uri
from trainstack.contract.config import SnapshotConfig
from trainstack.contract.deadline import NoAnswer, call_within
from trainstack.contract.errors import UserError
from trainstack.contract.log import info, warn
from trainstack.contract.paths import kind_of

REACH_TIMEOUT_S = 30.0  # how long the first question to the store may take before it counts as unreachable
# Clients that log each failed retry with its traceback (gcsfs: logger.exception in retry_request); with no
# handler configured, Python's last-resort handler would print them all. The one-line error says it.
QUIET_LOGGERS = ("gcsfs", "s3fs", "fsspec", "google.auth", "google_auth_httplib2", "aiobotocore", "botocore")
OWNER_FILE = "snapshot_run.json"  # in RUN_DIR and at URI: the id of the run that writes here
UPLOADED_BY = "uploaded_by.json"  # in each uploaded checkpoint, before its data
# The small files of a run that a restored RUN_DIR needs (or that a reader of the bucket wants).
RUN_FILES = ("run_config.json", "model_config.json", OWNER_FILE, "wandb_run.json", "metrics.jsonl", "loss.png",
             "compile_cache.tar.gz")  # the run's compile cache (training/compile_cache/blob.py)
CHECKPOINT_FILES = ("model.pt", "optimizer.pt", "trainer.pt")
STAGING_PREFIX = ".upload-"
RESTORE_PREFIX = ".restore-"  # run files on their way from the store into RUN_DIR


def local_form(uri: str) -> str:
    """file://localhost/PATH as file:///PATH; a file:// URI naming any other host is refused.

    RFC 8089 section 2: the authority of a file URI is a host, "localhost" or empty meaning this
    machine. fsspec's LocalFileSystem (fsspec 2026.9.0, implementations/local.py _strip_protocol) keeps
    the host as the first folder of a path relative to the working directory, so snapshots of
    file://otherhost/x would land in ./otherhost/x without a word.
    """
    scheme, _, rest = uri.partition("://")
    if scheme != "file" or rest.startswith("/"):
        return uri
    host, _, path = rest.partition("/")
    if host.lower() == "localhost":
        return f"file:///{path}"
    raise UserError(f"--snapshot-uri {uri} names the host '{host}', and a file:// URI is a path on this machine; "
                    f"write file:///PATH (three slashes; file:///{rest} if '{host}' is a folder), or mount the "
                    "other machine's share and give its path")


class Store:
    """A URI prefix in object storage (or a directory), through fsspec."""

    def __init__(self, uri: str):
        check_snapshot_uri(uri)
        self.uri = local_form(uri).rstrip("/")
        scheme, rest = self.uri.split("://", 1)
        if scheme != "file" and not rest.split("/", 1)[0].strip():
            # gs:///x or s3:///x: no bucket, which the clients would first look for over the network
            raise UserError(f"--snapshot-uri {uri}: no bucket name; use {scheme}://BUCKET/PREFIX")
        package = SNAPSHOT_SCHEMES[scheme]
        for name in QUIET_LOGGERS:
            quiet = logging.getLogger(name)
            if not quiet.handlers:
                quiet.addHandler(logging.NullHandler())
        if package == "gcsfs":
            # gcsfs would ask GCS's control plane for each bucket's layout (hierarchical or zonal), which
            # needs a permission beyond object access; plain object reads and writes are all we do.
            os.environ.setdefault("GCSFS_EXPERIMENTAL_ZB_HNS_SUPPORT", "false")
        if package:
            try:
                __import__(package)
            except ImportError as exc:
                raise UserError(f"--snapshot-uri {uri} needs the {package} package; pip install {package}") from exc
        if package == "gcsfs":
            check_google_credentials(uri)
        import fsspec

        # The client and the first question share one bound (REACH_TIMEOUT_S): gcsfs looks for
        # credentials while it is made, on the metadata server first, which does not answer off Google Cloud.
        self.began = time.monotonic()
        # A fresh client per Store: credentials and endpoints are read from the environment now.
        self.fs, self.root = within(REACH_TIMEOUT_S, lambda: fsspec.core.url_to_fs(self.uri, skip_instance_cache=True),
                                    self.uri)
        self.root = self.root.rstrip("/")
        self.local = scheme == "file"
        self.restored_step: int | None = None  # set when an empty RUN_DIR was restored from this store

    def path(self, *parts: str) -> str:
        return "/".join((self.root, *parts))

    def url(self, *parts: str) -> str:
        return "/".join((self.uri, *parts))

    def check_reachable(self, timeout_s: float | None = None) -> None:
        """Ask the store once up front, so a wrong bucket or missing credentials is bad input, not a late surprise.

        Bounded: gcsfs retries a request 6 times with exponential backoff (gcsfs/retry.py, retry_request),
        and looks for credentials on the metadata server first, so an unreachable GCS would take minutes.
        """
        if timeout_s is None:  # what is left of the bound the client's making started
            timeout_s = max(1.0, REACH_TIMEOUT_S - (time.monotonic() - self.began))
        within(timeout_s, self._ask, self.uri)

    def _ask(self) -> None:
        bucket = self.root.split("/", 1)[0]
        try:
            if self.uri.startswith("s3://"):
                # HeadBucket: the bucket exists and the credentials may list it. (On GCS a bucket read needs
                # more than object access, and gcsfs cannot tell an empty bucket from a missing one
                # without it: there the first write, which prepare() makes, finds a missing bucket.)
                self.fs.info(bucket)
            if self.fs.exists(self.root):
                self.fs.ls(self.root, detail=False)
        except FileNotFoundError as exc:
            raise UserError(f"--snapshot-uri {self.uri}: bucket {bucket} does not exist; create it (the stacks "
                            "create one per cluster) or fix the name") from exc
        except Exception as exc:  # fsspec backends raise their own error types
            raise UserError(f"cannot use --snapshot-uri {self.uri} ({_reason(exc)}); check the bucket name and "
                            "the credentials in the environment") from exc

    def read_json(self, *parts: str):
        """The parsed JSON at `parts` (any JSON value: callers check its shape); None when it is absent or
        is not JSON."""
        try:
            return json.loads(self.fs.cat_file(self.path(*parts)))
        except FileNotFoundError:
            return None
        except ValueError:  # not JSON, or not UTF-8
            return None

    def read_object(self, *parts: str) -> dict | None:
        """A small JSON object we wrote (an owner mark); None when it is absent or damaged."""
        found = self.read_json(*parts)
        return found if isinstance(found, dict) else None

    def put_bytes(self, data: bytes, *parts: str) -> None:
        self._parent(*parts)
        self.fs.pipe_file(self.path(*parts), data)

    def put_file(self, local: Path, *parts: str) -> None:
        self._parent(*parts)
        self.fs.put_file(str(local), self.path(*parts))

    def _parent(self, *parts: str) -> None:
        # Only a local directory needs its folders made; on S3 makedirs could create a bucket.
        if self.local:
            self.fs.makedirs(self.path(*parts[:-1]), exist_ok=True)

    def size(self, *parts: str) -> int | None:
        try:
            return int(self.fs.info(self.path(*parts))["size"])
        except FileNotFoundError:
            return None

    def remove(self, *parts: str) -> None:
        with contextlib.suppress(FileNotFoundError):
            self.fs.rm_file(self.path(*parts))

    def checkpoint_steps(self) -> list[int]:
        """Steps with a checkpoint folder (complete or not), newest first."""
        base = self.path(checkpoint.CHECKPOINTS)
        self.fs.invalidate_cache(base)
        try:
            names = [p.rstrip("/").rsplit("/", 1)[-1] for p in self.fs.ls(base, detail=False)]
        except FileNotFoundError:
            return []
        steps = [int(n[len(checkpoint.PREFIX):]) for n in names
                 if n.startswith(checkpoint.PREFIX) and n[len(checkpoint.PREFIX):].isdigit()]
        return sorted(steps, reverse=True)


def within(timeout_s: float, call, uri: str):
    """call()'s result, or one line when it has not answered within timeout_s (the clients' own retries
    take minutes)."""
    try:
        return call_within(timeout_s, call, "snapshot-reach")
    except NoAnswer:
        raise UserError(f"--snapshot-uri {uri}: no answer from the store within {timeout_s:.0f}s (network, "
                        "DNS, a proxy or the credentials lookup); check that this machine can reach it, or run "
                        "without --snapshot-uri") from None


MAX_CREDENTIALS_BYTES = 2**20  # a key file is a few KiB


def check_google_credentials(uri: str) -> None:
    """GOOGLE_APPLICATION_CREDENTIALS, when set, must be a credentials file google.auth can load.

    gcsfs tries it first and, when it cannot be loaded, falls back without a word to the metadata
    server and then to anonymous access (gcsfs credentials.py GoogleCredentials.connect), so a wrong
    file would surface a minute later as an unreachable store. google.auth.load_credentials_from_file
    reads the file and nothing else (no network)."""
    path = os.environ.get("GOOGLE_APPLICATION_CREDENTIALS", "")
    if not path:  # unset or empty: Workload Identity / the metadata server, as gcsfs finds them
        return
    problem = _credentials_problem(Path(path))
    if problem:
        raise UserError(f"--snapshot-uri {uri}: GOOGLE_APPLICATION_CREDENTIALS={path} cannot be used ({problem}); "
                        "point it at a service-account or `gcloud auth application-default login` JSON file, or "
                        "unset it to use Workload Identity")


def _credentials_problem(credentials: Path) -> str | None:
    """Why google.auth cannot load this credentials file, or None."""
    kind = kind_of(credentials)
    if kind:  # a pipe is used up by one read, /dev/zero never ends: google.auth reads it twice
        return f"it is {kind}, not a file"
    if credentials.is_file() and credentials.stat().st_size > MAX_CREDENTIALS_BYTES:
        return f"it holds {credentials.stat().st_size:,} bytes, far more than a key file"
    import google.auth
    import google.auth.exceptions

    try:
        with warnings.catch_warnings():  # its deprecation is about trusting the file's content; we only check it
            warnings.simplefilter("ignore", DeprecationWarning)
            google.auth.load_credentials_from_file(str(credentials))
    except (google.auth.exceptions.GoogleAuthError, OSError, ValueError, AttributeError, TypeError,
            RecursionError) as exc:
        # AttributeError, TypeError: JSON that is not an object ([], 1, null), which google.auth reads as one;
        # RecursionError: JSON nested deeper than the parser goes
        detail = str(exc.args[0]).strip() if exc.args else ""
        return (detail.splitlines() or [type(exc).__name__])[0][:160]
    return None


def _reason(exc: Exception) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0][:200]}" if text else type(exc).__name__


def step_name(step: int) -> str:
    return f"{checkpoint.PREFIX}{step:08d}"


def _digest(path: Path) -> str:
    return checkpoint._sha256(path)


# ------------------------------------------------------------------------------------------ reading


def prepare(settings: SnapshotConfig, run_dir: Path, data_dir: Path, dist_info) -> Store | None:
    """Check --snapshot-uri, restore from it when RUN_DIR has no intact checkpoint, claim it for this run.

    Every rank checks the URI's form; each node's first process checks that the store answers and
    restores (nodes may not share RUN_DIR); rank 0 claims the URI with a first write (so missing write
    permission is found now). A problem on any rank becomes the same one-line error on every rank.
    """
    uri = settings.uri
    if not uri:
        return None
    store = Store(uri)
    problem = None
    try:
        if dist_info.local_rank == 0:
            check_location(store, run_dir, data_dir)
            store.check_reachable()
            check_owner(store, run_dir)
            store.restored_step = restore_if_missing(store, run_dir)
        if dist_info.is_main:
            _claim(store, run_dir)
    except UserError as exc:
        problem = str(exc)
    problems = distributed.gather_objects(problem, dist_info)
    first = next((p for p in problems if p), None)
    if first:
        raise UserError(first)
    return store


def _claim(store: Store, run_dir: Path) -> None:
    run_dir.mkdir(parents=True, exist_ok=True)
    run_uid(run_dir)
    try:
        if store.read_object(OWNER_FILE) is None:
            store.put_file(run_dir / OWNER_FILE, OWNER_FILE)
    except Exception as exc:
        raise UserError(f"cannot write to --snapshot-uri {store.uri} ({_reason(exc)}); check the "
                        "credentials' write permission on the bucket") from exc


def check_location(store: Store, run_dir: Path, data_dir: Path) -> None:
    """A file:// URI must be a snapshot location of its own: not RUN_DIR, not another run's directory,
    not a prepared data directory, and inside none of them (retention and the export would overwrite
    what they hold, as --out onto the data would)."""
    if not store.local:
        return
    where = Path("/" + store.root.lstrip("/")).resolve()
    fix = "give this run a --snapshot-uri of its own (an empty or new directory, or a bucket prefix)"
    out, data = run_dir.resolve(), data_dir.resolve()
    if where == out or out in where.parents:
        raise UserError(f"--snapshot-uri {store.uri} is inside this run's --out {run_dir}; {fix}")
    if where in out.parents:
        raise UserError(f"--snapshot-uri {store.uri} contains this run's --out {run_dir}; {fix}")
    for folder in (where, *where.parents):
        if folder == data or _is_data_dir(folder):
            raise UserError(f"--snapshot-uri {store.uri} is inside the prepared data directory {folder}; {fix}")
        if _is_run_dir(folder):
            raise UserError(f"--snapshot-uri {store.uri} is inside the run directory {folder} of another run "
                            f"(its checkpoints and export would be overwritten); {fix}")
    _check_local_folder(store, where, fix)


def _check_local_folder(store: Store, where: Path, fix: str) -> None:
    """The location must be a directory (or not exist yet, under directories), and one that holds
    snapshots of a run (its claim, snapshot_run.json, or only names a run writes there) or nothing: a folder of someone's files would get checkpoints/ and export/ among
    them, as `train --out` onto such a folder is refused. (Under a bucket prefix other objects are
    left alone and never resumed from: only a local folder is checked for them.)"""
    for folder in (where, *where.parents):
        if not folder.exists() and not folder.is_symlink():
            continue
        if not folder.is_dir():
            kind = "a file" if folder.is_file() else "not a directory"
            what = "is" if folder == where else f"lies under {folder}, which is"
            raise UserError(f"--snapshot-uri {store.uri} {what} {kind}; {fix}")
        break
    ours = {*RUN_FILES, checkpoint.CHECKPOINTS, "export"}
    if where.is_dir() and not (where / OWNER_FILE).is_file() and any(p.name not in ours for p in where.iterdir()):
        raise UserError(f"--snapshot-uri {store.uri} already holds other files and no snapshots of a run; {fix}")


def _is_data_dir(folder: Path) -> bool:
    meta = _read_local_json(folder / "meta.json")
    return isinstance(meta, dict) and "splits" in meta


def _is_run_dir(folder: Path) -> bool:
    """A training's own RUN_DIR (not a snapshot location): its local-only files, or checkpoints it saved
    itself rather than received by upload."""
    if not (folder / "run_config.json").is_file():
        return False
    if (folder / "tensorboard").is_dir() or (folder / ".lock").exists():
        return True
    return any(not (step / UPLOADED_BY).exists() for step in (folder / checkpoint.CHECKPOINTS).glob(f"{checkpoint.PREFIX}*"))


def check_owner(store: Store, run_dir: Path) -> None:
    """Two runs writing one URI would overwrite each other's checkpoints: refuse that up front.

    The URI belongs to the run named in its snapshot_run.json. RUN_DIR continues that run when it
    is the same one (the same id) or holds no checkpoint yet (a restart on a fresh volume). A URI
    without an owner is new, unless it holds prepared data."""
    local = _read_local_json(run_dir / OWNER_FILE)
    remote = store.read_object(OWNER_FILE)
    fix = "give each run its own --snapshot-uri"
    if remote is None:
        meta = store.read_json("meta.json")  # a prepared data directory copied to the bucket
        if isinstance(meta, dict) and "splits" in meta:
            raise UserError(f"--snapshot-uri {store.uri} holds a prepared data directory (meta.json), not snapshots "
                            f"of a run; {fix}")
        return  # other objects under the prefix are tolerated and never touched (retention is by run id)
    if local and local.get("run_uid") != remote.get("run_uid"):
        raise UserError(f"--snapshot-uri {store.uri} holds the snapshots of another run (run {remote.get('run_uid')}, "
                        f"this is {local.get('run_uid')}); {fix}")
    if not local and _has_checkpoint(run_dir):
        raise UserError(f"--snapshot-uri {store.uri} holds the snapshots of another run (run {remote.get('run_uid')}) "
                        f"and {run_dir} has checkpoints of its own; {fix}")


def _has_checkpoint(run_dir: Path) -> bool:
    return any((run_dir / checkpoint.CHECKPOINTS).glob(f"{checkpoint.PREFIX}*"))


def restore_if_missing(store: Store, run_dir: Path) -> int | None:
    """Without an intact local checkpoint, bring the newest complete and intact one from the store.

    Returns the restored step, or None (a local checkpoint exists, or the store has none usable).
    """
    if checkpoint.latest_valid(run_dir, announce=False) is not None:
        return None
    for step in store.checkpoint_steps():
        name = step_name(step)
        manifest = store.read_json(checkpoint.CHECKPOINTS, name, checkpoint.MANIFEST)
        if manifest is None:
            continue  # an upload that never finished
        restored = _download_checkpoint(store, run_dir, step, manifest)
        if restored:
            _restore_run_files(store, run_dir)
            owner = (store.read_object(OWNER_FILE) or {}).get("run_uid")
            info(f"resuming run {owner} from --snapshot-uri {store.uri}: restored the checkpoint of step {step} "
                 f"from {store.url(checkpoint.CHECKPOINTS, name)}")
            return step
    return None


def _download_checkpoint(store: Store, run_dir: Path, step: int, manifest: dict) -> bool:
    remote = (checkpoint.CHECKPOINTS, step_name(step))
    problem = checkpoint.manifest_problem(manifest)  # a damaged manifest in the store: nothing downloaded
    if problem is not None:
        warn(f"{store.url(*remote)} is damaged ({problem}); trying the previous checkpoint")
        return False
    parent = run_dir / checkpoint.CHECKPOINTS
    parent.mkdir(parents=True, exist_ok=True)
    # The temporary prefix of local saves: a download cut short is cleared by the next save.
    tmp = parent / f"{checkpoint.TMP_PREFIX}{step_name(step)}-restore-{uuid.uuid4().hex[:8]}"
    tmp.mkdir()
    try:
        for file in manifest["files"]:
            store.fs.get_file(store.path(*remote, file), str(tmp / file))
        (tmp / checkpoint.MANIFEST).write_text(json.dumps(manifest, indent=1))
        problem = checkpoint.verify(tmp)
    except (OSError, ValueError) as exc:
        problem = f"download failed: {exc}"
    if problem is not None:
        shutil.rmtree(tmp, ignore_errors=True)
        warn(f"{store.url(*remote)} is damaged ({problem}); trying the previous checkpoint")
        return False
    final = parent / step_name(step)
    if final.exists():  # a damaged local copy of this step: kept for inspection, as a local save does
        final.rename(parent / f"{final.name}.damaged-{uuid.uuid4().hex[:8]}")
    try:
        os.rename(tmp, final)
    except OSError:
        # Another node restoring into the same shared RUN_DIR got there first.
        shutil.rmtree(tmp, ignore_errors=True)
        return checkpoint.verify(final) is None
    return True


# They describe the restored checkpoints: copies left by a start that saved nothing give way to them.
DESCRIBE_CHECKPOINTS = ("run_config.json", "model_config.json")


def _restore_run_files(store: Store, run_dir: Path) -> None:
    for name in RUN_FILES:
        target = run_dir / name
        if (not target.exists() or name in DESCRIBE_CHECKPOINTS) and store.fs.exists(store.path(name)):
            tmp = run_dir / f"{RESTORE_PREFIX}{name}-{uuid.uuid4().hex[:8]}"
            store.fs.get_file(store.path(name), str(tmp))
            os.replace(tmp, target)
    tokenizer = run_dir / "tokenizer"
    if not tokenizer.exists() and store.fs.exists(store.path("tokenizer")):
        tmp = run_dir / f"{RESTORE_PREFIX}tokenizer-{uuid.uuid4().hex[:8]}"
        store.fs.get(store.path("tokenizer") + "/", str(tmp), recursive=True)
        os.rename(tmp, tokenizer)


def _read_local_json(path: Path) -> dict | None:
    """A small JSON object we wrote; None when it is absent or damaged (not UTF-8, not JSON, not an object)."""
    try:
        found = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return found if isinstance(found, dict) else None


def run_uid(run_dir: Path) -> str:
    """This run's id (RUN_DIR/snapshot_run.json), created on first use."""
    path = run_dir / OWNER_FILE
    existing = _read_local_json(path)
    if existing and existing.get("run_uid"):
        return existing["run_uid"]
    uid = uuid.uuid4().hex
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps({"run_uid": uid, "created": time.time()}))
    os.replace(tmp, path)
    return uid


# ------------------------------------------------------------------------------------------ writing


@dataclass
class _Job:
    kind: str  # "checkpoint", "export" or "files"
    step: int = 0
    path: Path | None = None
    attempts: int = 0

    def __str__(self) -> str:
        return {"checkpoint": f"checkpoint {step_name(self.step)}", "export": "the export"}.get(self.kind, "run files")


class Uploader:
    """Rank 0's background uploads: submit returns at once; wait() bounds the time spent at exit."""

    def __init__(self, store: Store, run_dir: Path, keep: int, events=None, max_pending: int = 2,
                 attempts: int = 6, backoff_s: float = 2.0, commit_wait_s: float = 600.0):
        self.store, self.run_dir, self.keep = store, run_dir, keep
        self.uid = run_uid(run_dir)
        self.events = events  # callable(kind, **fields): the run's metrics.jsonl
        self.max_pending, self.attempts, self.backoff_s = max_pending, attempts, backoff_s
        self.commit_wait_s = commit_wait_s
        self._queue: collections.deque[_Job] = collections.deque()
        self._busy: _Job | None = None
        self._cond = threading.Condition()
        self._sent: dict[str, tuple[int, int]] = {}  # run file -> (size, mtime_ns) last uploaded
        self._tokenizer_sent = False
        self._submitted: set[int] = set()  # steps of the checkpoints this process saved
        for leftover in (run_dir / checkpoint.CHECKPOINTS).glob(f"{STAGING_PREFIX}*"):
            shutil.rmtree(leftover, ignore_errors=True)  # a previous process died mid-upload
        self._thread = threading.Thread(target=self._loop, name="snapshot-upload", daemon=True)
        self._thread.start()

    # ---- the training thread's side
    def submit_checkpoint(self, step: int) -> None:
        with self._cond:
            waiting = [j for j in self._queue if j.kind == "checkpoint"]
            if len(waiting) >= self.max_pending:
                dropped = waiting[0]
                self._queue.remove(dropped)
                warn(f"the object store is slower than the checkpoint cadence: {dropped} is not uploaded "
                     f"(superseded by {step_name(step)})")
                self._event(dropped, ok=False, skipped="superseded")
            self._queue.append(_Job("checkpoint", step=step))
            self._submitted.add(step)
            self._cond.notify()

    def submit_export(self, path: Path) -> None:
        self._submit(_Job("export", path=path))

    def submit_run_files(self) -> None:
        with self._cond:
            if not any(j.kind == "files" for j in self._queue):
                self._queue.append(_Job("files"))
                self._cond.notify()

    def _submit(self, job: _Job) -> None:
        with self._cond:
            self._queue.append(job)
            self._cond.notify()

    def wait(self, timeout_s: float) -> bool:
        """Upload the run files too, then wait (at most timeout_s) until nothing is left to upload."""
        self.submit_run_files()
        deadline = time.monotonic() + timeout_s
        with self._cond:
            while self._queue or self._busy is not None:
                left = deadline - time.monotonic()
                if left <= 0:
                    pending = [str(j) for j in ([self._busy] if self._busy else []) + list(self._queue)]
                    warn(f"uploads to {self.store.uri} unfinished after {timeout_s:.0f}s: {', '.join(pending)} "
                         "(raise --snapshot-wait; the local copies are intact)")
                    return False
                self._cond.wait(timeout=min(left, 1.0))
        return True

    # ---- the upload thread
    def _loop(self) -> None:
        while True:
            with self._cond:
                while not self._queue:
                    self._cond.wait()
                job = self._busy = self._queue.popleft()
            try:
                self._run_with_retries(job)
            finally:
                with self._cond:
                    self._busy = None
                    self._cond.notify_all()

    def _run_with_retries(self, job: _Job) -> None:
        while True:
            began = time.monotonic()
            try:
                uri = self._run(job)
            except Exception as exc:  # any backend error: report, retry, never raise into training
                job.attempts += 1
                reason = _reason(exc)
                superseded = job.kind == "checkpoint" and any(j.kind == "checkpoint" for j in self._queue)
                if job.attempts >= self.attempts or superseded:
                    warn(f"giving up uploading {job} to {self.store.uri} after {job.attempts} attempt(s): {reason}")
                    self._event(job, ok=False, error=reason)
                    return
                delay = min(self.backoff_s * 2 ** (job.attempts - 1), 60.0)
                warn(f"uploading {job} to {self.store.uri} failed ({reason}); retrying in {delay:.0f}s "
                     f"({job.attempts}/{self.attempts - 1})")
                time.sleep(delay)
                continue
            if uri is not None:
                self._event(job, ok=True, uri=uri, seconds=round(time.monotonic() - began, 3))
            return

    def _event(self, job: _Job, **fields) -> None:
        if self.events is not None:
            self.events("upload", what=job.kind, step=job.step or None, **fields)

    def _run(self, job: _Job) -> str | None:
        if job.kind == "checkpoint":
            return self._upload_checkpoint(job.step)
        if job.kind == "export":
            return self._upload_export(job.path)
        self._upload_run_files()
        return None

    def _upload_run_files(self) -> None:
        for name in RUN_FILES:
            local = self.run_dir / name
            if not local.is_file():
                continue
            stat = local.stat()
            if self._sent.get(name) == (stat.st_size, stat.st_mtime_ns):
                continue
            self.store.put_file(local, name)
            self._sent[name] = (stat.st_size, stat.st_mtime_ns)
        tokenizer = self.run_dir / "tokenizer"
        if not self._tokenizer_sent and tokenizer.is_dir():
            for file in sorted(p for p in tokenizer.rglob("*") if p.is_file()):
                self.store.put_file(file, "tokenizer", *file.relative_to(tokenizer).parts)
            self._tokenizer_sent = True

    def _upload_checkpoint(self, step: int) -> str | None:
        name = step_name(step)
        local = self.run_dir / checkpoint.CHECKPOINTS / name
        deadline = time.monotonic() + self.commit_wait_s
        # The background writer may still be at it (on a run's first save, checkpoints/ itself may not
        # exist yet). Once a newer checkpoint has committed, this one either committed too and was
        # pruned by local retention, or never will: waiting longer would hold up every later upload.
        while not (local / checkpoint.MANIFEST).is_file():
            if self._newer_committed(step):
                info(f"{name} is no longer on disk (local retention, or a failed write) before its upload; a "
                     "newer one supersedes it")
                return None
            if time.monotonic() > deadline:
                raise RuntimeError(f"{local} never appeared")
            time.sleep(0.5)
        staged = self._stage(local)
        if staged is None:
            info(f"{name} was removed locally (retention) before its upload; a newer one supersedes it")
            return None
        try:
            problem = checkpoint.verify(staged)
            if problem is not None:
                warn(f"not uploading {local}: {problem}")
                self._event(_Job("checkpoint", step=step), ok=False, error=problem)
                return None
            manifest_bytes = (staged / checkpoint.MANIFEST).read_bytes()
            manifest = json.loads(manifest_bytes)
            remote = (checkpoint.CHECKPOINTS, name)
            # A restart may save a step again; its old copy (perhaps damaged) is incomplete while replaced.
            self.store.remove(*remote, checkpoint.MANIFEST)
            self._upload_run_files()
            self.store.put_bytes(json.dumps({"run_uid": self.uid, "time": time.time()}).encode(), *remote, UPLOADED_BY)
            for file, expected in manifest["files"].items():
                self.store.put_file(staged / file, *remote, file)
                size = self.store.size(*remote, file)
                if size != expected["bytes"]:
                    raise OSError(f"{file} has {size} bytes in the store, {expected['bytes']} here")
            self.store.put_bytes(manifest_bytes, *remote, checkpoint.MANIFEST)  # last: now it is complete
        finally:
            shutil.rmtree(staged, ignore_errors=True)
        self._apply_retention(newest=step)
        return self.store.url(*remote)

    def _newer_committed(self, step: int) -> bool:
        """A checkpoint this process saved after `step` is on disk: the writer, one save at a time and
        in order, is done with `step`. (Only this process's saves count: a damaged later checkpoint
        left from before a fallback says nothing about this one.)"""
        with self._cond:
            newer = [s for s in self._submitted if s > step]
        root = self.run_dir / checkpoint.CHECKPOINTS
        return any((root / step_name(s) / checkpoint.MANIFEST).is_file() for s in newer)

    def _stage(self, local: Path) -> Path | None:
        """Hard links to the checkpoint's files: local retention cannot pull them away mid-upload."""
        staged = local.parent / f"{STAGING_PREFIX}{local.name}-{uuid.uuid4().hex[:8]}"
        try:
            staged.mkdir()
            for entry in local.iterdir():
                try:
                    os.link(entry, staged / entry.name)
                except OSError:
                    shutil.copy2(entry, staged / entry.name)  # a filesystem without hard links
        except FileNotFoundError:
            shutil.rmtree(staged, ignore_errors=True)
            return None
        return staged

    def _apply_retention(self, newest: int) -> None:
        """Keep the newest `keep` complete checkpoints this run uploaded up to `newest` (the one just
        written); remove its older ones and its abandoned partial uploads (a process killed mid-upload).
        Complete ones after `newest` are left alone, as local retention does. Anything not marked with
        this run's id is never touched."""
        complete = 0
        for step in self.store.checkpoint_steps():
            remote = (checkpoint.CHECKPOINTS, step_name(step))
            owner = self.store.read_object(*remote, UPLOADED_BY)
            if not owner or owner.get("run_uid") != self.uid:
                continue
            manifest = self.store.read_json(*remote, checkpoint.MANIFEST)
            if manifest is not None:
                if step > newest:
                    continue
                complete += 1
                if complete <= self.keep:
                    continue
            self.store.remove(*remote, checkpoint.MANIFEST)  # first: incomplete from here on
            # a damaged manifest's names are not trusted (one outside the folder would delete elsewhere)
            files = manifest["files"] if checkpoint.manifest_problem(manifest) is None else CHECKPOINT_FILES
            for file in files:
                self.store.remove(*remote, file)
            self.store.remove(*remote, UPLOADED_BY)
            if self.store.local:  # object stores have no folders; a directory would stay behind empty
                with contextlib.suppress(OSError):
                    os.rmdir(self.store.path(*remote))

    def _upload_export(self, export: Path) -> str:
        files = sorted(p for p in export.rglob("*") if p.is_file())
        manifest = {"files": {str(p.relative_to(export)): {"bytes": p.stat().st_size, "sha256": _digest(p)}
                              for p in files}}
        self.store.remove("export", checkpoint.MANIFEST)
        for file in files:
            self.store.put_file(file, "export", *file.relative_to(export).parts)
        self.store.put_bytes(json.dumps(manifest, indent=1).encode(), "export", checkpoint.MANIFEST)
        return self.store.url("export")


def start_uploader(store: Store | None, run_dir: Path, keep: int, events) -> Uploader | None:
    """Rank 0's uploader (None without --snapshot-uri); `events` records each upload in metrics.jsonl."""
    return Uploader(store, run_dir, keep, events) if store is not None else None
