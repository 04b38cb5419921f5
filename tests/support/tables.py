"""Tables as the table contract reads them, for the ingest tests and the commands' tests.

`write_table` writes rows as CSV (lists joined by '|'), JSONL or Parquet by the file's extension;
`pool_rows` is a small selection study's pools table (three prompts in three countries, two to
four candidates each, alignment and stereotype ratings).
"""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pandas as pd

POOLS = [
    # prompt_id, prompt, country, [(candidate_id, model, alignment, stereotype, n)]
    ("p1", "A street market in Lagos", "Nigeria", [("p1_a", "m1", 1.0, 0.0, 3), ("p1_b", "m2", 0.5, 1.0, 2), ("p1_c", "m3", 0.0, None, 3)]),
    ("p2", "Tea ceremony, Kyoto", "Japan", [("p2_a", "m1", 0.5, 0.0, 2), ("p2_b", "m2", 0.75, 0.5, 4)]),
    ("p3", "Diwali, family, lamps", "India", [("p3_a", "m1", 0.25, 0.0, 2), ("p3_b", "m2", 1.0, 0.0, 2), ("p3_c", "m3", 0.5, 0.0, 2), ("p3_d", "m4", 0.0, 1.0, 2)]),
]


def pool_rows() -> list[dict]:
    rows = []
    for pid, prompt, country, cands in POOLS:
        for cid, model, alignment, stereotype, n in cands:
            row = {"prompt_id": pid, "prompt": prompt, "country": country, "candidate_id": cid,
                   "source_model": model, "alignment": alignment, "n": n}
            if stereotype is not None:
                row["stereotype"] = stereotype
            rows.append(row)
    return rows


def write_table(path: Path, rows: list[dict]) -> Path:
    """Write rows as CSV (lists joined by '|'), JSONL or Parquet, by extension."""
    if path.suffix == ".jsonl":
        path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    elif path.suffix == ".parquet":
        pd.DataFrame(rows).to_parquet(path)
    else:
        columns = list(dict.fromkeys(k for r in rows for k in r))
        with open(path, "w", newline="", encoding="utf-8") as handle:
            writer = csv.DictWriter(handle, fieldnames=columns)
            writer.writeheader()
            for r in rows:
                writer.writerow({k: "|".join(v) if isinstance(v, list) else v for k, v in r.items()})
    return path
