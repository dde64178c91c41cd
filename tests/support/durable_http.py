"""Requests to devhost's Durable HTTP API (the webhook endpoints), as a caller with
``statusQueryGetUri`` in hand makes them."""

import json
from typing import Any

import aiohttp

from harness.devhost.durable_api import BASE
from tests.support.devhost_sample import Sample

JSON = {"Content-Type": "application/json"}


def call(
    sample: Sample,
    method: str,
    path: str,
    body: bytes | None = None,
    headers: dict[str, str] | None = None,
) -> tuple[int, Any, dict[str, str]]:
    """A request to the webhook API: status, the JSON body (or None), the headers."""

    async def request() -> tuple[int, Any, dict[str, str]]:
        url = path if path.startswith("http") else sample.host.base_url + BASE + path
        async with (
            aiohttp.ClientSession() as session,
            session.request(method, url, data=body, headers=headers or {}) as response,
        ):
            text = await response.text()
            return response.status, json.loads(text) if text else None, dict(response.headers)

    return sample.run(request())


def start(sample: Sample, name: str, value: object = None, instance_id: str = "") -> dict[str, Any]:
    suffix = f"/{instance_id}" if instance_id else ""
    body = None if value is None else json.dumps(value).encode()
    status, payload, _ = call(sample, "POST", f"/orchestrators/{name}{suffix}", body)
    assert status == 202, payload
    return dict(payload)
