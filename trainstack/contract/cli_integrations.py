"""Flags and commands of the integrations: report, evaluate, distillation, object storage, W&B.

Kept apart from trainstack/contract/cli.py so each group reads in one place; `build_parser` calls `extend`.
"""

from __future__ import annotations

import argparse

from trainstack.contract.errors import UserError
from trainstack.contract.flag_types import non_negative, number, path, positive_int

TEMPERATURE = number(float, 0.0, low_open=True)


def _add_report(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("report", help="summary of a run: steps, tokens, time, losses, throughput, files")
    p.add_argument("run_dir", metavar="RUN_DIR", type=path)
    p.add_argument("--json", action="store_true", help="print the summary as JSON")


def _add_evaluate(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("evaluate", help="perplexity of a run, an export or a hub model on a validation split or text")
    p.add_argument("model", metavar="RUN_DIR_OR_EXPORT", type=path,
                   help="a run directory (its export, else its newest checkpoint), an export, or a model "
                        "directory or hub name from_pretrained loads")
    p.add_argument("--data", required=True, metavar="DATA_DIR_OR_TEXT", type=path,
                   help="a prepared DATA_DIR (its validation split) or a text file (tokenized with the model's tokenizer)")
    p.add_argument("--block-size", type=positive_int, default=None,
                   help="tokens per window (default: the model's context length, at most 1024)")
    p.add_argument("--batch-size", type=positive_int, default=8)
    p.add_argument("--max-windows", type=positive_int, default=None, help="evaluate on the first N windows only")
    p.add_argument("--device", choices=("auto", "cpu", "cuda"), default="auto")
    p.add_argument("--json", action="store_true", help="print the result as one JSON line")


def _add_snapshot_flags(train: argparse.ArgumentParser) -> None:
    g = train.add_argument_group("object storage")
    g.add_argument("--snapshot-uri", metavar="URI", default=None,
                   help="also keep checkpoints, the export, metrics and loss.png at s3://BUCKET/PREFIX, "
                        "gs://BUCKET/PREFIX or file:///PATH (one URI per run; credentials from the environment); "
                        "a RUN_DIR without an intact checkpoint resumes from there")
    g.add_argument("--snapshot-wait", type=positive_int, default=120, metavar="SECONDS",
                   help="how long the end of training or a SIGTERM waits for uploads to finish")


def _add_wandb_flags(train: argparse.ArgumentParser) -> None:
    g = train.add_argument_group("Weights & Biases (in a checkout: .venv/bin/pip install -e '.[wandb]')")
    g.add_argument("--wandb-project", default=None, help="log the run to this W&B project (rank 0; key from WANDB_API_KEY)")
    g.add_argument("--wandb-entity", default=None, help="W&B team or user (default: the key's default entity)")
    g.add_argument("--wandb-group", default=None,
                   help="W&B run group (default: the job id, torchrun's --rdzv-id, else RUN_DIR's name)")
    g.add_argument("--wandb-mode", choices=("online", "offline", "disabled"), default="online",
                   help="offline: write into RUN_DIR/wandb for a later `wandb sync`")


def _add_distill_flags(train: argparse.ArgumentParser) -> None:
    g = train.add_argument_group("distillation (defaults: Hugging Face's DistilGPT2/DistilBERT settings)")
    g.add_argument("--distill-from", metavar="TEACHER", type=path, default=None,
                   help="distil this teacher (a run, an export, or a GPT-2 hub name/directory with the data's "
                        "tokenizer) into a student with half its layers (or --n-layer/--n-embd/--n-head)")
    g.add_argument("--alpha-kd", type=non_negative, default=5.0, help="weight of T^2 * KL(teacher || student) at temperature T")
    g.add_argument("--alpha-lm", type=non_negative, default=2.0, help="weight of the student's next-token cross-entropy")
    g.add_argument("--alpha-cos", type=non_negative, default=1.0, help="weight of the cosine loss on the last hidden states")
    g.add_argument("--temperature", type=TEMPERATURE, default=2.0, help="softmax temperature T of the KL term")


def _add_distill(sub: argparse._SubParsersAction) -> None:
    """`distill`: `train`'s flags (--distill-from required: `check_train_values`)."""
    # The actions are shared with `train` (argparse copies references), -h included: so no help of its own.
    sub.add_parser("distill", parents=[sub.choices["train"]], add_help=False,
                   help="distil a teacher into a smaller GPT-2 (train --distill-from TEACHER)")


# --snapshot-uri schemes, each with the fsspec package that reads it (checkpoints/snapshots.py imports it)
SNAPSHOT_SCHEMES = {"s3": "s3fs", "gs": "gcsfs", "gcs": "gcsfs", "file": None}


def check_snapshot_uri(uri: str) -> None:
    if not uri.strip():  # an unset variable in a launch script: it must not mean "no snapshots"
        raise UserError("--snapshot-uri is empty: give s3://BUCKET/PREFIX, gs://BUCKET/PREFIX or file:///PATH, "
                        "or leave the flag out to train without snapshots")
    scheme, _, rest = uri.partition("://")
    if scheme not in SNAPSHOT_SCHEMES or not rest.strip("/"):
        raise UserError(f"--snapshot-uri {uri}: use s3://BUCKET/PREFIX, gs://BUCKET/PREFIX or file:///PATH")
    if scheme != "file" and any(part in ("", ".", "..") for part in rest.rstrip("/").split("/")[1:]):
        # A bucket has no parent or current directory: S3 and GCS keep ".." as part of the object names.
        raise UserError(f"--snapshot-uri {uri}: an empty, . or .. part, which S3 and GCS keep as part of the "
                        "object names (a bucket has no parent directory); write the prefix without it")


def check_train_values(args: argparse.Namespace) -> None:
    """The integrations' flags that depend on each other (called by cli.check_values for train/distill)."""
    if args.snapshot_uri is not None:
        check_snapshot_uri(args.snapshot_uri)
    if args.command == "distill" and not args.distill_from:
        raise UserError("distill needs --distill-from TEACHER (a run, an export or a GPT-2 hub model); "
                        "see `python -m training distill --help`")
    if args.distill_from:
        if args.init_from:
            raise UserError("--distill-from and --init-from exclude each other: the student starts from the "
                            "teacher's layers; drop --init-from")
        if args.alpha_kd + args.alpha_lm + args.alpha_cos == 0:
            raise UserError("--alpha-kd, --alpha-lm and --alpha-cos are all 0: nothing to learn from; keep at "
                            "least one (defaults 5, 2, 1)")


def extend(sub: argparse._SubParsersAction) -> None:
    """Add the integrations' flags to `train` and their commands (called after the core commands exist)."""
    _add_snapshot_flags(sub.choices["train"])
    _add_wandb_flags(sub.choices["train"])
    _add_distill_flags(sub.choices["train"])
    _add_distill(sub)
    _add_report(sub)
    _add_evaluate(sub)
