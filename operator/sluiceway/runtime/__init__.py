"""The composition root: settings, clock, and the wiring of kopf, the HTTP API,
the decider and the sweeper into one process."""
