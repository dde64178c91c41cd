"""Activity functions of the order workflow: fenced state transitions, order reads, agent
requests, local steps, compensations, status posts. ``contracts`` types what each takes and
returns, ``steps`` holds their typed bodies, ``functions`` their JSON entry points."""
