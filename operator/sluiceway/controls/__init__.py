"""Pure policy: backoff delays, retry decisions, the retry budget, timeout
meanings, gate arithmetic, the circuit breaker and parameter expressions.

Nothing here does IO or reads a clock: `now` and the random source are
parameters, so every rule is pinned by table tests."""
