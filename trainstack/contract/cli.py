"""Command-line contract of `python -m training`.

The Helm chart renders `train` arguments and its tests parse them with `build_parser()`, so every
flag here is part of the contract between the training package and the cluster workloads. The
Pulumi program checks `job.train` values with `check_train_args()` and lists the flags with
`train_flags()`, so the cluster config and this parser cannot drift.

Every number is checked where it is parsed (finite, in range) and the flags that depend on each
other right after (`check_values`), so bad input is one line and exit 2 before torch starts.
"""

from __future__ import annotations

import argparse
import codecs
import sys
from dataclasses import dataclass

from trainstack.contract import cli_integrations
from trainstack.contract.errors import UserError
from trainstack.contract.flag_types import (
    fraction,
    learning_rate,
    non_negative,
    non_negative_int,
    number,
    path,
    positive_int,
    probability,
    seed,
)
from trainstack.contract.log import warn
from trainstack.contract.shapes import PRESETS, resolve_shape

TOKEN_DTYPES = ("auto", "uint16", "uint32")


def _add_prepare(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("prepare", help="tokenize text into training shards")
    p.add_argument("--data", nargs="+", required=True, metavar="SRC", type=path,
                   help="text files (also .gz/.bz2/.xz/.zst), directories, globs, or json/jsonl/csv/parquet files")
    p.add_argument("--out", required=True, metavar="DATA_DIR", type=path, help="where shards and metadata go")
    p.add_argument("--tokenizer", default="gpt2",
                   help="local directory or hub name with GPT-2 BPE files (a hub name needs the network "
                        "once), or train:VOCAB to train a byte-level BPE tokenizer on the corpus (offline)")
    p.add_argument("--text-column", default="text", help="column holding the text in structured files")
    p.add_argument("--encoding", default="utf-8", help="encoding of plain-text files")
    p.add_argument("--extensions", default=".txt,.md,.rst,.py,.text",
                   help="file suffixes picked up when SRC is a directory or a glob (comma-separated); files "
                        "without a suffix (LICENSE, COPYING) and compressed ones (.txt.gz) are picked up too")
    p.add_argument("--val-fraction", type=fraction, default=0.01, help="share of tokens held out")
    p.add_argument("--token-dtype", choices=TOKEN_DTYPES, default="auto",
                   help="storage type of token ids (auto: uint16 when the vocabulary fits)")
    p.add_argument("--num-proc", type=number(int, 1, 1024), default=None, help="tokenizer processes (default: CPUs)")
    p.add_argument("--shard-tokens", type=positive_int, default=100_000_000, help="tokens per shard file")
    p.add_argument("--seed", type=seed, default=1337)


def _add_shape(p: argparse.ArgumentParser) -> argparse._ArgumentGroup:
    """Model shape flags, shared by `train` and `bench`."""
    model = p.add_argument_group("model")
    model.add_argument("--preset", choices=sorted(PRESETS), default="gpt2")
    model.add_argument("--n-layer", type=positive_int, default=None)
    model.add_argument("--n-embd", type=positive_int, default=None)
    model.add_argument("--n-head", type=positive_int, default=None)
    model.add_argument("--block-size", type=positive_int, default=None, help="sequence length")
    model.add_argument("--dropout", type=probability, default=0.0)
    return model


def _add_step_settings(p: argparse.ArgumentParser) -> argparse._ArgumentGroup:
    """Batch and optimizer flags, shared by `train` and `bench`."""
    opt = p.add_argument_group("optimisation")
    opt.add_argument("--batch-size", type=positive_int, default=8, help="sequences per process per micro-step")
    opt.add_argument("--lr", type=learning_rate, default=6e-4)
    opt.add_argument("--weight-decay", type=number(float, 0.0, 1.0), default=0.1)
    opt.add_argument("--beta1", type=probability, default=0.9)
    opt.add_argument("--beta2", type=probability, default=0.95)
    opt.add_argument("--grad-clip", type=non_negative, default=1.0, help="0 disables clipping")
    return opt


def _add_device_settings(group) -> None:
    """Device flags, shared by `train` and `bench`."""
    group.add_argument("--device", choices=("auto", "cpu", "cuda"), default="auto")
    group.add_argument("--precision", choices=("auto", "bf16", "fp16", "fp32"), default="auto",
                       help="auto: bf16 autocast on GPUs from SM 8.0 (A100, H100, L4, A10G) and on CPUs with native "
                            "bf16 (AVX512-BF16, AMX); fp16 with loss scaling on older GPUs (T4, V100); fp32 elsewhere")
    group.add_argument("--compile", choices=("auto", "on", "off"), default="auto",
                       help="torch.compile the model and its loss (auto: on)")


def _add_train(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("train", help="train (or fine-tune) a GPT-2 model; resumes automatically")
    p.add_argument("--data", required=True, metavar="DATA_DIR", type=path, help="output of `prepare`")
    p.add_argument("--out", required=True, metavar="RUN_DIR", type=path, help="checkpoints, logs and the export")
    model = _add_shape(p)
    model.add_argument("--init-from", metavar="DIR_OR_HUB_NAME", default=None,
                       help="start from pretrained weights (e.g. a local export, or gpt2 / distilgpt2 from the "
                            "hub, which needs the network on the first start)")

    opt = _add_step_settings(p)
    opt.add_argument("--max-steps", type=positive_int, default=1000,
                     help="length of the run; the cosine schedule decays to --min-lr at this step")
    opt.add_argument("--global-batch-size", type=positive_int, default=None,
                     help="sequences per optimizer step across all workers (fixed for the run, so "
                          "elastic restarts with fewer workers accumulate more micro-steps; "
                          "default: batch size x initial world size)")
    opt.add_argument("--min-lr", type=number(float, 0.0, 1.0), default=None,
                     help="floor of the cosine schedule (default lr/10)")
    opt.add_argument("--warmup-steps", type=non_negative_int, default=None,
                     help="linear warmup steps (default: 2%% of max steps)")

    run = p.add_argument_group("run")
    run.add_argument("--checkpoint-every", type=positive_int, default=200)
    run.add_argument("--checkpoint-every-minutes", type=non_negative, default=0.0, metavar="M",
                     help="also save once M minutes of training have passed since the last save (decimals "
                          "allowed), so a preemption loses at most about M minutes whatever the step time; "
                          "0 (default): --checkpoint-every alone")
    run.add_argument("--keep-checkpoints", type=positive_int, default=3, help="how many checkpoints to keep")
    run.add_argument("--eval-every", type=positive_int, default=200)
    run.add_argument("--eval-samples", type=positive_int, default=256,
                     help="validation windows per evaluation: a fixed set, so losses compare across "
                          "batch sizes and worker counts")
    run.add_argument("--log-every", type=positive_int, default=10)
    run.add_argument("--seed", type=seed, default=1337)
    _add_device_settings(run)
    run.add_argument("--dist-timeout", type=positive_int, default=600,
                     help="seconds a collective may wait before failing (checkpoint barriers wait this long)")
    run.add_argument("--peer-timeout", type=positive_int, default=30,
                     help="seconds without a heartbeat from a peer (a node lost without a connection reset) "
                          "before the survivors restart without it")
    run.add_argument("--no-export", action="store_true", help="skip the Hugging Face export at the end")
    run.add_argument("--no-progress", action="store_true", help="no progress bar (logs only)")


def _add_sample(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("sample", help="generate text from a run or an export")
    p.add_argument("model", metavar="RUN_DIR_OR_EXPORT", type=path)
    p.add_argument("--prompt", default="\n", help="any length: the model sees its last block-size tokens")
    p.add_argument("--max-new-tokens", type=number(int, 1, 1_000_000), default=100)
    p.add_argument("--temperature", type=non_negative, default=0.8, help="0 picks the likeliest token (greedy)")
    p.add_argument("--top-k", type=non_negative_int, default=50, help="0 samples from the whole vocabulary")
    p.add_argument("--num-samples", type=number(int, 1, 1000), default=1)
    p.add_argument("--seed", type=seed, default=1337)


def _add_bench(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("bench", help="measure training throughput on this device (one JSON line); takes "
                                     "train's model, batch and device flags")
    _add_shape(p)
    _add_step_settings(p)
    _add_device_settings(p)
    p.add_argument("--vocab-size", type=number(int, 2, 2**32 - 1), default=50304,
                   help="vocabulary (train takes it from DATA_DIR; 50304 is GPT-2's, padded)")
    p.add_argument("--steps", type=positive_int, default=20, help="timed steps")
    p.add_argument("--warmup", type=non_negative_int, default=5, help="untimed steps (compilation)")


def _add_demo(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("demo", help="the embedded default: prepare, train with 2 local workers, sample")
    p.add_argument("--workdir", default=".demo", type=path, help="where the demo keeps its data and run")
    p.add_argument("--max-steps", type=positive_int, default=600)
    p.add_argument("--nproc", type=number(int, 1, 256), default=2, help="local worker processes")


class OneLineErrorParser(argparse.ArgumentParser):
    """argparse, but a bad flag is one line (what is wrong, where to look), like every other input error."""

    def error(self, message: str):
        sys.stderr.write(f"error: {message}; see `{self.prog} --help`\n")
        sys.exit(2)


class _RaisingParser(argparse.ArgumentParser):
    """For callers that check arguments without running them: a bad flag is a UserError, not an exit."""

    def error(self, message: str):
        raise UserError(f"{message}; see `{self.prog} --help`")


def build_parser(parser_class: type[argparse.ArgumentParser] = OneLineErrorParser) -> argparse.ArgumentParser:
    parser = parser_class(prog="python -m training",
                          description="Train GPT-2 on your own text, elastic and checkpointed.")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    _add_prepare(sub)
    _add_train(sub)
    _add_sample(sub)
    _add_bench(sub)
    _add_demo(sub)
    cli_integrations.extend(sub)  # report, evaluate, distill, snapshots, W&B
    for command in sub.choices.values():
        _show_defaults(command)
    return parser


def _show_defaults(parser: argparse.ArgumentParser) -> None:
    """`--help` says each flag's default (the first checkpoint at step 200 is no secret). A flag whose help
    already explains its default, or that has none (None, a switch), is left as it is."""
    for action in parser._actions:
        if (not action.option_strings or any(action.default is nothing for nothing in (None, False, argparse.SUPPRESS))
                or "default" in (action.help or "")):
            continue
        shown = f"(default: {action.default})".replace("%", "%%")
        action.help = f"{action.help} {shown}" if action.help else shown


# ---------------------------------------------------------------- flags that depend on each other
def check_values(args: argparse.Namespace) -> None:
    """What one flag alone cannot tell; UserError (one line) before any work starts."""
    if args.command in ("train", "distill"):
        cli_integrations.check_train_values(args)  # --distill-from, --snapshot-uri
        _check_train(args)
    elif args.command == "prepare":
        _check_prepare(args)
    elif args.command == "bench":
        resolve_shape(args.preset, block_size=args.block_size)


def _check_train(args: argparse.Namespace) -> None:
    if args.min_lr is not None and args.min_lr > args.lr:
        raise UserError(f"--min-lr {args.min_lr:g} is above --lr {args.lr:g}; the schedule decays from --lr "
                        "down to --min-lr, so pick --min-lr <= --lr")
    if args.warmup_steps is not None and args.warmup_steps > args.max_steps:
        warn(f"--warmup-steps {args.warmup_steps} is longer than --max-steps {args.max_steps}: the run ends "
             "before the learning rate reaches --lr")
    if args.init_from:
        shaped = [f"--{name.replace('_', '-')}" for name in ("n_layer", "n_embd", "n_head")
                  if getattr(args, name) is not None]
        if shaped:
            raise UserError(f"{' '.join(shaped)} cannot change a pretrained model's architecture (--init-from "
                            f"{args.init_from}); drop {' '.join(shaped)}")
    elif not args.distill_from:  # a student's shape derives from its teacher's (distill.make_student)
        resolve_shape(args.preset, args.n_layer, args.n_embd, args.n_head, args.block_size)


MIN_TRAINED_VOCAB = 257  # 256 byte symbols + the end-of-text token


def parse_tokenizer_spec(spec: str) -> int | None:
    """The vocabulary size for `train:VOCAB`, None for a name or path to load."""
    if not spec.startswith("train:"):
        return None
    text = spec.split(":", 1)[1]
    if not text.isdigit():
        raise UserError(f"--tokenizer {spec}: VOCAB must be a whole number, e.g. --tokenizer train:16384")
    vocab = int(text)
    if vocab < MIN_TRAINED_VOCAB:
        raise UserError(f"--tokenizer {spec}: a byte-level BPE vocabulary needs at least {MIN_TRAINED_VOCAB} "
                        "tokens; use e.g. train:8192")
    if vocab > 2**32 - 1:
        raise UserError(f"--tokenizer {spec}: {vocab} tokens cannot be stored even as uint32; use a smaller VOCAB")
    return vocab


def _check_prepare(args: argparse.Namespace) -> None:
    try:
        codecs.lookup(args.encoding)
    except LookupError:
        raise UserError(f"--encoding {args.encoding}: unknown encoding; use e.g. utf-8 or latin-1") from None
    parse_tokenizer_spec(args.tokenizer)


# ---------------------------------------------------------------- for the Pulumi program
@dataclass(frozen=True)
class Flag:
    """One `train` flag as the cluster config needs it: to generate `job.train` keys and check values."""

    flag: str  # "--max-steps"
    dest: str  # "max_steps"
    kind: str  # "int", "float", "str" or "bool" (a switch without a value)
    default: object
    choices: tuple | None
    required: bool
    help: str


def train_flags() -> list[Flag]:
    """Every flag of `python -m training train`, in the order of `--help`."""
    train = _subparser(build_parser(), "train")
    flags = []
    for action in train._actions:
        if not action.option_strings or isinstance(action, argparse._HelpAction):
            continue
        switch = isinstance(action, argparse._StoreTrueAction)
        kind = "bool" if switch else getattr(action.type, "kind", "str")
        flags.append(Flag(flag=action.option_strings[0], dest=action.dest, kind=kind, default=action.default,
                          choices=tuple(action.choices) if action.choices else None, required=action.required,
                          help=action.help or ""))
    return flags


def check_train_args(argv: list[str]) -> argparse.Namespace:
    """`argv` after `train` (with --data and --out), checked exactly as the trainer checks it at start.

    Returns the parsed arguments; raises UserError with the trainer's own one-line message otherwise.
    Parses only: no torch, no files read.
    """
    args = build_parser(_RaisingParser).parse_args(["train", *argv])
    check_values(args)
    return args


def _subparser(parser: argparse.ArgumentParser, name: str) -> argparse.ArgumentParser:
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return sub.choices[name]
