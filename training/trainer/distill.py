"""Knowledge distillation, DistilGPT2's recipe: `python -m training distill --distill-from TEACHER ...`
(the same as `train --distill-from TEACHER`; everything `train` does holds: DDP, resume, SIGTERM,
checkpoints, export, TensorBoard, MFU).

Student: the teacher's configuration with half its layers (or --n-layer/--n-embd/--n-head), and,
when the width matches, the teacher's embeddings, final LayerNorm and layers spread evenly over its
depth (12 -> 6 takes layers 0, 2, 4, 7, 9, 11, as Hugging Face's DistilGPT2 extraction did).
Loss per token, as in Hugging Face's distillation example (examples/research_projects/distillation):

    alpha_kd * T^2 * KL(teacher_T || student_T) + alpha_lm * CE(student, next token)
    + alpha_cos * (1 - cos(student's last hidden state, teacher's))

with the softmaxes at temperature T. Defaults are that example's published DistilBERT/DistilGPT2
settings: alpha_ce (our alpha_kd) 5.0, alpha_mlm/clm (our alpha_lm) 2.0, alpha_cos 1.0, T = 2.0.
The teacher is frozen, in eval mode, outside the optimizer, in bf16 on GPUs (fp16 before Ampere); its
forward runs under the student's autocast (so in bf16 on CPUs that have it, from fp32 weights: the
student's initial weights are copied from them unrounded) and is compiled when the student is.
`train/loss` stays the student's cross-entropy (comparable with plain training and `val/loss`); the
three terms are logged as distill/kd, distill/lm, distill/cos.
"""

from __future__ import annotations

import copy
import functools
from dataclasses import dataclass
from pathlib import Path

import torch
import torch.nn.functional as F

from training.data import tokenizer as tokenizers
from training.data.dataset import DataMeta
from training.model.build import create_gpt, load_pretrained
from training.model.loss import cross_entropy
from training.observability import metrics
from training.trainer.step import Stepper, resolve_compile
from trainstack.contract.config import DistillConfig, ModelChoice
from trainstack.contract.errors import UserError


@dataclass(frozen=True)
class LossWeights:
    kd: float
    lm: float
    cos: float
    temperature: float


def weights_from(settings: DistillConfig) -> LossWeights:
    """The loss weights of the flags (their ranges and combinations are checked by the CLI)."""
    return LossWeights(settings.alpha_kd, settings.alpha_lm, settings.alpha_cos, settings.temperature)


def load_teacher(settings: DistillConfig, data: DataMeta, device: torch.device):
    """The frozen teacher: a run (its export or newest checkpoint), an export, or a GPT-2 from_pretrained loads."""
    source = settings.teacher
    path = Path(source)
    if path.exists():
        from training.commands.sample import load_for_generation
        from training.model.gpt import unsupported

        hf, tokenizer = load_for_generation(path)
        if hf.config.model_type != "gpt2" or unsupported(hf.config):
            raise UserError(f"--distill-from {source} is not a standard GPT-2 model "
                            f"({unsupported(hf.config) or hf.config.model_type}); the teacher must be one")
        teacher = create_gpt(hf.config)  # the lean model train.py trains: same weights, one forward for both
        teacher.load_state_dict(hf.state_dict())
    elif path.is_absolute() or source.startswith((".", "~")):
        raise UserError(f"--distill-from {source} does not exist; pass a run directory, an export or a hub name")
    else:
        teacher = load_pretrained(source, "--distill-from")
        tokenizer = tokenizers.load(source, "--distill-from")
    if tokenizers.fingerprint(tokenizer) != data.tokenizer_fingerprint:
        raise UserError(f"--distill-from {source} uses a different tokenizer than {data.root}; prepare the data with "
                        f"the teacher's tokenizer (--tokenizer {source}, or its RUN_DIR/tokenizer)")
    if data.vocab_size > teacher.config.vocab_size:
        raise UserError(f"{data.root} has a {data.vocab_size}-token vocabulary but the teacher only "
                        f"{teacher.config.vocab_size} embeddings; prepare the data with the teacher's tokenizer")
    dtype = torch.float32
    if device.type == "cuda":
        dtype = torch.bfloat16 if torch.cuda.is_bf16_supported() else torch.float16
    teacher.config.use_cache = False
    return teacher.requires_grad_(False).eval().to(device=device, dtype=dtype)


def teacher_layers(n_teacher: int, n_student: int) -> list[int]:
    """Teacher layers spread evenly over its depth, first and last included."""
    if n_student == 1:
        return [0]
    return [int(i * (n_teacher - 1) / (n_student - 1) + 0.5) for i in range(n_student)]


def make_student(teacher, choice: ModelChoice, settings: DistillConfig):
    t = teacher.config
    config = copy.deepcopy(t)
    config.n_layer = choice.n_layer or max(1, t.n_layer // 2)
    config.n_embd = choice.n_embd or t.n_embd
    config.n_head = choice.n_head or t.n_head
    config.resid_pdrop = config.embd_pdrop = config.attn_pdrop = choice.dropout
    config.use_cache = False
    if config.n_layer > t.n_layer:
        raise UserError(f"--n-layer {config.n_layer} is more than the teacher's {t.n_layer} layers; a student is smaller")
    if config.n_embd % config.n_head:
        raise UserError(f"--n-embd {config.n_embd} is not divisible by --n-head {config.n_head}")
    if config.n_embd != t.n_embd and settings.alpha_cos > 0:
        raise UserError(f"the cosine loss compares hidden states, so it needs the teacher's width ({t.n_embd}), "
                        f"not --n-embd {config.n_embd}; pass --alpha-cos 0")
    student = create_gpt(config)
    if config.n_embd == t.n_embd and config.n_head == t.n_head:
        source = {k: v.detach().to("cpu", torch.float32) for k, v in teacher.state_dict().items()}
        state = student.state_dict()
        for name in ("transformer.wte.weight", "transformer.wpe.weight", "transformer.ln_f.weight",
                     "transformer.ln_f.bias"):
            state[name] = source[name]
        for mine, theirs in enumerate(teacher_layers(t.n_layer, config.n_layer)):
            prefix = f"transformer.h.{mine}."
            for key in [k for k in state if k.startswith(prefix)]:
                state[key] = source[f"transformer.h.{theirs}.{key[len(prefix):]}"]
        student.load_state_dict(state)  # lm_head is tied to wte
    return student


def describe(source: str, teacher, student) -> str:
    """The line a distillation starts with: the teacher, the student's shape, and where its layers come from."""
    shape = f"{student.n_layer} layers x {student.n_embd} wide, {student.n_head} heads"
    if student.n_embd != teacher.n_embd or student.n_head != teacher.n_head:
        start = "its weights random (another width than the teacher's)"
    else:
        pairs = ", ".join(f"{mine}<-{theirs}" for mine, theirs in
                          enumerate(teacher_layers(teacher.n_layer, student.n_layer)))
        start = f"its layers copied from the teacher's (student<-teacher: {pairs}), embeddings and final LayerNorm too"
    return (f"distilling teacher {source} ({teacher.n_layer} layers x {teacher.n_embd} wide, {teacher.n_head} heads) "
            f"into a student of {shape}, {start}")


def teacher_flops_per_token(teacher, block_size: int) -> float:
    """The teacher's forward pass: a third of the forward+backward FLOPs of metrics.flops_per_token."""
    c = teacher.config
    return metrics.flops_per_token(metrics.count_params(teacher), c.n_layer, c.n_embd, block_size) / 3.0


def distillation_loss(s_logits, t_logits, targets, s_hidden, t_hidden, w: LossWeights):
    """(loss whose value is the LM cross-entropy and whose gradient is the distillation objective's,
    tensor of the three terms [kd, lm, cos]) per token."""
    vocab = s_logits.size(-1)
    s = s_logits.float().view(-1, vocab)
    t = t_logits.float().view(-1, vocab)
    # eager: the one-pass backward (training/model/loss.py); compiled (DistillStepper): inductor fuses F.cross_entropy
    lm = (F.cross_entropy if torch.compiler.is_compiling() else cross_entropy)(s, targets.reshape(-1))
    temp = w.temperature
    kd = F.kl_div(F.log_softmax(s / temp, dim=-1), F.log_softmax(t / temp, dim=-1), log_target=True,
                  reduction="batchmean") * temp * temp
    if w.cos > 0:
        cos = (1.0 - F.cosine_similarity(s_hidden.float().flatten(0, 1), t_hidden.float().flatten(0, 1), dim=-1)).mean()
    else:
        cos = torch.zeros((), device=s.device)
    objective = w.kd * kd + w.lm * lm + w.cos * cos
    return objective + (lm - objective).detach(), torch.stack([kd, lm, cos]).detach()


class DistillStepper(Stepper):
    """Stepper whose training loss is the distillation loss; evaluation stays the plain cross-entropy.

    With `compiled` (train's --compile), the teacher's forward and the loss are compiled like the
    student: eager, the loss's passes over the (tokens x vocabulary) logits are a large share of a
    step on CPU (docs/BENCHMARKS.md, bench/distill_step.py)."""

    def __init__(self, *args, teacher, weights: LossWeights, compiled: bool = False, **kwargs):
        super().__init__(*args, **kwargs)
        self.teacher = torch.compile(teacher) if compiled else teacher
        self.loss = torch.compile(distillation_loss) if compiled else distillation_loss
        self.weights = weights
        self._parts = torch.zeros(3, device=self.device)
        self._count = 0

    def forward_loss(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        if not torch.is_grad_enabled():
            return super().forward_loss(x, y)
        with torch.no_grad(), self.autocast:  # the student's precision (on CPUs the teacher's weights are fp32)
            t_logits, t_hidden = self.teacher(x, return_hidden=True)
        with self.autocast:
            s_logits, s_hidden = self.model(x, return_hidden=True)
        loss, parts = self.loss(s_logits, t_logits, y, s_hidden, t_hidden, self.weights)
        self._parts += parts
        self._count += 1
        return loss

    def pop_parts(self) -> dict[str, float]:
        """Mean of each term since the last call (this rank's micro-batches)."""
        kd, lm, cos = (self._parts / max(self._count, 1)).tolist()
        self._parts.zero_()
        self._count = 0
        return {"distill/kd": kd, "distill/lm": lm, "distill/cos": cos}


def stepper_factory(teacher, settings: DistillConfig, compile_: str):
    """DistillStepper's constructor with the teacher, the loss weights and --compile bound (called like Stepper's)."""
    return functools.partial(DistillStepper, teacher=teacher, weights=weights_from(settings),
                             compiled=resolve_compile(compile_))
