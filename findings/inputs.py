"""What a report is made from: the audits, the dataset's provenance and a way to embed images."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import pandas as pd

from audit_core import AttributeAudit, AttributeData, RatingAudit, RatingData, SelectionAudit, SelectionData
from audit_core.rating.rubric_vs_scorer import RubricVsScorer
from audit_core.store.schema import DEFAULT_POOL
from findings.colours import name_colours


@dataclass(frozen=True)
class ReportInput:
    """Everything a report is made from.

    row: the dataset's `datasets` row; note: its one-line source note (`report.source_note`);
    data/result: the selection audit's input and result (None without alignment ratings);
    rating_data/rating: the rating audit's (None without rating data); attribute_data/attributes:
    the attribute audit's (None without attribute judges); rubric: the rating judges' rubric beside
    the content scorers (None without both); runs: the dataset's
    `runs` rows (provenance); image: (candidate id, image path) → data URI or None;
    image_paths: candidate id → image file (None without one);
    pool: the reference pool of the selection audit; versions: library versions of this build.
    """

    dataset_id: str
    row: dict
    note: str
    data: SelectionData | None
    result: SelectionAudit | None
    rating_data: RatingData | None = None
    rating: RatingAudit | None = None
    attribute_data: AttributeData | None = None
    attributes: AttributeAudit | None = None
    rubric: RubricVsScorer | None = None
    runs: pd.DataFrame = field(default_factory=pd.DataFrame)
    image: Callable[[str, str | None], str | None] = lambda candidate_id, path: None
    image_paths: dict[str, str | None] = field(default_factory=dict)
    pool: str = DEFAULT_POOL
    versions: dict[str, str] = field(default_factory=dict)

    @property
    def name(self) -> str:
        """The dataset's name, with its id when they differ."""
        name = str(self.row.get("name") or self.dataset_id)
        return name if name == self.dataset_id else f"{name} ({self.dataset_id})"

    @property
    def simulated(self) -> bool:
        """Whether the dataset is generated (the source note says "simulated")."""
        return "simulated" in self.note.lower()

    @property
    def colours(self) -> dict[str, str]:
        """One colour per judge, scorer and rating judge (`findings.colours.name_colours`)."""
        names = [*(self.data.judges if self.data is not None else ()), *(self.data.scorers if self.data is not None else ())]
        if self.rating_data is not None:
            names += [judge for judge, _ in self.rating_data.raters]
        if self.attribute_data is not None:
            names += [judge for judge, _ in self.attribute_data.labelers]
        return name_colours(names)
