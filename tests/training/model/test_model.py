"""training/model/gpt.py is GPT2LMHeadModel's function with its weights; the compiled step trains like the eager one."""

from __future__ import annotations

import math

import pytest
import torch

from tests.support.training_runs import losses, train
from training.model.build import config_for, create_model, resolve_shape
from training.model.gpt import GPT, causal_attention


def _config(**overrides):
    shape = resolve_shape("tiny", n_layer=2, n_embd=64, n_head=4, block_size=48)
    config = config_for(shape, 300, 0.0, 0)
    for key, value in overrides.items():
        setattr(config, key, value)
    return config


@pytest.mark.parametrize("activation", ["gelu_pytorch_tanh", "gelu_new", "gelu"])
def test_same_weights_same_function_as_gpt2lmheadmodel(activation):
    config = _config(activation_function=activation)
    torch.manual_seed(0)
    ours = GPT(config).double()
    hf = create_model(config).double()
    assert list(ours.state_dict()) == list(hf.state_dict())
    hf.load_state_dict(ours.state_dict())
    x = torch.randint(0, 300, (3, 48))
    y = torch.randint(0, 300, (3, 48))
    expected = hf(input_ids=x).logits
    assert torch.allclose(ours(x), expected, rtol=1e-9, atol=1e-9)
    loss = ours(x, y)
    reference = torch.nn.functional.cross_entropy(expected.view(-1, config.vocab_size), y.view(-1))
    assert loss.item() == pytest.approx(reference.item(), rel=1e-9)
    (ours_grad,) = torch.autograd.grad(loss, ours.transformer.h[0].attn.c_attn.weight)
    (hf_grad,) = torch.autograd.grad(reference, hf.transformer.h[0].attn.c_attn.weight)
    assert torch.allclose(ours_grad, hf_grad, rtol=1e-7, atol=1e-10)


def test_export_round_trip_keeps_the_weights():
    torch.manual_seed(1)
    ours = GPT(_config())
    hf = ours.to_hf()
    assert hf.lm_head.weight.data_ptr() == hf.transformer.wte.weight.data_ptr(), "tied like GPT-2"
    for name, tensor in ours.state_dict().items():
        assert torch.equal(tensor, hf.state_dict()[name]), name


def test_initialisation_follows_gpt2():
    config = _config(n_layer=8, n_embd=256)
    torch.manual_seed(2)
    model = GPT(config)
    block = model.transformer.h[0]
    assert block.attn.c_attn.weight.std().item() == pytest.approx(0.02, rel=0.05)
    assert block.mlp.c_proj.weight.std().item() == pytest.approx(0.02 / math.sqrt(16), rel=0.05)
    assert torch.all(block.ln_1.weight == 1) and torch.all(block.attn.c_attn.bias == 0)


def test_materialised_cpu_attention_equals_sdpa():
    torch.manual_seed(3)
    q, k, v = (torch.randn(2, 3, 40, 16, dtype=torch.float64) for _ in range(3))
    expected = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)
    assert torch.allclose(causal_attention(q, k, v, 0.0), expected, rtol=1e-10, atol=1e-12)


def test_unsupported_configurations_are_refused():
    with pytest.raises(ValueError, match="scale_attn_by_inverse_layer_idx"):
        GPT(_config(scale_attn_by_inverse_layer_idx=True))


@pytest.mark.timeout(240)
def test_compiled_training_matches_eager(data_dir, tmp_path):
    """The default on every device: model and loss in one torch.compile graph (F.cross_entropy there)."""
    for mode in ("off", "on"):
        code, out, err = train(data_dir, tmp_path / mode, "--max-steps", "4", "--no-export", "--precision", "fp32",
                               "--compile", mode)
        assert code == 0, err
    eager, compiled = losses(tmp_path / "off"), losses(tmp_path / "on")
    assert sorted(compiled) == [1, 2, 3, 4]
    for step in range(1, 5):
        assert compiled[step] == pytest.approx(eager[step], rel=2e-4), step
