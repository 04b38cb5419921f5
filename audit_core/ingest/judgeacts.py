"""Reader for the JudgeActs artifact layout (DESIGN.md §6).

- pools: `data/derived/{split}.jsonl`, one prompt per line with its candidates and
  aggregated ratings (`utility` = mean alignment, `alignment_ratings` = votes);
- runs: `runs/*.jsonl`, one judge call per line with `permutation`, `mapping`
  (label → candidate id, the slot order as shown), parse flags, `raw_output`,
  `parsed` and `selected_id`;
- scores: `{"model", "revision", "scores": {candidate_id: cosine}}`.

Slot orders are read from `mapping`, never recomputed. Candidate `image` paths
are relative to the artifact root (the folder holding `data/derived/`; for a
pools file elsewhere, its own folder) and must stay inside it; an image file
that exists is decoded at ingest, an absent one is recorded as no image.

Images can also come from a folder given apart from the pools (`attach_images`):
either the CulturalFrames release's parquet shards (`DIR/data/*.parquet`, rows with
`id` and `image` {bytes}), whose images are staged for the images folder, or, when
the folder has no shards, image files directly inside it named
`<candidate id>.png|.jpg|.jpeg|.webp` (any case), used where they are. Such an
image replaces the one the pools file names; a candidate with none in the folder
keeps the pools file's (or none). Every attached image is decoded at ingest.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pandas as pd

from audit_core.errors import InputError
from audit_core.ingest import culturalframes, images, input_files, values
from audit_core.ingest.pools import ImportedRun, ImportedScores, PoolSet
from audit_core.ingest.sources import json_document, json_lines
from audit_core.selection.orders import slot_labels
from audit_core.user_text import excerpt, shown

IMAGE_SUFFIXES = (".png", ".jpg", ".jpeg", ".webp")

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


def _require(obj: dict, key: str, kind: type | tuple[type, ...], where: dict) -> object:
    if key not in obj or obj[key] is None:
        raise InputError("missing", field=key, **where)
    value = obj[key]
    if not isinstance(value, kind) or isinstance(value, bool) and kind is not bool:
        raise InputError(f"expected {_kind_name(kind)}, got {shown(value)}", field=key, **where)
    return value


def _kind_name(kind: type | tuple[type, ...]) -> str:
    kinds = kind if isinstance(kind, tuple) else (kind,)
    return " or ".join({str: "text", int: "an integer", float: "a number", list: "a list", dict: "an object"}.get(k, k.__name__) for k in kinds)


def _count(value: object, where: dict, field: str) -> int | None:
    """An annotation count: absent, or a positive integer."""
    return None if value is None else values.integer(value, field, where, minimum=1)


def artifact_root(pools_file: Path) -> Path:
    """The folder candidate image paths are relative to (see the module docstring)."""
    derived = pools_file.parent
    return derived.parent.parent if derived.name == "derived" and derived.parent.name == "data" else derived


def _image_path(image: object, root: Path, where: dict, field: str) -> str | None:
    """The decoded image's resolved path, or None when the candidate names no file that exists."""
    image = values.text(image, field, where)
    if not image:
        return None
    located = images.confined_path(image, root, field, where)
    if not images.existing_file(located, field, where):
        return None
    images.decoded_format(located, field, where)
    return str(located)


def read_pools(path: str | Path, dataset_id: str, split: str | None = None) -> PoolSet:
    """Parse a derived split file into a PoolSet (no database access)."""
    path = Path(path)
    root = artifact_root(path)
    prompts, candidates, ratings, votes = [], [], [], []
    seen_prompts: dict[str, int] = {}
    for number, obj in json_lines(path):
        where = {"file": path, "line": number}
        pid = values.identifier(obj.get("prompt_id"), "prompt_id", where)
        if pid in seen_prompts:
            raise InputError(f"prompt {shown(pid)} already appeared on line {seen_prompts[pid]}", field="prompt_id",
                             **where)
        seen_prompts[pid] = number
        prompts.append(
            {
                "prompt_id": pid,
                "prompt": values.text(obj.get("prompt"), "prompt", where, required=True),
                "country": values.text(obj.get("country"), "country", where),
                "category": values.text(obj.get("category"), "category", where),
                "split": split or values.text(obj.get("split"), "split", where) or path.stem,
                "line": number,
            }
        )
        for k, cand in enumerate(_require(obj, "candidates", list, where)):
            at = f"candidates[{k}]"
            if not isinstance(cand, dict):
                raise InputError("expected an object", field=at, **where)
            cid = values.identifier(cand.get("id"), f"{at}.id", where)
            candidates.append(
                {
                    "prompt_id": pid,
                    "candidate_id": cid,
                    "source_model": values.text(cand.get("source_model"), f"{at}.source_model", where),
                    "image_path": _image_path(cand.get("image"), root, where, f"{at}.image"),
                    "line": number,
                }
            )
            for key, (outcome, n_key) in RATING_FIELDS.items():
                value = cand.get(key)
                if value is None:
                    if key == "utility":
                        raise InputError(f"candidate {shown(cid)} has no alignment rating", field=f"{at}.utility",
                                         **where)
                    continue
                n_field = n_key if n_key in cand else "n_annotations"
                ratings.append(
                    {
                        "candidate_id": cid,
                        "outcome": outcome,
                        "pool": "all",
                        "value": values.number(value, f"{at}.{key}", where),
                        "n": _count(cand.get(n_field), where, f"{at}.{n_field}"),
                        "line": number,
                        "field": f"{at}.{key}",
                    }
                )
            alignment_votes = cand.get("alignment_ratings")
            if alignment_votes is None:
                alignment_votes = []
            if not isinstance(alignment_votes, list):
                raise InputError(
                    f"expected a list, got {shown(alignment_votes)}", field=f"{at}.alignment_ratings", **where
                )
            for a, vote in enumerate(alignment_votes):
                votes.append(
                    {
                        "candidate_id": cid,
                        "outcome": "alignment",
                        "pool": "all",
                        "annotator": str(a),
                        "value": values.number(vote, f"{at}.alignment_ratings[{a}]", where),
                        "line": number,
                        "field": f"{at}.alignment_ratings[{a}]",
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
        votes=pd.DataFrame(votes, columns=["candidate_id", "outcome", "pool", "annotator", "value", "line", "field"]),
    )


def read_run(path: str | Path, judge: str) -> ImportedRun:
    """Parse a recorded-calls file; status from the file's own parse flags."""
    path = Path(path)
    rows, models = [], set()
    for number, obj in json_lines(path):
        where = {"file": path, "line": number}
        pid = values.identifier(obj.get("prompt_id"), "prompt_id", where)
        order = values.integer(_require(obj, "permutation", int, where), "permutation", where, minimum=0)
        mapping = _require(obj, "mapping", dict, where)
        labels = sorted(mapping)
        if not 2 <= len(labels) <= 26 or labels != slot_labels(len(labels)):
            raise InputError(f"labels {shown(labels)} are not the slot labels A, B, C, …", field="mapping", **where)
        slots = [mapping[label] for label in labels]
        if not all(isinstance(s, str) for s in slots):
            raise InputError("every label must map to a candidate id", field="mapping", **where)
        seconds = obj.get("seconds")
        if seconds is not None:
            seconds = values.number(seconds, "seconds", where)
        attempts = obj.get("attempts")
        if attempts is None:
            attempts = []
        if not isinstance(attempts, list):
            raise InputError(f"expected a list of earlier attempts, got {shown(attempts)}", field="attempts", **where)
        parsed = obj.get("parsed")
        if parsed is None:
            parsed = {}
        if not isinstance(parsed, dict):
            raise InputError(f"expected an object, got {shown(parsed)}", field="parsed", **where)
        raw = values.text(obj.get("raw_output"), "raw_output", where)
        selected = values.text(obj.get("selected_id"), "selected_id", where)
        flags = {k: values.flag(obj.get(k), k, where) for k in ("json_valid", "schema_valid", "recovered") if k in obj}
        choice = parsed.get("choice")
        ranking = parsed.get("ranking")
        parse_ok = values.flag(obj.get("parse_ok"), "parse_ok", where)
        if parse_ok is None:
            raise InputError("expected true or false", field="parse_ok", **where)
        if parse_ok:
            if not isinstance(choice, str) or choice not in mapping:
                raise InputError(
                    f"parse_ok is true but the choice {shown(choice)} is not a shown label",
                    field="parsed.choice",
                    **where,
                )
            if selected is not None and mapping[choice] != selected:
                raise InputError(
                    f"label {shown(choice)} maps to {shown(mapping[choice])} but selected_id is {shown(selected)}",
                    field="selected_id",
                    **where,
                )
            if ranking is not None and not (isinstance(ranking, list) and all(isinstance(r, str) for r in ranking)):
                raise InputError(f"expected a list of labels, got {shown(ranking)}", field="parsed.ranking", **where)
            selected = mapping[choice]
            status = "recovered" if flags.get("recovered") else "ok"
        else:
            status = "runtime_fail" if raw is None else "parse_fail"
            choice, selected, ranking = None, None, None
        note = values.text(obj.get("parse_error"), "parse_error", where)
        if note is None and flags:
            note = ", ".join(f"{k}={str(v).lower()}" for k, v in flags.items())
        model = values.text(obj.get("model"), "model", where)
        if model is not None:
            models.add(model)
        rows.append(
            {
                "line": number,
                "prompt_id": pid,
                "order_index": order,
                "slot_candidate_ids": slots,
                "status": status,
                "choice_label": choice,
                "chosen_candidate_id": selected,
                "ranking": ranking,
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
    obj = json_document(path)
    where = {"file": path}
    if not isinstance(obj, dict):
        raise InputError("expected a JSON object with 'scores'", **where)
    scores = _require(obj, "scores", dict, where)
    rows = [
        {"candidate_id": values.identifier(cid, f"scores.{excerpt(cid)}", where),
         "score": values.number(v, f"scores.{excerpt(cid)}", where)}
        for cid, v in scores.items()
    ]
    return ImportedScores(
        scorer=scorer,
        source_file=str(path),
        scores=pd.DataFrame(rows, columns=["candidate_id", "score"]),
        model=values.text(obj.get("model"), "model", where),
        model_revision=values.text(obj.get("revision"), "revision", where),
    )


def attach_images(
    pools: PoolSet, folder: str | Path, stage: culturalframes.ImageStage | None
) -> tuple[PoolSet, dict[str, str], str]:
    """`pools` with the images of `folder` attached (module docstring), the attached images
    (candidate id → path) and a summary line.

    Shard images are staged in `stage` (publish the attached paths after the database
    write); a folder of image files needs no stage.
    InputError, naming the file (and row) and field, when an image does not decode,
    two files name one candidate, or a file leads outside `folder`.
    """
    folder = input_files.folder(folder, "image files named by candidate id, or data/*.parquet shards")
    wanted = set(pools.candidates["candidate_id"])
    shards = image_shards(folder)
    if shards:
        if stage is None:
            raise ValueError("images from parquet shards need an ImageStage")
        found, unmatched = _shard_images(shards, wanted, stage)
        origin = f"{len(shards)} parquet shard(s) in {folder}"
    else:
        found, unmatched = _image_files(folder, wanted)
        origin = folder
    given = pools.candidates["image_path"]
    candidates = pools.candidates.assign(image_path=[
        found.get(cid, old if isinstance(old, str) else None) for cid, old in zip(pools.candidates["candidate_id"], given)
    ])
    line = (
        f"images: {len(found)} of {len(candidates)} candidates attached from {origin}, every one decoded; "
        f"{int(candidates['image_path'].isna().sum())} without an image"
        + (f"; {unmatched} image(s) there name no candidate" if unmatched else "")
    )
    return dataclasses.replace(pools, candidates=candidates), found, line


def image_shards(folder: str | Path) -> list[Path]:
    """The CulturalFrames image shards inside `folder` (`culturalframes.SHARDS_GLOB`), sorted; [] when none."""
    return sorted(Path(folder).glob(culturalframes.SHARDS_GLOB))


def _shard_images(
    shards: list[Path], wanted: set[str], stage: culturalframes.ImageStage
) -> tuple[dict[str, str], int]:
    """Decode and stage the shard rows of wanted candidates: (candidate id → final path, rows for no candidate)."""
    found: dict[str, str] = {}
    unmatched = 0
    for where, image_id, row in culturalframes.shard_rows(shards, ("id", "image")):
        if image_id not in wanted:
            unmatched += 1
            continue
        data = culturalframes.image_bytes(row.get("image"), where)
        suffix = images.decoded_format(data, "image.bytes", where)
        found[image_id] = str(stage.put(f"{culturalframes.file_stem(image_id)}.{suffix}", data))
    return found, unmatched


def _image_files(folder: Path, wanted: set[str]) -> tuple[dict[str, str], int]:
    """Decode the image files directly in `folder` named by a wanted candidate id:
    (candidate id → resolved path, image files naming no candidate)."""
    by_id: dict[str, Path] = {}
    unmatched = 0
    for entry in sorted(folder.iterdir()):
        if entry.suffix.lower() not in IMAGE_SUFFIXES:
            continue
        cid = entry.stem
        if cid not in wanted:
            unmatched += 1
            continue
        if cid in by_id:
            raise InputError(f"candidate {shown(cid)} has two images here: {excerpt(by_id[cid].name)} and "
                             f"{excerpt(entry.name)}", file=folder)
        by_id[cid] = entry
    found: dict[str, str] = {}
    for cid, entry in by_id.items():
        where = {"file": entry}
        located = images.confined_path(entry.name, folder, "image", where)
        if not images.existing_file(located, "image", where):
            raise InputError("no such file (a dangling link)", field="image", **where)
        images.decoded_format(located, "image", where)
        found[cid] = str(located)
    return found, unmatched
