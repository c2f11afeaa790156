"""Distillation: the student beats the same shape trained from scratch; the recipe's parts; bad input."""

from __future__ import annotations

import json

import pytest
import torch

from tests.support.training_runs import TINY, cli, losses, one_line_error, train
from training.trainer import distill
from trainstack.contract.config import DistillConfig, ModelChoice

TEACHER_SHAPE = ["--n-layer", "4"]  # TINY is 64 wide, 2 heads, block 32
STUDENT_STEPS = "30"
EVAL = ["--eval-every", "1000", "--eval-samples", "64"]


@pytest.fixture(scope="module")
def teacher(data_dir, tmp_path_factory):
    run = tmp_path_factory.mktemp("teacher") / "run"
    code, out, err = train(data_dir, run, *TEACHER_SHAPE, "--max-steps", "150", "--lr", "3e-3", "--min-lr", "3e-4",
                           *EVAL)
    assert code == 0, err
    return run


def test_distilled_student_beats_the_same_student_trained_from_scratch(data_dir, teacher, tmp_path):
    common = ["--n-layer", "2", "--max-steps", STUDENT_STEPS, "--seed", "7", "--no-export", *EVAL]
    code, out, err = cli(["distill", "--distill-from", str(teacher), "--data", str(data_dir), "--out",
                          str(tmp_path / "student"), *TINY, *common])
    assert code == 0, err
    code, out, err = train(data_dir, tmp_path / "scratch", *common)
    assert code == 0, err
    distilled = losses(tmp_path / "student", "val/loss")[int(STUDENT_STEPS)]
    scratch = losses(tmp_path / "scratch", "val/loss")[int(STUDENT_STEPS)]
    teacher_loss = losses(teacher, "val/loss")[150]
    # Same steps, tokens, seed and data order; measured on the same 64 validation windows.
    assert distilled < scratch - 0.1, (distilled, scratch, teacher_loss)
    kd = losses(tmp_path / "student", "distill/kd")
    assert kd and all(v >= 0 for v in kd.values()), "the KL term is logged"


def test_student_starts_from_the_teachers_spread_layers(data_dir, teacher):
    assert distill.teacher_layers(12, 6) == [0, 2, 4, 7, 9, 11]  # Hugging Face's DistilGPT2 extraction
    assert distill.teacher_layers(4, 2) == [0, 3] and distill.teacher_layers(6, 1) == [0]
    from training.commands.sample import load_for_generation

    model, _ = load_for_generation(teacher)
    student = distill.make_student(model, ModelChoice("gpt2", None, None, None, None, 0.0, None),
                                   DistillConfig(str(teacher), 5.0, 2.0, 1.0, 2.0))
    assert student.config.n_layer == 2
    t, s = model.state_dict(), student.state_dict()
    assert torch.equal(s["transformer.wte.weight"], t["transformer.wte.weight"])
    assert torch.equal(s["transformer.h.1.mlp.c_fc.weight"], t["transformer.h.3.mlp.c_fc.weight"])
    assert torch.equal(s["lm_head.weight"], s["transformer.wte.weight"]), "the LM head stays tied"


def test_the_loss_is_the_published_recipe():
    torch.manual_seed(0)
    s_logits, t_logits = torch.randn(2, 5, 11, requires_grad=True), torch.randn(2, 5, 11)
    s_hidden, t_hidden = torch.randn(2, 5, 8, requires_grad=True), torch.randn(2, 5, 8)
    y = torch.randint(0, 11, (2, 5))
    w = distill.LossWeights(kd=5.0, lm=2.0, cos=1.0, temperature=2.0)
    loss, (kd, lm, cos) = distill.distillation_loss(s_logits, t_logits, y, s_hidden, t_hidden, w)
    # The reference: Hugging Face's distiller (KLDivLoss batchmean over tokens, CosineEmbeddingLoss target 1).
    s, t = s_logits.view(-1, 11), t_logits.view(-1, 11)
    ref_kd = torch.nn.KLDivLoss(reduction="batchmean")(torch.log_softmax(s / 2, -1), torch.softmax(t / 2, -1)) * 4
    ref_lm = torch.nn.functional.cross_entropy(s, y.view(-1))
    ref_cos = torch.nn.CosineEmbeddingLoss()(s_hidden.view(-1, 8), t_hidden.view(-1, 8), torch.ones(10))
    assert kd.item() == pytest.approx(ref_kd.item(), rel=1e-5)
    assert cos.item() == pytest.approx(ref_cos.item(), rel=1e-5)
    assert loss.item() == pytest.approx(ref_lm.item(), rel=1e-5), "the logged value is the LM loss"
    (grad,) = torch.autograd.grad(loss, s_logits)
    (ref_grad,) = torch.autograd.grad(5 * ref_kd + 2 * ref_lm + 1 * ref_cos, s_logits)
    assert torch.allclose(grad, ref_grad, atol=1e-6), "the gradient is the whole objective's"


def test_distill_resumes_and_exports_a_loadable_student(data_dir, teacher, tmp_path):
    from transformers import pipeline

    run = tmp_path / "student"
    args = ["distill", "--distill-from", str(teacher / "export"), "--data", str(data_dir), "--out", str(run), *TINY,
            "--checkpoint-every", "2"]
    assert cli([*args, "--max-steps", "2", "--no-export"])[0] == 0
    code, out, err = cli([*args, "--max-steps", "4"])
    assert code == 0, err
    assert "resumed from" in out and "step 2" in out
    config = json.loads((run / "export" / "config.json").read_text())
    assert config["n_layer"] == 2 and config["model_type"] == "gpt2"
    text = pipeline("text-generation", model=str(run / "export"))("def ", max_new_tokens=4, do_sample=False)
    assert text[0]["generated_text"].startswith("def ")
    one_line_error(cli(["train", "--data", str(data_dir), "--out", str(run), *TINY, "--max-steps", "6"]),
                   f"started with --distill-from {teacher / 'export'}", "neither --init-from nor --distill-from")
    # the run is a distillation: resuming it as plain training is refused, naming the flag it was started with


def test_distill_bad_input(data_dir, teacher, corpus_dir, tmp_path):
    base = ["--data", str(data_dir), "--out", str(tmp_path / "run"), *TINY, "--max-steps", "2"]

    def distill_with(*extra: str):
        return cli(["distill", *base, *extra])  # after TINY, so these flags win

    one_line_error(distill_with(), "--distill-from")
    one_line_error(distill_with("--distill-from", str(tmp_path / "none")), "does not exist")
    one_line_error(distill_with("--distill-from", str(teacher), "--init-from", str(teacher)), "exclude each other")
    one_line_error(distill_with("--distill-from", str(teacher), "--temperature", "0"), "--temperature")
    one_line_error(distill_with("--distill-from", str(teacher), "--n-embd", "32"), "--alpha-cos 0")
    one_line_error(distill_with("--distill-from", str(teacher), "--n-layer", "8"), "more than the teacher's")
    other = tmp_path / "other"
    assert cli(["prepare", "--data", str(corpus_dir / "glob.txt"), "--out", str(other), "--tokenizer", "train:300",
                "--num-proc", "1"])[0] == 0
    one_line_error(cli(["distill", "--distill-from", str(teacher), "--data", str(other), "--out",
                        str(tmp_path / "run"), *TINY]), "different tokenizer")
    assert not (tmp_path / "run").exists(), "refused before anything is written"


def _steppers(compiled: bool, precision: str):
    """A 2-layer teacher, its 1-layer student and the DistillStepper train.py would build around them."""
    from training.model.build import config_for
    from trainstack.contract.shapes import ModelShape

    torch.manual_seed(0)
    teacher = distill.create_gpt(config_for(ModelShape(2, 32, 2, 16), 128, 0.0, 0)).requires_grad_(False).eval()
    settings = DistillConfig("teacher", alpha_kd=5.0, alpha_lm=2.0, alpha_cos=1.0, temperature=2.0)
    student = distill.make_student(teacher, ModelChoice("gpt2", None, None, None, None, 0.0, None), settings)
    model = torch.compile(student) if compiled else student  # as train.py passes it
    stepper = distill.stepper_factory(teacher, settings, "on" if compiled else "off")(model, torch.optim.SGD(student.parameters()), torch.device("cpu"),
                                                     precision, 1.0, 1, 4)
    return teacher, student, stepper


def _loss_and_grads(student, stepper, x, y):
    loss = stepper.forward_loss(x, y)
    loss.backward()
    return loss.item(), {n: p.grad.clone() for n, p in student.named_parameters()}


def test_the_teacher_runs_in_the_students_precision():
    teacher, student, stepper = _steppers(compiled=False, precision="bf16")
    seen = []
    teacher.register_forward_hook(lambda module, inputs, out: seen.append(out[0].dtype))
    x = torch.randint(0, 128, (4, 16))
    stepper.forward_loss(x, torch.roll(x, -1, 1)).backward()
    assert seen == [torch.bfloat16], "the teacher's forward runs under the student's bf16 autocast"
    assert next(teacher.parameters()).dtype == torch.float32, "its weights stay as loaded"


def test_compiled_distillation_step_matches_the_eager_one():
    # --compile on compiles the teacher's forward and the loss too; same loss and gradients as eager
    x = torch.randint(0, 128, (4, 16))
    y = torch.roll(x, -1, 1)
    eager = _loss_and_grads(*_steppers(compiled=False, precision="fp32")[1:], x, y)
    compiled_student, compiled_stepper = _steppers(compiled=True, precision="fp32")[1:]
    assert isinstance(compiled_stepper.teacher, torch._dynamo.eval_frame.OptimizedModule)
    compiled = _loss_and_grads(compiled_student, compiled_stepper, x, y)
    assert compiled[0] == pytest.approx(eager[0], rel=1e-5)
    for name, grad in eager[1].items():
        assert torch.allclose(compiled[1][name], grad, rtol=1e-3, atol=1e-5), name


@pytest.mark.parametrize("inside", ["student", "export/student", "checkpoints/x", "tensorboard/a/b"])
@pytest.mark.parametrize("source", ["", "/export"])
def test_a_student_inside_the_teachers_run_is_refused_and_the_teacher_untouched(data_dir, teacher, inside, source):
    """Re-check 15: the reverse of a student that is its own teacher."""
    from tests.training.test_bad_input import tree

    before = tree(teacher)
    one_line_error(cli(["distill", "--data", str(data_dir), "--out", str(teacher / inside), *TINY, "--max-steps", "2",
                        "--distill-from", f"{teacher}{source}"]), "is inside the run directory", "of its own")
    assert tree(teacher) == before
