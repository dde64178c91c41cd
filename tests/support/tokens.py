"""Forged and tampered tokens, as an attacker would present them to the front end."""

import base64
import hashlib
import hmac
import json

from cryptography.hazmat.primitives import serialization

from harness.standins.local_issuer import LocalIssuer


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def unsigned(issuer: LocalIssuer, header: dict[str, str], client_id: str) -> str:
    """The issuer's claims for ``client_id`` under ``header``, with no signature part."""
    return f"{_b64(json.dumps(header).encode())}.{_b64(json.dumps(issuer.claims(client_id)).encode())}"


def hs256_with_public_key(issuer: LocalIssuer, client_id: str) -> str:
    """The classic key-confusion forgery: HMAC keyed with the published RSA public key."""
    public = issuer.key.public_key().public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    signing_input = unsigned(issuer, {"alg": "HS256", "typ": "JWT", "kid": issuer.kid}, client_id)
    signature = hmac.new(public, signing_input.encode(), hashlib.sha256).digest()
    return f"{signing_input}.{_b64(signature)}"


def tampered(token: str) -> str:
    """``token`` with one character of its signature changed."""
    head, payload, signature = token.split(".")
    flipped = "A" if signature[10] != "A" else "B"
    return f"{head}.{payload}.{signature[:10]}{flipped}{signature[11:]}"
