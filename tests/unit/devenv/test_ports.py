"""`make up` chooses the API's port: two choosing at once never get the same
one, a port another process takes between the choice and the bind is given
up for another, and no address is handed out before our own server is the
one listening on it. Real sockets and processes on loopback."""

from __future__ import annotations

import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from sluiceway.devenv import up
from sluiceway.devenv.processes import Child, Reservation, free_port, listens, reserve_port

HOST = "127.0.0.1"
# A child that binds the port it is given, as the operator's API server does
# (SO_REUSEADDR, as uvicorn), and exits with "address already in use" when
# another process holds it.
SERVER = """
import socket, sys, time
s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("127.0.0.1", int(sys.argv[1])))
s.listen()
time.sleep(120)
"""
# Reserves a port in a process of its own, prints it, holds it until stdin closes.
RESERVER = """
import sys
from sluiceway.devenv.processes import reserve_port
held = reserve_port("127.0.0.1", int(sys.argv[1]))
print(held.port, flush=True)
sys.stdin.read()
"""


@pytest.fixture
def children(tmp_path: Path) -> Iterator[list[Child]]:
    started: list[Child] = []
    yield started
    for child in started:
        child.kill()


def listener(port: int) -> socket.socket:
    """Another process's server on `port` (here, this test's)."""
    taken = socket.socket()
    taken.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    taken.bind((HOST, port))
    taken.listen()
    return taken


def test_reservations_made_at_once_in_threads_never_share_a_port() -> None:
    preferred = free_port()
    start = threading.Barrier(8)
    held: list[Reservation] = []
    lock = threading.Lock()

    def choose() -> None:
        start.wait()
        reservation = reserve_port(HOST, preferred)
        with lock:
            held.append(reservation)

    threads = [threading.Thread(target=choose) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    try:
        ports = [r.port for r in held]
        assert len(ports) == 8 and len(set(ports)) == 8, ports
        assert preferred in ports, "the preferred port, free, goes to one of them"
    finally:
        for reservation in held:
            reservation.release()


def test_reservations_made_at_once_in_processes_never_share_a_port() -> None:
    preferred = free_port()
    reservers = [
        subprocess.Popen(
            [sys.executable, "-c", RESERVER, str(preferred)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
        )
        for _ in range(4)
    ]
    try:
        ports = [int(p.stdout.readline()) for p in reservers if p.stdout is not None]
    finally:
        for reserver in reservers:
            reserver.communicate(timeout=30)
    assert len(ports) == 4 and len(set(ports)) == 4, ports
    assert preferred in ports


def test_a_released_reservation_is_free_to_take_again() -> None:
    first = reserve_port(HOST, free_port())
    first.release()
    again = reserve_port(HOST, first.port)
    again.release()
    assert again.port == first.port


def test_a_port_bound_by_another_process_is_not_chosen() -> None:
    with listener(free_port()) as taken:
        port = taken.getsockname()[1]
        reservation = reserve_port(HOST, port)
        reservation.release()
    assert reservation.port != port


def test_only_our_own_child_counts_as_listening(tmp_path: Path, children: list[Child]) -> None:
    idle = Child("idle", [sys.executable, "-c", "import time; time.sleep(120)"], tmp_path)
    children.append(idle)
    with listener(free_port()) as taken:
        assert not listens(idle, taken.getsockname()[1]), "another process's listener is not our child's"
    port = free_port()
    server = Child("server", [sys.executable, "-c", SERVER, str(port)], tmp_path)
    children.append(server)
    up.wait_until(lambda: listens(server, port), timeout=30, what="the child to listen", child=server)


def test_a_port_taken_between_choice_and_bind_is_given_up_for_another(tmp_path: Path, children: list[Child]) -> None:
    preferred = free_port()
    taken: list[socket.socket] = []
    asked: list[int] = []

    def start(port: int) -> Child:
        asked.append(port)
        if port == preferred:
            # Another `make up`'s operator, or anything else, binds the port
            # after it was chosen and before our server binds it.
            taken.append(listener(port))
        child = Child(f"server-{len(asked)}", [sys.executable, "-c", SERVER, str(port)], tmp_path)
        children.append(child)
        return child

    try:
        child, reservation = up.serve_api(start, HOST, preferred)
        reservation.release()
        assert asked[0] == preferred and reservation.port != preferred, asked
        assert listens(child, reservation.port), "the address handed out is our child's"
        assert not children[0].alive(), "the child that could not bind exited"
    finally:
        for sock in taken:
            sock.close()


def test_a_child_that_fails_for_another_reason_is_not_retried(tmp_path: Path, children: list[Child]) -> None:
    def start(port: int) -> Child:
        child = Child("broken", [sys.executable, "-c", "raise SystemExit('no database')"], tmp_path)
        children.append(child)
        return child

    with pytest.raises(RuntimeError, match="no database"):
        up.serve_api(start, HOST, free_port())
    assert len(children) == 1


def test_a_second_up_with_the_same_state_directory_refuses_and_touches_nothing(tmp_path: Path) -> None:
    state = tmp_path / ".run"
    state.mkdir()
    (state / "kubeconfig").write_text("the first one's")
    first = up.claim_state(state)
    assert first is not None
    try:
        assert up.main(tmp_path / "x" / ".." / ".run") == 1
        assert (state / "kubeconfig").read_text() == "the first one's"
    finally:
        first.release()
    again = up.claim_state(state)
    assert again is not None, "free once the first one ends"
    again.release()
