"""Authentication and authorization, without a cluster: the route rules, the
caches on an injected clock, API-key matching, and the middleware on the real
application with the Kubernetes calls faked."""

from __future__ import annotations

import asyncio
import base64
import json
from typing import Any

import pytest

from sluiceway.api import guards, identities
from sluiceway.api.access import Check, Names, Rule
from sluiceway.api.app import create_app
from sluiceway.api.authenticator import MISSING, REJECTED_TOKEN_TTL, Authenticator, TtlCache
from sluiceway.api.errors import ApiError
from sluiceway.api.services import Services
from sluiceway.controls.ratelimits import Bucket, RateLimits
from sluiceway.kubeapi.auth import KeySecret, ReviewedToken
from sluiceway.plane import Plane

A_KEY = "k3y-for-namespace-a-0123456789"


class Clock:
    def __init__(self, now: float = 1000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


class FakeKube:
    """The three Kubernetes calls, counted."""

    def __init__(self) -> None:
        self.tokens: dict[str, ReviewedToken] = {
            "token-a": ReviewedToken(
                True,
                "system:serviceaccount:a:worker",
                ("system:serviceaccounts", "system:serviceaccounts:a", "system:authenticated"),
            ),
        }
        # (user, verb, resource, namespace, name) allowed
        self.grants: set[tuple[str, str, str, str, str | None]] = {
            ("system:serviceaccount:a:worker", "poll", "taskdefinitions", "a", "echo"),
            ("system:serviceaccount:a:worker", "update", "taskdefinitions", "a", "echo"),
        }
        self.secrets = [KeySecret("key-a", A_KEY.encode(), "a/worker")]
        self.token_reviews = 0
        self.access_reviews = 0
        self.lists = 0
        self.fail = False

    async def review_token(self, kube: object, token: str) -> ReviewedToken:
        self.token_reviews += 1
        await asyncio.sleep(0)
        if self.fail:
            raise ConnectionError("unreachable")
        return self.tokens.get(token, ReviewedToken(False, error="invalid bearer token"))

    async def review_access(
        self,
        kube: object,
        user: str,
        groups: tuple[str, ...],
        *,
        group: str,
        resource: str,
        verb: str,
        namespace: str,
        name: str | None,
    ) -> bool:
        self.access_reviews += 1
        await asyncio.sleep(0)
        assert group == "sluiceway.dev"
        return (user, verb, resource, namespace, name) in self.grants

    async def list_keys(self, kube: object, namespace: str) -> list[KeySecret]:
        self.lists += 1
        if self.fail:
            raise ConnectionError("unreachable")
        return list(self.secrets)


def authenticator(fake: FakeKube, clock: Clock, *, wall: float = 1_700_000_000.0, **kwargs: Any) -> Authenticator:
    return Authenticator(
        object(),
        keys_namespace=kwargs.pop("keys_namespace", "ops"),
        clock=clock,  # type: ignore[arg-type]
        wall=lambda: wall + clock.now,
        review_token=fake.review_token,
        review_access=fake.review_access,
        list_keys=fake.list_keys,
        **kwargs,
    )


def jwt(claims: dict[str, Any]) -> str:
    def part(value: dict[str, Any]) -> str:
        return base64.urlsafe_b64encode(json.dumps(value).encode()).decode().rstrip("=")

    return f"{part({'alg': 'RS256'})}.{part(claims)}.c2lnbmF0dXJl"


# -- rules ---------------------------------------------------------------------

PREFIX = "/v1/ns/{namespace}"
POLL = Rule("poll", "taskdefinitions", Names.REQUEST)
REPORT = Rule("update", "taskdefinitions", Names.REQUEST)

EXPECTED_GUARDS: dict[tuple[str, str], Rule | str] = {
    ("POST", "/tasks/poll"): POLL,
    ("POST", "/tasks/results"): REPORT,
    ("POST", "/tasks/{task_id}/result"): REPORT,
    ("POST", "/tasks/heartbeats"): REPORT,
    ("POST", "/tasks/{task_id}/heartbeat"): REPORT,
    ("POST", "/executions"): Rule("create", "workflowruns"),
    ("GET", "/executions/{execution_id}"): Rule("get", "workflowruns"),
    ("POST", "/executions/{execution_id}/decide"): Rule("update", "workflowruns"),
    ("POST", "/executions/{execution_id}/terminate"): Rule("update", "workflowruns"),
    ("GET", "/executions/{execution_id}/why"): Rule("get", "workflowruns"),
    ("GET", "/tasks/{task_id}/why"): Rule("get", "workflowruns"),
    ("GET", "/queues"): Rule("list", "taskdefinitions"),
    ("GET", "/queues/workers"): Rule("list", "taskdefinitions"),
    ("GET", "/queues/{name}/depth"): Rule("list", "taskdefinitions"),
    ("GET", "/semaphores"): Rule("get", "semaphores"),
    ("GET", "/semaphores/{name}"): Rule("get", "semaphores", Names.PATH),
    ("GET", "/quotas"): Rule("get", "quotas"),
    ("GET", "/metadata/task-definitions"): Rule("get", "taskdefinitions"),
    ("GET", "/metadata/task-definitions/{name}"): Rule("get", "taskdefinitions", Names.PATH),
    ("POST", "/metadata/task-definitions"): guards.WRITES_AS_CALLER,
    ("PUT", "/semaphores/{name}"): guards.WRITES_AS_CALLER,
    ("PUT", "/quotas"): guards.WRITES_AS_CALLER,
    # Publishing an event starts runs; reading events is reading what the namespace's Triggers did.
    ("POST", "/events/{name}"): Rule("create", "workflowruns"),
    ("GET", "/events"): Rule("list", "triggers"),
    ("GET", "/events/{event_record_id}"): Rule("get", "triggers"),
}


def declared_guards() -> dict[tuple[str, str], Rule | str | None]:
    """What guards each /v1 route of the real application, as its declaration says."""
    app = create_app(Services(Plane(pool=None)))  # type: ignore[arg-type]
    routes = [r for r in guards.api_routes(app.routes) if r.path.startswith("/v1/")]
    return {(m, r.path.removeprefix(PREFIX)): guards.guard_of(r) for r in routes for m in r.methods}


def rule_of(method: str, path: str) -> Rule:
    found = declared_guards()[(method, path)]
    assert isinstance(found, Rule)
    return found


def test_a_poll_checks_poll_on_each_distinct_task_type() -> None:
    poll = rule_of("POST", "/tasks/poll")
    assert poll.checks("a", ["ship", "echo", "ship"]) == [
        Check("poll", "taskdefinitions", "a", "echo"),
        Check("poll", "taskdefinitions", "a", "ship"),
    ]
    assert all(c.group == "sluiceway.dev" for c in poll.checks("a", ["echo"]))


def test_results_and_heartbeats_check_update_on_the_task_types_and_nothing_for_unknown_tasks() -> None:
    for path in ("/tasks/results", "/tasks/{task_id}/result", "/tasks/heartbeats", "/tasks/{task_id}/heartbeat"):
        rule = rule_of("POST", path)
        assert rule.checks("a", ["echo"]) == [Check("update", "taskdefinitions", "a", "echo")]
        assert rule.checks("a", []) == []


@pytest.mark.parametrize(
    ("method", "path", "verb", "resource"),
    [
        ("POST", "/executions", "create", "workflowruns"),
        ("GET", "/executions/{execution_id}", "get", "workflowruns"),
        ("GET", "/executions/{execution_id}/why", "get", "workflowruns"),
        ("GET", "/tasks/{task_id}/why", "get", "workflowruns"),
        ("POST", "/executions/{execution_id}/decide", "update", "workflowruns"),
        ("POST", "/executions/{execution_id}/terminate", "update", "workflowruns"),
        ("GET", "/queues", "list", "taskdefinitions"),
        ("GET", "/queues/workers", "list", "taskdefinitions"),
        ("GET", "/queues/{name}/depth", "list", "taskdefinitions"),
        ("GET", "/semaphores", "get", "semaphores"),
        ("GET", "/quotas", "get", "quotas"),
        ("GET", "/metadata/task-definitions", "get", "taskdefinitions"),
    ],
)
def test_namespace_wide_routes_ask_one_unnamed_check(method: str, path: str, verb: str, resource: str) -> None:
    assert rule_of(method, path).checks("ns", ["ignored"]) == [Check(verb, resource, "ns")]


def test_routes_naming_one_object_ask_about_that_name() -> None:
    assert rule_of("GET", "/semaphores/{name}").checks("a", ["db"]) == [Check("get", "semaphores", "a", "db")]
    assert rule_of("GET", "/metadata/task-definitions/{name}").checks("a", ["echo"]) == [
        Check("get", "taskdefinitions", "a", "echo")
    ]


def test_a_refusal_names_user_verb_resource_and_namespace() -> None:
    check = Check("poll", "taskdefinitions", "b", "echo")
    assert (
        check.refusal("system:serviceaccount:a:worker")
        == "system:serviceaccount:a:worker may not poll taskdefinitions/echo in namespace b"
    )
    assert Check("list", "taskdefinitions", "b").refusal("u") == "u may not list taskdefinitions in namespace b"


def test_every_v1_route_of_the_application_has_its_rule() -> None:
    found = declared_guards()
    assert all(rule is not None for rule in found.values()), [key for key, rule in found.items() if rule is None]
    for key, rule in EXPECTED_GUARDS.items():
        assert found.get(key) == rule, key


def test_a_rule_that_checks_a_name_the_path_lacks_fails_at_start() -> None:
    from fastapi import FastAPI

    app = FastAPI()

    @app.get("/v1/ns/{namespace}/things", dependencies=[guards.requires("get", "things", Names.PATH)])
    async def things(namespace: str) -> None: ...

    with pytest.raises(ValueError, match="checks its {name}"):
        guards.install(app, Services(Plane(pool=None)))  # type: ignore[arg-type]


# -- caches --------------------------------------------------------------------


def test_a_cache_entry_expires_on_the_injected_clock() -> None:
    clock = Clock()
    cache: TtlCache[str, bool] = TtlCache(30, clock=clock)
    cache.put("k", False)
    clock.now += 29.9
    assert cache.get("k") is False  # a refusal is an answer like any other
    clock.now += 0.1
    assert cache.get("k") is MISSING


def test_a_shorter_ttl_is_kept_and_a_longer_one_is_capped() -> None:
    clock = Clock()
    cache: TtlCache[str, int] = TtlCache(60, clock=clock)
    cache.put("short", 1, ttl=5)
    cache.put("long", 2, ttl=600)
    cache.put("expired", 3, ttl=0)
    clock.now += 5
    assert cache.get("short") is MISSING and cache.get("expired") is MISSING
    assert cache.get("long") == 2
    clock.now += 55
    assert cache.get("long") is MISSING


def test_a_cache_holds_at_most_its_bound_dropping_the_least_recently_used() -> None:
    cache: TtlCache[int, int] = TtlCache(60, max_entries=3, clock=Clock())
    for i in range(3):
        cache.put(i, i)
    assert cache.get(0) == 0  # 0 is now the most recently used
    cache.put(3, 3)
    assert len(cache) == 3
    assert cache.get(1) is MISSING
    assert [cache.get(i) for i in (0, 2, 3)] == [0, 2, 3]


def test_a_token_is_trusted_until_its_expiry_at_the_latest() -> None:
    assert identities.token_ttl(jwt({"exp": 1000 + 20}), now=1000) == 20
    assert identities.token_ttl(jwt({"exp": 1000 + 3600}), now=1000) == 60
    assert identities.token_ttl(jwt({"exp": 900}), now=1000) == 0
    assert identities.token_ttl("opaque-token", now=1000) == 60
    assert identities.token_ttl("a.!!!.c", now=1000) == 60
    assert identities.token_ttl(jwt({"exp": True}), now=1000) == 60


# -- API keys ------------------------------------------------------------------


def test_a_key_secret_is_parsed_or_refused_with_a_reason_naming_no_key() -> None:
    key = identities.parse_key_secret(KeySecret("key-a", (A_KEY + "\n").encode(), "a/worker"))
    assert isinstance(key, identities.ApiKey)
    assert key.digest == identities.digest(A_KEY)  # a trailing newline (from a file) does not count
    assert key.principal == identities.Principal(
        "system:serviceaccount:a:worker", ("system:serviceaccounts", "system:serviceaccounts:a", "system:authenticated")
    )
    for bad, reason in [
        (KeySecret("s", None, "a/worker"), "no data key"),
        (KeySecret("s", b"short", "a/worker"), "shorter"),
        (KeySecret("s", A_KEY.encode(), None), "annotation"),
        (KeySecret("s", A_KEY.encode(), "worker"), "annotation"),
        (KeySecret("s", A_KEY.encode(), "A/worker"), "annotation"),
    ]:
        refused = identities.parse_key_secret(bad)
        assert isinstance(refused, str) and reason in refused
        assert A_KEY not in refused


def test_keys_match_exactly_on_their_digests() -> None:
    keys = identities.ApiKeys(Clock())
    keys.replace(
        [
            KeySecret("key-a", A_KEY.encode(), "a/worker"),
            KeySecret("key-b", b"another-key-of-namespace-b", "b/worker"),
            KeySecret("broken", None, "a/worker"),
        ]
    )
    assert len(keys) == 2
    found = keys.lookup(A_KEY)
    assert found is not None and found.secret == "key-a" and found.namespace == "a"
    assert keys.lookup(A_KEY[:-1]) is None
    assert keys.lookup(A_KEY + "x") is None
    assert keys.lookup("") is None
    keys.replace([])
    assert keys.lookup(A_KEY) is None


def test_keys_go_stale_without_a_successful_relist() -> None:
    clock = Clock()
    keys = identities.ApiKeys(clock, stale_after=60)
    assert not keys.loaded and not keys.fresh
    keys.replace([])
    assert keys.fresh
    clock.now += 60
    assert not keys.fresh


# -- the authenticator ---------------------------------------------------------


async def test_a_token_is_reviewed_once_then_served_from_the_cache_until_60s() -> None:
    fake, clock = FakeKube(), Clock()
    authn = authenticator(fake, clock)
    for _ in range(5):
        identity = await authn.identify({"authorization": "Bearer token-a"})
    assert identity.user == "system:serviceaccount:a:worker" and identity.via == "token"
    assert identity.token == "token-a" and "token-a" not in repr(identity)
    assert fake.token_reviews == 1
    clock.now += 59
    await authn.identify({"authorization": "bearer token-a"})
    assert fake.token_reviews == 1
    clock.now += 1
    await authn.identify({"authorization": "Bearer token-a"})
    assert fake.token_reviews == 2


async def test_a_token_is_not_trusted_past_its_own_expiry() -> None:
    fake, clock = FakeKube(), Clock()
    authn = authenticator(fake, clock, wall=0.0)
    token = jwt({"exp": clock.now + 10})  # the wall clock here reads clock.now
    fake.tokens[token] = fake.tokens["token-a"]
    await authn.identify({"authorization": f"Bearer {token}"})
    clock.now += 10
    await authn.identify({"authorization": f"Bearer {token}"})
    assert fake.token_reviews == 2


async def test_concurrent_requests_with_a_new_token_share_one_review() -> None:
    fake = FakeKube()
    authn = authenticator(fake, Clock())
    await asyncio.gather(*(authn.identify({"authorization": "Bearer token-a"}) for _ in range(20)))
    assert fake.token_reviews == 1


@pytest.mark.parametrize(
    "headers",
    [
        {},
        {"authorization": "Bearer"},
        {"authorization": "Basic dXNlcjpwdw=="},
        {"authorization": "Bearer wrong"},
        {"x-api-key": "not-a-key-of-anyone-at-all"},
    ],
)
async def test_no_identity_or_an_invalid_one_is_401(headers: dict[str, str]) -> None:
    authn = authenticator(FakeKube(), Clock())
    with pytest.raises(ApiError) as refused:
        await authn.identify(headers)
    assert refused.value.status == 401 and refused.value.body["error"] == "UNAUTHENTICATED"


async def test_a_rejected_token_is_remembered_briefly() -> None:
    fake, clock = FakeKube(), Clock()
    authn = authenticator(fake, clock)
    for _ in range(3):
        with pytest.raises(ApiError):
            await authn.identify({"authorization": "Bearer wrong"})
    assert fake.token_reviews == 1
    clock.now += REJECTED_TOKEN_TTL
    with pytest.raises(ApiError):
        await authn.identify({"authorization": "Bearer wrong"})
    assert fake.token_reviews == 2


async def test_an_unreachable_api_server_is_503_and_nothing_is_cached() -> None:
    fake = FakeKube()
    fake.fail = True
    authn = authenticator(fake, Clock())
    with pytest.raises(ApiError) as refused:
        await authn.identify({"authorization": "Bearer token-a"})
    assert refused.value.status == 503 and "token-a" not in str(refused.value.body)
    fake.fail = False
    assert (await authn.identify({"authorization": "Bearer token-a"})).user.endswith(":a:worker")


async def test_access_is_reviewed_once_per_question_and_a_refusal_is_cached_too() -> None:
    fake, clock = FakeKube(), Clock()
    authn = authenticator(fake, clock)
    identity = await authn.identify({"authorization": "Bearer token-a"})
    for _ in range(3):
        await authn.authorize(identity, POLL.checks("a", ["echo"]))
        with pytest.raises(ApiError) as refused:
            await authn.authorize(identity, POLL.checks("b", ["echo"]))
    assert refused.value.status == 403
    assert refused.value.body == {
        "error": "FORBIDDEN",
        "message": "system:serviceaccount:a:worker may not poll taskdefinitions/echo in namespace b",
    }
    assert fake.access_reviews == 2
    clock.now += 30
    await authn.authorize(identity, POLL.checks("a", ["echo"]))
    assert fake.access_reviews == 3


async def test_one_refused_task_type_refuses_the_whole_poll() -> None:
    fake = FakeKube()
    authn = authenticator(fake, Clock())
    identity = await authn.identify({"authorization": "Bearer token-a"})
    with pytest.raises(ApiError) as refused:
        await authn.authorize(identity, POLL.checks("a", ["echo", "secret_stuff"]))
    assert "taskdefinitions/secret_stuff" in refused.value.body["message"]


async def test_an_api_key_acts_as_its_service_account_until_its_secret_goes() -> None:
    fake, clock = FakeKube(), Clock()
    authn = authenticator(fake, clock)
    identity = await authn.identify({"x-api-key": A_KEY})
    assert identity.via == "api-key" and identity.key == "key-a" and identity.token is None
    assert identity.impersonate is None  # keys may not write unless allowed
    assert identity.principal == identities.service_account_principal("a", "worker")
    await authn.authorize(identity, POLL.checks("a", ["echo"]))
    fake.secrets = []
    await authn.refresh_keys()
    with pytest.raises(ApiError) as refused:
        await authn.identify({"x-api-key": A_KEY})
    assert refused.value.status == 401


async def test_keys_may_write_as_their_service_account_only_when_allowed() -> None:
    authn = authenticator(FakeKube(), Clock(), allow_writes=True)
    identity = await authn.identify({"x-api-key": A_KEY})
    assert identity.impersonate == (
        "system:serviceaccount:a:worker",
        ["system:serviceaccounts", "system:serviceaccounts:a", "system:authenticated"],
    )


async def test_without_a_keys_namespace_keys_are_refused() -> None:
    fake = FakeKube()
    authn = authenticator(fake, Clock(), keys_namespace=None)
    authn.keys_namespace = None  # not in a pod either
    with pytest.raises(ApiError) as refused:
        await authn.identify({"x-api-key": A_KEY})
    assert refused.value.status == 401 and fake.lists == 0


async def test_stale_keys_are_not_trusted() -> None:
    fake, clock = FakeKube(), Clock()
    authn = authenticator(fake, clock, keys_stale_after=60)
    await authn.identify({"x-api-key": A_KEY})
    fake.fail = True
    with pytest.raises(ConnectionError):
        await authn.refresh_keys()
    clock.now += 60
    with pytest.raises(ApiError) as refused:
        await authn.identify({"x-api-key": A_KEY})
    assert refused.value.status == 503


async def test_keys_that_cannot_be_listed_at_all_are_503() -> None:
    fake = FakeKube()
    fake.fail = True
    authn = authenticator(fake, Clock())
    with pytest.raises(ApiError) as refused:
        await authn.identify({"x-api-key": A_KEY})
    assert refused.value.status == 503


async def test_the_refresher_relists_until_stopped() -> None:
    fake = FakeKube()
    authn = authenticator(fake, Clock(), key_refresh=0.01)
    stop = asyncio.Event()
    runner = asyncio.create_task(authn.run(stop))
    while fake.lists < 3:
        await asyncio.sleep(0.01)
    stop.set()
    await asyncio.wait_for(runner, 2)
    assert len(authn.keys) == 1


# -- the middleware, on the real application -----------------------------------


async def call(
    app: Any,
    method: str,
    path: str,
    headers: dict[str, str] | None = None,
    body: bytes = b"",
    client: str = "127.0.0.1",
) -> tuple[int, dict[str, Any] | str]:
    scope = {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": method,
        "scheme": "http",
        "path": path,
        "raw_path": path.encode(),
        "query_string": b"",
        "root_path": "",
        "headers": [
            (k.lower().encode(), v.encode()) for k, v in {"content-type": "application/json", **(headers or {})}.items()
        ],
        "client": (client, 1),
        "server": ("127.0.0.1", 80),
    }
    sent: list[dict[str, Any]] = []
    received = False

    async def receive() -> dict[str, Any]:
        nonlocal received
        if received:
            await asyncio.sleep(3600)
        received = True
        return {"type": "http.request", "body": body, "more_body": False}

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    await app(scope, receive, send)
    status = next(m["status"] for m in sent if m["type"] == "http.response.start")
    text = b"".join(m.get("body", b"") for m in sent if m["type"] == "http.response.body").decode()
    try:
        return status, json.loads(text)
    except ValueError:
        return status, text


def secured_app(fake: FakeKube) -> Any:
    services = Services(
        Plane(pool=None),  # type: ignore[arg-type]
        authenticate=True,
        authenticator=authenticator(fake, Clock()),
    )
    return create_app(services)


async def test_health_metrics_and_openapi_stay_open() -> None:
    app = secured_app(FakeKube())
    for path in ("/healthz", "/metrics", "/openapi.json"):
        status, _ = await call(app, "GET", path)
        assert status == 200, path


async def test_a_v1_request_without_identity_is_401() -> None:
    app = secured_app(FakeKube())
    status, body = await call(app, "GET", "/v1/ns/a/queues")
    assert status == 401 and isinstance(body, dict) and body["error"] == "UNAUTHENTICATED"
    status, _ = await call(app, "GET", "/v1/ns/a/no-such-route")
    assert status == 401


async def test_a_route_refuses_a_caller_rbac_does_not_allow() -> None:
    fake = FakeKube()
    app = secured_app(fake)
    headers = {"authorization": "Bearer token-a"}
    status, body = await call(app, "GET", "/v1/ns/a/executions/123", headers)
    assert status == 403 and body == {
        "error": "FORBIDDEN",
        "message": "system:serviceaccount:a:worker may not get workflowruns in namespace a",
    }
    poll = json.dumps({"taskTypes": ["echo"], "workerId": "w"}).encode()
    status, body = await call(app, "POST", "/v1/ns/b/tasks/poll", headers, poll)
    assert status == 403 and isinstance(body, dict) and "in namespace b" in body["message"]


async def test_api_keys_may_not_write_definitions_unless_allowed() -> None:
    app = secured_app(FakeKube())
    status, body = await call(app, "PUT", "/v1/ns/a/semaphores/db", {"x-api-key": A_KEY}, b'{"permits": 1}')
    assert status == 403 and isinstance(body, dict) and "API keys may not write definitions" in body["message"]


async def test_a_route_without_a_rule_refuses_everyone_when_authentication_is_on() -> None:
    services = Services(
        Plane(pool=None),  # type: ignore[arg-type]
        authenticate=True,
        authenticator=authenticator(FakeKube(), Clock()),
    )
    app = create_app(services)

    @app.get("/v1/ns/{namespace}/unguarded")
    async def unguarded(namespace: str) -> dict[str, str]:
        return {"leak": namespace}

    status, body = await call(app, "GET", "/v1/ns/a/unguarded", {"authorization": "Bearer token-a"})
    assert status == 403 and isinstance(body, dict) and body["message"] == "no authorization rule covers this route"


async def test_failed_authentications_from_one_address_are_limited_without_a_token_review() -> None:
    """Three 401s empty the address's bucket (it refills a token a minute, so
    no timing decides the count): the fourth made-up token is 429 with
    Retry-After and costs no TokenReview. A token reviewed before and an
    API key still work from there; another address is still answered 401."""
    fake = FakeKube()
    services = Services(
        Plane(pool=None),  # type: ignore[arg-type]
        authenticate=True,
        authenticator=authenticator(fake, Clock()),
        rate_limits=RateLimits.off().model_copy(update={"failed_authentication": Bucket(per_second=1 / 60, burst=3)}),
    )
    app = create_app(services)
    known = {"authorization": "Bearer token-a"}
    assert (await call(app, "GET", "/v1/ns/b/queues", known))[0] == 403  # reviewed: now in the cache
    for attempt in range(3):
        status, _ = await call(app, "GET", "/v1/ns/a/queues", {"authorization": f"Bearer made-up-{attempt}"})
        assert status == 401
    assert (await call(app, "GET", "/v1/ns/a/queues"))[0] == 429  # no credentials at all: a failure too
    reviews = fake.token_reviews
    status, body = await call(app, "GET", "/v1/ns/a/queues", {"authorization": "Bearer made-up-3"})
    assert status == 429 and isinstance(body, dict), body
    assert body["error"] == "RATE_LIMITED" and body["bucket"] == "failedAuthentication", body
    assert body["retryAfterSeconds"] >= 1 and "address:127.0.0.1" in body["message"], body
    assert "made-up" not in json.dumps(body)
    assert fake.token_reviews == reviews, "a limited address made a TokenReview"
    assert (await call(app, "GET", "/v1/ns/b/queues", known))[0] == 403  # past authentication
    assert (await call(app, "GET", "/v1/ns/b/queues", {"x-api-key": A_KEY}))[0] == 403
    assert (await call(app, "GET", "/v1/ns/a/queues", client="10.0.0.9"))[0] == 401
