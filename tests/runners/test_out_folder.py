"""`--out DIR` of runners.analyze and runners.report: a folder that cannot take the files is refused in
one line before any audit, and links (or hard links) under the names the commands write are replaced,
never written through (`findings.output_folder`)."""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from findings import export
from findings.output_folder import OutputFolder
from runners import analyze, report
from tests.support.app import build_app_db
from tests.support.paths import REPO

RESAMPLES = "20"
COMMANDS = {"analyze": analyze.main, "report": report.main}


@pytest.fixture(scope="module")
def db(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("db")
    return build_app_db(folder / "a.duckdb", folder / "img", images=False)


@pytest.fixture
def fake_kaleido(monkeypatch) -> None:
    """The figure export without a browser: each figure's file holds its own name. Everything after the
    rendering (staging folder, files put in place) is the real code."""
    def render(specs: list[dict], browser: str) -> None:
        for spec in specs:
            Path(spec["path"]).write_bytes(f"figure {Path(spec['path']).name}".encode())

    monkeypatch.setattr(export, "browser_path", lambda: "/fake/chromium")
    monkeypatch.setattr(export, "_render", render)


def argv(db: Path, out: Path, *extra: str) -> list[str]:
    return ["--db", str(db), "--dataset", "tiny", "--out", str(out), "--resamples", RESAMPLES, *extra]


def tree(root: Path) -> dict[str, tuple]:
    """Every entry under `root` (links not followed): its kind and content or target."""
    found = {}
    for path in sorted(root.rglob("*")):
        info = path.lstat()
        if stat.S_ISLNK(info.st_mode):
            found[str(path)] = ("link", os.readlink(path))
        elif stat.S_ISREG(info.st_mode):
            found[str(path)] = ("file", path.read_bytes(), stat.S_IMODE(info.st_mode))
        else:
            found[str(path)] = ("dir", stat.S_IMODE(info.st_mode))
    return found


def one_error_line(err: str, *expected: str) -> str:
    lines = [line for line in err.splitlines() if line.strip()]
    assert "Traceback" not in err and len(lines) == 1 and lines[0].startswith("error: "), err
    for text in expected:
        assert text in lines[0], lines[0]
    return lines[0]


# ------------------------------------------------------------------ folders that cannot take the files

def _file(base: Path) -> Path:
    (base / "taken").write_text("a file the user keeps\n")
    return base / "taken"


def _under_file(depth: int) -> Callable[[Path], Path]:
    def make(base: Path) -> Path:
        out = _file(base)
        for i in range(depth):
            out = out / f"sub{i}"
        return out
    return make


def _dangling_link(base: Path) -> Path:
    (base / "gone").symlink_to(base / "nowhere")
    return base / "gone"


def _link_loop(base: Path) -> Path:
    (base / "loop").symlink_to(base / "loop")
    return base / "loop" / "out"


def _link_to_file(base: Path) -> Path:
    (base / "to-file").symlink_to(_file(base))
    return base / "to-file"


def _figures_is(kind: str) -> Callable[[Path], Path]:
    """An existing --out whose figures/ is a link to a folder elsewhere, a link to nothing, or a file."""
    def make(base: Path) -> Path:
        out, elsewhere = base / "out", base / "elsewhere"
        out.mkdir()
        elsewhere.mkdir()
        (elsewhere / "headline_gain.svg").write_text("the user's own figure\n")
        if kind == "link":
            (out / "figures").symlink_to(elsewhere)
        elif kind == "dangling":
            (out / "figures").symlink_to(base / "nowhere")
        else:
            (out / "figures").write_text("not a folder\n")
        return out
    return make


BAD_OUT = {
    "a file": (_file, "is a file, not a folder"),
    "a link to a file": (_link_to_file, "is a file, not a folder"),
    "a link to nothing": (_dangling_link, "is a link to nothing"),
    **{f"{depth} below a file": (_under_file(depth), "which is not a folder") for depth in (1, 2, 3)},
    "a name too long": (lambda base: base / ("x" * 300), "File name too long"),
    "a name too long below": (lambda base: base / ("x" * 300) / "out", "File name too long"),
    "a loop of links": (_link_loop, "which is not a folder"),
}
BAD_FIGURES = {f"figures/ {kind}": (_figures_is(kind), why) for kind, why in
               (("link", "figures is a link"), ("dangling", "figures is a link"), ("file", "figures is not a folder"))}


@pytest.mark.parametrize("command", sorted(COMMANDS))
@pytest.mark.parametrize("case", sorted(BAD_OUT))
def test_an_out_that_is_not_a_folder_is_refused_before_the_audit(db, tmp_path, capsys, command, case) -> None:
    make, why = BAD_OUT[case]
    out = make(tmp_path)
    before, db_folder = tree(tmp_path), tree(db.parent)
    assert COMMANDS[command](argv(db, out, *(["--no-figures"] if command == "report" else []))) == 2
    one_error_line(capsys.readouterr().err, f"error: --out {out}: ", why)
    assert tree(tmp_path) == before
    assert tree(db.parent) == db_folder  # refused before the audit: no audit cache written either


@pytest.mark.parametrize("case", sorted(BAD_FIGURES))
def test_a_figures_folder_that_is_a_link_or_a_file_is_refused(db, tmp_path, capsys, fake_kaleido, case) -> None:
    make, why = BAD_FIGURES[case]
    out = make(tmp_path)
    before = tree(tmp_path)
    assert report.main(argv(db, out)) == 2
    one_error_line(capsys.readouterr().err, f"error: --out {out}: ", why)
    assert tree(tmp_path) == before
    # Without figures, figures/ is not ours to touch: the report is written and the link left as it was.
    assert report.main(argv(db, out, "--no-figures")) == 0
    after = tree(tmp_path)
    assert {k: v for k, v in after.items() if k.startswith(str(tmp_path / "elsewhere"))} == \
        {k: v for k, v in before.items() if k.startswith(str(tmp_path / "elsewhere"))}
    assert after[str(out / "figures")] == before[str(out / "figures")]


@pytest.mark.parametrize("command", sorted(COMMANDS))
@pytest.mark.parametrize("name", ["report.md", "summary.json", "policies.csv"])
def test_a_write_that_fails_midway_is_one_line(db, tmp_path, capsys, command, name) -> None:
    """A folder where a file should go passes the check and fails the write (as a full disk or a
    folder made read-only meanwhile would): one line naming the file, exit 2."""
    out = tmp_path / "out"
    (out / name).mkdir(parents=True)
    assert COMMANDS[command](argv(db, out, *(["--no-figures"] if command == "report" else []))) == 2
    one_error_line(capsys.readouterr().err, f"error: {out / name}: cannot read or write (")
    assert (out / name).is_dir() and not [p for p in out.iterdir() if p.name.startswith(".")]


def unshare_mounts() -> bool:
    """Root with a working `unshare -m` (private mount namespaces): a read-only mount is then the way to
    show a folder root cannot write (mode bits do not stop root)."""
    if os.geteuid() != 0 or shutil.which("unshare") is None:
        return False
    return subprocess.run(["unshare", "-m", "true"], capture_output=True).returncode == 0


READ_ONLY_OUT = {"the folder itself": ".", "a folder to create in it": "new/deeper"}


@pytest.mark.parametrize("command", sorted(COMMANDS))
@pytest.mark.parametrize("case", sorted(READ_ONLY_OUT))
def test_a_read_only_out_is_refused_before_the_audit(db, tmp_path, command, case) -> None:
    """As root: --out on a read-only tmpfs in a private mount namespace. Otherwise: a folder of mode 0555."""
    ro = tmp_path / "ro"
    ro.mkdir()
    out = ro / READ_ONLY_OUT[case]
    args = [sys.executable, "-m", f"runners.{command}", *argv(db, out, *(["--no-figures"] if command == "report" else []))]
    db_folder = tree(db.parent)
    if os.geteuid() == 0:
        if not unshare_mounts():
            pytest.skip("as root, a read-only folder needs `unshare -m` to mount one")
        script = f'mount -t tmpfs -o ro,size=64k tmpfs "{ro}" && exec "$@"'
        done = subprocess.run(["unshare", "-m", "sh", "-c", script, "sh", *args], cwd=REPO, capture_output=True,
                              text=True, timeout=120)
        why = "read-only file system"
    else:
        ro.chmod(0o555)
        try:
            done = subprocess.run(args, cwd=REPO, capture_output=True, text=True, timeout=120)
        finally:
            ro.chmod(0o755)
        why = "permission denied"
    assert done.returncode == 2, done.stderr
    one_error_line(done.stderr, f"error: --out {out}: ", why)
    assert not list(ro.iterdir()) and tree(db.parent) == db_folder


# ------------------------------------------------------------------ links under the names we write

@pytest.fixture(scope="module")
def references(tmp_path_factory) -> dict[str, Path]:
    """command -> the folder a real run of it wrote, filled by `written_names`."""
    return {"folder": tmp_path_factory.mktemp("references")}


def written_names(db: Path, references: dict[str, Path], command: str) -> list[str]:
    """The files `command` writes into a fresh folder (relative paths), from a real run (kept in `references`)."""
    if command not in references:
        references[command] = references["folder"] / command
        assert COMMANDS[command](argv(db, references[command])) == 0
    out = references[command]
    return sorted(str(p.relative_to(out)) for p in out.rglob("*") if p.is_file())


@pytest.mark.parametrize("command", sorted(COMMANDS))
@pytest.mark.parametrize("planted", ["symlink", "hard link", "dangling symlink"])
def test_links_under_every_written_name_are_replaced_not_followed(db, references, tmp_path, capsys, fake_kaleido,
                                                                   command, planted) -> None:
    names = written_names(db, references, command)
    assert "summary.json" in names and "report.md" in names
    assert command == "analyze" or any(n.startswith("figures/") for n in names)
    outside, out = tmp_path / "outside", tmp_path / "out"
    outside.mkdir()  # so that a write through a dangling link would land there
    for name in names:
        target = outside / name.replace("/", "__")
        (out / name).parent.mkdir(parents=True, exist_ok=True)
        if planted == "dangling symlink":
            (out / name).symlink_to(target)
            continue
        target.write_bytes(f"the user's own {name}\n".encode())
        target.chmod(0o444)
        if planted == "symlink":
            (out / name).symlink_to(target)
        else:
            os.link(target, out / name)
    before = tree(outside)
    capsys.readouterr()
    assert COMMANDS[command](argv(db, out)) == 0, capsys.readouterr().err
    assert tree(outside) == before  # unchanged, and nothing created there
    reference = references[command]
    for name in names:
        info = (out / name).lstat()
        assert stat.S_ISREG(info.st_mode) and info.st_nlink == 1, name
        assert (out / name).read_bytes() == (reference / name).read_bytes(), name
    assert sorted(str(p.relative_to(out)) for p in out.rglob("*") if not p.is_dir()) == names  # no staging left


# ------------------------------------------------------------------ OutputFolder, whatever stands at a name

ENTRY = st.sampled_from(["absent", "file", "symlink", "hard link", "dangling symlink", "folder"])
NAMES = st.lists(st.from_regex(r"[a-z][a-z0-9_.-]{0,12}", fullmatch=True).filter(lambda n: ".." not in n),
                 min_size=1, max_size=6, unique=True)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(names=NAMES, kinds=st.lists(ENTRY, min_size=6, max_size=6), text=st.text(max_size=50))
def test_output_folder_replaces_every_entry_but_a_folder(tmp_path_factory, names, kinds, text) -> None:
    base = tmp_path_factory.mktemp("of")
    out, outside = base / "out", base / "outside"
    out.mkdir()
    outside.mkdir()
    for name, kind in zip(names, kinds):
        target = outside / name
        if kind in ("symlink", "hard link", "file"):
            target.write_text("kept")
        if kind == "file":
            (out / name).write_text("old")
        elif kind == "symlink" or kind == "dangling symlink":
            (out / name).symlink_to(outside / (name if kind == "symlink" else f"{name}.missing"))
        elif kind == "hard link":
            os.link(target, out / name)
        elif kind == "folder":
            (out / name).mkdir()
    before = tree(outside)
    with OutputFolder.open(out) as folder:
        for name, kind in zip(names, kinds):
            if kind == "folder":
                with pytest.raises(OSError) as raised:
                    folder.write_text(name, text)
                assert raised.value.filename == str(out / name)
                assert (out / name).is_dir()
            else:
                assert folder.write_text(name, text) == out / name
                assert not (out / name).is_symlink() and (out / name).read_bytes() == text.encode()
    assert tree(outside) == before
    assert not [p for p in out.iterdir() if p.name.startswith(".")]
