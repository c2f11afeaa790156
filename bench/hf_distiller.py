"""Hugging Face's distillation example as a benchmark peer: its `Distiller.step` (DistilGPT2's recipe).

The example (distillation/distiller.py, train.py) is not in the transformers package; it lives in
huggingface/transformers-research-projects (before that in transformers' examples/research_projects).
Get a checkout into the git-ignored bench/.peers/ (the default path; any checkout can be passed with
--hf-distiller):

    git clone https://github.com/huggingface/transformers-research-projects bench/.peers/transformers-research-projects
    # measured at commit fccd0cd

What runs is the example's own code: `Distiller.__init__` (its AdamW with betas 0.9/0.98 and eps 1e-6,
no decay on biases and LayerNorms, its linear warmup schedule) and, per step, its `prepare_batch_clm`
and `step` (student and teacher forward, KL at temperature T, causal-LM cross-entropy, cosine loss
on the last hidden states, the `.item()` calls it logs, backward, clipping, optimizer and scheduler
step). Its settings: the README's training command (alpha_ce 5, alpha_mlm 2, alpha_cos 1) with the
causal-LM term in place of the masked-LM one (alpha_clm 2, as training/trainer/distill.py's defaults), and
train.py's defaults (T 2, max_grad_norm 5, lr 5e-4, warmup 5%); its logging every 500 steps and
checkpoints every 4000 never fire inside a benchmark.

Two adaptations, none of them in its computation:
- its data comes from our token windows in our sample order instead of its binarized pickles: each
  window with its first and last token replaced by <|endoftext|> (the example wraps every sequence
  so), put into its LmSeqsDataset, batched by its `batch_sequences` and `prepare_batch_clm`;
- its utils.py imports GitPython for `git_log`, which Distiller never calls; where GitPython is not
  installed an empty module named `git` stands in for the import.
Its models are transformers' GPT2LMHeadModel in our shapes with our weights and, as its train.py
configures them, `output_hidden_states=True`; `use_cache` is off (nothing reads the key/value cache).
Its fp16 path needs NVIDIA apex; there is no bf16 switch. Where our step runs in bf16 the benchmark
runs its step under torch.autocast(bf16), as bench/nanogpt.py does for nanoGPT on CPU.
"""

from __future__ import annotations

import argparse
import contextlib
import copy
import importlib
import logging
import sys
import tempfile
import types
from pathlib import Path

import numpy as np
import torch

from bench import common
from training.data.dataset import SampleOrder, TokenWindows

DEFAULT_CHECKOUT = common.ROOT / "bench" / ".peers" / "transformers-research-projects"
GET = ("git clone https://github.com/huggingface/transformers-research-projects "
       "bench/.peers/transformers-research-projects")
# DistilGPT2's settings in the example (README's train.py command and train.py's defaults)
SETTINGS = dict(temperature=2.0, alpha_ce=5.0, alpha_mlm=0.0, alpha_clm=2.0, alpha_mse=0.0, alpha_cos=1.0,
                learning_rate=5e-4, adam_epsilon=1e-6, weight_decay=0.0, warmup_prop=0.05, max_grad_norm=5.0,
                gradient_accumulation_steps=1, log_interval=500, checkpoint_interval=4000)


def example_dir(checkout: Path | str | None) -> Path:
    """The example's folder in a checkout of either repository that has held it."""
    root = Path(checkout or DEFAULT_CHECKOUT)
    for sub in ("distillation", "examples/research_projects/distillation"):
        if (root / sub / "distiller.py").is_file():
            return root / sub
    raise FileNotFoundError(f"no distillation example (distiller.py) in {root}; get one with `{GET}` "
                            "or pass --hf-distiller")


def load_module(checkout: Path | str | None):
    """The example's distiller.py, imported as `distiller` with its folder on sys.path (its own imports)."""
    folder = example_dir(checkout)
    try:
        import git  # noqa: F401
    except ImportError:  # utils.py imports it for git_log(), which the Distiller never calls
        sys.modules["git"] = types.ModuleType("git")
    sys.path.insert(0, str(folder))
    try:
        module = importlib.import_module("distiller")
    finally:
        sys.path.remove(str(folder))
    logging.getLogger("utils").setLevel(logging.WARNING)  # its logger logs every set-up line at INFO
    if Path(module.__file__).resolve().parent != folder.resolve():
        raise SystemExit(f"imported {module.__file__}, not the example's distiller.py in {folder}")
    return module


def hf_gpt2(gpt, device: torch.device):
    """transformers' GPT2LMHeadModel with the weights of our `gpt` (training/model/gpt.py keeps HF's layout), fp32."""
    hf = copy.deepcopy(gpt).to("cpu", torch.float32).to_hf()
    hf.config.output_hidden_states = True  # as the example's train.py sets it for both models
    hf.config.use_cache = False
    return hf.to(device)


class HFDistillLoop(common.TimedLoop):
    """The example's loop body for one batch: its dataset's batch_sequences, prepare_batch_clm, Distiller.step."""

    def __init__(self, module, student_gpt, teacher_gpt, windows: TokenWindows, batch_size: int, max_steps: int,
                 device: torch.device, precision: str, eos_id: int, seed: int = common.SEED):
        self.batch_size, self.device, self.done = batch_size, device, 0
        self.tmp = tempfile.TemporaryDirectory(prefix="hf-distiller-")  # its TensorBoard writer's dump_path
        params = argparse.Namespace(
            **SETTINGS, dump_path=self.tmp.name, multi_gpu=False, fp16=False, n_gpu=0, local_rank=0, is_master=True,
            group_by_size=False, batch_size=batch_size, mlm=False, n_epoch=1, restrict_ce_to_mask=False,
            special_tok_ids={"unk_token": eos_id, "bos_token": eos_id, "eos_token": eos_id},
            max_model_input_size=windows.block_size)
        order = SampleOrder(len(windows), seed)
        sequences = []
        for sample in range(max_steps * batch_size):  # the windows our loop trains on, in its order
            seq = windows.batch([order.window_of(sample)])[0][0].numpy().astype(np.int64)
            seq[0] = seq[-1] = eos_id  # the example wraps every sequence in <|endoftext|>
            sequences.append(seq)
        self.dataset = module.LmSeqsDataset(params, sequences)
        if len(self.dataset) != len(sequences):
            raise SystemExit(f"the example's LmSeqsDataset kept {len(self.dataset)} of {len(sequences)} sequences")
        # its teacher stays fp32 (its fp16 needs apex); under our autocast like its student
        self.distiller = module.Distiller(params=params, dataset=self.dataset, token_probs=None,
                                          student=hf_gpt2(student_gpt, device), teacher=hf_gpt2(teacher_gpt, device))
        self.distiller.student.train()  # as its train() starts
        self.distiller.teacher.eval()
        dtype = {"bf16": torch.bfloat16, "fp16": torch.float16}.get(precision)
        self.ctx = torch.autocast(device.type, dtype=dtype) if dtype else contextlib.nullcontext()

    def step(self) -> None:
        first = self.done * self.batch_size
        batch = self.dataset.batch_sequences([self.dataset[i] for i in range(first, first + self.batch_size)])
        batch = tuple(t.to(self.device) for t in batch)  # as its train() does on GPUs
        token_ids, attn_mask, lm_labels = self.distiller.prepare_batch_clm(batch=batch)
        with self.ctx:
            self.distiller.step(input_ids=token_ids, attention_mask=attn_mask, lm_labels=lm_labels)
        self.done += 1

    @property
    def last_loss(self) -> float:
        return float(self.distiller.last_loss)

    def close(self) -> None:
        self.distiller.tensorboard.close()
        self.tmp.cleanup()
