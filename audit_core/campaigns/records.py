"""What a campaign is, as typed records: its task and scale, the items it draws, and its one error.

Scales (DESIGN §6; the page shows `label` and takes `key` as the keyboard shortcut):

- alignment (outcome `alignment`, votes on [0, 1]): 0 "no" (n), 0.5 "partly" (p), 1 "yes" (y),
  as the public rating set used here;
- rubric (outcome `rubric`, votes on 1–5): 1..5 with the anchor texts of the rating judges'
  rubric (`runners/instructions/rubric_1to5_v1.txt`), keys "1".."5";
- labels (outcome `labels`, votes kept per annotator in `campaign_labels`): no scale; each
  attribute's closed label set and the taxonomy's abstention label.
"""

from __future__ import annotations

from dataclasses import dataclass

TASKS: tuple[str, ...] = ("alignment", "rubric", "labels")
# the outcome each task's votes are stored under (labels go to campaign_labels and gold_labels)
TASK_OUTCOMES: dict[str, str] = {"alignment": "alignment", "rubric": "rubric", "labels": "labels"}


class CampaignError(ValueError):
    """A campaign refuses the request: one sentence naming the field (never a traceback)."""

    def __init__(self, message: str, *, field: str | None = None) -> None:
        self.field = field
        self.message = message
        super().__init__(f"{field}: {message}" if field else message)


@dataclass(frozen=True)
class ScalePoint:
    """One answer of a scale: the stored value, its label, and the key that gives it."""

    value: float
    label: str
    key: str


ALIGNMENT_SCALE: tuple[ScalePoint, ...] = (
    ScalePoint(0.0, "no", "n"),
    ScalePoint(0.5, "partly", "p"),
    ScalePoint(1.0, "yes", "y"),
)
RUBRIC_SCALE: tuple[ScalePoint, ...] = (
    ScalePoint(1.0, "1 = the image does not depict the prompt at all", "1"),
    ScalePoint(2.0, "2 = the image barely depicts the prompt: most of what it asks for is missing or wrong", "2"),
    ScalePoint(3.0, "3 = the image depicts the prompt in part: some important elements are missing or wrong", "3"),
    ScalePoint(4.0, "4 = the image depicts the prompt well, with small omissions or inaccuracies", "4"),
    ScalePoint(5.0, "5 = the image depicts everything the prompt asks for, faithfully and convincingly", "5"),
)
SCALES: dict[str, tuple[ScalePoint, ...]] = {"alignment": ALIGNMENT_SCALE, "rubric": RUBRIC_SCALE, "labels": ()}

DEFAULT_INSTRUCTIONS: dict[str, str] = {
    "alignment": (
        "You see a text prompt and several images generated for it, in an order of their own.\n"
        "For each image, answer whether it depicts what the prompt asks for: yes, partly or no.\n"
        "Judge each image against the prompt, not against the other images. Skip an item you cannot judge.\n"
    ),
    "rubric": (
        "You see a text prompt and one image generated for it.\n"
        "Rate how well the image depicts the prompt on the scale from 1 to 5, using the anchor texts.\n"
        "Skip an item you cannot judge.\n"
    ),
    "labels": (
        "You see one generated image.\n"
        "For each question, choose the label the image shows. When the image gives no evidence,\n"
        "choose the abstention label rather than guess.\n"
    ),
}


@dataclass(frozen=True)
class Campaign:
    """A campaign as stored: what is rated (task, pool, the seeded draw), by whom, on which scale.

    annotators: the named annotators (empty: open to any name); taxonomy: labels task only,
    attribute -> its closed label set (without the abstention label, `abstain_label`).
    """

    dataset: str
    name: str
    task: str
    pool: str
    outcome: str
    plan: str
    size: int
    overlap: int
    seed: int
    annotators: tuple[str, ...]
    scale: tuple[ScalePoint, ...]
    taxonomy: dict[str, tuple[str, ...]] | None
    abstain_label: str | None
    instructions: str
    instructions_sha256: str
    created_at: str


@dataclass(frozen=True)
class Item:
    """One drawn item: a prompt with its pool's candidates (alignment) or with one image (rubric, labels).

    image_paths are aligned with candidate_ids, as the store holds them (None when a candidate has no image).
    """

    campaign: str
    item_id: str
    prompt_id: str
    prompt: str
    candidate_ids: tuple[str, ...]
    image_paths: tuple[str | None, ...]
