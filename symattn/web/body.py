"""Reading a request's JSON body: its keys, its spec and its claims, each error naming what the page sent."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from symattn.input.errors import SpecError

SPEC_SOURCE, CLAIMS_SOURCE, REQUEST_SOURCE = "spec", "claims", "request"


def request_reader(source: str):
    from symattn.input.reader import Reader

    return Reader(source)


def request_fields(body: Any, allowed: tuple[str, ...], required: tuple[str, ...] = ("spec",)) -> dict[str, Any]:
    from symattn.input.reader import check_keys

    reader = request_reader(REQUEST_SOURCE)
    if not isinstance(body, Mapping):
        raise reader.error(None, "expected a JSON object")
    check_keys(reader, body, allowed)
    for key in required:
        if key not in body:
            raise reader.error(key, "missing")
    return dict(body)


def spec_of(raw: Any):
    from symattn.input.spec import spec_from_mapping

    return spec_from_mapping(raw, SPEC_SOURCE)


def flag(body: Mapping[str, Any], key: str, default: bool) -> bool:
    from symattn.input.reader import brief

    value = body.get(key, default)
    if not isinstance(value, bool):
        raise request_reader(REQUEST_SOURCE).error(key, f"expected true or false, got {brief(value)}")
    return value


def claims_of(spec: Any, raw: Any):
    from symattn.input.claims import claims_from_mapping
    from symattn.input.quantities import is_multihead

    if is_multihead(spec):  # the page's boxes are one head's; symattn check takes per-head claims
        raise SpecError(
            spec.source, "heads", "the page checks one head without W_O; use symattn check for several heads"
        )
    return claims_from_mapping({"claims": raw}, CLAIMS_SOURCE, spec=spec)
