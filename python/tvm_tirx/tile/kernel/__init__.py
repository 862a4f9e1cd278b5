"""A whole kernel: call sites, decoded calls, kernel facts, program order, the protocol and kernel rules."""
