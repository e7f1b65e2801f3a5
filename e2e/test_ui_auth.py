"""The UI with SLUICEWAY_AUTH=kubernetes against the real API server: a login
form that takes a Kubernetes token and keeps it in an HttpOnly, SameSite
cookie; a token from an authenticating proxy's header; every page and action
checked with the API's SubjectAccessReview rules; only the namespaces the
identity may list; actions refused without their CSRF token."""

from __future__ import annotations

import re
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
from playwright.sync_api import Browser, expect, sync_playwright

from e2e.test_auth import secured  # noqa: F401 - the fixture
from e2e.test_ui_browser import CHROMIUM, accessible
from tests.support.api import call
from tests.support.secured import Secured, role, start_run

pytestmark = pytest.mark.e2e

VIEWER_RULES = [
    {"apiGroups": ["sluiceway.dev"], "resources": ["workflowruns"], "verbs": ["get", "list", "update"]},
    {"apiGroups": ["sluiceway.dev"], "resources": ["taskdefinitions"], "verbs": ["list"]},
]


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args: object, **kwargs: object) -> None:
        return None


def fetch(
    url: str, headers: dict[str, str] | None = None, data: dict[str, str] | None = None
) -> tuple[int, str, dict[str, str]]:
    """One request, redirects not followed: (status, body, headers)."""
    body = urllib.parse.urlencode(data).encode() if data is not None else None
    request = urllib.request.Request(url, data=body, headers=headers or {})
    opener = urllib.request.build_opener(_NoRedirect)
    try:
        with opener.open(request, timeout=30) as response:
            return response.status, response.read().decode(), dict(response.headers)
    except urllib.error.HTTPError as error:
        return error.code, error.read().decode(), dict(error.headers)


@pytest.fixture(scope="module")
def viewer(secured: Secured) -> str:  # noqa: F811 - the fixture imported above
    """A token that may read and operate runs in namespace a, and nothing in b."""
    secured.kube.run("create", "serviceaccount", "ui-viewer", "-n", secured.a)
    secured.kube.apply(role("sluiceway-ui-viewer", VIEWER_RULES, "ui-viewer"), secured.a)
    token: str = secured.kube.run("create", "token", "ui-viewer", "-n", secured.a).stdout.strip()
    return token


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    assert Path(CHROMIUM).exists(), f"{CHROMIUM} is missing: run hack/install-browser.sh (make test does)"
    with sync_playwright() as playwright:
        found = playwright.chromium.launch(executable_path=CHROMIUM)
        yield found
        found.close()


def test_a_page_without_a_token_asks_to_sign_in_and_a_bad_token_is_refused(secured: Secured) -> None:  # noqa: F811
    status, _, headers = fetch(f"{secured.url}/ui/ns/{secured.a}/runs")
    assert status == 303 and headers["location"].startswith("/ui/login?next=")
    status, page, _ = fetch(f"{secured.url}/ui/login")
    assert status == 200 and 'name="token"' in page
    csrf = re.search(r'name="csrf" value="([^"]+)"', page)
    assert csrf
    refused, page, _ = fetch(
        f"{secured.url}/ui/login",
        {"Cookie": f"sluiceway_csrf={csrf.group(1)}"},
        {"csrf": csrf.group(1), "token": "not-a-token", "next": "/ui"},
    )
    assert refused == 401 and "not accepted" in page


def test_sign_in_shows_only_the_namespaces_the_identity_may_list(
    secured: Secured,  # noqa: F811
    viewer: str,
    browser: Browser,
) -> None:
    run_id = start_run(secured, secured.a, "hello")
    context = browser.new_context()
    page = context.new_page()
    page.goto(f"{secured.url}/ui")
    expect(page).to_have_url(re.compile(r"/ui/login"))
    accessible(page, "login")
    page.get_by_label("Kubernetes token").fill(viewer)
    page.get_by_role("button", name="Sign in").click()
    # One namespace it may list (b has definitions too): straight to its runs.
    expect(page).to_have_url(re.compile(rf"/ui/ns/{secured.a}/runs"))
    expect(page.locator("table.runs")).to_contain_text(run_id[:8])
    expect(page.locator("#ns-pick option")).to_have_count(1)
    cookie = next(c for c in context.cookies() if c["name"] == "sluiceway_token")
    assert cookie["httpOnly"] and cookie["sameSite"] == "Strict" and cookie["path"] == "/ui"
    assert page.evaluate("() => document.cookie") == ""  # no script reads either cookie

    page.goto(f"{secured.url}/ui/ns/{secured.b}/runs")
    expect(page.locator("[role=alert]")).to_contain_text(f"may not list workflowruns in namespace {secured.b}")
    page.goto(f"{secured.url}/ui/ns/{secured.a}/gates")
    expect(page.locator("#sem-title")).to_be_visible()  # listing taskdefinitions is enough for queues
    expect(page.locator("main")).to_contain_text("You may not read semaphores")

    # Pause from the UI: allowed (update on workflowruns), behind its confirmation.
    page.goto(f"{secured.url}/ui/ns/{secured.a}/runs/{run_id}")
    page.get_by_role("link", name="Pause").click()
    page.get_by_role("button", name="Pause").click()
    expect(page.locator(".notice.ok")).to_contain_text("pause")
    page.get_by_role("button", name="Sign out").click()
    expect(page).to_have_url(re.compile(r"/ui/login"))
    assert not [c for c in context.cookies() if c["name"] == "sluiceway_token"]
    context.close()


def test_a_proxy_header_token_is_checked_like_the_api_and_actions_need_csrf(
    secured: Secured,  # noqa: F811
    viewer: str,
) -> None:
    run_id = start_run(secured, secured.a, "proxied")
    proxied = {"X-Forwarded-Access-Token": viewer}
    status, page, _ = fetch(f"{secured.url}/ui/ns/{secured.a}/runs/{run_id}", proxied)
    assert status == 200 and run_id in page
    # The starter may start and read runs but not update them: no action for it.
    starter = secured.token(secured.a, "starter")
    status, page, _ = fetch(f"{secured.url}/ui/ns/{secured.a}/runs/{run_id}", starter)
    assert status == 200 and "Terminate" not in page
    status, page, _ = fetch(f"{secured.url}/ui/ns/{secured.a}/runs/{run_id}/terminate", starter)
    assert status == 403 and "may not update workflowruns" in page
    # A POST without the CSRF cookie and field changes nothing.
    status, page, _ = fetch(f"{secured.url}/ui/ns/{secured.a}/runs/{run_id}/terminate", proxied, {"reason": "x"})
    assert status == 403 and "CSRF" in page
    status, run = call("GET", f"{secured.url}/v1/ns/{secured.a}/executions/{run_id}", headers=starter)
    assert status == 200 and run["status"] == "RUNNING", run
