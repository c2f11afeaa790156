"""Entry point: `python -m training {prepare,train,distill,sample,bench,demo,report,evaluate}`.

Bad input (UserError) is printed as one line and exits 2, and so is a write that failed because the
storage is full or read-only (the code that wrote has already removed its half-written files). A
retry cannot fix either (trainstack/contract/errors.py). Nothing else is caught. `train` and `distill` end
without the interpreter's own shutdown (training/elastic/process_exit.py).
"""

from __future__ import annotations

import sys

from training.elastic.process_exit import exit_code, exit_now
from training.library_bars import quiet_transformers_bars
from trainstack.contract.cli import build_parser, check_values
from trainstack.contract.errors import NO_RETRY_EXIT, UserError, storage_error, storage_failure

# The commands that load or save models with transformers (its bars say nothing a user needs).
LOAD_OR_SAVE_MODELS = ("train", "distill", "sample", "evaluate", "demo")


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        check_values(args)
        if args.command in LOAD_OR_SAVE_MODELS:
            quiet_transformers_bars()
        if args.command == "prepare":
            from training.data.prepare import prepare

            prepare(args)
            return 0
        if args.command in ("train", "distill"):
            from training.trainer.train import run

            return run(args)
        if args.command == "sample":
            from training.commands.sample import sample

            for text in sample(args):
                print(text)
                print("-" * 40)
            return 0
        if args.command == "bench":
            from training.commands.bench import bench

            bench(args)
            return 0
        if args.command == "report":
            from training.commands.report import report

            print(report(args))
            return 0
        if args.command == "evaluate":
            from training.commands.evaluate import evaluate

            print(evaluate(args))
            return 0
        if args.command == "demo":
            from training.commands.demo import demo

            return demo(args)
    except UserError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return NO_RETRY_EXIT
    except Exception as exc:
        cause = storage_failure(exc)
        if cause is None:
            raise
        print(f"error: {storage_error(cause)}", file=sys.stderr)
        return NO_RETRY_EXIT
    raise AssertionError(f"unhandled command {args.command}")


if __name__ == "__main__":
    if sys.argv[1:2] in (["train"], ["distill"]):  # torchrun's workers: their exit time delays a restart
        exit_now(exit_code(main))
    sys.exit(main())
