"""``python -m harness.tools.iac.checkov_check [ROOT]``: checkov over ROOT/infra, with the committed skip
list.

Runs under ``.venv-checkov`` (checkov pins pycep-parser 0.5.1; the project checker needs 0.7.1).
checkov exits 0 when a file does not parse, so this reads its JSON and fails on:

- any parsing error (a file checkov did not scan is a file nothing checked);
- any failed check that no line of the skip list covers;
- any skip without a reason, and any skip that no longer matches a failure (stale);
- any inline ``checkov:skip`` comment in the Bicep (the list is the one place for skips).

checkov evaluates neither parameters nor conditions, so it also scans each combination of the
deployment options rendered as literal Bicep (``harness.tools.iac.render``, run with ``.venv-bicep``'s
Python, which the evaluator needs): a failure there names its combination, and a skip is stale only
when it matches no failure in any scan.

Skip list format (``harness/tools/iac/checkov-skips.txt``), one skip a line, ``#`` starts a comment line::

    CKV_AZURE_35 Microsoft.Storage/storageAccounts.*: why this check does not apply here

The resource pattern (checkov's ``resource`` field, shell-style wildcards) is optional; without it
the skip covers the check on every resource.
"""

import argparse
import fnmatch
import json
import re
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

SKIPS = "harness/tools/iac/checkov-skips.txt"
REPO = Path(__file__).resolve().parents[3]
RENDER_PYTHON = REPO / ".venv-bicep" / "bin" / "python"
SKIP_LINE = re.compile(r"^(?P<check>CKV2?_[A-Z0-9_]+)(?:\s+(?P<resource>[^\s:]+))?\s*:\s*(?P<reason>.*)$")


@dataclass(frozen=True)
class Skip:
    check: str
    resource: str
    reason: str
    line: int

    def covers(self, failure: dict[str, Any]) -> bool:
        return failure.get("check_id") == self.check and fnmatch.fnmatchcase(
            str(failure.get("resource", "")), self.resource
        )


def read_skips(path: Path, rel: str, problems: list[str]) -> list[Skip]:
    if not path.is_file():
        problems.append(f"{rel} — missing — commit the skip list (it may be empty)")
        return []
    skips: list[Skip] = []
    for number, raw in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        match = SKIP_LINE.match(line)
        if match is None:
            problems.append(f"{rel}:{number} — not a skip line — write 'CKV_ID [resource-pattern]: reason'")
            continue
        if not match.group("reason").strip():
            problems.append(
                f"{rel}:{number} — skip of {match.group('check')} has no reason — say in one line why"
            )
            continue
        skips.append(
            Skip(match.group("check"), match.group("resource") or "*", match.group("reason"), number)
        )
    return skips


def render(root: Path, out: Path, problems: list[str]) -> bool:
    """Each combination as literal Bicep under ``out`` (harness.tools.iac.render, in .venv-bicep)."""
    if not RENDER_PYTHON.exists():
        problems.append(f"{RENDER_PYTHON} — missing, so no combination was rendered — run `make iac-venvs`")
        return False
    command = [str(RENDER_PYTHON), "-m", "harness.tools.iac.render", str(root), str(out)]
    completed = subprocess.run(command, cwd=REPO, capture_output=True, text=True, check=False)
    if completed.returncode != 0:
        problems.append(
            f"harness.tools.iac.render — failed (exit {completed.returncode}), "
            "so no combination was checked — "
            f"{completed.stderr.strip()[-500:]}"
        )
        return False
    return True


def run_checkov(infra: Path) -> list[dict[str, Any]]:
    checkov = Path(sys.executable).parent / "checkov"
    command = [str(checkov), "-d", str(infra), "--framework", "bicep", "-o", "json", "--compact"]
    command += ["--skip-download"]  # offline: no guideline download
    completed = subprocess.run(command, capture_output=True, text=True, check=False)
    try:
        output = json.loads(completed.stdout)
    except json.JSONDecodeError:
        raise SystemExit(
            f"checkov printed no JSON (exit {completed.returncode}):\n{completed.stderr[-2000:]}"
        ) from None
    # One report per framework: a list, one object, or (nothing scanned) a bare summary.
    reports = output if isinstance(output, list) else [output]
    return [r for r in reports if isinstance(r, dict)]


def _tally(
    prefix: str,
    *,
    reports: list[dict[str, Any]],
    skips: list[Skip],
    used: set[Skip],
    problems: list[str],
    root: Path,
    counts: tuple[int, int, int],
) -> tuple[int, int, int]:
    """One scan's failures, parse errors and inline skips into ``problems``; the counts so far."""
    failed, passed, resources = counts
    for report in reports:
        results = report.get("results") or {}
        summary = report.get("summary") or report
        passed += int(summary.get("passed", 0))
        resources += int(summary.get("resource_count", 0))
        for path in results.get("parsing_errors") or []:
            given = Path(path)
            if not given.is_absolute():
                rel: Path | str = f"{prefix}/{path}".replace("//", "/")
            elif given.resolve().is_relative_to(root):
                rel = given.resolve().relative_to(root)
            else:
                rel = f"{prefix}{path}"
            problems.append(
                f"{rel} — checkov cannot parse it, so none of its checks ran — write Bicep in the "
                "subset checkov's pycep 0.5.1 parses (infra/README.md)"
            )
        if not results.get("parsing_errors") and int(summary.get("parsing_errors", 0)):
            problems.append(
                "infra — checkov reports parsing errors without naming the files — run it by hand"
            )
        for inline in results.get("skipped_checks") or []:  # only inline comments skip: no --skip-check
            lines = inline.get("file_line_range") or [None]
            problems.append(
                f"{prefix}{inline.get('file_path')}:{lines[0]} — inline checkov skip of "
                f"{inline.get('check_id')} — move it to {SKIPS} with its reason"
            )
        for failure in results.get("failed_checks") or []:
            covering = [s for s in skips if s.covers(failure)]
            if covering:
                used.update(covering)
                continue
            failed += 1
            lines = failure.get("file_line_range") or [None]
            problems.append(
                f"{prefix}{failure.get('file_path')}:{lines[0]} — {failure.get('check_id')} "
                f"{failure.get('check_name')} ({failure.get('resource')}) — fix it, or add "
                f"'{failure.get('check_id')} {failure.get('resource')}: <reason>' to {SKIPS}"
            )
    return failed, passed, resources


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m harness.tools.iac.checkov_check", description=__doc__)
    parser.add_argument("root", nargs="?", default=".", type=Path, help="the repository root (default: .)")
    parser.add_argument("--skips", type=Path, help=f"the skip list (default: ROOT/{SKIPS})")
    args = parser.parse_args(argv)
    root: Path = args.root.resolve()
    skips_path: Path = args.skips or root / SKIPS
    started = time.monotonic()
    problems: list[str] = []
    skips = read_skips(skips_path, str(args.skips or SKIPS), problems)
    infra = root / "infra"
    if not infra.is_dir():
        print("infra — missing — nothing for checkov to scan")
        return 1
    scans = [("infra", run_checkov(infra))]
    with tempfile.TemporaryDirectory() as tmp:
        if render(root, Path(tmp), problems):
            scans.append(("rendered:", run_checkov(Path(tmp))))
    used: set[Skip] = set()
    failed = passed = resources = 0
    for prefix, reports in scans:
        failed, passed, resources = _tally(
            prefix,
            reports=reports,
            skips=skips,
            used=used,
            problems=problems,
            root=root,
            counts=(failed, passed, resources),
        )
    for skip in skips:
        if skip not in used:
            problems.append(
                f"{args.skips or SKIPS}:{skip.line} — skip of {skip.check} {skip.resource} matches "
                "no failure — remove it"
            )
    for problem in problems:
        print(problem)
    elapsed = time.monotonic() - started
    if problems:
        print(f"checkov: {len(problems)} problem(s) in {elapsed:.1f}s", file=sys.stderr)
        return 1
    print(
        f"checkov: clean — {resources} resources, {passed} checks passed, {len(used)} skips used "
        f"({elapsed:.1f}s)"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
