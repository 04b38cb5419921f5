"""Reader for the CulturalFrames release layout (DESIGN.md §6).

A release folder holds:

- `culturalframes_human_annotations.json`: a JSON list, one record per image::

      {"id": "<prompt id>", "prompt": str, "country": str, "category": str | null,
       "model_name": str,
       "human_annotations": [
         {"annotator_id": str | int (optional; default: position in the list),
          "prompt_alignment": {"score": 0 | 0.5 | 1,
                               "missing_explicit": bool | 0 | 1 | [missing items],
                               "missing_implicit": bool | 0 | 1 | [missing items]},
          "stereotype": {"is_stereotypical": bool | 0 | 1},
          "image_quality": {"score": 0 | 0.5 | 1},
          "overall_score": 1..5}, ...]}

  The image id is `<id>_<model_name>`; a record whose `id` already ends in
  `_<model_name>` is taken as that image id. A list of missing items counts as
  1 when non-empty. `overall_score` v maps to (v − 1) / 4.
- `data/*.parquet`: image rows with `id` (image id), `image` (a struct with
  `bytes`, as Hugging Face stores images, or plain bytes), `prompt`, `country`
  and `model` (the model name used in the id).

Rules: every image row is decoded (Pillow) and checked against its annotation
record (prompt, country, model must agree); the original bytes are written to
`<images dir>/<image id>.<format>`. An absent or null annotation value is
skipped, never imputed: each outcome's rating is the mean of the values
present, with n = their count, and each value is kept as a vote. A candidate
needs ≥1 alignment score and an image; a pool needs ≥3 such candidates. Among
pools of one country whose prompt texts match (case and spacing aside), the
one with the most candidates is kept (ties: smallest prompt id). Within each
country the kept prompt ids are ordered by sha256("<seed>:<prompt id>"): the
first `per_country_dev` form split 'dev', the next `per_country_main` 'main',
the rest 'extra'. What is read, kept and dropped is reported, with reasons.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import tempfile
from collections import Counter
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType

import pandas as pd

from audit_core import user_text
from audit_core.errors import InputError
from audit_core.ingest import images, input_files, sources, values
from audit_core.ingest.pools import PoolSet
from audit_core.user_text import shown

ANNOTATIONS_FILE = "culturalframes_human_annotations.json"
SHARDS_GLOB = "data/*.parquet"
SHARD_COLUMNS: tuple[str, ...] = ("id", "image", "prompt", "country", "model")
MIN_ANNOTATED = 3
LEVELS = (0.0, 0.5, 1.0)
SPLITS = ("dev", "main", "all")


@dataclass
class ImageRecord:
    """One annotation record: an image's prompt, model and per-outcome votes."""

    line: int
    prompt_id: str
    image_id: str
    prompt: str
    country: str
    category: str | None
    model: str
    votes: list[dict] = field(default_factory=list)
    absent: Counter = field(default_factory=Counter)


class ImageStage:
    """Images written to a private folder beside `images_dir`, published on demand.

    Use as a context manager: on exit the staging folder is removed, so images
    land in `images_dir` only through `publish` (called after the database
    commit); folders created for staging are removed again on failure.
    """

    def __init__(self, images_dir: str | Path) -> None:
        self.images_dir = Path(images_dir).resolve()
        self.created: list[Path] = []
        self.dir: Path | None = None

    def __enter__(self) -> ImageStage:
        missing = [p for p in [self.images_dir.parent, *self.images_dir.parent.parents] if not p.exists()]
        self.images_dir.parent.mkdir(parents=True, exist_ok=True)
        self.created = missing
        self.dir = Path(tempfile.mkdtemp(prefix=f".{self.images_dir.name}-staging-", dir=self.images_dir.parent))
        return self

    def __exit__(self, kind: type | None, err: BaseException | None, tb: TracebackType | None) -> None:
        shutil.rmtree(self.dir, ignore_errors=True)
        if kind is not None:
            for folder in self.created:  # deepest first
                if folder.exists() and not any(folder.iterdir()):
                    folder.rmdir()

    def put(self, name: str, data: bytes) -> Path:
        """Stage `data` as `name`; returns the path it will have once published."""
        (self.dir / name).write_bytes(data)
        return self.images_dir / name

    def publish(self, paths: Iterable[str]) -> int:
        """Move the staged files behind these final paths into place; returns their number."""
        self.images_dir.mkdir(parents=True, exist_ok=True)
        moved = 0
        for final in paths:
            os.replace(self.dir / Path(final).name, final)
            moved += 1
        return moved


def read_release(
    release: str | Path,
    dataset_id: str,
    stage: ImageStage,
    *,
    split: str = "all",
    per_country_dev: int = 3,
    per_country_main: int = 30,
    seed: int = 0,
) -> tuple[PoolSet, list[str]]:
    """Read, join and filter a release into a PoolSet; returns it with the audit lines.

    Images of the kept candidates are staged in `stage` (publish them after the
    database write succeeds). `split` selects 'dev', 'main' or 'all' kept pools.
    """
    if split not in SPLITS:
        raise ValueError(f"split must be one of {SPLITS}, got {shown(split)}")
    release = input_files.folder(release, f"{ANNOTATIONS_FILE} and {SHARDS_GLOB}")
    records = read_annotations(release / ANNOTATIONS_FILE)
    audit: Counter = Counter()
    staged = scan_images(release, records, stage, audit)
    candidates = _annotated_candidates(records, staged, audit)
    pools = _kept_pools(candidates, audit)
    pools = pools.assign(split=frozen_split(pools, per_country_dev, per_country_main, seed))
    chosen = pools if split == "all" else pools[pools["split"] == split]
    if chosen.empty:
        reasons = "; ".join(f"{audit[k]} {k}" for k in audit if audit[k])
        raise InputError(f"no pool is left to ingest (split {split}; {reasons})", file=release)
    kept = candidates[candidates["prompt_id"].isin(chosen["prompt_id"])]
    votes = pd.DataFrame(
        [{"candidate_id": r.image_id, "pool": "all", **v} for r in records.values() for v in r.votes],
        columns=["candidate_id", "outcome", "pool", "annotator", "value", "line"],
    )
    votes = votes[votes["candidate_id"].isin(kept["candidate_id"])]
    ratings = (
        votes.groupby(["candidate_id", "outcome", "pool"], as_index=False)
        .agg(value=("value", "mean"), n=("value", "size"))
        .astype({"n": "Int64"})
    )
    pool_set = PoolSet(
        dataset_id=dataset_id,
        source=str(release),
        prompts=chosen.loc[:, ["prompt_id", "prompt", "country", "category", "split", "line"]],
        candidates=kept.loc[:, ["prompt_id", "candidate_id", "source_model", "image_path", "line"]],
        ratings=ratings,
        votes=votes,
        notes=f"CulturalFrames release; split {split}, seed {seed}, {per_country_dev} dev + {per_country_main} main per country",
    )
    return pool_set, _audit_lines(records, audit, pools, chosen, kept, votes, split, seed, per_country_dev, per_country_main)


def read_annotations(path: Path) -> dict[str, ImageRecord]:
    """Parse the annotations JSON into records keyed by image id; InputError on bad input.

    Records of one prompt must agree on its text, country and category.
    """
    records: dict[str, ImageRecord] = {}
    prompt_of: dict[str, ImageRecord] = {}
    for line, index, obj in _json_list(path):
        where = {"file": path, "line": line}
        if not isinstance(obj, dict):
            raise InputError("expected an object", field=f"[{index}]", **where)
        text = {k: _text(obj, k, where, required=k != "category") for k in ("id", "prompt", "country", "category", "model_name")}
        model, rid = values.name(text["model_name"], "model_name", where), values.name(text["id"], "id", where)
        image_id = rid if rid.endswith(f"_{model}") else f"{rid}_{model}"
        if user_text.blank(image_id[: -len(model) - 1]):
            raise InputError(f"id {shown(rid)} names no prompt before {shown('_' + model)}", field="id", **where)
        if image_id in records:
            raise InputError(
                f"image {shown(image_id)} is annotated again (first on line {records[image_id].line})", field="id", **where
            )
        record = ImageRecord(
            line=line,
            prompt_id=image_id[: -len(model) - 1],
            image_id=image_id,
            prompt=text["prompt"],
            country=text["country"],
            category=text["category"],
            model=model,
        )
        annotations = obj.get("human_annotations")
        if not isinstance(annotations, list):
            raise InputError(f"expected a list, got {shown(annotations)}", field="human_annotations", **where)
        for j, annotation in enumerate(annotations):
            votes = _votes(annotation, j, where, f"human_annotations[{j}]")
            record.votes.extend(v for v in votes if v["value"] is not None)
            record.absent.update(v["outcome"] for v in votes if v["value"] is None)
        first = prompt_of.setdefault(record.prompt_id, record)
        for name in ("prompt", "country", "category"):
            if getattr(first, name) != getattr(record, name):
                raise InputError(
                    f"prompt {shown(record.prompt_id)} has {shown(getattr(first, name))} on line {first.line} "
                    f"but {shown(getattr(record, name))} here",
                    field=name,
                    **where,
                )
        dup = Counter((v["outcome"], v["annotator"]) for v in record.votes)
        twice = [k for k, c in dup.items() if c > 1]
        if twice:
            raise InputError(f"annotator {shown(twice[0][1])} appears twice", field="human_annotations", **where)
        records[image_id] = record
    return records


def _json_list(path: Path) -> Iterator[tuple[int, int, object]]:
    """Yield (line, index, element) for each element of a top-level JSON list."""
    text = sources.decoded(input_files.read_bytes(path, input_files.TABLE))
    counted = [0, 1]  # (position, its line): lines are counted on from the last record, never from the start

    def line_at(position: int) -> int:
        if position < counted[0]:
            counted[:] = [0, 1]
        counted[1] += text.count("\n", counted[0], position)
        counted[0] = position
        return counted[1]

    position = sources.skip_space(text, 0)
    if text[position : position + 1] != "[":
        raise InputError("expected a JSON list of annotation records", file=path, line=line_at(position))
    position = sources.skip_space(text, position + 1)
    index = 0
    while text[position : position + 1] != "]":
        if position >= len(text):
            raise InputError("the list of records is cut short (no closing ']')", file=path, line=line_at(position))
        line = line_at(position)
        obj, end = sources.parsed_json(text, position, {"file": path, "line": line})
        yield line, index, obj
        index += 1
        position = sources.skip_space(text, end)
        if text[position : position + 1] == ",":
            position = sources.skip_space(text, position + 1)
        elif text[position : position + 1] != "]":
            raise InputError("expected ',' or ']' after a record", file=path, line=line_at(position))
    if text[sources.skip_space(text, position + 1) :]:
        raise InputError("unexpected text after the list", file=path, line=line_at(position))


def _text(obj: dict, key: str, where: dict, *, required: bool = True) -> str | None:
    value = obj.get(key)
    return values.text(None if value == "" else value, key, where, required=required)


def _votes(annotation: object, j: int, where: dict, path: str) -> list[dict]:
    """One vote per outcome of a human annotation (value None when absent); invalid values refused."""
    if not isinstance(annotation, dict):
        raise InputError("expected an object", field=path, **where)
    annotator = annotation.get("annotator_id", j)
    if isinstance(annotator, bool) or not isinstance(annotator, (str, int)):
        raise InputError(f"expected text or an integer, got {shown(annotator)}", field=f"{path}.annotator_id", **where)
    if isinstance(annotator, str):
        values.name(annotator, f"{path}.annotator_id", where)
    by_outcome = {
        "alignment": _level(annotation, ("prompt_alignment", "score"), where, path),
        "missing_explicit": _flag(annotation, ("prompt_alignment", "missing_explicit"), where, path),
        "missing_implicit": _flag(annotation, ("prompt_alignment", "missing_implicit"), where, path),
        "stereotype": _flag(annotation, ("stereotype", "is_stereotypical"), where, path),
        "image_quality": _level(annotation, ("image_quality", "score"), where, path),
        "overall": _overall(annotation, where, path),
    }
    line = where["line"]
    return [{"outcome": k, "annotator": str(annotator), "value": v, "line": line} for k, v in by_outcome.items()]


def _get(annotation: dict, keys: tuple[str, ...], where: dict, path: str) -> object:
    value: object = annotation
    for depth, key in enumerate(keys):
        if value is None:
            return None
        if not isinstance(value, dict):
            raise InputError(f"expected an object, got {shown(value)}", field=".".join([path, *keys[:depth]]), **where)
        value = value.get(key)
    return value


def _level(annotation: dict, keys: tuple[str, ...], where: dict, path: str) -> float | None:
    value = _get(annotation, keys, where, path)
    if value is None:
        return None
    level = values.real(value)
    if level not in LEVELS:
        raise InputError(f"expected 0, 0.5 or 1, got {shown(value)}", field=".".join([path, *keys]), **where)
    return level


def _flag(annotation: dict, keys: tuple[str, ...], where: dict, path: str) -> float | None:
    value = _get(annotation, keys, where, path)
    if value is None:
        return None
    if isinstance(value, list):
        return float(bool(value))
    if isinstance(value, bool) or value in (0, 1) and isinstance(value, (int, float)):
        return float(value)
    raise InputError(f"expected true/false, 0/1 or a list, got {shown(value)}", field=".".join([path, *keys]), **where)


def _overall(annotation: dict, where: dict, path: str) -> float | None:
    value = annotation.get("overall_score")
    if value is None:
        return None
    score = values.real(value)
    if score is None or not 1 <= score <= 5:
        raise InputError(f"expected a number from 1 to 5, got {shown(value)}", field=f"{path}.overall_score", **where)
    return (score - 1) / 4


def scan_images(release: Path, records: dict[str, ImageRecord], stage: ImageStage, audit: Counter) -> dict[str, str]:
    """Decode every image row, check it against its record, stage it; image id → final path."""
    shards = sorted(release.glob(SHARDS_GLOB))  # each checked as it is opened (`sources.parquet_rows`)
    if not shards:
        raise InputError(f"no image shards ({SHARDS_GLOB})", file=release)
    audit["shards"] += len(shards)
    staged: dict[str, str] = {}
    for where, image_id, row in shard_rows(shards, SHARD_COLUMNS):
        audit["image rows"] += 1
        data = image_bytes(row.get("image"), where)
        suffix = images.decoded_format(data, "image.bytes", where)
        record = records.get(image_id)
        if record is None:
            audit["image rows without an annotation record"] += 1
            continue
        for column, expected in (("prompt", record.prompt), ("country", record.country), ("model", record.model)):
            if row.get(column) != expected:
                raise InputError(
                    f"{shown(row.get(column))} disagrees with the annotation record's {shown(expected)} "
                    f"({ANNOTATIONS_FILE} line {record.line})",
                    field=column,
                    **where,
                )
        staged[image_id] = str(stage.put(f"{file_stem(image_id)}.{suffix}", data))
    return staged


def shard_rows(shards: Sequence[Path], columns: Sequence[str]) -> Iterator[tuple[dict, str, dict]]:
    """(where, image id, row) for every row of the image shards, in order; `columns` are read.

    `where` locates the row (file, line = row number) for errors. InputError when a row's
    `id` is not non-empty text or repeats an id seen earlier in any shard.
    """
    first_seen: dict[str, str] = {}
    for shard in shards:
        for row_number, row in sources.parquet_rows(shard, columns, input_files.SHARD):
            where = {"file": shard, "line": row_number}
            image_id = row.get("id")
            if not isinstance(image_id, str):
                raise InputError(f"expected an image id, got {shown(image_id)}", field="id", **where)
            values.name(image_id, "id", where)
            if image_id in first_seen:
                raise InputError(f"image {shown(image_id)} already appeared in {first_seen[image_id]}", field="id", **where)
            first_seen[image_id] = f"{shard.name} row {row_number}"
            yield where, image_id, row


def image_bytes(image: object, where: dict) -> bytes:
    """The bytes of a shard's `image` cell (a struct with `bytes`, or plain bytes); InputError when absent."""
    data = image.get("bytes") if isinstance(image, dict) else image
    if not isinstance(data, bytes) or not data:
        raise InputError("missing image bytes", field="image.bytes", **where)
    return data


def file_stem(image_id: str) -> str:
    """The image id when it is a safe file name, else a hash of it."""
    if re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._-]{0,200}", image_id):
        return image_id
    return hashlib.sha256(image_id.encode()).hexdigest()[:32]


def _annotated_candidates(records: dict[str, ImageRecord], staged: dict[str, str], audit: Counter) -> pd.DataFrame:
    """Candidates with an image and ≥1 alignment vote."""
    rows = []
    for record in records.values():
        if record.image_id not in staged:
            audit["annotation records without an image"] += 1
        elif not any(v["outcome"] == "alignment" for v in record.votes):
            audit["images without an alignment score"] += 1
        else:
            rows.append(
                {
                    "prompt_id": record.prompt_id,
                    "candidate_id": record.image_id,
                    "source_model": record.model,
                    "image_path": staged[record.image_id],
                    "prompt": record.prompt,
                    "country": record.country,
                    "category": record.category,
                    "line": record.line,
                }
            )
    columns = ["prompt_id", "candidate_id", "source_model", "image_path", "prompt", "country", "category", "line"]
    return pd.DataFrame(rows, columns=columns)


def _kept_pools(candidates: pd.DataFrame, audit: Counter) -> pd.DataFrame:
    """One row per kept prompt: pools with ≥ MIN_ANNOTATED candidates, repeated texts removed."""
    pools = (
        candidates.groupby("prompt_id", as_index=False)
        .agg(prompt=("prompt", "first"), country=("country", "first"), category=("category", "first"),
             line=("line", "min"), size=("candidate_id", "size"))
    )
    small = pools["size"] < MIN_ANNOTATED
    audit[f"pools with fewer than {MIN_ANNOTATED} annotated candidates"] += int(small.sum())
    pools = pools[~small].assign(text_key=lambda f: f["prompt"].map(lambda t: " ".join(t.casefold().split())))
    pools = pools.sort_values(["country", "text_key", "size", "prompt_id"], ascending=[True, True, False, True])
    repeated = pools.duplicated(["country", "text_key"])
    audit["pools repeating a prompt text within their country"] += int(repeated.sum())
    return pools[~repeated].drop(columns=["text_key"]).sort_values("prompt_id").reset_index(drop=True)


def frozen_split(pools: pd.DataFrame, per_country_dev: int, per_country_main: int, seed: int) -> pd.Series:
    """'dev' / 'main' / 'extra' per pool, by rank of sha256(f"{seed}:{prompt_id}") within its country."""
    key = pools["prompt_id"].map(lambda pid: hashlib.sha256(f"{seed}:{pid}".encode()).hexdigest())
    rank = pools.assign(key=key).groupby("country")["key"].rank(method="first").astype(int) - 1
    split = pd.Series("extra", index=pools.index)
    split[rank < per_country_dev + per_country_main] = "main"
    split[rank < per_country_dev] = "dev"
    return split


def _audit_lines(
    records: dict[str, ImageRecord],
    audit: Counter,
    pools: pd.DataFrame,
    chosen: pd.DataFrame,
    kept: pd.DataFrame,
    votes: pd.DataFrame,
    split: str,
    seed: int,
    per_country_dev: int,
    per_country_main: int,
) -> list[str]:
    n_values = sum(len(r.votes) for r in records.values())
    prompts = {r.prompt_id for r in records.values()}
    lines = [
        f"read: {len(records)} annotation records ({len(prompts)} prompts, {n_values} rating values), "
        f"{audit['image rows']} image rows in {audit['shards']} shard(s), every image decoded",
    ]
    dropped = [k for k in audit if k not in ("image rows", "shards") and audit[k]]
    lines += [f"dropped: {audit[k]} {k}" for k in dropped] or ["dropped: nothing"]
    absent = sum((r.absent for r in records.values()), Counter())
    lines.append(
        "absent annotation values (skipped, never imputed): "
        + (", ".join(f"{k} {absent[k]}" for k in sorted(absent)) or "none")
    )
    counts = pools["split"].value_counts().to_dict()
    lines.append(
        f"split (seed {seed}; {per_country_dev} dev + {per_country_main} main per country, rest 'extra'): "
        + ", ".join(f"{name} {counts.get(name, 0)}" for name in ("dev", "main", "extra"))
        + f"; ingesting {split}"
    )
    lines.append(
        f"kept: {len(chosen)} prompts in {chosen['country'].nunique()} countries, {len(kept)} candidates, "
        f"{len(votes)} votes"
    )
    return lines
