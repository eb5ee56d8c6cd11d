"""Typeform (https://www.typeform.com/developers/webhooks/secure-your-webhooks/):
`Typeform-Signature: sha256=<base64>`, the standard base64 of the HMAC-SHA256 of the raw body
under the webhook's secret (its UTF-8 bytes). The body carries `event_id` (stable across
redeliveries: the dedup key), `event_type` (`form_response`, or `form_response_partial` for
partial responses) and `form_response.form_id`.

No timestamp is signed, so there is no freshness window: replay protection is the host's dedup
alone (`tolerance` is left unset)."""

import wit_world
from wit_world.imports.types import Description, Parsed, Prepared, Request

from wharf import (
    base64_bytes,
    description,
    event,
    events,
    hmac_sha256,
    invalid,
    json,
    optional_str,
    raw_body,
    required_str,
    signature_header,
)

PREFIX = "sha256="


class WitWorld(wit_world.WitWorld):
    def describe(self) -> Description:
        return description("typeform", "0.1.0", event_types=["form_response*"])

    def prepare(self, req: Request) -> Prepared:
        value = signature_header(req, "typeform-signature")
        if not value.startswith(PREFIX):
            raise invalid("typeform-signature lacks sha256=")
        signature = base64_bytes(value[len(PREFIX):], "typeform-signature")
        return Prepared([hmac_sha256([raw_body()], [signature])], None)

    def parse(self, req: Request) -> Parsed:
        body = json(req)
        return events(
            event(
                required_str(body, "event_id"),
                required_str(body, "event_type"),
                optional_str(body, "form_response.form_id"),
            )
        )
