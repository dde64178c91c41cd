"""``make demo``: the whole pattern on the embedded profile, as real processes, with faults."""
