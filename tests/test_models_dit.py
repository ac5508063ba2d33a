"""DiT and control branch: control zero-init, RoPE per-view restart, view permutation,
per-view cross-attention isolation, sequence-parallel shard points and attention backends."""

from __future__ import annotations

import dataclasses
import math

import pytest
import torch

from avsim.models.attention import (
    CrossAttention,
    FlashAttnBackend,
    SDPABackend,
    group_tokens_by_view,
    set_attention_backend,
)
from avsim.models.checkpoint import load_into
from avsim.models.config import debug
from avsim.models.control import TransferDiT
from avsim.models.dit import DiT, Patchify
from avsim.models.rope import apply_rope, axis_dims, multiview_rope_angles, rope_angles

CFG = debug().dit
V, T, H, W = 3, 2, 4, 6  # views, latent frames per view, latent H, W


def _inputs(seed: int = 0, views: int = V, dtype=torch.float64):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(1, 16, views * T, H, W, generator=g, dtype=dtype)
    ctx = torch.randn(1, views * CFG.text_tokens_per_view, CFG.crossattn_proj_in_channels, generator=g, dtype=dtype)
    ctrl = torch.randn(1, 16, views * T, H, W, generator=g, dtype=dtype)
    cond = torch.zeros(1, 1, views * T, H, W, dtype=dtype)
    cond[:, :, ::T] = 1.0
    return x, ctx, ctrl, cond


def _transfer(seed: int = 0, random_projections: bool = False) -> TransferDiT:
    torch.manual_seed(seed)
    model = TransferDiT(CFG).double().eval()
    if random_projections:
        with torch.no_grad():
            for name, p in model.named_parameters():
                if "before_proj" in name or "after_proj" in name:
                    p.normal_(0, 0.1)
    return model


T_STEP = torch.tensor([700.0], dtype=torch.float64)


@torch.no_grad()
def test_zero_initialised_control_equals_base_exactly():
    base = DiT(CFG).double().eval()
    transfer = TransferDiT(CFG).double().eval()
    load_into(transfer, base.state_dict(), strict=False)
    x, ctx, ctrl, cond = _inputs()
    out_base = base(x, T_STEP, ctx, cond, num_views=V)
    out_transfer = transfer(x, T_STEP, ctx, cond, num_views=V, control_latent=ctrl, control_weight=1.0)
    assert torch.equal(out_base, out_transfer)
    assert out_base.shape == x.shape and out_base.dtype == torch.float64


@pytest.mark.slow
@torch.no_grad()
def test_control_weight_zero_equals_base_exactly():
    model = _transfer(random_projections=True)
    x, ctx, ctrl, cond = _inputs()
    without = model(x, T_STEP, ctx, cond, num_views=V)
    weight0 = model(x, T_STEP, ctx, cond, num_views=V, control_latent=ctrl, control_weight=0.0)
    weight1 = model(x, T_STEP, ctx, cond, num_views=V, control_latent=ctrl, control_weight=1.0)
    half = model(x, T_STEP, ctx, cond, num_views=V, control_latent=ctrl, control_weight=0.5)
    assert torch.equal(without, weight0)
    assert (weight1 - without).abs().max() > 1e-3
    assert (half - without).abs().max() < (weight1 - without).abs().max()


def test_control_blocks_start_as_copies_of_base_blocks():
    model = TransferDiT(CFG)
    for k, block in enumerate(model.control_blocks):
        for name, p in model.blocks[k].named_parameters():
            assert torch.equal(dict(block.named_parameters())[name], p)
        assert torch.count_nonzero(block.after_proj.weight) == 0 and torch.count_nonzero(block.after_proj.bias) == 0
    assert torch.count_nonzero(model.control_blocks[0].before_proj.weight) == 0
    assert model.control_blocks[1].before_proj is None
    assert not any("before_proj" in k for k in model.control_blocks[1].state_dict())


def test_rope_axis_split_and_frequencies_follow_spec():
    assert axis_dims(128) == (44, 42, 42)
    full = dataclasses.replace(CFG, model_channels=2048, num_heads=16)
    ang = rope_angles(full, 3, 2, 5).double()
    assert ang.shape == (30, 128)
    assert torch.equal(ang[:, :64], ang[:, 64:])  # rotate-half layout: the block twice
    # token (t=2, h=1, w=3): angle of the i-th t frequency is 2 / theta_t^(2i/44)
    tok = (2 * 2 + 1) * 5 + 3
    theta_t = 10000.0 * (1 / 3) ** (44 / 42)
    theta_s = 10000.0 * 3.0 ** (42 / 40)
    for i in (0, 5, 21):
        assert ang[tok, i].item() == pytest.approx(2 / theta_t ** (2 * i / 44), rel=1e-6)
    for i in (0, 7, 20):
        assert ang[tok, 22 + i].item() == pytest.approx(1 / theta_s ** (2 * i / 42), rel=1e-6)
        assert ang[tok, 43 + i].item() == pytest.approx(3 / theta_s ** (2 * i / 42), rel=1e-6)


def test_rope_positions_restart_in_every_view():
    table = multiview_rope_angles(CFG, V, T, H // 2, W // 2)
    per_view = T * (H // 2) * (W // 2)
    assert table.shape == (V * per_view, CFG.head_dim)
    for v in range(1, V):
        assert torch.equal(table[v * per_view : (v + 1) * per_view], table[:per_view])
    # within a view time advances: frame 1 differs from frame 0
    assert not torch.equal(table[: per_view // T], table[per_view // T : 2 * per_view // T])


def test_rope_scores_depend_only_on_relative_position():
    g = torch.Generator().manual_seed(0)
    q = torch.randn(1, 1, 1, CFG.head_dim, generator=g, dtype=torch.float64)
    k = torch.randn(1, 1, 1, CFG.head_dim, generator=g, dtype=torch.float64)
    table = rope_angles(CFG, 6, 1, 1).double()

    def score(i, j):
        return (apply_rope(q, table[i : i + 1]) * apply_rope(k, table[j : j + 1])).sum().item()

    assert score(3, 1) == pytest.approx(score(4, 2), abs=1e-5)  # table is float32
    assert score(3, 1) != pytest.approx(score(3, 2), abs=1e-6)


@pytest.mark.slow
@torch.no_grad()
def test_swapping_two_views_permutes_the_output():
    model = _transfer(random_projections=True)
    x, ctx, ctrl, cond = _inputs()
    n = CFG.text_tokens_per_view
    order = [2, 1, 0]

    def permute_frames(t):
        return torch.cat([t[:, :, v * T : (v + 1) * T] for v in order], dim=2)

    ctx_p = torch.cat([ctx[:, v * n : (v + 1) * n] for v in order], dim=1)
    out = model(x, T_STEP, ctx, cond, num_views=V, view_indices=torch.tensor([0, 1, 2]), control_latent=ctrl)
    out_p = model(permute_frames(x), T_STEP, ctx_p, permute_frames(cond), num_views=V,
                  view_indices=torch.tensor(order), control_latent=permute_frames(ctrl))
    torch.testing.assert_close(out_p, permute_frames(out), rtol=1e-5, atol=1e-5)
    # without swapping the view embeddings the result is a different prediction
    out_wrong = model(permute_frames(x), T_STEP, ctx_p, permute_frames(cond), num_views=V,
                      view_indices=torch.tensor([0, 1, 2]), control_latent=permute_frames(ctrl))
    assert (out_wrong - permute_frames(out)).abs().max() > 1e-4


@torch.no_grad()
def test_cross_attention_isolates_views():
    torch.manual_seed(0)
    layer = CrossAttention(CFG.model_channels, CFG.crossattn_emb_channels, CFG.num_heads).double()
    views, per_view, n = 5, 7, 4
    x = torch.randn(2, views * per_view, CFG.model_channels, dtype=torch.float64)
    ctx = torch.randn(2, views * n, CFG.crossattn_emb_channels, dtype=torch.float64)
    token_view = torch.arange(views).repeat_interleave(per_view)
    groups = group_tokens_by_view(token_view)
    out = layer(x, ctx, groups, n)
    ctx2 = ctx.clone()
    ctx2[:, 3 * n : 4 * n] += torch.randn(2, n, CFG.crossattn_emb_channels, dtype=torch.float64)
    out2 = layer(x, ctx2, groups, n)
    other = token_view != 3
    assert torch.equal(out[:, other], out2[:, other])
    assert (out[:, ~other] - out2[:, ~other]).abs().min() > 0
    # same result for a shuffled subset of tokens (a sequence shard)
    perm = torch.randperm(views * per_view)[:20]
    shard = layer(x[:, perm], ctx, group_tokens_by_view(token_view[perm]), n)
    torch.testing.assert_close(shard, out[:, perm], rtol=1e-12, atol=1e-12)


class _PermutingSequenceParallel:
    """A one-process stand-in for context parallelism: 'shards' by permuting the tokens."""

    def __init__(self, perm: torch.Tensor) -> None:
        self.perm, self.inverse = perm, torch.argsort(perm)
        self.begun: list[tuple[int, int, int]] = []
        self.sharded: list[tuple[int, ...]] = []

    def begin(self, num_views: int, frames: int, tokens_per_frame: int) -> None:
        self.begun.append((num_views, frames, tokens_per_frame))

    def shard(self, x: torch.Tensor, dim: int) -> torch.Tensor:
        self.sharded.append(tuple(x.shape))
        return x.index_select(dim, self.perm)

    def gather(self, x: torch.Tensor) -> torch.Tensor:
        return x[:, self.inverse]


@pytest.mark.slow
@torch.no_grad()
def test_sequence_parallel_allows_any_token_split():
    model = _transfer(random_projections=True)
    x, ctx, ctrl, cond = _inputs()
    ref = model(x, T_STEP, ctx, cond, num_views=V, control_latent=ctrl)
    length = V * T * (H // 2) * (W // 2)
    sp = _PermutingSequenceParallel(torch.randperm(length, generator=torch.Generator().manual_seed(1)))
    model.set_sequence_parallel(sp)
    out = model(x, T_STEP, ctx, cond, num_views=V, control_latent=ctrl)
    assert sp.begun == [(V, T, (H // 2) * (W // 2))]
    # base tokens, RoPE, per-token view index and the control stream
    assert sorted(s[1] if len(s) == 3 else s[0] for s in sp.sharded) == [length] * 4
    torch.testing.assert_close(out, ref, rtol=1e-10, atol=1e-10)
    model.set_sequence_parallel(None)
    assert torch.equal(model(x, T_STEP, ctx, cond, num_views=V, control_latent=ctrl), ref)


@pytest.mark.slow
@torch.no_grad()
@pytest.mark.parametrize("model_cls", [DiT, TransferDiT])
def test_sequence_parallel_sees_num_views_however_it_is_passed(model_cls):
    """The pipeline and training call the model with num_views by keyword; positional calls
    (the forward's parameter order) must reach the split plan just the same."""
    torch.manual_seed(0)
    model = model_cls(CFG).double().eval()
    x, ctx, ctrl, cond = _inputs()
    length = V * T * (H // 2) * (W // 2)
    sp = _PermutingSequenceParallel(torch.randperm(length, generator=torch.Generator().manual_seed(2)))
    model.set_sequence_parallel(sp)
    vi = torch.arange(V)
    pad = torch.zeros(1, 1, H, W, dtype=torch.float64)
    control = ctrl if model_cls is TransferDiT else None
    positional = model(x, T_STEP, ctx, cond, V, vi, control, 1.0, pad)
    keyword = model(x, T_STEP, ctx, condition_mask=cond, num_views=V, view_indices=vi, control_latent=control,
                    control_weight=1.0, padding_mask=pad)
    everything_by_name = model(x=x, timesteps=T_STEP, text_context=ctx, condition_mask=cond, num_views=V,
                               view_indices=vi, control_latent=control, padding_mask=pad)
    assert sp.begun == [(V, T, (H // 2) * (W // 2))] * 3
    assert torch.equal(positional, keyword) and torch.equal(keyword, everything_by_name)
    model.set_sequence_parallel(None)
    torch.testing.assert_close(model(x, T_STEP, ctx, cond, V, vi, control, 1.0, pad), keyword, rtol=1e-10, atol=1e-10)


def test_attention_backend_hook_sees_sequence_major_tensors():
    model = _transfer()
    seen = []

    class Recording:
        def __call__(self, q, k, v):
            seen.append(q.shape)
            return SDPABackend()(q, k, v)

    assert set_attention_backend(model, Recording()) == CFG.num_blocks + CFG.num_control_blocks
    x, ctx, ctrl, cond = _inputs()
    with torch.no_grad():
        model(x, T_STEP, ctx, cond, num_views=V, control_latent=ctrl)
    tokens = V * T * (H // 2) * (W // 2)
    assert seen and all(s == (1, tokens, CFG.num_heads, CFG.head_dim) for s in seen)
    assert all(isinstance(m.backend, SDPABackend) for m in model.modules() if isinstance(m, CrossAttention))
    assert "backend" not in "".join(model.state_dict())
    n_all = set_attention_backend(model, SDPABackend(), self_attention_only=False)
    assert n_all == 2 * (CFG.num_blocks + CFG.num_control_blocks)


def test_flash_backend_falls_back_to_sdpa_on_cpu():
    g = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(1, 9, 2, 8, generator=g) for _ in range(3))
    torch.testing.assert_close(FlashAttnBackend()(q, k, v), SDPABackend()(q, k, v))
    ref = torch.softmax(torch.einsum("bqhd,bkhd->bhqk", q, k) / math.sqrt(8), -1)
    torch.testing.assert_close(SDPABackend()(q, k, v), torch.einsum("bhqk,bkhd->bqhd", ref, v), rtol=1e-5, atol=1e-5)


def test_patch_embedding_feature_order_and_unpatchify():
    x = torch.arange(2 * 3 * 2 * 4 * 4, dtype=torch.float64).reshape(2, 3, 2, 4, 4)
    tokens = Patchify(2, 1)(x)
    # token (t=1, h=0, w=1), feature c*4 + dy*2 + dx
    tok = tokens[0, 1 * 4 + 0 * 2 + 1]
    assert tok[2 * 4 + 1 * 2 + 0].item() == x[0, 2, 1, 1, 2].item()
    model = DiT(dataclasses.replace(CFG, latent_channels=3))
    # output features ordered (ph, pw, pt, C), C innermost
    feats = torch.zeros(2, 2 * 2 * 2, 2 * 2 * 1 * 3, dtype=torch.float64)
    feats[0, 1 * 4 + 0 * 2 + 1, (1 * 2 + 0) * 3 + 2] = 1.0  # t=1,h=0,w=1, ph=1, pw=0, C=2
    out = model.unpatchify(feats, 2, 2, 2)
    assert out.shape == (2, 3, 2, 4, 4)
    assert out[0, 2, 1, 1, 2].item() == 1.0 and out.sum().item() == 1.0


@pytest.mark.slow
@torch.no_grad()
def test_projected_text_is_equivalent_and_shapes_are_checked():
    model = _transfer(random_projections=True)
    x, ctx, ctrl, cond = _inputs(views=2)
    raw = model(x, T_STEP, ctx, cond, num_views=2, control_latent=ctrl)
    projected = model(x, T_STEP, model.project_text(ctx), cond, num_views=2, control_latent=ctrl)
    assert torch.equal(raw, projected)
    with pytest.raises(ValueError, match="timesteps"):
        model(x, torch.tensor([[1.0]]), ctx, cond, num_views=2)
    with pytest.raises(ValueError, match="num_views"):
        model(x[:, :, :3], T_STEP, ctx, cond[:, :, :3], num_views=2)


@pytest.mark.slow
@torch.no_grad()
def test_bf16_parameters_keep_fp32_islands():
    model = _transfer(random_projections=True).to(torch.bfloat16)
    x, ctx, ctrl, cond = _inputs(dtype=torch.float32)
    out = model(x, T_STEP.float(), ctx, cond, num_views=V, control_latent=ctrl)
    ref = _transfer(random_projections=True).float()(x, T_STEP.float(), ctx, cond, num_views=V, control_latent=ctrl)
    assert out.dtype == torch.float32 and torch.isfinite(out).all()
    assert (out - ref).abs().mean() < 0.05 * ref.abs().mean()


# Golden output of diffusers 0.42.1 `CosmosTransformer3DModel` (an independent implementation of
# the Cosmos 2.x base DiT; not a dependency) for this test's single-view network and weights,
# mapped with the public conversion names, timestep 734 (fed to it as 0.734), float64. The
# control branch and the multi-view parts have no counterpart there.
GOLDEN_DIT = [5.076343933704727, -1.6769967516081854, 4.009167445508477, -5.904683193617007, -3.597722921091948,
              1.4563034464942597, 1.7338402603703706, -0.26931544846232225, -0.6615292241410191, 3.463927671427045,
              -1.222953754081338, -2.494696818269143, -3.263289450008747, 1.5749427664289877, 0.6457051733325002,
              -9.920882669993073, -6.346044627201042, 0.08395450186229883, -0.6535932946621169, 6.76734221425055,
              -1.1026556883432366, -0.2991615565520188, 0.18766899464163994, 2.6397652560029146, -4.25029965594928,
              2.8823597569744224, 8.070244380576318, 4.714431025694375, -0.896045919949758]
GOLDEN_DIT_SUM = 269.47031027554607


@pytest.mark.slow
@torch.no_grad()
def test_base_network_matches_an_independent_implementation():
    cfg = dataclasses.replace(CFG, num_view_embeddings=0, view_condition_dim=0)
    torch.manual_seed(0)
    model = DiT(cfg).double().eval()
    for p in model.parameters():
        p.normal_(0, 0.2)
    g = torch.Generator().manual_seed(1)
    x = torch.randn(1, 16, 3, 4, 6, generator=g, dtype=torch.float64)
    ctx = torch.randn(1, 8, 48, generator=g, dtype=torch.float64)
    cond = torch.zeros(1, 1, 3, 4, 6, dtype=torch.float64)
    cond[:, :, 0] = 1
    out = model(x, torch.tensor([734.0], dtype=torch.float64), ctx, cond, num_views=1).double()
    torch.testing.assert_close(out.flatten()[::41], torch.tensor(GOLDEN_DIT, dtype=torch.float64), rtol=0, atol=2e-5)
    assert out.sum().item() == pytest.approx(GOLDEN_DIT_SUM, abs=1e-3)
