"""The locked environments: each shipped artefact installs a lock (every distribution, transitive
ones included, at one version with its hashes) compiled from a short input of the direct pins.

``python -m harness.tools.locks`` (``make lock``) regenerates the locks with uv from PyPI itself, not the
machine's configured mirrors, so each ``--hash`` is PyPI's sha256 of that file.
``python -m harness.tools.locks --check`` and ``lock_problems`` find a stale lock offline: a lock holds
exactly its input's pins as its roots (uv's ``# via -r INPUT`` annotations), every other entry is
required by one of its entries, and every entry is hashed. pip installs a hashed file in
hash-checking mode (every download must match), which is what Oryx's remote build runs
(``pip install -r requirements.txt``), devhost's package build (harness/devhost/app_package.py) and the
images' ``RUN pip install -r``.
"""

import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from harness.tools.shipping import canonical, pins

# The input of each lock, and the lock.
LOCKS = (
    ("requirements.in", "requirements.txt"),
    ("agent_worker/requirements.in", "agent_worker/requirements.txt"),
    ("simulator/requirements.in", "simulator/requirements.txt"),
)
# PyPI, named so the hashes are PyPI's whatever index pip or uv is configured with here.
INDEX = "https://pypi.org/simple"
# What runs them: the Functions Python 3.13 image and python:3.13-slim, both Debian on x86-64
# (glibc 2.36); the hashes cover every file of each version, so other machines install them too.
PYTHON_VERSION = "3.13"
PYTHON_PLATFORM = "x86_64-manylinux_2_28"

_ENTRY = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)==(\S+)")
_HASH = re.compile(r"--hash=sha256:[0-9a-f]{64}")


@dataclass
class Entry:
    version: str
    hashes: int = 0
    via: tuple[str, ...] = ()


def compile_command(source: str, lock: str) -> list[str]:
    return [
        *(sys.executable, "-m", "uv", "pip", "compile", source, "--output-file", lock),
        "--generate-hashes",
        *("--index-url", INDEX),
        *("--python-version", PYTHON_VERSION),
        *("--python-platform", PYTHON_PLATFORM),
        *("--custom-compile-command", "make lock"),
        "--quiet",
    ]


def read_lock(text: str) -> dict[str, Entry]:
    """A uv lock's entries by canonical name: version, hash count and what requires each."""
    entries: dict[str, Entry] = {}
    current: Entry | None = None
    via: list[str] = []
    for line in text.splitlines():
        found = _ENTRY.match(line)
        if found:
            if current is not None:
                current.via = tuple(via)
            current, via = Entry(found[2]), []
            entries[canonical(found[1])] = current
        elif current is not None:
            current.hashes += len(_HASH.findall(line))
            note = line.strip().removeprefix("#").strip()
            if line.lstrip().startswith("#") and note and note != "via":
                via.append(note.removeprefix("via ").strip())
    if current is not None:
        current.via = tuple(via)
    return entries


def lock_problems(root: Path) -> list[str]:
    problems: list[str] = []
    for source, lock in LOCKS:
        if not (root / lock).exists():
            problems.append(f"{lock}: missing; run `make lock`")
            continue
        wanted = pins(root, source)
        entries = read_lock((root / lock).read_text())
        roots = {name for name, entry in entries.items() if f"-r {source}" in entry.via}
        stale = [f"{name}=={version}" for name, version in sorted(wanted.items()) if name not in roots]
        stale += [
            f"{name}=={entries[name].version} (the input pins {wanted[name]})"
            for name in sorted(roots & wanted.keys())
            if entries[name].version != wanted[name]
        ]
        stale += [f"{name} (no longer in the input)" for name in sorted(roots - wanted.keys())]
        orphans = [
            name
            for name, entry in sorted(entries.items())
            if name not in roots and not any(canonical(v) in entries for v in entry.via)
        ]
        problems += [f"{lock}: stale against {source}: {item}; run `make lock`" for item in stale]
        problems += [f"{lock}: {name} is required by nothing it holds; run `make lock`" for name in orphans]
        problems += [f"{lock}: {name} has no --hash" for name, e in sorted(entries.items()) if e.hashes == 0]
    versions: dict[str, dict[str, str]] = {}
    for _, lock in LOCKS:
        if (root / lock).exists():
            for name, entry in read_lock((root / lock).read_text()).items():
                versions.setdefault(name, {})[lock] = entry.version
    problems += [
        f"{name} is locked at different versions: {by_lock}"
        for name, by_lock in sorted(versions.items())
        if len(set(by_lock.values())) > 1
    ]
    return problems


def main(argv: list[str]) -> int:
    root = Path.cwd()
    if "--check" not in argv:
        for source, lock in LOCKS:
            subprocess.run(compile_command(source, lock), cwd=root, check=True)
    found = lock_problems(root)
    print("\n".join(found) if found else "every lock matches its input")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
