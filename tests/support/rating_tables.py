"""A small rating study as tables of the table contract: three prompts, each with an `east` and a
`west` image, rubric votes (1–5) from pool `a` (three annotators) and pool `b` (two), and a rating
judge's recorded calls."""

from __future__ import annotations

PROMPTS = [("p1", "A wedding feast", "food"), ("p2", "A harvest festival", "festival"), ("p3", "A city street", "place")]
CULTURES = ("east", "west")
CANDIDATES = [f"{pid}_{c}" for pid, _, _ in PROMPTS for c in CULTURES]
ANNOTATORS = {"a": ("a1", "a2", "a3"), "b": ("b1", "b2")}


def pool_rows() -> list[dict]:
    """The pools table of a rating study: no rating column at all, an item attribute per image."""
    return [{"prompt_id": pid, "prompt": text, "category": category, "candidate_id": f"{pid}_{c}", "item_culture": c}
            for pid, text, category in PROMPTS for c in CULTURES]


def vote_rows() -> list[dict]:
    """Rubric votes on 1–5: pool a likes east images, pool b west ones, with some spread."""
    rows = []
    for k, cid in enumerate(CANDIDATES):
        east = cid.endswith("east")
        for pool, annotators in ANNOTATORS.items():
            base = 4 if east == (pool == "a") else 2
            rows += [{"candidate_id": cid, "outcome": "rubric", "pool": pool, "annotator": who,
                      "value": min(5, base + (j + k) % 2)} for j, who in enumerate(annotators)]
    return rows


def rating_rows() -> list[dict]:
    return [
        {"candidate_id": "p1_east", "rating": 4, "raw_output": "4", "seconds": 0.5},
        {"candidate_id": "p1_west", "condition": "persona", "rating": 2.0, "status": "ok", "raw_output": "2",
         "parse_note": "bare integer", "attempts": 2},
        {"candidate_id": "p2_east", "status": "abstained", "raw_output": "unspecified"},
        {"candidate_id": "p2_west", "raw_output": "It is lovely."},
        {"candidate_id": "p3_east"},
        {"candidate_id": "p3_east", "condition": "persona", "rating": 5},
    ]
