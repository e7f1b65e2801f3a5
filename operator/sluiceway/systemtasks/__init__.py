"""System tasks the operator runs itself: HTTP and HTTP_POLL, behind
per-host circuit breakers."""
