"""The openai backend's `--logprobs`: the request asks for log-probabilities, and what comes back at the
label's position is recorded with the call. `transformers serve` refuses `logprobs` (an unsupported
field), so a scripted server on 127.0.0.1 answers in the OpenAI logprobs shape."""

from __future__ import annotations

import json
import math

import pytest

from audit_core import store
from runners.backends.openai_compat import OpenAISelector, label_steps
from runners.run_judge import main
from runners.selection import recorder
from tests.support.pools import write_tiny_dataset


def entry(token: str, logprob: float, top: list[tuple[str, float]]) -> dict:
    return {"token": token, "logprob": logprob, "bytes": list(token.encode()),
            "top_logprobs": [{"token": t, "logprob": lp, "bytes": list(t.encode())} for t, lp in top]}


# {"choice": "B", "ranking": ["B", "A", "C"]} as a server tokenises and scores it
CONTENT = [
    entry('{"', -0.01, [('{"', -0.01)]),
    entry("choice", -0.02, [("choice", -0.02)]),
    entry('":', -0.01, [('":', -0.01)]),
    entry(' "', -0.05, [(' "', -0.05), (" ", -3.2)]),
    entry("B", -0.3, [("B", -0.3), ("A", -1.9), ("C", -3.5), (" B", -6.0), ("D", -7.0)]),
    entry('",', -0.01, [('",', -0.01)]),
    entry(' "', -0.01, [(' "', -0.01)]),
    entry("ranking", -0.01, [("ranking", -0.01)]),
    entry('":', -0.01, [('":', -0.01)]),
    entry(' ["', -0.01, [(' ["', -0.01)]),
    entry("B", -0.01, [("B", -0.01)]),
    entry('",', -0.01, [('",', -0.01)]),
    entry(' "A', -0.3, [(' "A', -0.3), (' "C', -1.4)]),
    entry('",', -0.01, [('",', -0.01)]),
    entry(' "C', -0.01, [(' "C', -0.01)]),
    entry('"]}', -0.01, [('"]}', -0.01)]),
]
TEXT = '{"choice": "B", "ranking": ["B", "A", "C"]}'


def completion(text: str, logprobs: object = None) -> bytes:
    choice: dict = {"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}
    if logprobs is not None:
        choice["logprobs"] = logprobs
    return json.dumps({"id": "x", "object": "chat.completion", "choices": [choice]}).encode()


@pytest.fixture
def db(tmp_path):
    path = tmp_path / "lp.duckdb"
    write_tiny_dataset(path, tmp_path / "images", n_prompts=2, pool_sizes=(3,))
    return path


def test_label_steps_read_every_token_that_spells_an_offered_label():
    steps = label_steps(completion(TEXT, {"content": CONTENT}), ("A", "B", "C"))
    assert [s.label for s in steps] == ["B", "B", "A", "C"]
    first = steps[0].probs
    assert first == pytest.approx({"A": math.exp(-1.9), "B": math.exp(-0.3) + math.exp(-6.0), "C": math.exp(-3.5)})
    assert sum(first.values()) <= 1  # D is not offered; the rest went to tokens spelling no label
    assert steps[2].probs == pytest.approx({"A": math.exp(-0.3), "C": math.exp(-1.4)})  # B: not in the top list
    assert steps[1].probs == pytest.approx({"B": math.exp(-0.01)})


@pytest.mark.parametrize("logprobs", [None, {"content": None}, {"content": "x"}, {"content": [{"token": 3}]}, [],
                                      {"refusal": []}])
def test_a_response_without_usable_log_probabilities_gives_no_steps(logprobs):
    assert label_steps(completion(TEXT, logprobs), ("A", "B", "C")) is None


def test_logprobs_asks_the_server_and_records_the_choice_probabilities(server, db):
    script, url = server
    with_probs = completion(TEXT, {"content": CONTENT})
    script.steps = [("body", with_probs, True), ("body", completion(TEXT), True)] + [
        ("body", with_probs, True)] * 4
    code = main(["--db", str(db), "--dataset", "tiny", "--judge", "api", "--backend", "openai", "--model", "m",
                 "--base-url", url, "--orders", "3", "--logprobs", "5", "--quiet"])
    assert code == 0
    assert all(body["logprobs"] is True and body["top_logprobs"] == 5 for body in script.bodies)
    con = store.connect(db, read_only=True)
    try:
        rows = con.execute("SELECT c.status, c.label_probs FROM calls c ORDER BY c.created_at, c.request_key").df()
        config = json.loads(con.execute("SELECT config_json FROM runs").fetchone()[0])
    finally:
        con.close()
    assert set(rows["status"]) == {"ok"} and config["logprobs"] == 5
    recorded = rows["label_probs"].dropna().map(json.loads).tolist()
    assert len(recorded) == 5  # the reply without log-probabilities left its call's NULL
    assert all(r == pytest.approx({"A": math.exp(-1.9), "B": math.exp(-0.3) + math.exp(-6.0),
                                   "C": math.exp(-3.5)}) for r in recorded)


def test_without_logprobs_the_request_does_not_ask_and_nothing_is_recorded(server, db):
    script, url = server
    script.steps = [("body", completion(TEXT, {"content": CONTENT}), True)]
    backend = OpenAISelector("m", base_url=url)
    con = store.connect(db)
    try:
        request = recorder.plan_requests(con, dataset="tiny", judge="api", orders=1, contract="ranking",
                                         limit=1)[0][0]
    finally:
        con.close()
    reply = backend.reply(request)
    assert reply.text == TEXT and reply.label_steps is None
    assert "logprobs" not in script.bodies[0] and "top_logprobs" not in script.bodies[0]
    with pytest.raises(ValueError, match="top_logprobs"):
        OpenAISelector("m", base_url=url, top_logprobs=0)


@pytest.mark.parametrize(("flags", "message"), [
    (["--backend", "simulated", "--model", "strong", "--logprobs"], "--logprobs needs --backend openai"),
    (["--backend", "openai", "--model", "m", "--logprobs", "0"], "--logprobs must be at least 1"),
])
def test_logprobs_flag_misuse_is_a_usage_error(db, capsys, flags, message):
    with pytest.raises(SystemExit) as exit_info:
        main(["--db", str(db), "--dataset", "tiny", "--judge", "j", *flags])
    assert exit_info.value.code == 2 and message in capsys.readouterr().err
