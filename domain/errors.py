"""Typed errors of the domain and of the ports."""


class DomainError(Exception):
    """Base of every error the domain raises on purpose."""


class IllegalTransition(DomainError):
    """The record's state does not allow this move."""


class FencedOut(IllegalTransition):
    """The caller's attempt no longer owns the record (E5): LockedBy names another attempt."""


class NotClaimable(IllegalTransition):
    """The record is not Pending, is locked, or is cooling down (NotBefore in the future)."""


class NotExpired(IllegalTransition):
    """The Supervisor asked to recover a record whose CompleteBy has not passed."""


class RetryBudgetExhausted(IllegalTransition):
    """The step has used every remote call the Scheduler's budget allows (C2)."""


class UnsupportedSchemaVersion(DomainError):
    """A stored record was written by a newer schema than this code understands (C7)."""


class InvalidOrderId(DomainError):
    """An OrderID that cannot be used safely in instance IDs, message IDs or keys."""


class PreconditionFailed(DomainError):
    """A conditional write lost: the ETag no longer matches (another writer got there first)."""


class RecordNotFound(DomainError):
    """The state record does not exist."""


class DependencyUnavailable(Exception):
    """A database, store or broker kept failing on transient faults for a whole retry budget.

    Not a ``DomainError``: nothing about the order is wrong, and the same call may succeed later.
    """

    def __init__(self, dependency: str, detail: str) -> None:
        super().__init__(f"the {dependency} is unavailable: {detail}")
        self.dependency = dependency
        self.detail = detail

    def __reduce__(self) -> tuple[type["DependencyUnavailable"], tuple[str, str]]:
        return type(self), (self.dependency, self.detail)
