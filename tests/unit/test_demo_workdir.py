"""``python -m harness.demo --workdir DIR`` deletes only a directory an earlier run made (its marker)."""

from pathlib import Path

import pytest

from harness.demo.__main__ import MARKER, WorkdirRefused, main, prepare_workdir


def test_a_new_or_empty_directory_is_taken_and_marked(tmp_path: Path) -> None:
    new = tmp_path / "new"
    prepare_workdir(new)
    assert [p.name for p in new.iterdir()] == [MARKER]
    empty = tmp_path / "empty"
    empty.mkdir()
    prepare_workdir(empty)
    assert (empty / MARKER).is_file()


def test_an_earlier_runs_directory_is_emptied(tmp_path: Path) -> None:
    workdir = tmp_path / "demo"
    prepare_workdir(workdir)
    (workdir / "servicebus.db").write_text("from the last run")
    prepare_workdir(workdir)
    assert [p.name for p in workdir.iterdir()] == [MARKER]


def test_a_directory_the_demo_did_not_make_is_refused_and_kept(tmp_path: Path) -> None:
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "notes.txt").write_text("keep me")
    with pytest.raises(WorkdirRefused, match="was not made by the demo"):
        prepare_workdir(mine)
    assert (mine / "notes.txt").read_text() == "keep me"


def test_the_demo_exits_2_before_starting_anything(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "notes.txt").write_text("keep me")
    assert main(["--workdir", str(tmp_path)]) == 2
    assert "was not made by the demo" in capsys.readouterr().out
    assert (tmp_path / "notes.txt").exists()
