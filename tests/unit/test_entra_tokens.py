"""The token validator (adapters/entra_tokens.py) and the domain's reading of a verified token
(domain.apps.authorised_app), against the local issuer: each hostile token refused for its own
reason, genuine ones accepted, the keys endpoint's outages and rotations handled. The same cases
run through the whole app on devhost in tests/app/test_tokens.py."""

from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta

import jwt
import pytest

from adapters.clock import ManualClock
from adapters.entra_tokens import LEEWAY, MAX_LIFETIME, MAX_TOKEN_CHARS, UNKNOWN_KID_REFRESH, EntraTokens
from domain.apps import NotAuthenticated, NotPermitted, NotRegistered, Registry, authorised_app
from domain.errors import DependencyUnavailable
from harness.standins.local_issuer import LocalIssuer, new_key
from tests.support.tokens import hs256_with_public_key, tampered, unsigned

TENANT = "00000000-0000-4000-8000-00000000001a"
AUDIENCE = "00000000-0000-4000-8000-0000000000fe"
APP_A = "11111111-1111-1111-1111-111111111111"
APP_Z = "99999999-9999-9999-9999-999999999999"
OTHER_TENANT = "00000000-0000-4000-8000-00000000002b"
YEAR_2100 = int(datetime(2100, 1, 1, tzinfo=UTC).timestamp())


def _at(moment: datetime) -> int:
    return int(moment.timestamp())


REGISTRY = Registry.parse(f"app-a={APP_A}")


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock()


@pytest.fixture
def issuer(clock: ManualClock) -> Iterator[LocalIssuer]:
    with LocalIssuer(TENANT, AUDIENCE, clock=clock) as running:
        yield running


@pytest.fixture
def tokens(issuer: LocalIssuer, clock: ManualClock) -> EntraTokens:
    return EntraTokens(issuer.authority, TENANT, AUDIENCE, clock, timeout=5)


Forge = Callable[[LocalIssuer], str]
REFUSED_AS_INVALID: dict[str, tuple[Forge, str]] = {
    "malformed": (lambda i: "not-a-jwt", "not a JWT"),
    "bad signature": (lambda i: tampered(i.mint(APP_A)), "signature"),
    "signed by another key with a known kid": (lambda i: i.mint(APP_A, key=new_key()), "signature"),
    "alg none": (lambda i: unsigned(i, {"alg": "none", "typ": "JWT", "kid": i.kid}, APP_A) + ".", "RS256"),
    "HS256 signed with the public key": (lambda i: hs256_with_public_key(i, APP_A), "RS256"),
    "expired": (lambda i: i.mint(APP_A, now=i.now() - timedelta(hours=2)), "expired"),
    "not yet valid": (
        lambda i: i.mint(APP_A, changes={"nbf": _at(i.now() + timedelta(minutes=10))}),
        "not valid yet",
    ),
    "wrong issuer": (
        lambda i: i.mint(APP_A, changes={"iss": f"https://login.microsoftonline.com/{TENANT}/v2.0"}),
        "issuer",
    ),
    "wrong audience": (lambda i: i.mint(APP_A, changes={"aud": "api://someone-else"}), "audience"),
    "no exp": (lambda i: i.mint(APP_A, drop=["exp"]), "claims"),
    "no iat": (lambda i: i.mint(APP_A, drop=["iat"]), "claims"),
    "no tid": (lambda i: i.mint(APP_A, drop=["tid"]), "claims"),
    "another tenant's tid": (lambda i: i.mint(APP_A, changes={"tid": OTHER_TENANT}), "tenant"),
    "aud as a list holding this audience": (lambda i: i.mint(APP_A, changes={"aud": [AUDIENCE]}), "audience"),
    "exp in the year 2100": (lambda i: i.mint(APP_A, changes={"exp": YEAR_2100}), "lives longer"),
    "a lifetime of a day and a minute": (
        lambda i: i.mint(APP_A, changes={"exp": _at(i.now() + MAX_LIFETIME + timedelta(minutes=1))}),
        "lives longer",
    ),
    "iat a year ahead": (
        lambda i: i.mint(APP_A, changes={"iat": _at(i.now() + timedelta(days=365))}),
        "issued in the future",
    ),
    "iat two minutes ahead, past the skew": (
        lambda i: i.mint(APP_A, changes={"iat": _at(i.now() + LEEWAY + timedelta(minutes=1))}),
        "issued in the future",
    ),
    "iat not a number": (lambda i: i.mint(APP_A, changes={"iat": "now"}), "iat"),
    "an unknown kid": (lambda i: i.mint(APP_A, key=new_key(), kid="unknown"), "does not publish"),
    "too large": (lambda i: "x" * (MAX_TOKEN_CHARS + 1), "too large"),
}


@pytest.mark.parametrize("case", list(REFUSED_AS_INVALID))
def test_a_hostile_token_is_not_authenticated(case: str, issuer: LocalIssuer, tokens: EntraTokens) -> None:
    forge, reason = REFUSED_AS_INVALID[case]
    with pytest.raises(NotAuthenticated, match=reason):
        tokens.claims(forge(issuer))


REFUSED_AS_NOT_PERMITTED: dict[str, tuple[Forge, type[NotPermitted], str]] = {
    "delegated (scp, no idtyp)": (
        lambda i: i.mint(APP_A, drop=["idtyp"], changes={"scp": "Orders.Submit"}),
        NotPermitted,
        "application tokens",
    ),
    "delegated with idtyp user": (
        lambda i: i.mint(APP_A, changes={"idtyp": "user"}),
        NotPermitted,
        "application",
    ),
    "an app token without the role": (lambda i: i.mint(APP_A, roles=()), NotPermitted, "Orders.Submit"),
    "an unregistered azp": (lambda i: i.mint(APP_Z), NotRegistered, "not a registered"),
}


@pytest.mark.parametrize("case", list(REFUSED_AS_NOT_PERMITTED))
def test_a_genuine_token_that_is_no_submitting_apps_is_not_permitted(
    case: str, issuer: LocalIssuer, tokens: EntraTokens
) -> None:
    forge, error, reason = REFUSED_AS_NOT_PERMITTED[case]
    with pytest.raises(error, match=reason):
        authorised_app(tokens.claims(forge(issuer)), REGISTRY)


def test_a_submitting_apps_application_token_is_accepted_within_the_leeway(
    issuer: LocalIssuer, tokens: EntraTokens, clock: ManualClock
) -> None:
    token = issuer.mint(APP_A, now=clock.now() + timedelta(seconds=30))  # the issuer's clock is ahead
    assert authorised_app(tokens.claims(token), REGISTRY).name == "app-a"
    clock.advance(timedelta(hours=1, seconds=50))  # just past exp, within the leeway
    assert authorised_app(tokens.claims(token), REGISTRY).name == "app-a"


def test_a_token_with_entras_longest_configurable_lifetime_is_accepted(
    issuer: LocalIssuer, tokens: EntraTokens, clock: ManualClock
) -> None:
    token = issuer.mint(APP_A, changes={"exp": _at(clock.now() + MAX_LIFETIME)})
    clock.advance(MAX_LIFETIME - timedelta(minutes=1))
    assert authorised_app(tokens.claims(token), REGISTRY).name == "app-a"


def test_a_v1_token_with_appid_counts_and_two_different_client_ids_do_not(
    issuer: LocalIssuer, tokens: EntraTokens
) -> None:
    v1 = issuer.mint(APP_A, drop=["azp"], changes={"appid": APP_A})
    assert authorised_app(tokens.claims(v1), REGISTRY).name == "app-a"
    both = issuer.mint(APP_A, changes={"appid": APP_Z})
    with pytest.raises(NotAuthenticated, match="single calling application"):
        authorised_app(tokens.claims(both), REGISTRY)


def test_the_keys_endpoint_down_is_an_outage_and_its_recovery_is_seen(
    issuer: LocalIssuer, tokens: EntraTokens
) -> None:
    issuer.available = False
    with pytest.raises(DependencyUnavailable, match="signing keys"):
        tokens.claims(issuer.mint(APP_A))
    issuer.available = True
    assert tokens.claims(issuer.mint(APP_A))["azp"] == APP_A


def test_the_keys_are_cached_and_a_rotation_is_read_once(issuer: LocalIssuer, tokens: EntraTokens) -> None:
    for _ in range(3):
        tokens.claims(issuer.mint(APP_A))
    assert issuer.key_set_requests == 1
    issuer.rotate()
    for _ in range(3):
        tokens.claims(issuer.mint(APP_A))
    assert issuer.key_set_requests == 2


def test_unknown_kids_refresh_the_keys_at_most_once_a_minute(
    issuer: LocalIssuer, tokens: EntraTokens, clock: ManualClock
) -> None:
    tokens.claims(issuer.mint(APP_A))
    for n in range(5):
        with pytest.raises(NotAuthenticated):
            tokens.claims(issuer.mint(APP_A, key=new_key(), kid=f"forged-{n}"))
    assert issuer.key_set_requests == 2
    issuer.rotate()
    clock.advance(UNKNOWN_KID_REFRESH)
    assert tokens.claims(issuer.mint(APP_A))["azp"] == APP_A
    assert issuer.key_set_requests == 3


def test_an_openid_configuration_of_another_issuer_is_not_trusted(
    issuer: LocalIssuer, clock: ManualClock
) -> None:
    other = EntraTokens(issuer.authority, "00000000-0000-4000-8000-00000000002b", AUDIENCE, clock, timeout=5)
    with pytest.raises(DependencyUnavailable):
        other.claims(issuer.mint(APP_A))


def test_the_local_issuers_token_endpoint_grants_the_role_to_assigned_apps_only(clock: ManualClock) -> None:
    with LocalIssuer(TENANT, AUDIENCE, assigned=[APP_A], clock=clock) as issuer:
        scope = f"api://{AUDIENCE}/.default"
        granted = {
            client: issuer.token_response(
                {"grant_type": "client_credentials", "client_id": client, "scope": scope}
            )
            for client in (APP_A, APP_Z)
        }
    assert jwt.decode(granted[APP_A][1]["access_token"], options={"verify_signature": False})["roles"] == [
        "Orders.Submit"
    ]
    assert jwt.decode(granted[APP_Z][1]["access_token"], options={"verify_signature": False})["roles"] == []
