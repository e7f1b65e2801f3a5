"""store/schema.sql is today's schema: what `sluiceway schema --check` (in
`make lint`) asserts, run here as a test too, on its own embedded PostgreSQL."""

from __future__ import annotations

from pathlib import Path

from sluiceway.devenv import schema
from sluiceway.store import migrating


def test_the_committed_schema_is_what_the_migrations_make() -> None:
    current = schema.generate()
    diff = schema.difference(schema.COMMITTED, current)
    assert diff == "", f"store/schema.sql is stale: run `{schema.REGENERATE}`\n{diff}"
    # The dump of a run that drew its own \restrict key, with nothing of the run
    # left in it, and a header naming the migration it stops at.
    header = current.split("-- Name:", 1)[0]
    assert "\n\\restrict " not in current and "Dumped by" not in current and "SET statement_timeout" not in current
    assert f"migrated up to {migrating.available()[-1][1]}" in header


def test_a_stale_file_is_reported_as_a_diff_naming_the_change(tmp_path: Path) -> None:
    current = schema.COMMITTED.read_text()
    stale = tmp_path / "schema.sql"
    stale.write_text(current.replace("CREATE TABLE public.tasks (", "CREATE TABLE public.tasks_of_old (", 1))
    diff = schema.difference(stale, current)
    assert "-CREATE TABLE public.tasks_of_old (" in diff and "+CREATE TABLE public.tasks (" in diff
    assert f"@@ -0,0 +1,{current.count(chr(10))} @@" in schema.difference(tmp_path / "missing.sql", current)
