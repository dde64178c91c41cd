"""One problem per line: ``file:line — what is wrong — how to fix``."""

from dataclasses import dataclass


@dataclass(frozen=True)
class Problem:
    file: str
    line: int | None
    what: str
    fix: str

    def __str__(self) -> str:
        where = f"{self.file}:{self.line}" if self.line else self.file
        return f"{where} — {self.what} — {self.fix}"


class Report:
    """Collects problems once each, in the order found (a module called twice reports once)."""

    def __init__(self) -> None:
        self.problems: list[Problem] = []
        self._seen: set[Problem] = set()

    def has(self, problem: Problem) -> bool:
        return problem in self._seen

    def add(self, file: str, line: int | None, what: str, fix: str) -> None:
        problem = Problem(file, line, what, fix)
        if problem not in self._seen:
            self._seen.add(problem)
            self.problems.append(problem)
