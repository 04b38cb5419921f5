"""Reader for the JudgeActs artifact layout (DESIGN.md §6).

- pools: `data/derived/{split}.jsonl`, one prompt per line with its candidates and
  aggregated ratings (`utility` = mean alignment, `alignment_ratings` = votes);
- runs: `runs/*.jsonl`, one judge call per line with `permutation`, `mapping`
  (label → candidate id, the slot order as shown), parse flags, `raw_output`,
  `parsed` and `selected_id`;
- scores: `{"model", "revision", "scores": {candidate_id: cosine}}`.

Slot orders are read from `mapping`, never recomputed.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterator
from pathlib import Path

import pandas as pd

from audit_core.errors import InputError
from audit_core.orders import slot_labels
from audit_core.ingest.pools import ImportedRun, ImportedScores, PoolSet

# candidate field -> (outcome, field holding its annotation count)
RATING_FIELDS: dict[str, tuple[str, str]] = {
    "utility": ("alignment", "n_utility"),
    "stereotype": ("stereotype", "n_stereotype"),
    "missing_explicit": ("missing_explicit", "n_missing_explicit"),
    "missing_implicit": ("missing_implicit", "n_missing_implicit"),
    "image_quality": ("image_quality", "n_image_quality"),
    "overall": ("overall", "n_overall"),
}


# call column -> the JudgeActs field it comes from (for error messages)
CALL_FIELDS: dict[str, str] = {
    "order_index": "permutation",
    "slot_candidate_ids": "mapping",
    "chosen_candidate_id": "selected_id",
    "choice_label": "parsed.choice",
    "ranking": "parsed.ranking",
    "status": "parse_ok",
}


def read_jsonl(path: str | Path) -> Iterator[tuple[int, dict]]:
    """Yield (line number, object) for each non-blank line; InputError on bad JSON."""
    path = Path(path)
    try:
        handle = open(path, encoding="utf-8")
    except OSError as err:
        raise InputError(f"cannot read file ({err.strerror})", file=path) from err
    with handle:
        for number, text in enumerate(handle, start=1):
            if not text.strip():
                continue
            try:
                obj = json.loads(text)
            except json.JSONDecodeError as err:
                raise InputError(f"not valid JSON ({err.msg} at column {err.colno})", file=path, line=number) from err
            if not isinstance(obj, dict):
                raise InputError("expected a JSON object", file=path, line=number)
            yield number, obj


def _require(obj: dict, key: str, kind: type | tuple[type, ...], where: dict) -> object:
    if key not in obj or obj[key] is None:
        raise InputError("missing", field=key, **where)
    value = obj[key]
    if not isinstance(value, kind) or isinstance(value, bool) and kind is not bool:
        raise InputError(f"expected {_kind_name(kind)}, got {value!r}", field=key, **where)
    return value


def _kind_name(kind: type | tuple[type, ...]) -> str:
    kinds = kind if isinstance(kind, tuple) else (kind,)
    return " or ".join({str: "text", int: "an integer", float: "a number", list: "a list", dict: "an object"}.get(k, k.__name__) for k in kinds)


def _number(value: object, where: dict, field: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise InputError(f"expected a finite number, got {value!r}", field=field, **where)
    return float(value)


def _count(value: object, where: dict, field: str) -> int | None:
    """An annotation count: absent, or a positive integer."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise InputError(f"expected a positive integer, got {value!r}", field=field, **where)
    return value


def read_pools(path: str | Path, dataset_id: str, split: str | None = None) -> PoolSet:
    """Parse a derived split file into a PoolSet (no database access)."""
    path = Path(path)
    root = path.parent.parent.parent  # data/derived/x.jsonl -> artifact root
    prompts, candidates, ratings, votes = [], [], [], []
    seen_prompts: dict[str, int] = {}
    for number, obj in read_jsonl(path):
        where = {"file": path, "line": number}
        pid = _require(obj, "prompt_id", str, where)
        if pid in seen_prompts:
            raise InputError(f"prompt {pid!r} already appeared on line {seen_prompts[pid]}", field="prompt_id", **where)
        seen_prompts[pid] = number
        prompts.append(
            {
                "prompt_id": pid,
                "prompt": _require(obj, "prompt", str, where),
                "country": obj.get("country"),
                "category": obj.get("category"),
                "split": split or obj.get("split") or path.stem,
                "line": number,
            }
        )
        for k, cand in enumerate(_require(obj, "candidates", list, where)):
            if not isinstance(cand, dict):
                raise InputError("expected an object", field=f"candidates[{k}]", **where)
            cid = _require(cand, "id", str, where)
            image = cand.get("image")
            image_path = str((root / image).resolve()) if image and (root / image).is_file() else None
            candidates.append(
                {
                    "prompt_id": pid,
                    "candidate_id": cid,
                    "source_model": cand.get("source_model"),
                    "image_path": image_path,
                    "line": number,
                }
            )
            for key, (outcome, n_key) in RATING_FIELDS.items():
                value = cand.get(key)
                if value is None:
                    if key == "utility":
                        raise InputError(f"candidate {cid!r} has no alignment rating", field=f"candidates[{k}].utility", **where)
                    continue
                value = _number(value, where, f"candidates[{k}].{key}")
                n_field = n_key if n_key in cand else "n_annotations"
                n = _count(cand.get(n_field), where, f"candidates[{k}].{n_field}")
                ratings.append(
                    {"candidate_id": cid, "outcome": outcome, "pool": "all", "value": value, "n": n, "line": number}
                )
            alignment_votes = cand.get("alignment_ratings") or []
            if not isinstance(alignment_votes, list):
                raise InputError(f"expected a list, got {alignment_votes!r}", field=f"candidates[{k}].alignment_ratings", **where)
            for a, vote in enumerate(alignment_votes):
                votes.append(
                    {
                        "candidate_id": cid,
                        "outcome": "alignment",
                        "pool": "all",
                        "annotator": str(a),
                        "value": _number(vote, where, f"candidates[{k}].alignment_ratings[{a}]"),
                        "line": number,
                    }
                )
    if not prompts:
        raise InputError("no pools found", file=path)
    return PoolSet(
        dataset_id=dataset_id,
        source=str(path),
        prompts=pd.DataFrame(prompts),
        candidates=pd.DataFrame(candidates),
        ratings=pd.DataFrame(ratings).astype({"n": "Int64"}),
        votes=pd.DataFrame(votes, columns=["candidate_id", "outcome", "pool", "annotator", "value", "line"]),
    )


def read_run(path: str | Path, judge: str) -> ImportedRun:
    """Parse a recorded-calls file; status from the file's own parse flags."""
    path = Path(path)
    rows, models = [], set()
    for number, obj in read_jsonl(path):
        where = {"file": path, "line": number}
        pid = _require(obj, "prompt_id", str, where)
        order = _require(obj, "permutation", int, where)
        if order < 0:
            raise InputError(f"expected a non-negative integer, got {order}", field="permutation", **where)
        mapping = _require(obj, "mapping", dict, where)
        labels = sorted(mapping)
        if not 2 <= len(labels) <= 26 or labels != slot_labels(len(labels)):
            raise InputError(f"labels {labels} are not the slot labels A, B, C, …", field="mapping", **where)
        slots = [mapping[label] for label in labels]
        if not all(isinstance(s, str) for s in slots):
            raise InputError("every label must map to a candidate id", field="mapping", **where)
        seconds = obj.get("seconds")
        if seconds is not None:
            seconds = _number(seconds, where, "seconds")
        attempts = obj.get("attempts") or []
        if not isinstance(attempts, list):
            raise InputError(f"expected a list of earlier attempts, got {attempts!r}", field="attempts", **where)
        parsed = obj.get("parsed") if isinstance(obj.get("parsed"), dict) else {}
        raw = obj.get("raw_output")
        if raw is not None and not isinstance(raw, str):
            raise InputError(f"expected text, got {raw!r}", field="raw_output", **where)
        selected = obj.get("selected_id")
        choice = parsed.get("choice")
        ranking = parsed.get("ranking")
        if obj.get("parse_ok") is True:
            if not isinstance(choice, str) or choice not in mapping:
                raise InputError(f"parse_ok is true but the choice {choice!r} is not a shown label", field="parsed.choice", **where)
            if selected is not None and mapping[choice] != selected:
                raise InputError(
                    f"label {choice!r} maps to {mapping[choice]!r} but selected_id is {selected!r}",
                    field="selected_id",
                    **where,
                )
            selected = mapping[choice]
            status = "recovered" if obj.get("recovered") else "ok"
        elif obj.get("parse_ok") is False:
            status = "runtime_fail" if raw is None else "parse_fail"
            choice, selected, ranking = None, None, None
        else:
            raise InputError("expected true or false", field="parse_ok", **where)
        flags = {k: obj[k] for k in ("json_valid", "schema_valid", "recovered") if k in obj}
        note = None if obj.get("parse_error") is None else str(obj["parse_error"])
        if note is None and flags:
            note = ", ".join(f"{k}={str(v).lower()}" for k, v in flags.items())
        if isinstance(obj.get("model"), str):
            models.add(obj["model"])
        rows.append(
            {
                "line": number,
                "prompt_id": pid,
                "order_index": order,
                "slot_candidate_ids": slots,
                "status": status,
                "choice_label": choice,
                "chosen_candidate_id": selected,
                "ranking": list(ranking) if isinstance(ranking, list) else None,
                "raw_output": raw,
                "parse_note": note,
                "attempts": 1 + len(attempts),
                "seconds": seconds,
                "input_json": json.dumps(
                    {k: obj[k] for k in ("image_count", "input_shapes") if k in obj}, sort_keys=True
                ),
            }
        )
    if not rows:
        raise InputError("no calls found", file=path)
    return ImportedRun(
        judge=judge,
        source_file=str(path),
        calls=pd.DataFrame(rows),
        model=", ".join(sorted(models)) or None,
        fields=CALL_FIELDS,
    )


def read_scores(path: str | Path, scorer: str) -> ImportedScores:
    """Parse a content-scorer file `{"model", "revision", "scores": {id: score}}`."""
    path = Path(path)
    try:
        obj = json.loads(Path(path).read_text(encoding="utf-8"))
    except OSError as err:
        raise InputError(f"cannot read file ({err.strerror})", file=path) from err
    except json.JSONDecodeError as err:
        raise InputError(f"not valid JSON ({err.msg}, line {err.lineno})", file=path, line=err.lineno) from err
    where = {"file": path}
    if not isinstance(obj, dict):
        raise InputError("expected a JSON object with 'scores'", **where)
    scores = _require(obj, "scores", dict, where)
    rows = [
        {"candidate_id": cid, "score": _number(v, where, f"scores.{cid}")} for cid, v in scores.items()
    ]
    return ImportedScores(
        scorer=scorer,
        source_file=str(path),
        scores=pd.DataFrame(rows, columns=["candidate_id", "score"]),
        model=obj.get("model"),
        model_revision=obj.get("revision"),
    )
