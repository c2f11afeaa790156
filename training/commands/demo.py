"""`python -m training demo` (what `make demo` runs): the whole job locally, offline, in minutes.

Corpus: the Python standard library's own source files (present on every machine with Python).
Tokenizer: a byte-level BPE trained on that corpus (no download). Training: a tiny GPT-2 with two
local workers under torchrun as the chart runs it (`python -m training.launch`, c10d rendezvous on
127.0.0.1), GPU if present, else CPU.
"""

from __future__ import annotations

import argparse
import socket
import subprocess
import sys
import sysconfig
import uuid
from pathlib import Path

import torch

from training.commands.report import report
from training.commands.sample import sample
from training.data.prepare import prepare
from training.observability.plots import LOSS_PNG
from trainstack.contract.cli import build_parser
from trainstack.contract.log import info


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def demo(args: argparse.Namespace) -> int:
    work = Path(args.workdir)
    data, run = work / "data", work / "run"
    stdlib = Path(sysconfig.get_paths()["stdlib"])
    parser = build_parser()
    prepare(parser.parse_args(["prepare", "--data", str(stdlib / "*.py"), "--out", str(data),
                               "--tokenizer", "train:8192", "--val-fraction", "0.02"]))

    nproc = args.nproc
    if torch.cuda.is_available() and torch.cuda.device_count() < nproc:
        info(f"{torch.cuda.device_count()} GPU(s) visible: running {torch.cuda.device_count()} worker(s), one per GPU")
        nproc = torch.cuda.device_count()
    # the launcher the chart runs (torchrun underneath; training/launch.py)
    launcher = [sys.executable, "-m", "training.launch", "--nnodes=1", f"--nproc-per-node={nproc}",
                "--rdzv-backend=c10d", f"--rdzv-endpoint=127.0.0.1:{_free_port()}",
                f"--rdzv-id=demo-{uuid.uuid4().hex[:8]}", "--max-restarts=0"]
    train = ["-m", "training", "train", "--data", str(data), "--out", str(run), "--preset", "tiny",
             "--max-steps", str(args.max_steps), "--batch-size", "8", "--lr", "2e-3", "--warmup-steps", "20",
             "--checkpoint-every", "100", "--eval-every", "100", "--log-every", "50"]
    info("training: " + " ".join(launcher[2:] + train))
    code = subprocess.run(launcher + train).returncode
    if code != 0:
        return code

    prompt = "def "
    text = sample(parser.parse_args(["sample", str(run), "--prompt", prompt, "--max-new-tokens", "80"]))[0]
    print("\n----- sample (prompt: 'def ') -----\n" + text + "\n-----------------------------------")
    info(f"model export: {run / 'export'}  (AutoModelForCausalLM.from_pretrained / pipeline('text-generation'))")
    info(f"TensorBoard logs: {run / 'tensorboard'}  (view: .venv/bin/tensorboard --logdir {run / 'tensorboard'})")
    print("\n----- report (python -m training report " + str(run) + ") -----\n"
          + report(parser.parse_args(["report", str(run)])) + "\n-----------------------------------")
    info(f"run it again to resume, or sample more: .venv/bin/python -m training sample {run} --prompt 'class '")
    info(f"loss curve: {(run / LOSS_PNG).resolve()}  (training and validation loss, learning rate)")
    return 0
