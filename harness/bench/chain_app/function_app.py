"""The benchmark's workload: an orchestrator that chains three activities."""

import azure.durable_functions as df
import azure.functions as func

app = df.DFApp(http_auth_level=func.AuthLevel.ANONYMOUS)


@app.orchestration_trigger(context_name="context")
def chain3(context: df.DurableOrchestrationContext):
    value = context.get_input()
    for _ in range(3):
        value = yield context.call_activity("add_one", value)
    return value


@app.activity_trigger(input_name="value")
def add_one(value: int) -> int:
    return value + 1
