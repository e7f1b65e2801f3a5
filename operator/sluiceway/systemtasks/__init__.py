"""System tasks the operator runs itself: one runner leases them all and hands
each to the kind of system task its type names (today HTTP and HTTP_POLL,
behind per-host circuit breakers)."""
