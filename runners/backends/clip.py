"""Content-only CLIP scorer (open_clip): prompt–image cosine similarity per candidate.

The prompt goes in raw (no template); images get the model's default
evaluation preprocessing; each image is scored alone, in batches, so the score
cannot depend on the order of a pool. Ties between candidates are left to the
audit, which breaks them by canonical order.

`zero_shot_classifier` is the zero-shot label task's half (runners/labels/clip_labels.py):
the cosine of each image, alone, with every templated label prompt.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Sequence
from pathlib import Path

import open_clip
import torch
from PIL import Image

from runners.backends.torch_device import resolve_device


class ClipScorer:
    """open_clip model `model` with weights `pretrained` (a tag such as "openai", a file, or None = random)."""

    def __init__(self, model: str, *, pretrained: str | None = None, device: str = "auto", batch_size: int = 32) -> None:
        self.device = resolve_device(device)
        self.model_name = model
        self.pretrained = pretrained
        self.batch_size = batch_size
        self.model, _, self.preprocess = open_clip.create_model_and_transforms(
            model, pretrained=pretrained, device=self.device
        )
        self.model.eval()
        self.tokenizer = open_clip.get_tokenizer(model)

    def model_revision(self) -> str | None:
        """Checkpoint file hash, or the pretrained tag's published source; None for random weights."""
        if self.pretrained is None:
            return None
        if Path(self.pretrained).is_file():
            digest = hashlib.sha256(Path(self.pretrained).read_bytes()).hexdigest()
            return f"{self.model_name} checkpoint sha256:{digest}"
        cfg = open_clip.get_pretrained_cfg(self.model_name, self.pretrained) or {}
        source = cfg.get("hf_hub") or cfg.get("url") or "unknown source"
        return f"open_clip {open_clip.__version__} {self.model_name}/{self.pretrained} ({source})"

    @torch.inference_mode()
    def score(self, prompt: str, image_paths: list[str]) -> list[float]:
        """Cosine similarity between the prompt and each image, in the order given."""
        text = self.model.encode_text(self.tokenizer([prompt]).to(self.device))
        text = text / text.norm(dim=-1, keepdim=True)
        scores: list[float] = []
        for start in range(0, len(image_paths), self.batch_size):
            batch = []
            for path in image_paths[start : start + self.batch_size]:
                with Image.open(path) as image:
                    batch.append(self.preprocess(image.convert("RGB")))
            features = self.model.encode_image(torch.stack(batch).to(self.device))
            features = features / features.norm(dim=-1, keepdim=True)
            scores += (features.float() @ text.float().T).squeeze(1).tolist()
        return scores


@torch.inference_mode()
def zero_shot_classifier(scorer: ClipScorer, prompts: Sequence[str]) -> Callable[[Sequence[str]], list[list[float]]]:
    """Encode `prompts` once (raw, as given); the function returned gives, for each image file,
    its cosine similarity with every prompt: rows in the order of the images, columns in the
    order of `prompts`, images encoded alone in batches of the scorer's batch size."""
    tokens = scorer.tokenizer(list(prompts)).to(scorer.device)
    text = scorer.model.encode_text(tokens).float()
    text = text / text.norm(dim=-1, keepdim=True)

    @torch.inference_mode()
    def cosines(image_paths: Sequence[str]) -> list[list[float]]:
        rows: list[list[float]] = []
        for start in range(0, len(image_paths), scorer.batch_size):
            batch = []
            for path in image_paths[start : start + scorer.batch_size]:
                with Image.open(path) as image:
                    batch.append(scorer.preprocess(image.convert("RGB")))
            features = scorer.model.encode_image(torch.stack(batch).to(scorer.device)).float()
            features = features / features.norm(dim=-1, keepdim=True)
            rows += (features @ text.T).tolist()
        return rows

    return cosines
