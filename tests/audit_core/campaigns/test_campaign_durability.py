"""A process killed with SIGKILL mid-campaign keeps every submission it reported as stored."""

from __future__ import annotations

import signal
import subprocess
import sys

from audit_core import campaigns as cp
from audit_core import store
from tests.support.paths import REPO

ANNOTATOR = """
import sys
from audit_core import campaigns as cp, store
con = store.connect(sys.argv[1])
campaign = cp.load_campaign(con, "tiny", "c")
while (item := cp.next_item(con, campaign, "ann")) is not None:
    assert cp.submit(con, campaign, "ann", item.item_id, {c: 1.0 for c in item.candidate_ids}, item.candidate_ids, 1.0)
    print(item.item_id, flush=True)
"""


def test_every_reported_submission_survives_a_kill_9(tiny_db):
    con = store.connect(tiny_db)
    cp.create_campaign(con, "tiny", "c", "alignment", "crowd", "uniform", 8, 1, annotators=("ann",), new_pool=True)
    con.close()
    child = subprocess.Popen([sys.executable, "-c", ANNOTATOR, str(tiny_db)], cwd=REPO, stdout=subprocess.PIPE,
                             text=True)
    reported = [child.stdout.readline().strip() for _ in range(3)]
    child.send_signal(signal.SIGKILL)
    child.wait()
    con = store.connect(tiny_db, read_only=True)
    stored = {r[0] for r in con.execute("SELECT item_id FROM campaign_submissions WHERE status = 'rated'").fetchall()}
    voted = con.execute("SELECT count(DISTINCT c.prompt_id) FROM votes v JOIN candidates c USING (dataset_id, "
                        "candidate_id) WHERE v.pool = 'crowd'").fetchone()[0]
    con.close()
    assert set(reported) <= stored and voted == len(stored) >= 3
