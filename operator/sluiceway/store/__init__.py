"""PostgreSQL: the only package with SQL. Numbered, append-only migrations;
the transactional dequeue, semaphores, windows and timers."""
