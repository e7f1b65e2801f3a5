"""The operator's settings, read from SLUICEWAY_* variables: a bad or
missing one is refused at start, naming the variable."""

from __future__ import annotations

import pytest

from sluiceway.runtime.settings import Settings, SettingsError


def test_settings_name_the_missing_variable() -> None:
    with pytest.raises(SettingsError, match="SLUICEWAY_DATABASE_URL"):
        Settings.from_env({})
    settings = Settings.from_env({"SLUICEWAY_DATABASE_URL": "postgresql://x", "SLUICEWAY_NAMESPACES": "a, b,"})
    assert settings.namespaces == ("a", "b")


def test_kubernetes_auth_without_kubernetes_is_refused() -> None:
    with pytest.raises(SettingsError, match="SLUICEWAY_KUBERNETES=false"):
        Settings.from_env(
            {
                "SLUICEWAY_DATABASE_URL": "postgresql://x",
                "SLUICEWAY_AUTH": "kubernetes",
                "SLUICEWAY_KUBERNETES": "false",
            }
        )


def test_timer_intervals_are_settings_and_a_bad_one_names_its_variable() -> None:
    defaults = Settings.from_env({"SLUICEWAY_DATABASE_URL": "postgresql://x"})
    assert (defaults.status_interval, defaults.autoscaling_interval) == (5.0, 5.0)
    fast = Settings.from_env(
        {
            "SLUICEWAY_DATABASE_URL": "postgresql://x",
            "SLUICEWAY_STATUS_INTERVAL": "0.5",
            "SLUICEWAY_AUTOSCALING_INTERVAL": "1",
        }
    )
    assert (fast.status_interval, fast.autoscaling_interval) == (0.5, 1.0)
    for variable in ("SLUICEWAY_STATUS_INTERVAL", "SLUICEWAY_AUTOSCALING_INTERVAL"):
        with pytest.raises(SettingsError, match=variable):
            Settings.from_env({"SLUICEWAY_DATABASE_URL": "postgresql://x", variable: "0"})


def test_retention_and_windows_are_durations_and_a_bad_one_names_its_variable() -> None:
    defaults = Settings.from_env({"SLUICEWAY_DATABASE_URL": "postgresql://x"})
    assert (defaults.retention, defaults.idempotency_window) == (30 * 86400, 86400)
    set_ = Settings.from_env(
        {"SLUICEWAY_DATABASE_URL": "postgresql://x", "SLUICEWAY_RETENTION": "14d", "SLUICEWAY_IDEMPOTENCY_WINDOW": "2h"}
    )
    assert (set_.retention, set_.idempotency_window) == (14 * 86400, 7200)
    assert Settings.from_env({"SLUICEWAY_DATABASE_URL": "postgresql://x", "SLUICEWAY_RETENTION": "0"}).retention == 0
    assert defaults.event_retention == 7 * 86400
    events = Settings.from_env({"SLUICEWAY_DATABASE_URL": "postgresql://x", "SLUICEWAY_EVENT_RETENTION": "2d"})
    assert events.event_retention == 2 * 86400
    for variable, value in (
        ("SLUICEWAY_RETENTION", "forever"),
        ("SLUICEWAY_TASK_LOG_BYTES", "12"),
        ("SLUICEWAY_PURGE_BATCH", "0"),
        ("SLUICEWAY_EVENT_RETENTION", "10s"),  # under a minute: a sender could not read what happened
    ):
        with pytest.raises(SettingsError, match=variable):
            Settings.from_env({"SLUICEWAY_DATABASE_URL": "postgresql://x", variable: value})


def test_the_purge_share_is_a_fraction_of_time() -> None:
    assert Settings.from_env({"SLUICEWAY_DATABASE_URL": "postgresql://x"}).purge_share == 0.25
    with pytest.raises(SettingsError, match="SLUICEWAY_PURGE_SHARE"):
        Settings.from_env({"SLUICEWAY_DATABASE_URL": "postgresql://x", "SLUICEWAY_PURGE_SHARE": "1.5"})


def test_archiving_is_off_unless_a_directory_is_set() -> None:
    assert Settings.from_env({"SLUICEWAY_DATABASE_URL": "postgresql://x"}).archive_dir is None
    env = {"SLUICEWAY_DATABASE_URL": "postgresql://x", "SLUICEWAY_ARCHIVE_DIR": "/var/lib/sluiceway/archive"}
    assert Settings.from_env(env).archive_dir == "/var/lib/sluiceway/archive"  # checked on disk at startup


def test_inline_deciding_is_off_unless_turned_on() -> None:
    base = {"SLUICEWAY_DATABASE_URL": "postgresql://x"}
    assert not Settings.from_env(base).decide_inline
    for off in ("false", "0", "no", "OFF"):
        assert not Settings.from_env({**base, "SLUICEWAY_DECIDE_INLINE": off}).decide_inline
    assert Settings.from_env({**base, "SLUICEWAY_DECIDE_INLINE": "true"}).decide_inline


def test_waiting_polls_are_matched_unless_turned_off() -> None:
    base = {"SLUICEWAY_DATABASE_URL": "postgresql://x"}
    assert Settings.from_env(base).match_polls
    assert Settings.from_env({**base, "SLUICEWAY_MATCH_POLLS": "true"}).match_polls
    for off in ("false", "0", "no", "OFF"):
        assert not Settings.from_env({**base, "SLUICEWAY_MATCH_POLLS": off}).match_polls


def test_the_event_loop_is_uvloop_unless_asyncio_is_asked_for() -> None:
    base = {"SLUICEWAY_DATABASE_URL": "postgresql://x"}
    assert Settings.from_env(base).event_loop == "uvloop"
    assert Settings.from_env({**base, "SLUICEWAY_EVENT_LOOP": "AsyncIO"}).event_loop == "asyncio"
    with pytest.raises(SettingsError, match="SLUICEWAY_EVENT_LOOP: 'trio' is not one of uvloop, asyncio"):
        Settings.from_env({**base, "SLUICEWAY_EVENT_LOOP": "trio"})


def test_the_run_waiters_of_a_process_are_capped() -> None:
    assert Settings.from_env({"SLUICEWAY_DATABASE_URL": "postgresql://x"}).max_run_waiters == 10_000
    given = {"SLUICEWAY_DATABASE_URL": "postgresql://x", "SLUICEWAY_MAX_RUN_WAITERS": "500"}
    assert Settings.from_env(given).max_run_waiters == 500
    with pytest.raises(SettingsError, match="SLUICEWAY_MAX_RUN_WAITERS"):
        Settings.from_env({"SLUICEWAY_DATABASE_URL": "postgresql://x", "SLUICEWAY_MAX_RUN_WAITERS": "0"})
