"""harness/tools/locks.py: each shipped environment's lock holds its input's pins, every dependency they
bring and a hash for each, and a lock left behind by a change to its input fails, offline."""

import shutil
from pathlib import Path

import pytest

from harness.tools.locks import LOCKS, lock_problems, read_lock

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def copy(tmp_path: Path) -> Path:
    for source, lock in LOCKS:
        for relative in (source, lock):
            (tmp_path / relative).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy(ROOT / relative, tmp_path / relative)
    return tmp_path


def test_every_lock_matches_its_input_and_is_hashed() -> None:
    assert lock_problems(ROOT) == []
    for _, lock in LOCKS:
        entries = read_lock((ROOT / lock).read_text())
        assert entries and all(entry.hashes > 0 for entry in entries.values())


def test_the_app_lock_holds_the_transitive_dependencies_too() -> None:
    entries = read_lock((ROOT / "requirements.txt").read_text())
    assert {"msal", "typing-extensions", "pydantic-core"} <= entries.keys()
    assert entries["pydantic-core"].via == ("pydantic",)


def test_a_pin_moved_in_the_input_makes_the_lock_stale(copy: Path) -> None:
    source = copy / "requirements.in"
    source.write_text(source.read_text().replace("tenacity==9.2.1", "tenacity==9.2.0"))
    stale = "tenacity==9.2.1 (the input pins 9.2.0)"
    assert lock_problems(copy) == [
        f"requirements.txt: stale against requirements.in: {stale}; run `make lock`"
    ]


def test_a_pin_added_or_dropped_in_the_input_makes_the_lock_stale(copy: Path) -> None:
    source = copy / "simulator/requirements.in"
    text = source.read_text()
    source.write_text(text.replace("aiohttp==3.14.5\n", "") + "rich==15.0.0\n")
    found = lock_problems(copy)
    assert (
        "simulator/requirements.txt: stale against simulator/requirements.in: rich==15.0.0; run `make lock`"
        in found
    )
    assert any("aiohttp (no longer in the input)" in p for p in found)


def test_a_lock_entry_without_its_hash_is_found(copy: Path) -> None:
    lock = copy / "agent_worker/requirements.txt"
    lines = lock.read_text().splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("purgatory=="))
    end = next(i for i in range(start + 1, len(lines)) if not lines[i].strip().startswith("--hash"))
    lock.write_text("\n".join([*lines[:start], lines[start].removesuffix(" \\"), *lines[end:]]) + "\n")
    assert lock_problems(copy) == ["agent_worker/requirements.txt: purgatory has no --hash"]
