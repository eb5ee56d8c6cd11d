"""Helpers for Wharf adapters written in Python. The adapter describes; the host holds every
secret and computes every MAC. The types are the WIT world's (`wit_world.imports.types`, made
by componentize-py from wit/adapter.wit): dataclasses with snake_case fields, enums, variants
as one class per case (`Part_Literal(b"...")`), options as a value or None."""

import base64
import binascii
import json as _json
import re
from typing import Any, List, Optional

from componentize_py_types import Err
from wit_world.imports.types import (
    Algorithm,
    Check,
    Description,
    Envelope,
    Ordering,
    Parsed,
    Parsed_Events,
    Part,
    Part_Literal,
    Part_RawBody,
    Rejection,
    RejectionKind,
    Request,
    SecretEncoding,
    Tolerance,
)


def invalid(detail: str) -> Err:
    """401 `invalid_signature`: missing or unparseable signature metadata. Raise it."""
    return Err(Rejection(RejectionKind.INVALID_SIGNATURE, detail))


def malformed(detail: str) -> Err:
    """400 `malformed`: a verified body whose envelope cannot be read. Raise it."""
    return Err(Rejection(RejectionKind.MALFORMED, detail))


def unsupported(detail: str) -> Err:
    """422 `unsupported_event_type` (or ignored, per endpoint). Raise it."""
    return Err(Rejection(RejectionKind.UNSUPPORTED_EVENT_TYPE, detail))


def signature_header(req: Request, name: str) -> str:
    """A header that must appear exactly once and be non-empty, as text; else 401."""
    value = req.header(name)
    if not value:
        raise invalid(f"{name} missing, empty or repeated")
    try:
        return value.decode("utf-8").strip()
    except UnicodeDecodeError:
        raise invalid(f"{name} is not UTF-8")


def hex_bytes(text: str, what: str) -> bytes:
    """Hex to bytes; else 401."""
    if not text or len(text) % 2 or not re.fullmatch(r"[0-9a-fA-F]+", text):
        raise invalid(f"{what} is not hex")
    return bytes.fromhex(text)


def base64_bytes(text: str, what: str) -> bytes:
    """Standard base64 (padding optional) to bytes; else 401."""
    stripped = text.rstrip("=")
    if not stripped or not re.fullmatch(r"[A-Za-z0-9+/]+", stripped):
        raise invalid(f"{what} is not base64")
    try:
        return base64.b64decode(stripped + "=" * (-len(stripped) % 4), validate=True)
    except binascii.Error:
        raise invalid(f"{what} is not base64")


def prefixed_hex(req: Request, name: str, prefix: str) -> bytes:
    """`name: PREFIX<hex>` (for example `sha256=`) to the signature's bytes; else 401."""
    value = signature_header(req, name)
    if not value.startswith(prefix):
        raise invalid(f"{name} lacks {prefix}")
    return hex_bytes(value[len(prefix):], name)


def unix_timestamp(text: str) -> int:
    """Unix seconds, as the decimal text the provider signed; else 401."""
    if not re.fullmatch(r"-?[0-9]{1,18}", text):
        raise invalid("timestamp is not an integer")
    return int(text)


def literal(value) -> Part:
    """Bytes the host signs as they are (a str is taken as UTF-8)."""
    return Part_Literal(value.encode("utf-8") if isinstance(value, str) else bytes(value))


def raw_body() -> Part:
    """The exact raw body, by reference: never copied out of the host."""
    return Part_RawBody()


def hmac_sha256(message: List[Part], signatures: List[bytes]) -> Check:
    """One HMAC-SHA256 check under the endpoint's secret."""
    return Check(Algorithm.HMAC_SHA256, None, message, signatures, None)


def json(req: Request) -> Any:
    """The verified body as JSON; else 400."""
    try:
        return _json.loads(req.body())
    except ValueError:
        raise malformed("body is not JSON")


def field(value: Any, path: str) -> Any:
    """`a.b.c` in a parsed JSON value, or None."""
    for key in path.split("."):
        if not isinstance(value, dict):
            return None
        value = value.get(key)
    return value


def optional_str(value: Any, path: str) -> Optional[str]:
    """A field that may be absent: its text (a number's decimal text) or None."""
    v = field(value, path)
    if isinstance(v, int) and not isinstance(v, bool):
        return str(v)
    return v if isinstance(v, str) and v else None


def required_str(value: Any, path: str) -> str:
    """A field that must be a non-empty string (or an integer); else 400."""
    v = optional_str(value, path)
    if v is None:
        raise malformed(f"{path} missing")
    return v


def event(event_id: str, event_type: str, object_id: Optional[str] = None) -> Envelope:
    """One event for the whole body."""
    return Envelope(event_id, event_type, object_id, None, None, None, None, None)


def events(*envelopes: Envelope) -> Parsed:
    """`parse`'s answer for one or more events."""
    return Parsed_Events(list(envelopes))


def description(
    name: str,
    version: str,
    *,
    algorithms: List[Algorithm] = [Algorithm.HMAC_SHA256],
    tolerance: Optional[Tolerance] = None,
    event_types: List[str] = [],
    secret_encoding: SecretEncoding = SecretEncoding.RAW,
    ordering: Ordering = Ordering.NONE,
    max_body_bytes: Optional[int] = None,
) -> Description:
    """`describe`'s answer: the keywords are what differs from a typical HMAC-SHA256 scheme."""
    return Description(
        name=name,
        version=version,
        event_types=list(event_types),
        max_body_bytes=max_body_bytes,
        algorithms=list(algorithms),
        secret_encoding=secret_encoding,
        public_key_encoding=None,
        tolerance=tolerance,
        ordering=ordering,
        serves_get=False,
        acknowledgement=None,
    )
