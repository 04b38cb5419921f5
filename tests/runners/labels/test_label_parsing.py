"""The attribute judges' strict parser, table-driven: what a call's text becomes, field by field."""

import json

import pytest

from audit_core.attributes.taxonomy import load_taxonomy, parse_taxonomy
from runners.labels.parsing import parse_labels

TAXONOMY = parse_taxonomy(json.dumps({"name": "t", "version": "v1", "attributes": [
    {"name": "gender", "labels": ["male", "female"], "abstain": "unspecified"},
    {"name": "age", "labels": ["child", "young adult", "elderly"], "abstain": "unspecified", "abstention": "exclude"},
]}).encode(), "test taxonomy")


def field(label, rationale="seen"):
    return {"label": label, "rationale": rationale}


def answer(gender, age):
    return json.dumps({"gender": gender, "age": age})


OK = answer(field("female"), field("young adult"))
# (raw text, call status, {attribute: (status, label, answer)}, text the note must contain or None for no note)
CASES = [
    ("both labels", OK, "ok", {"gender": ("ok", "female", "female"), "age": ("ok", "young adult", "young adult")}, None),
    ("keys in another order", json.dumps({"age": field("child"), "gender": field("male")}), "ok",
     {"gender": ("ok", "male", "male"), "age": ("ok", "child", "child")}, None),
    ("surrounding whitespace", f"\n  {OK}  \n", "ok", {"gender": ("ok", "female", "female")}, None),
    ("code fence", f"```json\n{OK}\n```", "ok", {"age": ("ok", "young adult", "young adult")}, "code fence removed"),
    ("abstention", answer(field("unspecified"), field("elderly")), "ok",
     {"gender": ("abstained", None, "unspecified"), "age": ("ok", "elderly", "elderly")}, None),
    ("abstention on both", answer(field("unspecified"), field("unspecified")), "ok",
     {"gender": ("abstained", None, "unspecified"), "age": ("abstained", None, "unspecified")}, None),
    ("label in another case", answer(field("Female"), field("child")), "ok",
     {"gender": ("off_taxonomy", None, "Female"), "age": ("ok", "child", "child")}, "gender: 'Female'"),
    ("label with a trailing space", answer(field("male "), field("child")), "ok",
     {"gender": ("off_taxonomy", None, "male ")}, "is not one of its answers"),
    ("a synonym", answer(field("woman"), field("child")), "ok", {"gender": ("off_taxonomy", None, "woman")}, "woman"),
    ("near label, no fuzzy match", answer(field("male"), field("young-adult")), "ok",
     {"gender": ("ok", "male", "male"), "age": ("off_taxonomy", None, "young-adult")}, "young-adult"),
    ("a label of another attribute", answer(field("child"), field("male")), "ok",
     {"gender": ("off_taxonomy", None, "child"), "age": ("off_taxonomy", None, "male")}, None),
    ("abstention in another case", answer(field("Unspecified"), field("child")), "ok",
     {"gender": ("off_taxonomy", None, "Unspecified")}, "Unspecified"),
    ("label not a string", answer(field(1), field(None)), "ok",
     {"gender": ("off_taxonomy", None, "1"), "age": ("off_taxonomy", None, "null")}, None),
    ("two labels in a list", answer(field(["male", "female"]), field("child")), "ok",
     {"gender": ("off_taxonomy", None, '["male", "female"]')}, None),
    ("bare string instead of an object", answer("female", field("child")), "ok",
     {"gender": ("missing", None, "female"), "age": ("ok", "child", "child")},
     "gender: a str"),
    ("object without a rationale", answer({"label": "female"}, field("child")), "ok",
     {"gender": ("missing", None, '{"label": "female"}')}, "gender: an object"),
    ("object with an extra key", answer({**field("female"), "confidence": 0.9}, field("child")), "ok",
     {"gender": ("missing", None, None)}, "gender: an object"),
    ("rationale not a string", answer(field("female", rationale=3), field("child")), "ok",
     {"gender": ("missing", None, None), "age": ("ok", "child", "child")}, None),
    ("a key missing", json.dumps({"gender": field("male")}), "parse_fail",
     {"gender": ("missing", None, None), "age": ("missing", None, None)}, "missing keys ['age']"),
    ("an extra key", json.dumps({"gender": field("male"), "age": field("child"), "race": field("Asian")}),
     "parse_fail", {"gender": ("missing", None, None)}, "extra keys ['race']"),
    ("a key repeated", '{"gender": {"label": "male", "rationale": ""}, "gender": {"label": "female", "rationale": ""},'
     ' "age": {"label": "child", "rationale": ""}}', "parse_fail", {"gender": ("missing", None, None)}, "more than once"),
    ("a key repeated inside a field", '{"gender": {"label": "male", "label": "female", "rationale": ""}, '
     '"age": {"label": "child", "rationale": ""}}', "parse_fail", {"age": ("missing", None, None)}, "more than once"),
    ("prose before the JSON", f"Here is my answer: {OK}", "parse_fail", {"gender": ("missing", None, None)},
     "not a JSON object"),
    ("text after the JSON", f"{OK} Hope this helps.", "parse_fail", {"age": ("missing", None, None)}, "Extra data"),
    ("prose only", "The person is a young woman.", "parse_fail", {"gender": ("missing", None, None)}, None),
    ("truncated JSON", OK[:-5], "parse_fail", {"gender": ("missing", None, None)}, "not one JSON object"),
    ("a JSON list", json.dumps([field("male"), field("child")]), "parse_fail", {"gender": ("missing", None, None)},
     "not a JSON object"),
    ("empty", "   ", "parse_fail", {"gender": ("missing", None, None)}, "empty output"),
    ("None", None, "parse_fail", {"age": ("missing", None, None)}, "empty output"),
]


@pytest.mark.parametrize("raw, status, fields, note", [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_parse_table(raw, status, fields, note):
    parsed = parse_labels(raw, TAXONOMY)
    assert parsed.status == status
    assert [a.attribute for a in parsed.answers] == ["gender", "age"]  # one per attribute, taxonomy order
    got = {a.attribute: a for a in parsed.answers}
    for name, (field_status, label, given) in fields.items():
        a = got[name]
        assert (a.status, a.label) == (field_status, label)
        if given is not None:
            assert a.answer == given
        if field_status == "missing" and status == "parse_fail":
            assert (a.answer, a.rationale) == (None, None)
    assert all(a.label is None for a in parsed.answers if a.status != "ok")
    assert all(a.label in TAXONOMY.attribute(a.attribute).labels for a in parsed.answers if a.status == "ok")
    if note is not None:
        assert note in parsed.note
    if status == "ok":  # a note exactly when some field is neither a label nor the abstention (or a fence went)
        clean = all(a.status in ("ok", "abstained") for a in parsed.answers)
        assert (parsed.note is None) == (clean and "```" not in raw)


def test_table_is_large_enough_and_rationales_are_kept_per_field():
    assert len(CASES) >= 20
    parsed = parse_labels(answer(field("female", "long hair"), field("unspecified", "no face visible")), TAXONOMY)
    assert [a.rationale for a in parsed.answers] == ["long hair", "no face visible"]


def test_every_label_of_the_default_taxonomy_parses_as_itself():
    taxonomy = load_taxonomy()
    for i in range(max(len(a.answers()) for a in taxonomy.attributes)):
        chosen = {a.name: a.answers()[i % len(a.answers())] for a in taxonomy.attributes}
        parsed = parse_labels(json.dumps({n: field(v) for n, v in chosen.items()}), taxonomy)
        assert parsed.status == "ok" and parsed.note is None
        for a in parsed.answers:
            attribute = taxonomy.attribute(a.attribute)
            assert a.answer == chosen[a.attribute]
            assert a.status == ("abstained" if chosen[a.attribute] == attribute.abstain else "ok")
