"""trainstack/contract/ is torch-free, and it is all of the trainer that the deploying code imports.

The Pulumi program runs in a virtualenv without torch (the [infra] extra), and it parses `job.train`
with the trainer's own parser; so the contract must import, and parse, with torch (and every other
heavy dependency of the trainer) absent. The deploying code (trainstack.infra, .components, .jobs and
__main__.py) imports no module of the `training` package at all: that top-level name may be a user's
own folder beside their Pulumi program.
"""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
CONTRACT = REPO / "trainstack" / "contract"
# What the trainer needs and the Pulumi program's virtualenv does not have.
HEAVY = ("torch", "numpy", "transformers", "tokenizers", "datasets", "fsspec", "safetensors", "wandb", "tqdm",
         "matplotlib", "tensorboard")

PROBE = """
import importlib, json, pkgutil, sys

class Absent:
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in HEAVY:
            raise ImportError(f"{name} is absent in this test")

sys.meta_path.insert(0, Absent())
import trainstack.contract
for module in pkgutil.walk_packages(trainstack.contract.__path__, "trainstack.contract."):
    importlib.import_module(module.name)
from trainstack.contract.cli import check_train_args, train_flags
from trainstack.contract.errors import UserError
args = check_train_args(["--data", "d", "--out", "o", "--preset", "tiny", "--snapshot-uri", "s3://b/p"])
flags = [flag.flag for flag in train_flags()]
try:
    check_train_args(["--data", "d", "--out", "o", "--n-embd", "100", "--n-head", "3"])
    refused = ""
except UserError as exc:
    refused = str(exc)
loaded = sorted(name for name in sys.modules if name.split(".")[0] == "training"
                or name.startswith("trainstack.") and not name.startswith("trainstack.contract"))
print(json.dumps({"preset": args.preset, "flags": len(flags), "refused": refused, "loaded": loaded}))
"""


def run_probe(code: str) -> dict:
    done = subprocess.run([sys.executable, "-c", f"HEAVY = {HEAVY!r}\n{code}"], cwd=REPO, capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_the_contract_imports_and_parses_without_torch():
    result = run_probe(PROBE)
    assert result["preset"] == "tiny"
    assert result["flags"] > 30
    assert "not divisible by --n-head" in result["refused"]
    assert result["loaded"] == []  # nothing outside the contract came along


def test_the_probe_would_notice_a_torch_import():
    done = subprocess.run([sys.executable, "-c", f"HEAVY = {HEAVY!r}\n"
                           + PROBE.split("import trainstack.contract")[0] + "import training.model.gpt"],
                          cwd=REPO, capture_output=True, text=True, timeout=120)
    assert done.returncode != 0 and "torch is absent in this test" in done.stderr


def training_imports(path: Path) -> set[str]:
    found = set()
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names if alias.name.split(".")[0] == "training")
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0 \
                and node.module.split(".")[0] == "training":
            found.add(node.module)
    return found


def training_imports_of(paths, root: Path = REPO) -> list[str]:
    return sorted(f"{path.relative_to(root)}: {module}" for path in paths for module in training_imports(path))


DEPLOYING = ("trainstack/infra", "trainstack/components", "trainstack/jobs", "provider")


def test_the_deploying_code_imports_nothing_of_the_training_package():
    programs = [*(path for folder in DEPLOYING for path in sorted((REPO / folder).rglob("*.py"))),
                REPO / "__main__.py"]
    assert len(programs) > 50
    assert training_imports_of(programs) == []


def test_the_contract_imports_nothing_of_training():
    assert training_imports_of(sorted(CONTRACT.rglob("*.py"))) == []


def test_the_boundary_check_catches_an_import_inside_a_function(tmp_path):
    program = tmp_path / "stack.py"
    program.write_text("from trainstack.contract.cli import train_flags\n\n\n"
                       "def f():\n    from training.observability import wandb_logger\n")
    assert training_imports_of([program], tmp_path) == ["stack.py: training.observability"]


# ---------------------------------------------------------------- the typed config's defaults (re-check case 6)
import argparse  # noqa: E402

import pytest  # noqa: E402

from trainstack.contract.cli import build_parser, check_values, train_flags  # noqa: E402
from trainstack.contract.config import TrainConfig  # noqa: E402

# Every entry that builds a TrainConfig parses one of these: `train` and `distill` directly, the
# launcher's forked workers (training/worker.py) and the demo's launched trainer through `python -m training`.
ENTRIES = {
    "train": ["train", "--data", "d", "--out", "o", "--preset", "tiny"],
    "distill": ["distill", "--data", "d", "--out", "o", "--preset", "tiny", "--distill-from", "t"],
}


@pytest.mark.parametrize("entry", sorted(ENTRIES))
def test_config_built_from_a_namespace_lacking_any_optional_flag_takes_the_parser_default(entry):
    """A namespace without a newer flag (once --checkpoint-every-minutes: AttributeError) gets its default."""
    parsed = build_parser().parse_args(ENTRIES[entry])
    check_values(parsed)
    full = TrainConfig.from_args(parsed)
    for flag in train_flags():
        if flag.required:
            continue
        partial = argparse.Namespace(**{k: v for k, v in vars(parsed).items() if k != flag.dest})
        config = TrainConfig.from_args(partial)
        assert config.flags[flag.dest] == flag.default, flag.flag
        if flag.dest not in {k for k, v in vars(parsed).items() if v != flag.default}:
            assert config == full, flag.flag


def test_config_from_a_namespace_without_checkpoint_every_minutes():
    args = build_parser().parse_args(ENTRIES["train"])
    del args.checkpoint_every_minutes
    assert TrainConfig.from_args(args).cadence.checkpoint_every_minutes == 0.0
