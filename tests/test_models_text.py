"""Text-embedding recipe on a tiny random Qwen2.5-VL built in the test (transformers 5.x)."""

from __future__ import annotations

import string

import pytest
import torch

transformers = pytest.importorskip("transformers")
tokenizers = pytest.importorskip("tokenizers")

from avsim.models.text import (  # noqa: E402 - after the importorskip of the optional extra
    TEXT_TOKENS,
    TextEncoder,
    chat_text,
    embed_token_ids,
    load_prompt_embeddings,
    multiview_context,
    normalize_hidden,
    save_prompt_embeddings,
    token_ids,
)

SPECIALS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
LAYERS, HIDDEN = 3, 32


@pytest.fixture(scope="module")
def tokenizer():
    from tokenizers import Regex, Tokenizer, models, pre_tokenizers

    chars = sorted(set(string.printable))
    vocab = {tok: i for i, tok in enumerate(SPECIALS + ["[UNK]"] + chars)}
    tok = Tokenizer(models.WordLevel(vocab, unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.Split(Regex(r"[\s\S]"), behavior="isolated")
    tok.add_special_tokens(SPECIALS)
    return transformers.PreTrainedTokenizerFast(tokenizer_object=tok, pad_token="<|endoftext|>", unk_token="[UNK]")


@pytest.fixture(scope="module")
def model():
    cfg = transformers.Qwen2_5_VLConfig(
        text_config={
            "vocab_size": 128, "hidden_size": HIDDEN, "intermediate_size": 64, "num_hidden_layers": LAYERS,
            "num_attention_heads": 4, "num_key_value_heads": 2, "max_position_embeddings": 1024,
            "rope_scaling": {"type": "mrope", "mrope_section": [1, 1, 2]}, "bos_token_id": 0, "eos_token_id": 2,
            "pad_token_id": 0,
        },
        vision_config={"depth": 1, "hidden_size": 16, "intermediate_size": 32, "num_heads": 2, "out_hidden_size": HIDDEN},
    )
    torch.manual_seed(0)
    return transformers.Qwen2_5_VLForConditionalGeneration(cfg).eval()


def test_template_padding_and_truncation(tokenizer):
    ids = token_ids(tokenizer, "a red car")
    assert ids.shape == (TEXT_TOKENS,)
    text = tokenizer.decode(ids.tolist(), skip_special_tokens=False)
    expected = (
        "<|im_start|>system\nYou are a helpful assistant who will provide prompts to an image generator."
        "<|im_end|>\n<|im_start|>user\na red car<|im_end|>\n"
    )
    assert chat_text("a red car") == expected
    n = len(tokenizer(expected, add_special_tokens=False)["input_ids"])
    assert text.replace(" ", "").startswith(expected.replace(" ", ""))
    assert "assistant\n" not in text.replace("helpful assistant", "")
    assert (ids[n:] == tokenizer.pad_token_id).all() and (ids[:n] != tokenizer.pad_token_id).all()
    long_ids = token_ids(tokenizer, "x" * 1000)
    assert long_ids.shape == (TEXT_TOKENS,) and (long_ids != tokenizer.pad_token_id).all()


@pytest.mark.slow
def test_layer_selection_and_normalisation(model, tokenizer):
    ids = token_ids(tokenizer, "night, rain, wet road")[None]
    layers = model.model.language_model.layers
    captured = []
    hooks = [layer.register_forward_hook(lambda m, i, o: captured.append(o[0] if isinstance(o, tuple) else o)) for layer in layers]
    try:
        emb = embed_token_ids(model, ids)
    finally:
        for h in hooks:
            h.remove()
    assert emb.shape == (1, TEXT_TOKENS, LAYERS * HIDDEN) and emb.dtype == torch.float32
    # independent recipe: layer outputs 1..L, the last one after the final norm
    states = captured[:LAYERS - 1] + [model.model.language_model.norm(captured[LAYERS - 1])]
    for k, h in enumerate(states):
        h = h.double()
        mean = h.sum(-1, keepdim=True) / HIDDEN
        std = (((h - mean) ** 2).sum(-1, keepdim=True) / (HIDDEN - 1)).sqrt()
        ref = (h - mean) / (std + 1e-8)
        torch.testing.assert_close(emb[..., k * HIDDEN : (k + 1) * HIDDEN].double(), ref, rtol=1e-4, atol=1e-4)
    # the embedding-layer output (hidden_states[0]) is not part of it
    embed = model.model.language_model.embed_tokens(ids)
    assert not torch.allclose(emb[..., :HIDDEN], normalize_hidden(embed), atol=1e-3)


def test_normalisation_runs_in_the_encoder_dtype():
    """bf16 hidden states are normalised in bf16, as the reference's TextEncoder.mean_normalize
    (restated here) does; float32 ones in float32; the result is float32 either way."""
    g = torch.Generator().manual_seed(0)
    h32 = torch.randn(2, 7, 3584, generator=g) * 3 + torch.randn(2, 7, 1, generator=g)
    h32[..., 5] = 400.0  # the outlier channels of real LLM hidden states
    h16 = h32.to(torch.bfloat16)
    ref16 = (h16 - h16.mean(dim=-1, keepdim=True)) / (h16.std(dim=-1, keepdim=True) + 1e-8)
    got16 = normalize_hidden(h16)
    assert got16.dtype == torch.float32 and torch.equal(got16, ref16.float())
    ref32 = (h32 - h32.mean(dim=-1, keepdim=True)) / (h32.std(dim=-1, keepdim=True) + 1e-8)
    assert torch.equal(normalize_hidden(h32), ref32)
    # avsim's earlier float32 normalisation of the same bf16 states differs by bf16 rounding only
    old = normalize_hidden(h16.float())
    assert 0 < float((got16 - old).abs().max()) <= 2**-7 * float(old.abs().max())


@pytest.mark.slow
def test_pads_are_forwarded_without_mask_and_depend_on_the_prompt(model, tokenizer):
    a = embed_token_ids(model, token_ids(tokenizer, "sunny")[None])
    b = embed_token_ids(model, token_ids(tokenizer, "snowy")[None])
    assert (a[0, -1] - b[0, -1]).abs().max() > 1e-4  # the last pad sees the prompt


@pytest.mark.slow
def test_encoder_from_directory_with_cache(model, tokenizer, tmp_path):
    model.save_pretrained(tmp_path / "reason1")
    tokenizer.save_pretrained(tmp_path / "reason1")
    enc = TextEncoder.from_pretrained(tmp_path / "reason1", dtype=torch.float32, cache_dir=tmp_path / "cache")
    first = enc.encode(["a bus", " "])
    assert first.shape == (2, TEXT_TOKENS, LAYERS * HIDDEN)
    torch.testing.assert_close(first[0], embed_token_ids(model, token_ids(tokenizer, "a bus")[None])[0])
    assert len(list((tmp_path / "cache").glob("*.safetensors"))) == 2
    enc.release()
    assert torch.equal(enc.encode(["a bus"])[0], first[0])  # served from the cache, no model

    from avsim.models.text import main

    out = tmp_path / "emb.safetensors"
    assert main(["--text-encoder", str(tmp_path / "reason1"), "--prompt", "a bus", "--out", str(out), "--device", "cpu"]) == 0
    data = load_prompt_embeddings(out)
    assert set(data) == {"prompt", "blank", "negative"}
    assert data["prompt"].shape == (TEXT_TOKENS, LAYERS * HIDDEN) and data["prompt"].dtype == torch.bfloat16


def test_embedding_file_and_multiview_context(tmp_path):
    p, blank, neg = torch.randn(8, 6), torch.randn(8, 6), torch.randn(8, 6)
    save_prompt_embeddings(tmp_path / "e.safetensors", p, blank, neg, metadata={"prompt": "x"})
    data = load_prompt_embeddings(tmp_path / "e.safetensors")
    assert torch.equal(data["prompt"], p) and torch.equal(data["negative"], neg)
    ctx = multiview_context(p, blank, num_views=3, prompt_view=0)
    assert ctx.shape == (24, 6)
    assert torch.equal(ctx[:8], p) and torch.equal(ctx[8:16], blank) and torch.equal(ctx[16:], blank)
    per_view = torch.randn(3, 8, 6)
    assert torch.equal(multiview_context(per_view, None, 3, 0), per_view.reshape(24, 6))
    with pytest.raises(ValueError, match="blank"):
        multiview_context(p, None, 3, 0)
