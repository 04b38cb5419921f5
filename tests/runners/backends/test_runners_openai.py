"""The OpenAI-compatible backend against a scripted local server on 127.0.0.1."""

import base64
import io
import json
import subprocess
import sys
import time

import jsonschema
import pandas as pd
import pytest
from PIL import Image

from audit_core import store
from runners import run_rater
from runners.backends.openai_compat import STORED_TEXT_CHARS, EndpointError, EndpointTimeout, OpenAISelector
from runners.rating.protocol import DEFAULT_CONDITIONS, DEFAULT_INSTRUCTION, load_rubric, select_conditions
from runners.rating.recorder import load_rating_scope, plan_ratings
from runners.run_judge import build_parser, main, make_backend, run_selector
from runners.selection import recorder
from tests.support.paths import REPO
from tests.support.pools import write_tiny_dataset


@pytest.fixture
def con(tmp_path):
    db = tmp_path / "o.duckdb"
    write_tiny_dataset(db, tmp_path / "images", n_prompts=2, pool_sizes=(3,))
    connection = store.connect(db)
    yield connection
    connection.close()


def first_request(con):
    return recorder.plan_requests(con, dataset="tiny", judge="api", orders=1, contract="choice", limit=1)[0][0]


def test_payload_interleaves_labels_and_data_url_images(server, con, monkeypatch):
    script, url = server
    monkeypatch.setenv("OPENAI_BASE_URL", url)
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    backend = OpenAISelector("tiny-vlm", max_new_tokens=16, max_edge=32)
    assert backend.generate(first_request(con)) == '{"choice": "A"}'
    body, headers = script.bodies[0], script.headers[0]
    assert headers["Authorization"] == "Bearer sk-test"
    assert (body["model"], body["max_tokens"], body["temperature"]) == ("tiny-vlm", 16, 0)
    content = body["messages"][0]["content"]
    assert [c["text"].strip() for c in content if c["type"] == "text"][1:4] == ["Image A:", "Image B:", "Image C:"]
    images = [c["image_url"]["url"] for c in content if c["type"] == "image_url"]
    assert len(images) == 3 and all(u.startswith("data:image/png;base64,") for u in images)
    decoded = Image.open(io.BytesIO(base64.b64decode(images[0].split(",", 1)[1])))
    assert decoded.size == (32, 32)  # 96x96 fitted into the 32-pixel box


def test_rate_limits_wait_and_do_not_count(server, con):
    script, url = server
    script.steps = [("status", 429, {"Retry-After": "0.05"}), ("status", 429, {}), ("ok", '{"choice": "B"}')]
    backend = OpenAISelector("m", base_url=url)
    backend._retry_after = lambda response: min(OpenAISelector._retry_after(backend, response), 0.05)
    run_selector(con, dataset="tiny", judge="api", backend=backend, backend_name="openai", model="m",
                 orders=1, contract="choice", limit=1, progress=False)
    call = store.load_calls(con, "tiny").iloc[0]
    assert (call["status"], call["choice_label"], call["attempts"]) == ("ok", "B", 1)
    assert len(script.bodies) == 3


def test_5xx_and_dropped_connection_get_one_identical_retry(server, con):
    script, url = server
    script.steps = [("status", 503, {}), ("ok", '{"choice": "C"}'), ("drop",), ("ok", "not json at all")]
    backend = OpenAISelector("m", base_url=url, timeout=5)
    run_selector(con, dataset="tiny", judge="api", backend=backend, backend_name="openai", model="m",
                 orders=1, contract="choice", progress=False)
    calls = store.load_calls(con, "tiny")
    assert list(calls["status"]) == ["ok", "parse_fail"]
    assert list(calls["attempts"]) == [2, 2]
    assert calls["raw_output"].iloc[1] == "not json at all"
    assert script.bodies[0] == script.bodies[1] and script.bodies[2] == script.bodies[3]


def test_timeouts_twice_is_a_runtime_failure_and_other_calls_go_on(server, con):
    script, url = server
    script.steps = [("sleep", 1.0, '{"choice": "A"}'), ("sleep", 1.0, '{"choice": "A"}')]
    backend = OpenAISelector("m", base_url=url, timeout=0.2)
    summary = run_selector(con, dataset="tiny", judge="api", backend=backend, backend_name="openai", model="m",
                           orders=1, contract="choice", progress=False)
    calls = store.load_calls(con, "tiny")
    assert summary.statuses == {"runtime_fail": 1, "ok": 1}
    failed = calls[calls["status"] == "runtime_fail"].iloc[0]
    assert failed["attempts"] == 2 and "Timeout" in failed["parse_note"] and pd.isna(failed["raw_output"])


def test_bounded_concurrency_and_client_errors(server, con):
    script, url = server
    script.steps = [("sleep", 0.3, '{"choice": "A"}') for _ in range(6)]
    backend = OpenAISelector("m", base_url=url)
    start = time.perf_counter()
    summary = run_selector(con, dataset="tiny", judge="api", backend=backend, backend_name="openai", model="m",
                           orders=3, contract="choice", concurrency=3, progress=False)
    assert summary.statuses == {"ok": 6}
    assert time.perf_counter() - start < 1.5  # six 0.3 s calls, three at a time
    script.steps = [("status", 400, {})]
    with pytest.raises(EndpointError, match="HTTP 400"):
        backend.generate(first_request(con))


def test_missing_endpoint_says_what_to_set(monkeypatch):
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    with pytest.raises(ValueError, match="OPENAI_BASE_URL"):
        OpenAISelector("m")


def run_one(con, backend, **kwargs):
    """Record the first prompt in one order; its call row."""
    run_selector(con, dataset="tiny", judge="api", backend=backend, backend_name="openai", model="m",
                 orders=1, contract="choice", limit=1, progress=False, **kwargs)
    calls = store.load_calls(con, "tiny")
    assert len(calls) == 1
    return calls.iloc[0]


@pytest.mark.parametrize(
    ("content", "kind"),
    [(5, "a number"), (3.5, "a number"), (None, "null"), (True, "a boolean"), ([1, 2], "a list"),
     ([], "an empty list"), ([{"type": "image_url", "image_url": {"url": "x"}}], "a list"),
     ([{"type": "text", "text": 7}], "a list"), ({"choice": "A"}, "an object")],
)
def test_content_that_is_not_text_is_a_parse_failure_of_that_call_not_of_the_run(server, con, content, kind):
    script, url = server
    script.steps = [("content", content), ("ok", '{"choice": "B"}')]
    backend = OpenAISelector("m", base_url=url)
    summary = run_selector(con, dataset="tiny", judge="api", backend=backend, backend_name="openai", model="m",
                           orders=1, contract="choice", lenient=True, progress=False)
    assert summary.statuses == {"parse_fail": 1, "ok": 1}
    calls = store.load_calls(con, "tiny").set_index("status")
    failed = calls.loc["parse_fail"]
    assert failed["attempts"] == 1 and len(script.bodies) == 2  # invalid text is never resampled
    assert failed["raw_output"] == f"(message content is {kind}, not text) {json.dumps(content)}"
    assert pd.isna(failed["choice_label"])  # not even an object with a valid choice gives a pick
    assert calls.loc["ok", "choice_label"] == "B"


def test_content_in_text_parts_is_joined(server, con):
    script, url = server
    script.steps = [("content", [{"type": "text", "text": '{"choice": '}, {"text": '"C"}'}])]
    call = run_one(con, OpenAISelector("m", base_url=url))
    assert (call["status"], call["choice_label"], call["raw_output"]) == ("ok", "C", '{"choice": "C"}')


@pytest.mark.parametrize("part", ["body", "headers"])
def test_a_dripping_server_is_cut_off_at_the_wall_clock_deadline(server, con, part):
    script, url = server
    script.steps = [("drip", part, 4.0)]  # would take 4 s or more; each byte comes well within a read timeout
    backend = OpenAISelector("m", base_url=url, timeout=1.0)
    start = time.perf_counter()
    with pytest.raises(EndpointTimeout, match="no complete response within 1 s"):
        backend.generate(first_request(con))
    assert 0.95 <= time.perf_counter() - start < 1.6


def test_a_dripping_server_twice_is_one_runtime_failure_within_two_deadlines(server, con):
    script, url = server
    script.steps = [("drip", "body", 3.0), ("drip", "body", 3.0)]
    start = time.perf_counter()
    call = run_one(con, OpenAISelector("m", base_url=url, timeout=0.5))
    assert time.perf_counter() - start < 2.0
    assert (call["status"], call["attempts"]) == ("runtime_fail", 2)
    assert call["parse_note"].startswith("EndpointTimeout: ") and pd.isna(call["raw_output"])


@pytest.mark.parametrize("send_length", [True, False])
def test_a_body_over_the_cap_is_a_runtime_failure_carrying_its_head_cut(server, con, send_length):
    script, url = server
    big = b'{"choices": [{"message": {"content": "' + b"A" * (8 << 20) + b'"}}]}'
    script.steps = [("body", big, send_length)] * 3
    backend = OpenAISelector("m", base_url=url, max_response_bytes=1 << 20)
    with pytest.raises(EndpointError, match="exceeds the 1048576-byte cap") as failure:
        backend.generate(first_request(con))
    head, marker = failure.value.raw_output.rsplit("\n", 1)
    assert head == big[:STORED_TEXT_CHARS].decode()
    assert marker == f"[cut: body over the {1 << 20}-byte cap; first {STORED_TEXT_CHARS} bytes kept]"
    call = run_one(con, backend)
    assert (call["status"], call["attempts"]) == ("runtime_fail", 2)  # one identical retry
    assert script.bodies[1] == script.bodies[2] and "exceeds the 1048576-byte cap" in call["parse_note"]
    assert call["raw_output"] == failure.value.raw_output  # stored with the failure, bounded and marked as cut


@pytest.mark.parametrize("content", ["A" * 20_000_000, '{"choice": "A"}' + " " * 20_000_000])
def test_huge_content_under_the_cap_is_stored_cut_and_never_parsed_into_a_pick(server, con, content):
    script, url = server
    script.steps = [("content", content)]
    call = run_one(con, OpenAISelector("m", base_url=url, max_response_bytes=64 << 20), lenient=True)
    assert (call["status"], call["attempts"]) == ("parse_fail", 1) and pd.isna(call["choice_label"])
    raw = call["raw_output"]
    assert raw.startswith(content[:STORED_TEXT_CHARS])
    marker = f"\n[cut: reply of {len(content)} characters; first {STORED_TEXT_CHARS} characters kept]"
    assert raw[STORED_TEXT_CHARS:] == marker


@pytest.mark.parametrize("body", [b"\xff\xfe not utf-8", b"[]", b'{"choices": []}', b'{"choices": [{"message": "A"}]}'])
def test_a_body_that_is_not_a_chat_completion_is_a_runtime_failure(server, con, body):
    script, url = server
    script.steps = [("body", body, True), ("body", body, True)]
    call = run_one(con, OpenAISelector("m", base_url=url))
    assert (call["status"], call["attempts"]) == ("runtime_fail", 2)
    assert "unexpected response body" in call["parse_note"]


def test_cli_bounds_reach_the_backend_and_bad_values_exit_2(tmp_path, capsys):
    common = ["--db", str(tmp_path / "x.duckdb"), "--dataset", "d", "--judge", "j", "--backend", "openai",
              "--model", "m", "--base-url", "http://127.0.0.1:9/v1"]
    backend = make_backend(build_parser().parse_args(common + ["--timeout", "7", "--max-response-bytes", "1000"]))
    assert (backend.timeout, backend.max_response_bytes) == (7.0, 1000)
    for flag, value in [("--timeout", "0"), ("--timeout", "inf"), ("--max-response-bytes", "0")]:
        with pytest.raises(SystemExit) as exit_:
            main(common + [flag, value])
        assert exit_.value.code == 2 and flag in capsys.readouterr().err
    assert not (tmp_path / "x.duckdb").exists()


@pytest.mark.parametrize("url", ["ftp://host/v1", "http:///v1", "http://host:99999/v1", "http://host:x/v1"])
def test_an_endpoint_that_is_not_an_http_url_is_refused(url):
    with pytest.raises(ValueError, match="not an http:// or https:// URL"):
        OpenAISelector("m", base_url=url)


# ------------------------------------------------------------------ structured output (--structured)


def shown_labels(body) -> tuple[str, ...]:
    """The slot labels a request body shows, read from its "Image X:" texts."""
    texts = [c["text"].strip() for c in body["messages"][0]["content"] if c["type"] == "text"]
    return tuple(t[len("Image "):-1] for t in texts if t.startswith("Image ") and t.endswith(":"))


def cli(db, url, *extra):
    return main(["--db", str(db), "--dataset", "tiny", "--backend", "openai", "--model", "m", "--base-url", url,
                 "--quiet", *extra])


@pytest.fixture
def mixed_db(tmp_path):
    """Two prompts, with pools of 3 and 4 candidates."""
    db = tmp_path / "mixed.duckdb"
    write_tiny_dataset(db, tmp_path / "images", n_prompts=2, pool_sizes=(3, 4))
    return db


@pytest.mark.parametrize("contract", ["choice", "ranking"])
def test_structured_requests_carry_a_strict_schema_of_exactly_their_labels(server, mixed_db, contract):
    script, url = server
    assert cli(mixed_db, url, "--judge", "api", "--orders", "2", "--contract", contract, "--structured") == 0
    assert len(script.bodies) == 4
    for body in script.bodies:
        labels = list(shown_labels(body))
        fmt = body["response_format"]
        assert (fmt["type"], fmt["json_schema"]["strict"]) == ("json_schema", True)
        assert fmt["json_schema"]["name"] == f"{contract}_{''.join(labels)}"
        schema = fmt["json_schema"]["schema"]
        label = {"type": "string", "enum": labels}
        keys = ["choice"] + (["ranking"] if contract == "ranking" else [])
        assert schema == {"type": "object", "required": keys, "additionalProperties": False,
                          "properties": {"choice": label, **({"ranking": {"type": "array", "items": label}}
                                                             if contract == "ranking" else {})}}
    assert {shown_labels(b) for b in script.bodies} == {tuple("ABC"), tuple("ABCD")}
    script.bodies.clear()
    assert cli(mixed_db, url, "--judge", "plain", "--orders", "2", "--contract", contract) == 0
    assert len(script.bodies) == 4 and not any("response_format" in b for b in script.bodies)


def read_back(db, sql):
    """(calls of dataset tiny, rows of `sql`) from a connection opened and closed here."""
    check = store.connect(db, read_only=True)
    try:
        return store.load_calls(check, "tiny"), check.execute(sql).fetchall()
    finally:
        check.close()


def test_structured_is_its_own_protocol_condition(server, con, tmp_path, capsys):
    script, url = server
    db = tmp_path / "o.duckdb"
    plan = dict(dataset="tiny", orders=3, contract="ranking", limit=None)
    plain, _, plain_sha, _ = recorder.plan_requests(con, judge="api", **plan)
    constrained, _, constrained_sha, _ = recorder.plan_requests(con, judge="api", **plan, structured=True)
    planned = recorder.plan_requests(con, judge="api-structured", **plan, structured=True)[0]
    con.close()
    assert len(plain) == len(constrained) == 6 and constrained_sha != plain_sha
    assert not {r.request_key for r in plain} & {r.request_key for r in constrained}
    assert [r.segments() for r in plain] == [r.segments() for r in constrained]  # the same text and images shown
    assert cli(db, url, "--judge", "api") == 0
    before, _ = read_back(db, "SELECT 1")
    assert cli(db, url, "--judge", "api", "--structured") == 2  # the same name under another protocol: refused
    assert "instruction_sha256" in capsys.readouterr().err and len(script.bodies) == 6
    assert cli(db, url, "--judge", "api-structured", "--structured") == 0
    calls, runs = read_back(db, "SELECT judge, instruction_sha256, config_json FROM runs ORDER BY judge")
    assert [(judge, sha, json.loads(config)["structured"]) for judge, sha, config in runs] == [
        ("api", plain_sha, False), ("api-structured", constrained_sha, True)]
    pd.testing.assert_frame_equal(calls[calls["judge"] == "api"].reset_index(drop=True), before)
    assert set(calls.loc[calls["judge"] == "api-structured", "request_key"]) == {r.request_key for r in planned}


def test_outputs_violating_the_schema_are_still_parse_failures(server, con, tmp_path):
    script, url = server
    db = tmp_path / "o.duckdb"
    con.close()
    answers = [
        '{"choice": "D", "ranking": ["D", "A", "B"]}',  # a label that is not supplied
        '{"choice": "A", "ranking": ["A", "B", "C"], "why": "x"}',  # a key the schema forbids
        '{"choice": "B"}',  # a required key missing
        "B",  # not JSON at all
        '{"choice": "A", "ranking": ["A", "A", "B"]}',  # fits the schema, yet not a ranking of every label
        '{"choice": "C", "ranking": ["C", "A", "B"]}',
    ]
    script.steps = [("ok", a) for a in answers]
    assert cli(db, url, "--judge", "api", "--structured") == 0
    schemas = [b["response_format"]["json_schema"]["schema"] for b in script.bodies]
    assert all(s == schemas[0] for s in schemas)

    def fits(text):
        try:
            jsonschema.validate(json.loads(text), schemas[0])
        except (ValueError, jsonschema.ValidationError):
            return False
        return True

    assert [fits(a) for a in answers] == [False, False, False, False, True, True]
    calls = read_back(db, "SELECT 1")[0].set_index("raw_output")
    assert [calls.loc[a, "status"] for a in answers] == ["parse_fail"] * 5 + ["ok"]
    assert calls.loc[answers[-1], "choice_label"] == "C" and calls["choice_label"].notna().sum() == 1


@pytest.mark.parametrize("backend", ["simulated", "hf"])
def test_structured_needs_the_openai_backend(tmp_path, capsys, backend):
    with pytest.raises(SystemExit) as exit_:
        main(["--db", str(tmp_path / "x.duckdb"), "--dataset", "d", "--judge", "j", "--backend", backend,
              "--model", "m", "--structured"])
    assert exit_.value.code == 2 and "--structured needs --backend openai" in capsys.readouterr().err
    assert not (tmp_path / "x.duckdb").exists()


def test_a_structured_rater_asks_for_a_rating_on_the_scale_and_its_parser_is_unchanged(server, tmp_path):
    script, url = server
    db = tmp_path / "r.duckdb"
    write_tiny_dataset(db, tmp_path / "images", n_prompts=2, pool_sizes=(4,))
    answers = [
        '{"rating": 4}',
        '{"rating": "unspecified"}',
        '{"rating": 6}',  # off the scale
        '{"rating": 3, "why": "x"}',  # a key the schema forbids
        '{"rating": 4.0}',  # JSON Schema counts 4.0 as the integer 4; the rating contract does not
        "4",  # outside the schema, but a bare rating is the contract's: the parser is the same under --structured
        "I'd say 4",
    ]
    script.steps = [("ok", a) for a in answers]
    code = run_rater.main(["--db", str(db), "--dataset", "tiny", "--judge", "api", "--backend", "openai",
                           "--model", "m", "--base-url", url, "--limit", str(len(answers)), "--structured", "--quiet"])
    assert code == 0 and len(script.bodies) == len(answers)
    formats = [b["response_format"] for b in script.bodies]
    assert all(f == formats[0] for f in formats)
    assert formats[0] == {"type": "json_schema", "json_schema": {"name": "rating_1_to_5", "strict": True, "schema": {
        "type": "object", "required": ["rating"], "additionalProperties": False, "properties": {"rating": {
            "anyOf": [{"type": "integer", "enum": [1, 2, 3, 4, 5]}, {"type": "string", "enum": ["unspecified"]}]}}}}}

    def fits(text):
        try:
            jsonschema.validate(json.loads(text), formats[0]["json_schema"]["schema"])
        except (ValueError, jsonschema.ValidationError):
            return False
        return True

    assert [fits(a) for a in answers] == [True, True, False, False, True, False, False]
    check = store.connect(db, read_only=True)
    calls = store.load_rating_calls(check, "tiny").set_index("raw_output")
    config = json.loads(check.execute("SELECT config_json FROM runs").fetchone()[0])
    check.close()
    assert [calls.loc[a, "status"] for a in answers] == [
        "ok", "abstained", "parse_fail", "parse_fail", "parse_fail", "ok", "parse_fail"]
    assert config["structured"] is True
    check = store.connect(db, read_only=True)
    scope = load_rating_scope(check, dataset="tiny", outcome="alignment", limit=None)
    check.close()
    keys = {structured: {r.request_key for r in plan_ratings(
        scope, judge="api", instruction=load_rubric(DEFAULT_INSTRUCTION, structured),
        conditions=select_conditions(DEFAULT_CONDITIONS, ["default"]))[0]} for structured in (False, True)}
    assert len(keys[False]) == len(keys[True]) == 8 and not keys[False] & keys[True]
    assert set(calls["request_key"]) <= keys[True]


@pytest.mark.parametrize("form", ["separate", "joined"])
def test_an_api_key_on_the_command_line_is_sent_but_never_stored(server, tmp_path, form):
    script, url = server
    db = tmp_path / "k.duckdb"
    write_tiny_dataset(db, tmp_path / "images", n_prompts=1, pool_sizes=(3,))
    secret = "sk-test-do-not-store-1234"
    key_args = ["--api-key", secret] if form == "separate" else [f"--api-key={secret}"]
    done = subprocess.run([sys.executable, "-m", "runners.run_judge", "--db", str(db), "--dataset", "tiny",
                           "--judge", "api", "--backend", "openai", "--model", "m", "--base-url", url, "--orders", "1",
                           "--quiet", *key_args], cwd=REPO, capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert script.headers[0]["Authorization"] == f"Bearer {secret}"
    _, runs = read_back(db, "SELECT config_json FROM runs")
    config = json.loads(runs[0][0])
    assert "--api-key" in " ".join(config["argv"]) and "api_key" not in config
    assert secret not in runs[0][0] and secret.encode() not in db.read_bytes()
