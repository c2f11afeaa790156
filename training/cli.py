"""Command-line contract of `python -m training`.

The Helm chart renders `train` arguments and its tests parse them with `build_parser()`, so every
flag here is part of the contract between the training package and the cluster workloads.
"""

from __future__ import annotations

import argparse
import sys

from training.model import PRESETS

TOKEN_DTYPES = ("auto", "uint16", "uint32")


def _positive_int(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be a positive integer, got {text}")
    return value


def _non_negative_int(text: str) -> int:
    value = int(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be zero or a positive integer, got {text}")
    return value


def _fraction(text: str) -> float:
    value = float(text)
    if not 0.0 < value < 1.0:
        raise argparse.ArgumentTypeError(f"must be between 0 and 1 (exclusive), got {text}")
    return value


def _add_prepare(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("prepare", help="tokenize text into training shards")
    p.add_argument("--data", nargs="+", required=True, metavar="SRC",
                   help="text files, directories, globs, or json/jsonl/csv/parquet files")
    p.add_argument("--out", required=True, metavar="DATA_DIR", help="where shards and metadata go")
    p.add_argument("--tokenizer", default="gpt2",
                   help="local directory or hub name with GPT-2 BPE files, or train:VOCAB to train a "
                        "byte-level BPE tokenizer on the corpus (offline)")
    p.add_argument("--text-column", default="text", help="column holding the text in structured files")
    p.add_argument("--encoding", default="utf-8", help="encoding of plain-text files")
    p.add_argument("--extensions", default=".txt,.md,.rst,.py,.text",
                   help="file suffixes picked up when SRC is a directory (comma-separated)")
    p.add_argument("--val-fraction", type=_fraction, default=0.01, help="share of tokens held out")
    p.add_argument("--token-dtype", choices=TOKEN_DTYPES, default="auto",
                   help="storage type of token ids (auto: uint16 when the vocabulary fits)")
    p.add_argument("--num-proc", type=_positive_int, default=None, help="tokenizer processes (default: CPUs)")
    p.add_argument("--shard-tokens", type=_positive_int, default=100_000_000, help="tokens per shard file")
    p.add_argument("--seed", type=int, default=1337)


def _add_shape(p: argparse.ArgumentParser) -> argparse._ArgumentGroup:
    """Model shape flags, shared by `train` and `bench`."""
    model = p.add_argument_group("model")
    model.add_argument("--preset", choices=sorted(PRESETS), default="gpt2")
    model.add_argument("--n-layer", type=_positive_int, default=None)
    model.add_argument("--n-embd", type=_positive_int, default=None)
    model.add_argument("--n-head", type=_positive_int, default=None)
    model.add_argument("--block-size", type=_positive_int, default=None, help="sequence length")
    model.add_argument("--dropout", type=float, default=0.0)
    return model


def _add_step_settings(p: argparse.ArgumentParser) -> argparse._ArgumentGroup:
    """Batch and optimizer flags, shared by `train` and `bench`."""
    opt = p.add_argument_group("optimisation")
    opt.add_argument("--batch-size", type=_positive_int, default=8, help="sequences per process per micro-step")
    opt.add_argument("--lr", type=float, default=6e-4)
    opt.add_argument("--weight-decay", type=float, default=0.1)
    opt.add_argument("--beta1", type=float, default=0.9)
    opt.add_argument("--beta2", type=float, default=0.95)
    opt.add_argument("--grad-clip", type=float, default=1.0, help="0 disables clipping")
    return opt


def _add_device_settings(group) -> None:
    """Device flags, shared by `train` and `bench`."""
    group.add_argument("--device", choices=("auto", "cpu", "cuda"), default="auto")
    group.add_argument("--precision", choices=("auto", "bf16", "fp16", "fp32"), default="auto",
                       help="auto: bf16 autocast on GPUs and on CPUs with native bf16 (AVX512-BF16, AMX), "
                            "fp32 elsewhere")
    group.add_argument("--compile", choices=("auto", "on", "off"), default="auto",
                       help="torch.compile the model and its loss (auto: on)")


def _add_train(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("train", help="train (or fine-tune) a GPT-2 model; resumes automatically")
    p.add_argument("--data", required=True, metavar="DATA_DIR", help="output of `prepare`")
    p.add_argument("--out", required=True, metavar="RUN_DIR", help="checkpoints, logs and the export")
    model = _add_shape(p)
    model.add_argument("--init-from", metavar="DIR_OR_HUB_NAME", default=None,
                       help="start from pretrained weights (e.g. gpt2, distilgpt2, or a local export)")

    opt = _add_step_settings(p)
    opt.add_argument("--max-steps", type=_positive_int, default=1000)
    opt.add_argument("--global-batch-size", type=_positive_int, default=None,
                     help="sequences per optimizer step across all workers (fixed for the run, so "
                          "elastic restarts with fewer workers accumulate more micro-steps; "
                          "default: batch size x initial world size)")
    opt.add_argument("--min-lr", type=float, default=None, help="floor of the cosine schedule (default lr/10)")
    opt.add_argument("--warmup-steps", type=_non_negative_int, default=None,
                     help="linear warmup steps (default: 2%% of max steps)")

    run = p.add_argument_group("run")
    run.add_argument("--checkpoint-every", type=_positive_int, default=200)
    run.add_argument("--keep-checkpoints", type=_positive_int, default=3, help="how many checkpoints to keep")
    run.add_argument("--eval-every", type=_positive_int, default=200)
    run.add_argument("--eval-samples", type=_positive_int, default=256,
                     help="validation windows per evaluation: a fixed set, so losses compare across "
                          "batch sizes and worker counts")
    run.add_argument("--log-every", type=_positive_int, default=10)
    run.add_argument("--seed", type=int, default=1337)
    _add_device_settings(run)
    run.add_argument("--dist-timeout", type=_positive_int, default=600,
                     help="seconds a collective may wait before failing (checkpoint barriers wait this long)")
    run.add_argument("--peer-timeout", type=_positive_int, default=30,
                     help="seconds without a heartbeat from a peer (a node lost without a connection reset) "
                          "before the survivors restart without it")
    run.add_argument("--no-export", action="store_true", help="skip the Hugging Face export at the end")
    run.add_argument("--no-progress", action="store_true", help="no progress bar (logs only)")


def _add_sample(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("sample", help="generate text from a run or an export")
    p.add_argument("model", metavar="RUN_DIR_OR_EXPORT")
    p.add_argument("--prompt", default="\n")
    p.add_argument("--max-new-tokens", type=_positive_int, default=100)
    p.add_argument("--temperature", type=float, default=0.8)
    p.add_argument("--top-k", type=_positive_int, default=50)
    p.add_argument("--num-samples", type=_positive_int, default=1)
    p.add_argument("--seed", type=int, default=1337)


def _add_bench(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("bench", help="measure training throughput on this device (one JSON line); takes "
                                     "train's model, batch and device flags")
    _add_shape(p)
    _add_step_settings(p)
    _add_device_settings(p)
    p.add_argument("--vocab-size", type=_positive_int, default=50304,
                   help="vocabulary (train takes it from DATA_DIR; 50304 is GPT-2's, padded)")
    p.add_argument("--steps", type=_positive_int, default=20, help="timed steps")
    p.add_argument("--warmup", type=_non_negative_int, default=5, help="untimed steps (compilation)")


def _add_demo(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("demo", help="the embedded default: prepare, train with 2 local workers, sample")
    p.add_argument("--workdir", default=".demo", help="where the demo keeps its data and run")
    p.add_argument("--max-steps", type=_positive_int, default=600)
    p.add_argument("--nproc", type=_positive_int, default=2, help="local worker processes")


class OneLineErrorParser(argparse.ArgumentParser):
    """argparse, but a bad flag is one line (what is wrong, where to look), like every other input error."""

    def error(self, message: str):
        sys.stderr.write(f"error: {message}; see `{self.prog} --help`\n")
        sys.exit(2)


def build_parser() -> argparse.ArgumentParser:
    parser = OneLineErrorParser(prog="python -m training",
                                     description="Train GPT-2 on your own text, elastic and checkpointed.")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    _add_prepare(sub)
    _add_train(sub)
    _add_sample(sub)
    _add_bench(sub)
    _add_demo(sub)
    return parser
