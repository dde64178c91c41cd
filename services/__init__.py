"""Use cases over the ports: what the function bodies call. No Azure Functions imports here."""
