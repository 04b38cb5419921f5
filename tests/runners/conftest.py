"""Fixtures the runners' tests share: tiny local models, a scripted OpenAI-compatible server, and a
rubric with test conditions as files. The models' libraries are imported when a test asks for them."""

from __future__ import annotations

import json

import pytest

from runners.rating import protocol as rating_protocol
from tests.support.openai_server import scripted_server
from tests.support.rating_runs import CONDITIONS, OUTCOME


@pytest.fixture(scope="module")
def tiny_models(tmp_path_factory):
    """The tiny randomly initialised Qwen3-VL and SmolVLM2 models (tests/support/vlms.py), saved once per module."""
    from tests.support.vlms import build_qwen3_vl, build_smolvlm

    root = tmp_path_factory.mktemp("tiny_vlms")
    return {"qwen3_vl": build_qwen3_vl(root / "qwen3_vl"), "smolvlm": build_smolvlm(root / "smolvlm")}


@pytest.fixture(scope="module")
def tiny_clip(tmp_path_factory):
    """(config folder, checkpoint) of the tiny open_clip model (tests/support/clip.py), registered with open_clip."""
    from tests.support.clip import build_tiny_clip

    return build_tiny_clip(tmp_path_factory.mktemp("clip_configs"))


@pytest.fixture
def server():
    """(script, base URL) of a scripted OpenAI-compatible server on 127.0.0.1 (tests/support/openai_server.py)."""
    with scripted_server() as served:
        yield served


@pytest.fixture
def files(tmp_path):
    """A rubric rating the `rubric` outcome and the test conditions, as files."""
    instruction = tmp_path / "rubric_test_v1.txt"
    instruction.write_text(rating_protocol.DEFAULT_INSTRUCTION.read_text().replace(
        "outcome: alignment", f"outcome: {OUTCOME}"))
    conditions = tmp_path / "conditions_v1.json"
    conditions.write_text(json.dumps(CONDITIONS, indent=2))
    return instruction, conditions
