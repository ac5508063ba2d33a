"""Key/shape manifests of the released checkpoints and strict checkpoint loading."""

from __future__ import annotations

import json
import math
import pickle

import pytest
import torch

from avsim.core.errors import AvsimInputError
from avsim.models.checkpoint import (
    TRAINING_STAT_BUFFERS,
    CheckpointMismatchError,
    load_dit_state_dict,
    load_into,
    load_vae_state_dict,
    save_net_state_dict,
)
from avsim.models.config import (
    VAEConfig,
    debug,
    transfer25_2b_multiview,
    transfer25_2b_single_view,
)
from avsim.models.control import TransferDiT
from avsim.models.dit import DiT
from avsim.models.vae import WanVAE


def _shapes(model: torch.nn.Module, prefix: str = "") -> dict[str, list[int]]:
    return {prefix + k: list(v.shape) for k, v in model.state_dict().items()}


def test_dit_matches_released_manifest(specs_dir):
    manifest = json.loads((specs_dir / "cosmos_transfer25_2b_multiview_keys.json").read_text())
    with torch.device("meta"):
        model = TransferDiT(transfer25_2b_multiview().dit)
    ours = _shapes(model, "net.")
    expected = manifest["parameters"]
    assert sorted(set(expected) - set(ours)) == []
    assert sorted(set(ours) - set(expected)) == []
    assert ours == expected
    total = sum(p.numel() for p in model.parameters())
    assert total == manifest["param_counts"]["total"] == 2_387_995_697
    base = sum(p.numel() for n, p in model.named_parameters() if not n.startswith(("control_", "input_hint")))
    assert base == manifest["param_counts"]["base_net"]
    assert all(p.device.type == "meta" for p in model.parameters())


def test_vae_matches_released_manifest(specs_dir):
    expected = json.loads((specs_dir / "wan21_vae_keys.json").read_text())
    with torch.device("meta"):
        model = WanVAE(VAEConfig())
    ours = _shapes(model)
    assert sorted(set(expected) - set(ours)) == [] and sorted(set(ours) - set(expected)) == []
    assert ours == expected
    assert sum(math.prod(s) for s in ours.values()) == 126_892_531


def test_single_view_layout_has_no_view_channels():
    with torch.device("meta"):
        model = TransferDiT(transfer25_2b_single_view().dit)
    sd = model.state_dict()
    assert "view_embeddings.weight" not in sd
    assert tuple(sd["x_embedder.proj.1.weight"].shape) == (2048, 72)
    assert tuple(sd["control_embedder.proj.1.weight"].shape) == (2048, (184 + 2) * 4)


@pytest.mark.parametrize("suffix", [".pt", ".safetensors"])
def test_net_checkpoint_round_trip_strict(tmp_path, suffix):
    torch.manual_seed(0)
    model = TransferDiT(debug().dit)
    path = tmp_path / f"net{suffix}"
    save_net_state_dict(model, path, dtype=None)
    state = load_dit_state_dict(path)
    assert set(state) == set(model.state_dict())
    with torch.device("meta"):
        fresh = TransferDiT(debug().dit)
    load_into(fresh, state)
    for k, v in model.state_dict().items():
        assert torch.equal(fresh.state_dict()[k], v), k


def test_extra_state_and_rope_buffers_are_ignored(tmp_path):
    model = DiT(debug().dit)
    raw = {f"net.{k}": v for k, v in model.state_dict().items()}
    raw["net.blocks.0.self_attn.q_proj._extra_state"] = torch.zeros(3)
    raw["net.pos_embedder_options.n_cameras_3.seq"] = torch.arange(128.0)
    raw["net.pos_embedder.dim_spatial_range"] = torch.zeros(21)
    torch.save(raw, tmp_path / "ck.pt")
    state = load_dit_state_dict(tmp_path / "ck.pt")
    assert set(state) == set(model.state_dict())
    load_into(DiT(debug().dit), state)


def test_training_stat_counters_are_ignored_and_nothing_else(tmp_path):
    """The reference network's WeightTrainingStat buffers (net.accum_*) load strictly; the
    same names anywhere else, or other accum_ names, are still unexpected."""
    assert TRAINING_STAT_BUFFERS == ("accum_video_sample_counter", "accum_image_sample_counter",
                                     "accum_iteration", "accum_train_in_hours")
    model = TransferDiT(debug().dit)
    raw = {f"net.{k}": v for k, v in model.state_dict().items()}
    counters = {"accum_video_sample_counter": torch.tensor(123, dtype=torch.int64),
                "accum_image_sample_counter": torch.tensor(0, dtype=torch.int64),
                "accum_iteration": torch.tensor(6500, dtype=torch.int64),
                "accum_train_in_hours": torch.tensor(41.5)}
    raw.update({f"net.{k}": v for k, v in counters.items()})
    torch.save(raw, tmp_path / "ck.pt")
    state = load_dit_state_dict(tmp_path / "ck.pt")
    assert set(state) == set(model.state_dict())
    load_into(TransferDiT(debug().dit), state)
    for extra in ("net.accum_other_counter", "net.blocks.0.accum_iteration", "net.accum_iteration_2"):
        torch.save({**raw, extra: torch.tensor(1)}, tmp_path / "bad.pt")
        with pytest.raises(CheckpointMismatchError, match="1 unexpected"):
            load_into(TransferDiT(debug().dit), load_dit_state_dict(tmp_path / "bad.pt"))


def test_random_weights_with_weight_files_is_a_usage_error(tmp_path, capsys):
    """--random-weights replaces --checkpoint / --vae: both at once is exit 2, nothing written."""
    from avsim.cli import main
    from avsim.models.generate import GenerateRequest, run_generate
    from avsim.models.pipeline import SamplingOptions

    weights = tmp_path / "w.pt"
    torch.save({}, weights)
    out = tmp_path / "out"
    for flags in (["--checkpoint", str(weights)], ["--vae", str(weights)],
                  ["--checkpoint", str(weights), "--vae", str(weights)]):
        assert main(["generate", str(tmp_path), str(out), "--config", "debug", "--random-weights", *flags]) == 2
        assert "--random-weights" in capsys.readouterr().err
    assert not out.exists()
    request = GenerateRequest(control_dir=tmp_path, out=out, config="debug", checkpoint=weights, random_weights=True,
                              options=SamplingOptions())
    with pytest.raises(AvsimInputError, match="random weights replace"):
        run_generate(request)
    assert not out.exists()


def test_mismatch_error_lists_missing_unexpected_and_shapes():
    model = DiT(debug().dit)
    state = dict(model.state_dict())
    del state["final_layer.linear.weight"]
    state["blocks.0.bogus.weight"] = torch.zeros(1)
    state["x_embedder.proj.1.weight"] = torch.zeros(3, 3)
    with pytest.raises(CheckpointMismatchError) as info:
        load_into(DiT(debug().dit), state)
    msg = str(info.value)
    assert "1 missing [final_layer.linear.weight]" in msg
    assert "1 unexpected [blocks.0.bogus.weight]" in msg
    assert "x_embedder.proj.1.weight: checkpoint (3, 3)" in msg


def test_pickled_code_is_refused(tmp_path):
    class Evil:
        def __reduce__(self):
            return (print, ("pwned",))

    path = tmp_path / "evil.pt"
    with open(path, "wb") as fh:
        pickle.dump({"net.x": Evil()}, fh)
    with pytest.raises(Exception, match="weights-only"):
        load_dit_state_dict(path)


@pytest.mark.slow
def test_vae_state_dict_has_no_prefix(tmp_path):
    vae = WanVAE(VAEConfig(dim=8, dim_mult=(1, 2, 2, 2)))
    torch.save(vae.state_dict(), tmp_path / "tokenizer.pth")
    state = load_vae_state_dict(tmp_path / "tokenizer.pth")
    with torch.device("meta"):
        fresh = WanVAE(VAEConfig(dim=8, dim_mult=(1, 2, 2, 2)))
    load_into(fresh, state)
    assert torch.equal(fresh.encoder.conv1.weight, vae.encoder.conv1.weight)


@pytest.mark.parametrize("factory", [transfer25_2b_multiview, transfer25_2b_single_view, debug])
def test_configs_round_trip_through_json(factory):
    from avsim.models.config import TransferConfig

    cfg = factory()
    assert TransferConfig.from_dict(json.loads(json.dumps(cfg.to_dict()))) == cfg
    assert cfg.dit.x_embedder_in_features == (100 if cfg.dit.is_multiview else 72)
    assert cfg.latent_frames_per_chunk == (8 if cfg.frames_per_chunk == 29 else 2)
