"""One ComponentResource per concept: cluster, slice pool, capacity chain, workloads."""
