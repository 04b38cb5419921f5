"""Table-driven tests of the strict parser and the opt-in lenient adapter (DESIGN §5)."""

import pytest

from runners.selection.parsing import ParseResult, parse_output

ABC = ("A", "B", "C")
ABCD = ("A", "B", "C", "D")
FAIL = ("parse_fail", None, None)

# (raw output, labels, contract, strict (status, choice, ranking), lenient (status, choice, ranking))
CASES = [
    # valid outputs
    ('{"choice": "B", "ranking": ["B", "A", "C"]}', ABC, "ranking", ("ok", "B", ("B", "A", "C")), ("ok", "B", ("B", "A", "C"))),
    ('{\n  "choice": "C",\n  "ranking": [\n    "C",\n    "A",\n    "B",\n    "D"\n  ]\n}', ABCD, "ranking",
     ("ok", "C", ("C", "A", "B", "D")), ("ok", "C", ("C", "A", "B", "D"))),
    ('  {"ranking": ["A", "C", "B"], "choice": "A"}\n', ABC, "ranking", ("ok", "A", ("A", "C", "B")), ("ok", "A", ("A", "C", "B"))),
    ('{"choice": "D"}', ABCD, "choice", ("ok", "D", None), ("ok", "D", None)),
    # code fences around the whole output (noted, still strict)
    ('```json\n{"choice": "A", "ranking": ["A", "B", "C"]}\n```', ABC, "ranking", ("ok", "A", ("A", "B", "C")), ("ok", "A", ("A", "B", "C"))),
    ('```\n{"choice": "B"}\n```', ABC, "choice", ("ok", "B", None), ("ok", "B", None)),
    ('```json\nB\n```', ABC, "choice", FAIL, ("recovered", "B", None)),
    # JSON wrapped in prose
    ('Here is my answer: {"choice": "B", "ranking": ["B", "A", "C"]}', ABC, "ranking", FAIL, FAIL),
    ('{"choice": "B", "ranking": ["B", "A", "C"]} I picked B because it is vivid.', ABC, "ranking", FAIL, FAIL),
    ('Sure!\n```json\n{"choice": "A"}\n```', ABC, "choice", FAIL, FAIL),
    # prose only
    ("I think the second image is best.", ABC, "ranking", FAIL, FAIL),
    ("Image B is the best match.", ABC, "choice", FAIL, FAIL),
    # repeated labels / several labels
    ('{"choice": "A", "ranking": ["A", "A", "B"]}', ABC, "ranking", FAIL, FAIL),
    ("A B", ABC, "choice", FAIL, FAIL),
    ("A, B", ABC, "choice", FAIL, FAIL),
    ('{"image": "A or B"}', ABC, "choice", FAIL, FAIL),
    ('{"choice": "A", "choice": "B"}', ABC, "choice", FAIL, FAIL),
    # incomplete rankings
    ('{"choice": "A", "ranking": ["A", "B"]}', ABC, "ranking", FAIL, FAIL),
    ('{"choice": "A", "ranking": []}', ABC, "ranking", FAIL, FAIL),
    ('{"choice": "A"}', ABC, "ranking", FAIL, ("recovered", "A", None)),
    ('{"choice": "A", "ranking": ["A", "B", "C"]', ABC, "ranking", FAIL, FAIL),
    # choice != ranking[0]
    ('{"choice": "B", "ranking": ["A", "B", "C"]}', ABC, "ranking", FAIL, FAIL),
    # extra or wrong keys
    ('{"choice": "B", "ranking": ["B", "A", "C"], "reason": "colours"}', ABC, "ranking", FAIL, FAIL),
    ('{"choice": "B", "ranking": ["B", "A", "C"]}', ABC, "choice", FAIL, FAIL),
    ('{"label": "C"}', ABC, "choice", FAIL, FAIL),
    # aliases (lenient only)
    ('{"image": "C"}', ABC, "choice", FAIL, ("recovered", "C", None)),
    (' {\n    "image": "C"\n}', ABCD, "ranking", FAIL, ("recovered", "C", None)),
    ('{"selected": "A"}', ABC, "choice", FAIL, ("recovered", "A", None)),
    ('{"selected_image": "B"}', ABC, "ranking", FAIL, ("recovered", "B", None)),
    ('{"candidate": "B"}', ABC, "choice", FAIL, ("recovered", "B", None)),
    ('{"image": "C", "selected": "C"}', ABC, "choice", FAIL, FAIL),
    # "Candidate B"
    (' {\n    "image": "Candidate A"\n}', ABC, "choice", FAIL, ("recovered", "A", None)),
    ("Candidate B", ABC, "choice", FAIL, ("recovered", "B", None)),
    ('{"choice": "Candidate B"}', ABC, "choice", FAIL, ("recovered", "B", None)),
    ('{"choice": "Candidate B", "ranking": ["B", "A", "C"]}', ABC, "ranking", FAIL, FAIL),
    # bare labels
    (" B", ABC, "ranking", FAIL, ("recovered", "B", None)),
    ("D\n", ABCD, "choice", FAIL, ("recovered", "D", None)),
    (" A.", ABC, "choice", FAIL, FAIL),
    ('"B"', ABC, "choice", FAIL, FAIL),
    # lowercase (labels are case-sensitive)
    ('{"choice": "b"}', ABC, "choice", FAIL, FAIL),
    ("b", ABC, "choice", FAIL, FAIL),
    ('{"image": "candidate b"}', ABC, "choice", FAIL, FAIL),
    ('{"choice": "a", "ranking": ["a", "b", "c"]}', ABC, "ranking", FAIL, FAIL),
    # unknown labels
    ('{"choice": "D"}', ABC, "choice", FAIL, FAIL),
    ('{"choice": "E", "ranking": ["E", "A", "B", "C"]}', ABC, "ranking", FAIL, FAIL),
    ("D", ABC, "choice", FAIL, FAIL),
    ('{"image": "Candidate E"}', ABCD, "choice", FAIL, FAIL),
    ('{"choice": 2}', ABC, "choice", FAIL, FAIL),
    # empty and non-objects
    ("", ABC, "ranking", FAIL, FAIL),
    ("   \n", ABC, "choice", FAIL, FAIL),
    ("[\"A\", \"B\", \"C\"]", ABC, "ranking", FAIL, FAIL),
    ("null", ABC, "choice", FAIL, FAIL),
]


def test_table_has_at_least_30_outputs():
    assert len(CASES) >= 30


@pytest.mark.parametrize(("raw", "labels", "contract", "strict", "lenient"), CASES)
def test_strict_and_lenient(raw, labels, contract, strict, lenient):
    for want, is_lenient in ((strict, False), (lenient, True)):
        got = parse_output(raw, labels, contract, lenient=is_lenient)
        assert (got.status, got.choice, got.ranking) == want, (raw, is_lenient, got)
        if got.status == "parse_fail":
            assert got.note, "a failure says why"
        if got.status == "recovered":
            assert got.note and got.ranking is None, "every recovery is flagged and invents no ranking"


def test_recovery_notes_say_what_was_recovered():
    assert parse_output(" B", ABC, "choice", lenient=True).note == "bare label"
    assert parse_output('{"image": "Candidate A"}', ABC, "choice", lenient=True).note == (
        "one-key object 'image' with 'Candidate' prefix"
    )
    fenced = parse_output('```json\n{"choice": "A"}\n```', ABC, "choice")
    assert fenced == ParseResult("ok", "A", None, "code fence removed")


def test_failure_notes_explain():
    assert "differs from ranking[0]" in parse_output('{"choice": "B", "ranking": ["A", "B", "C"]}', ABC, "ranking").note
    assert "incomplete" in parse_output('{"choice": "A", "ranking": ["A", "B"]}', ABC, "ranking").note
    assert "not a supplied label" in parse_output('{"choice": "b"}', ABC, "choice").note
    assert parse_output(None, ABC, "choice").note == "empty output"


def test_unknown_contract_is_a_programming_error():
    with pytest.raises(ValueError, match="unknown output contract"):
        parse_output('{"choice": "A"}', ABC, "score")
