"""The Function App's deployment package: the repository minus what ``.funcignore`` names.

``func azure functionapp publish`` and ``azd deploy`` build the zip the same way (gitignore-style
patterns, matched here with pathspec). ``python -m harness.tools.deploy_package DEST`` writes the files
to DEST, so what Azure would receive can be inspected or indexed (``python -m harness.devhost.worker``).
"""

import os
import shutil
import sys
from pathlib import Path

import pathspec


def deployed_files(root: Path) -> list[Path]:
    """Paths relative to ``root`` that the package holds, ignored directories never walked."""
    ignore = pathspec.GitIgnoreSpec.from_lines((root / ".funcignore").read_text().splitlines())
    kept: list[Path] = []
    for directory, subdirs, files in os.walk(root):
        relative = Path(directory).relative_to(root)
        subdirs[:] = sorted(d for d in subdirs if not ignore.match_file(f"{relative / d}/"))
        kept += [relative / f for f in sorted(files) if not ignore.match_file(str(relative / f))]
    return kept


def build(root: Path, dest: Path) -> list[Path]:
    files = deployed_files(root)
    for relative in files:
        target = dest / relative
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(root / relative, target)
    return files


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: python -m harness.tools.deploy_package DEST")
    written = build(Path.cwd(), Path(sys.argv[1]))
    print(f"{len(written)} files in {sys.argv[1]}")
