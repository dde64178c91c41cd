"""Hostile tokens against the real function_app.py on devhost (E16): each is refused with the
right status and nothing is stored or queued. The app verifies them with the validator it runs
in Azure; only the issuer is local (harness/standins/local_issuer.py). The validator's own reasons are
pinned case by case in tests/unit/test_entra_tokens.py."""

import json
import uuid
from collections.abc import Callable
from datetime import timedelta
from typing import Any

import pytest

from adapters.entra_tokens import MAX_TOKEN_CHARS
from harness.standins.local_issuer import LocalIssuer, new_key
from tests.support.app import CLIENT_IDS, App, order_body, start_app
from tests.support.tokens import hs256_with_public_key, tampered, unsigned

A = CLIENT_IDS["app-a"]


def post(
    app: App, headers: dict[str, str], order_id: str = "h-1", **changes: Any
) -> tuple[int, dict[str, Any]]:
    status, text, response_headers = app.http(
        "POST", "/api/orders", order_body(order_id, **changes), headers=headers
    )
    body = json.loads(text) if text.startswith("{") else {"text": text}
    return status, body | {"headers": response_headers}


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def assert_nothing_stored(app: App, *order_ids: str) -> None:
    app.settle(timedelta(seconds=5))  # a queued order would be stored by now
    assert app.bus.counts("orders")["active"] == 0 and not app.dead_letters("orders")
    assert all(app.states.get(order_id) is None for order_id in order_ids)


Headers = Callable[[LocalIssuer, App], dict[str, str]]
# (headers, status, error)
HOSTILE: dict[str, tuple[Headers, int, str]] = {
    "no token": (lambda i, a: {}, 401, "NotAuthenticated"),
    "not a bearer token": (
        lambda i, a: {"Authorization": f"Basic {a.token('app-a')}"},
        401,
        "NotAuthenticated",
    ),
    "malformed": (lambda i, a: bearer("not.a.jwt"), 401, "NotAuthenticated"),
    "bad signature": (lambda i, a: bearer(tampered(a.token("app-a"))), 401, "NotAuthenticated"),
    "another key with a known kid": (
        lambda i, a: bearer(i.mint(A, now=a.host.clock.now(), key=new_key())),
        401,
        "NotAuthenticated",
    ),
    "alg none": (
        lambda i, a: bearer(unsigned(i, {"alg": "none", "kid": i.kid}, A) + "."),
        401,
        "NotAuthenticated",
    ),
    "HS256 with the public key": (lambda i, a: bearer(hs256_with_public_key(i, A)), 401, "NotAuthenticated"),
    "expired": (
        lambda i, a: bearer(i.mint(A, now=a.host.clock.now() - timedelta(hours=2))),
        401,
        "NotAuthenticated",
    ),
    "not yet valid": (
        lambda i, a: bearer(
            i.mint(A, now=a.host.clock.now(), changes={"nbf": int(a.host.clock.now().timestamp()) + 600})
        ),
        401,
        "NotAuthenticated",
    ),
    "wrong issuer": (
        lambda i, a: bearer(i.mint(A, now=a.host.clock.now(), changes={"iss": "https://sts.example/x/v2.0"})),
        401,
        "NotAuthenticated",
    ),
    "wrong audience": (
        lambda i, a: bearer(i.mint(A, now=a.host.clock.now(), changes={"aud": "api://another-api"})),
        401,
        "NotAuthenticated",
    ),
    "another tenant's tid": (
        lambda i, a: bearer(i.mint(A, now=a.host.clock.now(), changes={"tid": str(uuid.uuid4())})),
        401,
        "NotAuthenticated",
    ),
    "aud as a list": (
        lambda i, a: bearer(i.mint(A, now=a.host.clock.now(), changes={"aud": [i.audience, "api://x"]})),
        401,
        "NotAuthenticated",
    ),
    "exp in the year 2100": (
        lambda i, a: bearer(i.mint(A, now=a.host.clock.now(), changes={"exp": 4102444800})),
        401,
        "NotAuthenticated",
    ),
    "iat a year ahead": (
        lambda i, a: bearer(
            i.mint(
                A, now=a.host.clock.now(), changes={"iat": int(a.host.clock.now().timestamp()) + 365 * 86400}
            )
        ),
        401,
        "NotAuthenticated",
    ),
    "delegated (scp, no idtyp)": (
        lambda i, a: bearer(
            i.mint(A, now=a.host.clock.now(), drop=["idtyp"], changes={"scp": "Orders.Submit"})
        ),
        403,
        "NotPermitted",
    ),
    "app token without the role": (
        lambda i, a: bearer(i.mint(A, now=a.host.clock.now(), roles=())),
        403,
        "NotPermitted",
    ),
    "unregistered azp": (lambda i, a: bearer(a.token("app-z")), 403, "NotRegistered"),
    "oversized token": (lambda i, a: bearer("x" * (MAX_TOKEN_CHARS + 100)), 401, "NotAuthenticated"),
}


def test_every_hostile_token_is_refused_with_its_status_and_nothing_is_stored(app: App) -> None:
    """One host for the whole table (each case is one request); every case is reported."""
    assert app.issuer is not None
    wrong: list[str] = []
    for n, (case, (headers, status, error)) in enumerate(HOSTILE.items()):
        got, body = post(app, headers(app.issuer, app), f"h-{n}")
        if (got, body.get("error")) != (status, error):
            wrong.append(f"{case}: {got} {body.get('error')} (expected {status} {error})")
        elif got == 401 and "Bearer" not in body["headers"].get("WWW-Authenticate", ""):
            wrong.append(f"{case}: 401 without WWW-Authenticate: Bearer")
    assert not wrong, "\n".join(wrong)
    assert_nothing_stored(app, *(f"h-{n}" for n in range(len(HOSTILE))))


def test_a_huge_header_is_refused_before_the_app(app: App) -> None:
    status, _ = post(app, bearer("x" * 100_000))
    assert 400 <= status < 500 and status not in (401, 403)  # the host's own limit, not a token check
    assert_nothing_stored(app, "h-1")


def test_a_registered_app_cannot_read_another_apps_order_or_use_its_status_queue(app: App) -> None:
    assert post(app, bearer(app.token("app-a")), "a-1")[0] == 202
    app.run_until(lambda: app.states.get("a-1") is not None)
    status, text, _ = app.http("GET", "/api/orders/a-1", app="app-b")
    assert status == 404 and json.loads(text)["error"] == "NotFound"
    status, body = post(app, bearer(app.token("app-b")), "b-1", StatusQueue="status-app-a")
    assert (status, body["error"]) == (403, "SubmissionRejected")
    assert_nothing_stored(app, "b-1")


def test_a_removed_submitters_token_is_refused_after_the_registry_changes(
    app: App, loop: Any, tmp_path: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    token = app.token("app-b")  # valid for an hour
    assert post(app, bearer(token), "b-1")[0] == 202
    app.run_until(lambda: app.states.get("b-1") is not None)
    clock, issuer = app.host.clock, app.issuer
    app.issuer = None  # the tenant outlives the deployment
    app.stop()
    # A new deployment on the same data and tenant, with app-b removed from SAS_SUBMITTERS.
    deployed = start_app(
        loop, tmp_path, monkeypatch, clock=clock, settings={"SAS_SUBMITTERS": f"app-a={A}"}, issuer=issuer
    )
    app.succeeded_by(deployed)
    status, body = post(deployed, bearer(token), "b-2")
    assert (status, body["error"]) == (403, "NotRegistered")
    assert_nothing_stored(deployed, "b-2")


def test_the_keys_endpoint_down_is_503_with_retry_after_and_its_recovery_accepts(app: App) -> None:
    assert app.issuer is not None
    app.issuer.available = False
    status, body = post(app, bearer(app.token("app-a")), "k-1")
    assert (status, body["error"]) == (503, "ServiceUnavailable") and body["headers"]["Retry-After"] == "5"
    assert_nothing_stored(app, "k-1")
    app.issuer.available = True
    assert post(app, bearer(app.token("app-a")), "k-1")[0] == 202


def test_a_key_rotation_is_accepted_after_one_refresh(app: App) -> None:
    assert app.issuer is not None
    assert post(app, bearer(app.token("app-a")), "r-1")[0] == 202
    assert app.issuer.key_set_requests == 1
    app.issuer.rotate()
    for n in (2, 3, 4):
        assert post(app, bearer(app.token("app-a")), f"r-{n}")[0] == 202
    assert app.issuer.key_set_requests == 2
