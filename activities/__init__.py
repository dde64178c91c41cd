"""Activity functions of the order workflow: fenced state transitions, order reads, agent
requests, local steps, compensations, status posts. Each takes a JSON payload and the ports."""
