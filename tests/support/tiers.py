"""Backend ids as test parameters that carry their tier marker (pyproject.toml lists the markers)."""

from collections.abc import Collection, Iterable

import pytest


def backend_params(backends: Iterable[str], *, emulated: Collection[str]) -> list[object]:
    """``backends`` sorted, as parameters of a fixture or ``parametrize``; those in ``emulated``
    (their server or driver comes from `make emulators` / `make system-deps`) marked `emulators`,
    so `make check` (`-m fast`) leaves them out."""
    return [
        pytest.param(backend, marks=pytest.mark.emulators) if backend in emulated else backend
        for backend in sorted(backends)
    ]
