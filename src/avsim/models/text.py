"""Text conditioning: Cosmos-Reason1-7B (Qwen2.5-VL) hidden states -> 512 x 100352 per prompt.

Recipe (transfer_model.md section 6):
1. chat text ``<|im_start|>system\\n{SYSTEM}<|im_end|>\\n<|im_start|>user\\n{prompt}<|im_end|>\\n``
   (no assistant header), tokenised without padding, right-padded with the pad id to 512
   tokens or cut to the first 512;
2. all 512 tokens forwarded with no attention mask (pads get real, prompt-dependent states);
3. hidden states of layers 1..L (the last after the final norm), each normalised per token
   over channels, (h - mean) / (std_unbiased + 1e-8) in the encoder's dtype (bf16),
   concatenated in layer order.

Embeddings are cached on disk keyed by (prompt, model identity, recipe version) and can be
precomputed into one safetensors file (`save_prompt_embeddings`), so generation never needs
the 7B model: ``python -m avsim.models.text --text-encoder DIR --prompt TEXT --out emb.safetensors``.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import torch
from torch import Tensor

from avsim.core.atomic import atomic_output_path
from avsim.core.errors import AvsimInputError

SYSTEM_PROMPT = "You are a helpful assistant who will provide prompts to an image generator."
TEXT_TOKENS = 512
RECIPE_VERSION = "cosmos-reason1-l1toL-meanstd-v2"  # v2: normalised in the encoder dtype
# Our own wording of a negative prompt describing the failure modes guidance should avoid.
DEFAULT_NEGATIVE_PROMPT = (
    "Blurry, low-resolution, grainy and pixelated video with flickering, jittery camera motion, "
    "warped geometry, melting or duplicated cars and people, smeared textures, washed-out or "
    "oversaturated colours, compression artefacts, frozen frames and abrupt scene cuts."
)


def chat_text(prompt: str) -> str:
    """The exact chat string fed to the tokenizer (system + user turns, no assistant header)."""
    return f"<|im_start|>system\n{SYSTEM_PROMPT}<|im_end|>\n<|im_start|>user\n{prompt}<|im_end|>\n"


def token_ids(tokenizer: Any, prompt: str, max_tokens: int = TEXT_TOKENS) -> Tensor:
    """Token ids (max_tokens,) of `chat_text(prompt)`: right-padded with the pad id, or cut."""
    ids = list(tokenizer(chat_text(prompt), add_special_tokens=False)["input_ids"])
    pad_id = tokenizer.pad_token_id
    if pad_id is None:
        raise ValueError("tokenizer has no pad token id")
    ids = ids[:max_tokens] + [pad_id] * max(0, max_tokens - len(ids))
    return torch.tensor(ids, dtype=torch.long)


def normalize_hidden(h: Tensor, eps: float = 1e-8) -> Tensor:
    """Per-token normalisation over channels, (h - mean) / (unbiased std + eps), in h's dtype.

    Computed in the encoder's own dtype (bf16 for the released encoder), as the reference
    does (TextEncoder.mean_normalize on the bf16 hidden states, cosmos-transfer2.5
    cosmos_transfer2/_src/predict2/text_encoders/text_encoder.py); then returned as float32.

    Args:
        h: hidden states (..., channels), any float dtype.
        eps: added to the standard deviation.

    Returns:
        Same shape, float32.
    """
    return ((h - h.mean(dim=-1, keepdim=True)) / (h.std(dim=-1, keepdim=True, unbiased=True) + eps)).float()


def _backbone(model: Any) -> Any:
    """The part of a Qwen2.5-VL model that returns hidden states without computing logits."""
    return model.model if hasattr(model, "lm_head") and hasattr(model, "model") else model


@torch.no_grad()
def embed_token_ids(model: Any, ids: Tensor) -> Tensor:
    """ids (B, N) -> (B, N, num_layers * hidden) float32 following the recipe (no attention mask)."""
    device = next(model.parameters()).device
    out = _backbone(model)(input_ids=ids.to(device), output_hidden_states=True, use_cache=False)
    hidden = out.hidden_states
    if hidden is None or len(hidden) < 2:
        raise RuntimeError("text encoder returned no hidden states")
    # hidden[0] is the token embedding; hidden[1..L] the layer outputs, the last after the final norm.
    return torch.cat([normalize_hidden(h) for h in hidden[1:]], dim=-1)


class TextEncoder:
    """Cosmos-Reason1-7B from a local directory (never downloaded), with an on-disk cache."""

    def __init__(self, model: Any, tokenizer: Any, model_id: str, cache_dir: Path | None = None) -> None:
        self.model, self.tokenizer, self.model_id = model, tokenizer, model_id
        self.cache_dir = cache_dir

    @classmethod
    def from_pretrained(
        cls, directory: str | os.PathLike[str], device: str = "cpu", dtype: torch.dtype = torch.bfloat16, cache_dir: Path | None = None
    ) -> TextEncoder:
        directory = Path(directory)
        if not (directory / "config.json").is_file():
            raise AvsimInputError(directory, "config.json", "not a transformers model directory")
        try:
            from transformers import AutoTokenizer, Qwen2_5_VLForConditionalGeneration
        except ImportError as exc:  # pragma: no cover - optional extra
            raise AvsimInputError(directory, "transformers", "install the 'text' extra: pip install avsim[text]") from exc
        tokenizer = AutoTokenizer.from_pretrained(directory, local_files_only=True)
        model = Qwen2_5_VLForConditionalGeneration.from_pretrained(directory, dtype=dtype, local_files_only=True)
        # transformers wraps `PreTrainedModel.to` in a decorator whose type hides the real signature
        model = model.to(device).eval()  # type: ignore[arg-type]
        return cls(model, tokenizer, model_identity(directory), cache_dir)

    def encode(self, prompts: Sequence[str]) -> Tensor:
        """(len(prompts), 512, num_layers * hidden) float32; cached per prompt when a cache is set."""
        out = []
        for prompt in prompts:
            cached = self._load_cached(prompt)
            if cached is None:
                cached = embed_token_ids(self.model, token_ids(self.tokenizer, prompt)[None])[0].cpu()
                self._store_cached(prompt, cached)
            out.append(cached.float())
        return torch.stack(out)

    def release(self) -> None:
        """Drop the model (and its GPU memory) before the DiT runs."""
        self.model = None
        if torch.cuda.is_available():
            torch.cuda.empty_cache()

    def _cache_path(self, prompt: str) -> Path | None:
        if self.cache_dir is None:
            return None
        return self.cache_dir / f"{cache_key(prompt, self.model_id)}.safetensors"

    def _load_cached(self, prompt: str) -> Tensor | None:
        path = self._cache_path(prompt)
        if path is None or not path.is_file():
            return None
        from safetensors.torch import load_file

        return load_file(str(path))["embedding"]

    def _store_cached(self, prompt: str, emb: Tensor) -> None:
        path = self._cache_path(prompt)
        if path is None:
            return
        from safetensors.torch import save_file

        with atomic_output_path(path) as tmp:
            save_file({"embedding": emb.contiguous()}, str(tmp), metadata={"prompt": prompt, "model": self.model_id})


def model_identity(directory: Path) -> str:
    """A stable id of a local model: its folder name and the hash of its config and weight index."""
    h = hashlib.sha256()
    for name in ("config.json", "model.safetensors.index.json"):
        p = directory / name
        if p.is_file():
            h.update(p.read_bytes())
    return f"{directory.name}-{h.hexdigest()[:16]}"


def cache_key(prompt: str, model_id: str) -> str:
    payload = json.dumps({"prompt": prompt, "model": model_id, "recipe": RECIPE_VERSION}, sort_keys=True)
    return hashlib.sha256(payload.encode()).hexdigest()


# ---- precomputed embedding files --------------------------------------------------------------

def save_prompt_embeddings(
    path: str | os.PathLike[str],
    prompt: Tensor,
    blank: Tensor | None = None,
    negative: Tensor | None = None,
    metadata: dict[str, str] | None = None,
) -> None:
    """Write {prompt, blank?, negative?} tensors (each (512, C) or (V, 512, C)) to safetensors.

    `blank` is the embedding of " " that multi-view inference gives every view but front_wide.
    """
    from safetensors.torch import save_file

    tensors = {"prompt": prompt}
    if blank is not None:
        tensors["blank"] = blank
    if negative is not None:
        tensors["negative"] = negative
    with atomic_output_path(path) as tmp:
        save_file({k: v.contiguous() for k, v in tensors.items()}, str(tmp), metadata=dict(metadata or {}))


def load_prompt_embeddings(path: str | os.PathLike[str]) -> dict[str, Tensor]:
    """Read a file written by `save_prompt_embeddings` (safetensors, or a torch.save dict)."""
    path = Path(path)
    if not path.is_file():
        raise AvsimInputError(path, "file", "embeddings file not found")
    if path.suffix == ".safetensors":
        from avsim.core.safe_tensors import load_safetensors

        data = load_safetensors(path)
    else:
        try:
            data = torch.load(path, map_location="cpu", weights_only=True)
        except Exception as exc:  # refused globals or a corrupt archive
            first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            raise AvsimInputError(path, "contents", f"cannot read as a weights-only torch file: {first}") from None
    if not isinstance(data, dict) or "prompt" not in data:
        raise AvsimInputError(path, "prompt", "embeddings file needs a 'prompt' tensor")
    for key, value in data.items():
        if not isinstance(value, Tensor) or value.ndim not in (2, 3):
            raise AvsimInputError(path, key, "must be a (512, C) or (V, 512, C) tensor")
    return data


def multiview_context(prompt: Tensor, blank: Tensor | None, num_views: int, prompt_view: int) -> Tensor:
    """(V * N, C) text context: view `prompt_view` gets the prompt, the others `blank`.

    A (V, N, C) `prompt` is taken as per-view embeddings and used as is.
    """
    if prompt.ndim == 3:
        if prompt.shape[0] != num_views:
            raise ValueError(f"per-view embeddings hold {prompt.shape[0]} views, need {num_views}")
        return prompt.reshape(-1, prompt.shape[-1])
    if num_views == 1:
        return prompt
    if blank is None:
        raise ValueError("multi-view inference with one caption needs the embedding of ' ' (blank)")
    chunks = [prompt if v == prompt_view else blank for v in range(num_views)]
    return torch.cat(chunks, dim=0)


def main(argv: list[str] | None = None) -> int:
    """Precompute prompt, blank and negative-prompt embeddings into one safetensors file."""
    parser = argparse.ArgumentParser(prog="python -m avsim.models.text", description=main.__doc__)
    parser.add_argument("--text-encoder", required=True, help="local Cosmos-Reason1-7B directory")
    parser.add_argument("--prompt", required=True)
    parser.add_argument("--negative-prompt", default=DEFAULT_NEGATIVE_PROMPT)
    parser.add_argument("--out", required=True)
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--cache-dir", default=None)
    args = parser.parse_args(argv)
    enc = TextEncoder.from_pretrained(args.text_encoder, args.device, cache_dir=Path(args.cache_dir) if args.cache_dir else None)
    emb = enc.encode([args.prompt, " ", args.negative_prompt]).to(torch.bfloat16)
    save_prompt_embeddings(
        args.out, emb[0], emb[1], emb[2],
        metadata={"prompt": args.prompt, "negative_prompt": args.negative_prompt, "model": enc.model_id},
    )
    return 0


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
