"""Device and dtype choice for the torch backends (hf, clip)."""

from __future__ import annotations

import torch


def resolve_device(requested: str = "auto") -> torch.device:
    """`auto` picks cuda, then mps, then cpu; any other value is used as given."""
    if requested != "auto":
        return torch.device(requested)
    if torch.cuda.is_available():
        return torch.device("cuda")
    if torch.backends.mps.is_available():
        return torch.device("mps")
    return torch.device("cpu")


def preferred_dtype(device: torch.device) -> torch.dtype:
    """bfloat16 where the device runs it natively (CUDA with bf16 support, MPS); float32 otherwise."""
    if device.type == "cuda" and torch.cuda.is_bf16_supported():
        return torch.bfloat16
    if device.type == "mps":
        return torch.bfloat16
    return torch.float32
