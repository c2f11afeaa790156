"""Entry point: `python -m training {prepare,train,sample,bench,demo}`.

Bad input (UserError) is printed as one line and exits 2; nothing else is caught.
"""

from __future__ import annotations

import sys

from training.cli import build_parser
from training.errors import UserError


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        if args.command == "prepare":
            from training.prepare import prepare

            prepare(args)
            return 0
        if args.command == "train":
            from training.train import run

            return run(args)
        if args.command == "sample":
            from training.sample import sample

            for text in sample(args):
                print(text)
                print("-" * 40)
            return 0
        if args.command == "bench":
            from training.bench import bench

            bench(args)
            return 0
        if args.command == "demo":
            from training.demo import demo

            return demo(args)
    except UserError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    raise AssertionError(f"unhandled command {args.command}")


if __name__ == "__main__":
    sys.exit(main())
