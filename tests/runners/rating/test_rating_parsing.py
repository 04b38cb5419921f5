"""The rating parser, table-driven: every accepted shape and the reasons for refusing the rest."""

import pytest

from runners.rating.parsing import SHAPES, Scale, parse_rating

SCALE = Scale(1, 5, "unspecified")
NO_ABSTAIN = Scale(1, 5, None)
WIDE = Scale(0, 10, "n/a")

# (raw output, scale, status, rating, note fragment or None for a clean parse)
CASES = [
    ("4", SCALE, "ok", 4, None),
    ("1", SCALE, "ok", 1, None),
    ("5", SCALE, "ok", 5, None),
    ("  3 \n", SCALE, "ok", 3, None),
    ("\t2", SCALE, "ok", 2, None),
    ('{"rating": 4}', SCALE, "ok", 4, None),
    (' {"rating":5} \n', SCALE, "ok", 5, None),
    ("```\n3\n```", SCALE, "ok", 3, "code fence removed"),
    ('```json\n{"rating": 2}\n```', SCALE, "ok", 2, "code fence removed"),
    ("10", WIDE, "ok", 10, None),
    ("0", WIDE, "ok", 0, None),
    ("unspecified", SCALE, "abstained", None, None),
    ("  unspecified\n", SCALE, "abstained", None, None),
    ('{"rating": "unspecified"}', SCALE, "abstained", None, None),
    ("n/a", WIDE, "abstained", None, None),
    ("", SCALE, "parse_fail", None, "empty output"),
    (None, SCALE, "parse_fail", None, "empty output"),
    ("   \n", SCALE, "parse_fail", None, "empty output"),
    ("6", SCALE, "parse_fail", None, "6 is outside the scale 1-5"),
    ("0", SCALE, "parse_fail", None, "0 is outside the scale 1-5"),
    ("11", WIDE, "parse_fail", None, "outside the scale 0-10"),
    ("3.5", SCALE, "parse_fail", None, "not a plain integer"),
    ("4.0", SCALE, "parse_fail", None, "not a plain integer"),
    ("4.", SCALE, "parse_fail", None, "not a plain integer"),
    ("-1", SCALE, "parse_fail", None, "not a plain integer"),
    ("+4", SCALE, "parse_fail", None, "not a plain integer"),
    ("04", SCALE, "parse_fail", None, "not a plain integer"),
    ("4e0", SCALE, "parse_fail", None, "not a plain integer"),
    ("\uff14", SCALE, "parse_fail", None, "not a rating"),  # fullwidth digit four
    ("four", SCALE, "parse_fail", None, "not a rating"),
    ("Rating: 4", SCALE, "parse_fail", None, "not a rating"),
    ("4/5", SCALE, "parse_fail", None, "not a rating"),
    ("3 or 4", SCALE, "parse_fail", None, "not a rating"),
    ("4\nThe image shows a festival.", SCALE, "parse_fail", None, "not a rating"),
    ("I would rate this image 4.", SCALE, "parse_fail", None, "not a rating"),
    ("[4]", SCALE, "parse_fail", None, "not a rating"),
    ("Unspecified", SCALE, "parse_fail", None, "case matters"),
    ("UNSPECIFIED", SCALE, "parse_fail", None, "case matters"),
    ("unspecified", NO_ABSTAIN, "parse_fail", None, "not allowed by this instruction"),
    ('{"rating": "unspecified"}', NO_ABSTAIN, "parse_fail", None, "not allowed by this instruction"),
    ("unspecified", WIDE, "parse_fail", None, "not a rating"),  # not this instruction's label
    ('{"rating": 4.0}', SCALE, "parse_fail", None, "rating is float 4.0"),
    ('{"rating": "4"}', SCALE, "parse_fail", None, "the string '4'"),
    ('{"rating": true}', SCALE, "parse_fail", None, "rating is bool"),
    ('{"rating": null}', SCALE, "parse_fail", None, "rating is NoneType"),
    ('{"rating": 7}', SCALE, "parse_fail", None, "7 is outside the scale 1-5"),
    ('{"rating": 4, "reason": "clear"}', SCALE, "parse_fail", None, "are not exactly ['rating']"),
    ('{"score": 4}', SCALE, "parse_fail", None, "are not exactly ['rating']"),
    ('{"rating": 2, "rating": 3}', SCALE, "parse_fail", None, "appears more than once"),
    ('{"rating": 4', SCALE, "parse_fail", None, "not a JSON object"),
    ("```\n6\n```", SCALE, "parse_fail", None, "code fence removed; 6 is outside"),
]


@pytest.mark.parametrize(("raw", "scale", "status", "rating", "note"), CASES)
def test_parse_rating_table(raw, scale, status, rating, note):
    parsed = parse_rating(raw, scale)
    assert (parsed.status, parsed.rating) == (status, rating)
    if note is None:
        assert parsed.note is None
    else:
        assert note in parsed.note


def test_table_is_large_and_every_failure_explains_itself():
    assert len(CASES) >= 20
    assert {status for _, _, status, _, _ in CASES} == {"ok", "abstained", "parse_fail"}
    for raw, scale, *_ in CASES:
        parsed = parse_rating(raw, scale)
        assert (parsed.rating is None) == (parsed.status != "ok")
        if parsed.status == "parse_fail":
            assert parsed.note


def test_shapes_are_a_table_tried_in_order():
    assert [name for name, _ in SHAPES] == ["bare integer", "other number", "abstention label", "JSON object"]


def test_scale_must_have_two_points():
    with pytest.raises(ValueError, match="top must exceed the bottom"):
        Scale(3, 3)
