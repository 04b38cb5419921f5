"""The hf backend's label probabilities, on the tiny randomly initialised Qwen3-VL and SmolVLM2 models.

Recording them must not change a greedy reply; at each generated token that spells an offered label
they are the softmax, over the whole vocabulary, of that step's scores at the labels' tokens (checked
against a separate forward pass of the prompt and the reply so far), so they sum to at most 1.
"""

from __future__ import annotations

import json

import pytest
import torch

from audit_core import store
from runners.backends.hf import HFSelector
from runners.selection import recorder
from tests.support.pools import write_tiny_dataset

MAX_NEW_TOKENS = 12


@pytest.fixture
def db(tmp_path):
    path = tmp_path / "hf_probs.duckdb"
    write_tiny_dataset(path, tmp_path / "images", n_prompts=2, pool_sizes=(3, 4))
    return path


def planned(db, judge="j"):
    con = store.connect(db)
    try:
        return recorder.plan_requests(con, dataset="tiny", judge=judge, orders=2, contract="ranking", limit=None)[0]
    finally:
        con.close()


def plain_replies(selector: HFSelector, requests) -> list[str]:
    """Greedy replies from the model's own generate(), without the backend's logits processor."""
    inputs = selector.batch_inputs(requests)
    with torch.inference_mode():
        output = selector.model.generate(**inputs, do_sample=False, max_new_tokens=selector.max_new_tokens)
    texts = []
    for row in output[:, inputs["input_ids"].shape[1]:].tolist():
        end = next((i + 1 for i, t in enumerate(row) if t in selector.eos_ids), len(row))
        texts.append(selector.processor.decode(row[:end], skip_special_tokens=True))
    return texts


@pytest.mark.parametrize("kind", ["qwen3_vl", "smolvlm"])
def test_recording_label_probabilities_leaves_greedy_replies_unchanged(kind, tiny_models, db):
    selector = HFSelector(str(tiny_models[kind]), max_new_tokens=MAX_NEW_TOKENS, max_edge=64, device="cpu")
    requests = planned(db)
    replies = selector.reply_batch(requests)
    assert [r.text for r in replies] == plain_replies(selector, requests)
    assert [selector.reply(r).text for r in requests] == [r.text for r in replies]
    assert selector.generate_batch(requests) == [r.text for r in replies]
    for request, reply in zip(requests, replies):
        assert reply.label_steps is not None
        for step in reply.label_steps:
            assert set(step.probs) == set(request.labels) and step.label in request.labels
            assert all(p >= 0 for p in step.probs.values()) and sum(step.probs.values()) <= 1 + 1e-6


def test_label_probabilities_are_the_softmax_at_the_step_where_the_label_was_generated(tiny_models, db):
    selector = HFSelector(str(tiny_models["smolvlm"]), max_new_tokens=MAX_NEW_TOKENS, max_edge=64, device="cpu")
    tokens = selector.label_tokens(("A", "B", "C", "D"))
    tokenizer = selector.processor.tokenizer
    assert tokens == {tokenizer.convert_tokens_to_ids(label): label for label in "ABCD"}  # byte tokens: one each
    checked = 0
    for request in planned(db):
        reply = selector.reply(request)
        inputs = selector.batch_inputs([request])
        with torch.inference_mode():
            output = selector.model.generate(**inputs, do_sample=False, max_new_tokens=MAX_NEW_TOKENS)
        prompt = inputs["input_ids"]
        generated = output[0, prompt.shape[1]:].tolist()
        positions = [t for t, token in enumerate(generated) if tokens.get(token) in request.labels]
        assert [tokens[generated[t]] for t in positions] == [s.label for s in reply.label_steps]
        for t, step in zip(positions, reply.label_steps):
            ids = torch.cat([prompt, torch.tensor([generated[:t]], dtype=prompt.dtype)], dim=1)
            extra = {k: v for k, v in inputs.items() if k not in ("input_ids", "attention_mask")}
            with torch.inference_mode():
                logits = selector.model(input_ids=ids, attention_mask=torch.ones_like(ids), **extra).logits[0, -1]
            softmax = torch.softmax(logits.float(), dim=-1)
            expected = {label: float(softmax[tokenizer.convert_tokens_to_ids(label)]) for label in request.labels}
            assert step.probs == pytest.approx(expected, abs=1e-6)
            checked += 1
    assert checked > 0  # the tiny SmolVLM2's junk spells label B early in every reply


def test_a_recorded_choice_stores_the_probabilities_of_its_label(tiny_models, db):
    """The tiny model made to answer "B" (a bias of its generation config towards that token, one new
    token): the lenient parser recovers the choice, and the call keeps the labels' probabilities there."""
    selector = HFSelector(str(tiny_models["smolvlm"]), max_new_tokens=1, max_edge=64, device="cpu")
    b = selector.processor.tokenizer.convert_tokens_to_ids("B")
    selector.model.generation_config.sequence_bias = {(b,): 6.0}
    summary = recorder.record_selector(db, dataset="tiny", judge="biased", backend=selector, backend_name="hf",
                                       model="tiny", orders=2, lenient=True, batch_size=2, progress=False)
    assert summary.statuses == {"recovered": 4}
    con = store.connect(db, read_only=True)
    try:
        rows = con.execute("SELECT request_key, choice_label, label_probs, slot_candidate_ids FROM calls").fetchall()
    finally:
        con.close()
    alone = {r.request_key: selector.reply(r) for r in planned(db, judge="biased")}
    for key, choice, text, slots in rows:
        probs = json.loads(text)
        assert choice == "B" and set(probs) == set("ABCD"[: len(slots)]) and alone[key].text == "B"
        assert sum(probs.values()) <= 1 + 1e-6 and max(probs, key=probs.get) == "B" and 0 < probs["A"] < probs["B"]
        assert probs == pytest.approx(dict(alone[key].label_steps[0].probs), abs=1e-5)  # batched as alone
