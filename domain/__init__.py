"""Pure domain of the Scheduler Agent Supervisor pattern: no Azure, no I/O."""
