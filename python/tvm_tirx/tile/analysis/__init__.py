"""Facts about a kernel's values: the prover, machine integers, bounds, uniformity, threads."""
