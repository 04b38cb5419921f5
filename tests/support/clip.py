"""A tiny randomly initialised open_clip model built from a config (no download), for the CLIP tests."""

from __future__ import annotations

import json
from pathlib import Path

import open_clip
import torch

TINY = "tiny-clip-test"
TINY_CONFIG = {
    "embed_dim": 16,
    "vision_cfg": {"image_size": 32, "layers": 1, "width": 32, "head_width": 16, "patch_size": 16},
    "text_cfg": {"context_length": 16, "vocab_size": 49408, "width": 32, "heads": 2, "layers": 1},
}


def build_tiny_clip(config_dir: Path) -> tuple[Path, Path]:
    """Write the tiny config into `config_dir`, register it with open_clip and save a seeded model's
    weights there; (config folder, checkpoint)."""
    (config_dir / f"{TINY}.json").write_text(json.dumps(TINY_CONFIG))
    open_clip.add_model_config(config_dir)
    torch.manual_seed(0)
    model = open_clip.create_model(TINY, pretrained=None)
    checkpoint = config_dir / "tiny.pt"
    torch.save(model.state_dict(), checkpoint)
    return config_dir, checkpoint
