"""The pure decider: `decide(snapshot, event, now, rng) -> Decision`.

No IO and no clock. The store loads a snapshot of one run, calls `decide`, and
applies the commands in one transaction; the same snapshot always yields the
same commands."""
