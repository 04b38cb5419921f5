"""Which sections a report has: one set of section builders per kind of judge data.

A builder takes the `ReportInput` and returns a `blocks.Section` (or None when it has
nothing to say). `SECTION_SETS` lists, per kind of data, when it applies and its
builders; `build_sections` puts the opening, every applying set and the closing
(method, provenance) in order. A dataset with two or more selector judges also gets the judge
change of its first two (`findings.judge_change`). A new kind of judge (e.g. attribute judges) adds its
module of builders and one entry here.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from findings import attributes, common, judge_change, rating, selection
from findings.blocks import Section
from findings.inputs import ReportInput

Builder = Callable[[ReportInput], Section | None]


@dataclass(frozen=True)
class SectionSet:
    """The sections of one kind of judge data and the test of whether a dataset has it."""

    applies: Callable[[ReportInput], bool]
    builders: tuple[Builder, ...]


SECTION_SETS: dict[str, SectionSet] = {
    "selection": SectionSet(lambda r: r.result is not None, selection.BUILDERS),
    "judge change": SectionSet(judge_change.applies, judge_change.BUILDERS),
    "rating": SectionSet(lambda r: r.rating is not None, rating.BUILDERS),
    "attributes": SectionSet(lambda r: r.attributes is not None, attributes.BUILDERS),
}


def build_sections(report: ReportInput) -> list[Section]:
    """The report's sections: the opening, then each applying set's in `SECTION_SETS` order, then
    method and provenance; builders returning None are skipped."""
    out = [common.opening(report)]
    for section_set in SECTION_SETS.values():
        if section_set.applies(report):
            out += [s for s in (b(report) for b in section_set.builders) if s is not None]
    return out + [common.method(report), common.provenance(report)]
