"""Viewer secrets: who may open the audit's pages when the app is served to other machines (docs/app.md).

    python -m runners.access grant --name NAME [--host H] [--port P]
    python -m runners.access revoke --name NAME
    python -m runners.access list

`grant` prints the secret once, with the link that opens the app with it (`http://HOST:PORT/?key=...`);
only its SHA-256 is kept (`audit_core.store.viewer_keys`, one file for this installation), and a new
grant to a name revokes its earlier secret. `revoke` stops a viewer's secret on their next page run.
`list` shows names and dates, never a secret. Annotators need no viewer secret: `runners.campaign
invite` gives them a link to their campaign's Annotate page only. Bad input (a blank name, a viewer
file that is not to be trusted) is one line, exit status 2.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from typing import NoReturn
from urllib.parse import urlencode

from audit_core.errors import InputError
from audit_core.store import viewer_keys
from audit_core.user_text import shown, visible
from runners.command import refused

KEY = "key"  # the URL parameter the app reads the secret from (`app_ui.access`)


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        print(f"error: {message}", file=sys.stderr)
        raise SystemExit(2)


def _parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="python -m runners.access", description=__doc__.splitlines()[0])
    commands = parser.add_subparsers(dest="command", required=True)
    grant = commands.add_parser("grant", help="print a new viewer secret and its link")
    grant.add_argument("--name", required=True)
    grant.add_argument("--host", default="localhost", help="the server's address as viewers reach it")
    grant.add_argument("--port", type=int, default=8501)
    revoke = commands.add_parser("revoke", help="revoke a viewer's secret")
    revoke.add_argument("--name", required=True)
    commands.add_parser("list", help="viewers granted, with dates (no secret)")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        if args.command == "grant":
            secret = viewer_keys.grant(args.name)
            print(f"viewer {shown(args.name)}: secret {secret} (shown once; only its hash is kept)")
            print(f"link: http://{args.host}:{args.port}/?{urlencode({KEY: secret})}")
        elif args.command == "revoke":
            count = viewer_keys.revoke(args.name)
            print(f"viewer {shown(args.name)}: {count} secret{'' if count == 1 else 's'} revoked")
        else:
            for viewer in viewer_keys.viewers():
                state = f"revoked {viewer.revoked_at}" if viewer.revoked_at else "valid"
                print(f"{visible(viewer.name)}\tgranted {viewer.granted_at}\t{state}")
    except InputError as err:
        return refused(err)
    except (OSError, RuntimeError) as err:  # a viewer file not to be trusted, no home folder, an unwritable folder
        print(f"error: {err}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
