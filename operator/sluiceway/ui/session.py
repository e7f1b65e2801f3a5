"""Who is looking at the UI, and what they may do: the API's rules, asked of
the same authenticator.

With `SLUICEWAY_AUTH=kubernetes` a page needs a Kubernetes token: from an
authenticating proxy in front of the operator (`Authorization: Bearer`, or
`X-Forwarded-Access-Token` as oauth2-proxy sends it), or typed into the login
form and kept in an HttpOnly, SameSite=Strict cookie scoped to /ui. Every page
and action then asks the SubjectAccessReview the matching API route asks.

Every action is a POST that carries a CSRF token equal to the `sluiceway_csrf`
cookie (double submit): a page on another site can neither read the cookie
nor, with SameSite=Strict, make the browser send it."""

from __future__ import annotations

import hmac
import secrets
from dataclasses import dataclass

from fastapi import Request

from sluiceway.api.access import Check, Names, Rule
from sluiceway.api.errors import ApiError
from sluiceway.api.identities import Identity
from sluiceway.api.services import services_of

TOKEN_COOKIE = "sluiceway_token"
CSRF_COOKIE = "sluiceway_csrf"
CSRF_FIELD = "csrf"
CSRF_HEADER = "x-csrf-token"
PROXY_HEADERS = ("x-forwarded-access-token", "x-auth-request-access-token")
COOKIE_PATH = "/ui"


class LoginNeeded(Exception):
    """No token, or one Kubernetes did not accept: the login form says which."""


@dataclass(frozen=True)
class Viewer:
    identity: Identity | None  # None: authentication is off
    from_cookie: bool = False

    @property
    def name(self) -> str:
        return self.identity.user if self.identity else "anyone (authentication is off)"


def _token(request: Request) -> tuple[str | None, bool]:
    authorization = request.headers.get("authorization", "")
    scheme, _, value = authorization.strip().partition(" ")
    if scheme.lower() == "bearer" and value.strip():
        return value.strip(), False
    for header in PROXY_HEADERS:
        if request.headers.get(header, "").strip():
            return request.headers[header].strip(), False
    cookie = request.cookies.get(TOKEN_COOKIE)
    return (cookie, True) if cookie else (None, False)


async def viewer_of(request: Request) -> Viewer:
    """The viewer of this request; LoginNeeded without an accepted token."""
    svc = services_of(request)
    if not svc.authenticate:
        return Viewer(None)
    token, from_cookie = _token(request)
    if token is None:
        raise LoginNeeded("sign in with a Kubernetes token")
    if svc.authenticator is None:
        raise ApiError(503, "AUTH_UNAVAILABLE", "authentication is on but this process has no Kubernetes API")
    try:
        identity = await svc.authenticator.identify({"authorization": f"Bearer {token}"})
    except ApiError as error:
        if error.status == 401:
            raise LoginNeeded("that token was not accepted: sign in again") from None
        raise
    return Viewer(identity, from_cookie)


async def may(
    request: Request, viewer: Viewer, verb: str, resource: str, namespace: str, name: str | None = None
) -> bool:
    """Whether the viewer may do what the API route with this rule does
    (on the resource `name`, for rules naming one)."""
    if viewer.identity is None:
        return True
    authenticator = services_of(request).authenticator
    if authenticator is None:
        return False
    rule = Rule(verb, resource, Names.NONE if name is None else Names.REQUEST)
    checks = rule.checks(namespace, [name] if name is not None else [])
    return all([await authenticator.allowed(viewer.identity.principal, c) for c in checks])


async def require(
    request: Request, viewer: Viewer, verb: str, resource: str, namespace: str, name: str | None = None
) -> None:
    """403, naming the missing right, unless the viewer may."""
    if not await may(request, viewer, verb, resource, namespace, name):
        check = Check(verb, resource, namespace, name)
        raise ApiError(403, "FORBIDDEN", check.refusal(viewer.name))


def csrf_token(request: Request) -> str:
    """The CSRF token of this browser: its cookie, or a new one the page sets."""
    found = request.cookies.get(CSRF_COOKIE)
    if found and len(found) >= 32:
        return found
    made: str = request.state.__dict__.setdefault("new_csrf", secrets.token_urlsafe(32))
    return made


def check_csrf(request: Request, form: dict[str, list[str]]) -> None:
    expected = request.cookies.get(CSRF_COOKIE, "")
    given = request.headers.get(CSRF_HEADER) or (form.get(CSRF_FIELD) or [""])[0]
    if not expected or not hmac.compare_digest(expected.encode(), given.encode()):
        raise ApiError(403, "CSRF", "this form is stale or came from another site: reload the page and try again")
