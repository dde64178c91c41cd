"""The submitting apps an operator names (``--app``): those registered in ``SAS_SUBMITTERS``."""

from domain.apps import SubmittingApp
from ops.errors import BadArgument
from settings import Settings


def registered(settings: Settings, name: str) -> SubmittingApp:
    """An app of SAS_SUBMITTERS by its name (``app-c``), or by the part after ``app-`` (``c``)."""
    submitters = settings.submitters
    found = submitters.named(name) or submitters.named(f"app-{name}")
    if found is None:
        known = ", ".join(a.name for a in submitters.apps) or "none"
        raise BadArgument(f"--app {name!r} is not a registered app (SAS_SUBMITTERS: {known})")
    return found
