"""What train compiles: each block and the head with its loss by default (TRAINSTACK_COMPILE_REGIONS=0:
the whole model), and graphs that do not depend on DDP, so a restart with another world size is warm."""

from __future__ import annotations

import pytest
import torch
import torch.distributed as dist
from torch._dynamo.utils import counters
from torch.nn.parallel import DistributedDataParallel

from training.compile_cache import regions
from training.model.build import config_for, create_gpt, resolve_shape


def _model(n_embd=64, vocab=8192):
    torch.manual_seed(0)
    return create_gpt(config_for(resolve_shape("tiny", 2, n_embd, 2, 16), vocab, dropout=0.0, eos_token_id=0))


def _compiled(module: torch.nn.Module) -> bool:
    return getattr(module, "_compiled_call_impl", None) is not None


def test_the_default_compiles_each_block_and_the_head_with_its_loss(monkeypatch):
    monkeypatch.delenv(regions.REGIONS, raising=False)
    model = _model()
    names = list(model.state_dict())
    assert regions.compile_in_place(model) is model
    assert all(_compiled(block) for block in model.transformer.h)
    assert hasattr(model.head_loss, "_torchdynamo_orig_callable")  # the second region: ln_f, head, loss
    assert not _compiled(model) and list(model.state_dict()) == names  # checkpoints keep the plain names


def test_regions_0_compiles_the_whole_model(monkeypatch):
    monkeypatch.setenv(regions.REGIONS, "0")
    model = _model()
    regions.compile_in_place(model)
    assert _compiled(model) and not any(_compiled(block) for block in model.transformer.h)


def test_a_model_without_head_loss_is_compiled_whole(monkeypatch):
    """Hugging Face's GPT-2 (bench/gpu.py's hf_model peer): its blocks alone would leave the head and loss eager."""
    from training.model.build import create_model

    monkeypatch.delenv(regions.REGIONS, raising=False)
    model = create_model(config_for(resolve_shape("tiny", 1, 32, 2, 16), 256, dropout=0.0, eos_token_id=0))
    regions.compile_in_place(model)
    assert _compiled(model) and not any(_compiled(block) for block in model.transformer.h)


@pytest.mark.timeout(600)
def test_a_start_without_ddp_reuses_the_graphs_compiled_under_ddp(tmp_path, monkeypatch):
    """A lost node: the run trained under DDP (2 workers), its survivor restarts alone, without DDP. Its
    graphs must be the ones compiled before (a cache hit), and the compiled loss must be the eager one.
    DDP's gradient buckets are made small (1 MB, the model 2.6 MB) as a large model's are, which is
    what made Dynamo's DDPOptimizer split the graph, and a start alone compile afresh."""
    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv(regions.REGIONS, raising=False)
    x = torch.randint(0, 8192, (2, 16))
    expected = _model()(x, x).item()

    def step(wrap: bool) -> float:
        model = regions.compile_in_place(_model())
        run = DistributedDataParallel(model, bucket_cap_mb=1) if wrap else model
        loss = run(x, x)
        loss.backward()
        return loss.item()

    dist.init_process_group("gloo", init_method=f"file://{tmp_path / 'store'}", rank=0, world_size=1)
    try:
        torch._dynamo.reset()
        assert step(wrap=True) == pytest.approx(expected, abs=1e-4)
    finally:
        dist.destroy_process_group()
    torch._dynamo.reset()
    counters.clear()
    assert step(wrap=False) == pytest.approx(expected, abs=1e-4)
    assert counters["inductor"]["fxgraph_cache_miss"] == 0, dict(counters["inductor"])
    assert counters["aot_autograd"]["autograd_cache_hit"] >= 2, dict(counters["aot_autograd"])
