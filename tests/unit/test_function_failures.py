"""Function failures as devhost records them and ops reads them (harness/devhost/invocation_log.py,
ops/function_failures.py): per function, its count and last error, failures first."""

from datetime import UTC, datetime
from pathlib import Path

from harness.devhost.invocation_log import InvocationLog, read
from ops import function_failures

AT = datetime(2026, 3, 1, 9, 0, tzinfo=UTC)


def test_each_outcome_is_counted_per_function_with_the_last_error(tmp_path: Path) -> None:
    log = InvocationLog(tmp_path)
    log.succeeded("advance")
    log.failed("advance", "QueueNotFound: queue 'orders' is not declared\nTraceback ...", AT)
    log.failed("advance", "the worker process 1 exited (code -9)", AT.replace(minute=1))
    log.succeeded("supervisor")
    log.close()  # read by another connection, as ops reads the host's file
    found = read(tmp_path)
    assert [(o.function, o.succeeded, o.failed) for o in found] == [("advance", 1, 2), ("supervisor", 1, 0)]
    assert found[0].last_error == "the worker process 1 exited (code -9)"
    assert found[0].last_failed_at == AT.replace(minute=1).isoformat()
    line = function_failures.line(found)
    assert line == "function failures: advance ×2 (last: the worker process 1 exited (code -9))"


def test_no_file_yet_reads_as_no_failures(tmp_path: Path) -> None:
    assert read(tmp_path / "never-ran") == []
    assert function_failures.line([]) == "function failures: none"


def test_a_relative_data_dir_resolves_against_the_app_directory(tmp_path: Path) -> None:
    found = function_failures.devhost_data_dir({"DEVHOST_DATA_DIR": ".devhost"}, tmp_path)
    assert found == tmp_path.resolve() / ".devhost"
    absolute = tmp_path / "elsewhere"
    assert function_failures.devhost_data_dir({"DEVHOST_DATA_DIR": str(absolute)}, tmp_path) == absolute
