"""An app with a Durable entity, the shape of Microsoft's counter_entity sample: devhost does not
run entities, and refuses the app at start-up."""

import azure.durable_functions as df
import azure.functions as func

app = df.DFApp(http_auth_level=func.AuthLevel.ANONYMOUS)


@app.entity_trigger(context_name="context")
def counter(context: df.DurableEntityContext) -> None:
    context.set_state(context.get_state(lambda: 0) + 1)
