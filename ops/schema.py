"""``ops schema``: create or migrate the orders database's schema (idempotent), or print it as a
script for the engine's own client (the post-provision step's sqlcmd)."""

import json
import os

from adapters.sql import schema
from bootstrap import create_orders_schema
from ops.output import Output
from settings import Settings


def run(script: str | None, out: Output) -> None:
    if script:
        # Plain text, as sqlcmd reads it: no markup, highlighting or wrapping.
        out.console.file.write(schema.script(script))
        return
    settings = Settings.from_env(os.environ)
    changed = create_orders_schema(settings)
    if out.as_json:
        out.console.print_json(json.dumps({"profile": settings.profile, "changed": changed}))
    else:
        out.console.print(f"orders schema ({settings.profile}): {'; '.join(changed) or 'up to date'}")
