"""The CLIP zero-shot label baseline: templated prompts per label, argmax of the mean cosine, as a labeler run.

Prompts are data (runners/templates/clip_labels_v1.json): each attribute's templates
filled with each label's text. For one image and attribute,

    score(label) = mean over the attribute's templates of cos(image, template(label))
    answer       = argmax over the attribute's labels of score (the first in taxonomy order on a tie)

so every answer has status 'ok' (no abstention, never off the taxonomy). The run is recorded
like an attribute judge's (runs.kind 'labeler', backend 'clip', condition `CONDITION`,
`runners.labels.recorder`'s tables, resume and crash safety): raw_output is the scores as JSON
({attribute: {label: score}}), each answer's rationale names its score and the runner-up's.
Request keys hash the templates file, the method, the taxonomy, the model with its weights and
the image, as an attribute judge's keys hash its instruction, condition, taxonomy and model.
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import duckdb

from audit_core.attributes.taxonomy import DEFAULT_TAXONOMY, Taxonomy, load_taxonomy
from audit_core.errors import InputError
from audit_core.ingest import input_files
from audit_core.user_text import excerpt, shown
from runners.labels.parsing import FieldAnswer, missing_answers
from runners.labels.protocol import LabelRequest, label_request_key
from runners.labels.recorder import (
    KIND,
    TABLE,
    LabeledCall,
    check_label_history,
    check_taxonomy,
    labeled_call,
    load_label_scope,
    taxonomy_config,
    write_label_calls,
)
from runners.recording.engines import Generated
from runners.recording.recorder import RunIdentity, RunSummary, check_images, local_engine, record_planned
from runners.recording.sessions import Database, as_database

DEFAULT_TEMPLATES = Path(__file__).resolve().parents[1] / "templates" / "clip_labels_v1.json"
CONDITION = "default"  # the baseline has one condition; it sits beside the judges' default
METHOD = {"task": "zero-shot labels", "score": "mean cosine over templates", "answer": "argmax, first on a tie"}
METHOD_SHA256 = hashlib.sha256(json.dumps(METHOD, sort_keys=True).encode()).hexdigest()
ANY_ATTRIBUTE = "*"


@dataclass(frozen=True)
class LabelPrompts:
    """The filled prompts of one templates file for one taxonomy; `sha256` is over the file's bytes."""

    file: Path
    sha256: str
    prompts: dict[str, dict[str, tuple[str, ...]]]  # attribute -> label -> its prompts, taxonomy order

    def flat(self) -> list[str]:
        """Every prompt once, in attribute, label, template order (the columns of the cosine matrix)."""
        return list(dict.fromkeys(p for labels in self.prompts.values() for ps in labels.values() for p in ps))


def load_label_prompts(path: str | Path, taxonomy: Taxonomy) -> LabelPrompts:
    """Fill a templates file's prompts for `taxonomy`; InputError naming the file and field on a defect
    (not JSON, an attribute without templates, a template without {label}, label text for an unknown label)."""
    path = Path(path)
    data = input_files.read_bytes(path, input_files.CONFIG, what="the templates file")
    try:
        doc = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as err:
        raise InputError(f"not a JSON templates file ({excerpt(str(err))})", file=path) from None
    if not isinstance(doc, dict) or not isinstance(doc.get("templates"), dict):
        raise InputError('expected an object with a "templates" object', file=path, field="templates")
    templates, label_text = doc["templates"], doc.get("label_text", {})
    if not isinstance(label_text, dict):
        raise InputError("expected an object of attribute -> {label: text}", file=path, field="label_text")
    prompts: dict[str, dict[str, tuple[str, ...]]] = {}
    for attribute in taxonomy.attributes:
        name = attribute.name if attribute.name in templates else ANY_ATTRIBUTE
        chosen = templates.get(name)
        where = f"templates.{name}"
        if chosen is None:
            raise InputError(f"no templates for attribute {shown(attribute.name)} (and no '{ANY_ATTRIBUTE}')",
                             file=path, field=f"templates.{attribute.name}")
        if isinstance(chosen, str):
            chosen = [chosen]
        if not isinstance(chosen, list) or not chosen or not all(isinstance(t, str) and "{label}" in t for t in chosen):
            raise InputError("expected a template string or a non-empty list of them, each with {label}",
                             file=path, field=where)
        texts = label_text.get(attribute.name, {})
        if not isinstance(texts, dict) or not all(isinstance(v, str) and v for v in texts.values()):
            raise InputError("expected an object of label -> non-empty text", file=path,
                             field=f"label_text.{attribute.name}")
        unknown = sorted(set(texts) - set(attribute.labels))
        if unknown:
            raise InputError(f"{shown(unknown[0])} is not a label of {shown(attribute.name)} "
                             f"({excerpt(', '.join(attribute.labels))})",
                             file=path, field=f"label_text.{attribute.name}")
        prompts[attribute.name] = {label: tuple(t.replace("{label}", texts.get(label, label)) for t in chosen)
                                   for label in attribute.labels}
    return LabelPrompts(path, hashlib.sha256(data).hexdigest(), prompts)


class ZeroShotLabeler:
    """A label backend over a cosine function (`runners.backends.clip.zero_shot_classifier`): its text is
    the scores of the request's image, as JSON {attribute: {label: score}}."""

    def __init__(self, cosines: Callable[[Sequence[str]], list[list[float]]], prompts: LabelPrompts,
                 revision: str | None) -> None:
        self.cosines = cosines
        self.prompts = prompts
        self.revision = revision
        self.columns = {p: i for i, p in enumerate(prompts.flat())}

    def model_revision(self) -> str | None:
        return self.revision

    def scores(self, image_path: str) -> dict[str, dict[str, float]]:
        """score(label) for every attribute and label (see the module docstring)."""
        row = self.cosines([image_path])[0]
        return {attribute: {label: sum(row[self.columns[p]] for p in ps) / len(ps) for label, ps in labels.items()}
                for attribute, labels in self.prompts.prompts.items()}

    def generate(self, request: LabelRequest) -> str:
        return json.dumps(self.scores(request.image_path))


def argmax_answers(raw: str, taxonomy: Taxonomy) -> tuple[FieldAnswer, ...]:
    """Each attribute's highest-scoring label (first in taxonomy order on a tie) from `ZeroShotLabeler` text."""
    scores = json.loads(raw)
    answers = []
    for attribute in taxonomy.attributes:
        ranked = sorted(attribute.labels, key=lambda label: -scores[attribute.name][label])  # stable: ties keep order
        best = ranked[0]
        why = f"CLIP zero-shot: score {scores[attribute.name][best]:.4f}"
        if len(ranked) > 1:
            why += f", runner-up {ranked[1]!r} {scores[attribute.name][ranked[1]]:.4f}"
        answers.append(FieldAnswer(attribute.name, "ok", label=best, answer=best, rationale=why))
    return tuple(answers)


def record_clip_labels(
    db: Database | duckdb.DuckDBPyConnection | str | Path,
    *,
    dataset: str,
    judge: str,
    backend: ZeroShotLabeler,
    model: str,
    weights: str | None,
    taxonomy_file: str | Path = DEFAULT_TAXONOMY,
    templates_file: str | Path = DEFAULT_TEMPLATES,
    limit: int | None = None,
    progress: bool = True,
    replace: bool = False,
    config: dict | None = None,
) -> RunSummary:
    """Record the zero-shot baseline on every image of `dataset` (the first `limit`) as labeler `judge`.

    `backend` must be built from the same taxonomy and templates files. Raises InputError
    before any call for an unknown dataset, a bad taxonomy or templates file, a taxonomy other
    than the dataset's, a missing or unreadable image, or records of this judge made with
    other templates, taxonomy or weights (unless `replace`).
    """
    engine = local_engine(backend, concurrency=1, batch_size=1, name=f"clip-{judge}")
    started = time.perf_counter()
    taxonomy = load_taxonomy(taxonomy_file)
    prompts = load_label_prompts(templates_file, taxonomy)
    keyed_model = model if weights is None else f"{model} ({weights})"
    keyed = {CONDITION: {"model": keyed_model, "taxonomy_sha256": taxonomy.sha256,
                         "instruction_sha256": prompts.sha256, "condition_sha256": METHOD_SHA256}}
    db = as_database(db)
    with db.claim(dataset, judge):
        with db.session() as con:
            scope = load_label_scope(con, dataset=dataset, limit=limit)
        check_taxonomy(scope, taxonomy)
        sizes = check_images(scope.images)
        shown = tuple(("text", p) for p in prompts.flat())
        requests = []
        for cid, path in zip(scope.images["candidate_id"], scope.images["image_path"]):
            content = (*shown, ("image", cid))
            key = label_request_key(
                dataset=dataset, judge=judge, model=keyed_model, condition=CONDITION, candidate_id=cid,
                manifest_sha256=scope.manifest_sha256, instruction_sha256=prompts.sha256,
                condition_sha256=METHOD_SHA256, taxonomy_sha256=taxonomy.sha256, content=content)
            requests.append(LabelRequest(key, dataset, cid, CONDITION, taxonomy, label_list=True, abstention=False,
                                         content=content, image_path=path))
        identity = RunIdentity(dataset, judge, KIND, "clip", model, prompts.sha256, scope.manifest_sha256)
        run_config = {**(config or {}), **taxonomy_config(taxonomy), "templates_file": str(prompts.file),
                      "method": METHOD, "weights": weights, "limit": limit}

        def build(run_id: str, request: LabelRequest, generated: Generated) -> LabeledCall:
            info = json.dumps({**keyed[CONDITION], "image_size": list(sizes[request.candidate_id]),
                               "prompts": len(shown)})
            if generated.raw is None:
                return labeled_call(request, generated, run_id=run_id, input_json=info, status="runtime_fail",
                                    answers=missing_answers(taxonomy), note=generated.error)
            return labeled_call(request, generated, run_id=run_id, input_json=info, status="ok",
                                answers=argmax_answers(generated.raw, taxonomy), note=None)

        return record_planned(
            db, identity, requests, engine=engine, build=build, write=write_label_calls, config=run_config,
            replace=replace, progress=progress, started=started, table=TABLE,
            check=lambda con: check_label_history(con, dataset, judge, requests, keyed),
        )
