// Lemon Squeezy (https://docs.lemonsqueezy.com/help/webhooks): `X-Signature` is the lowercase
// hex HMAC-SHA256 of the raw body under the webhook's signing secret (6-40 characters, used as
// its UTF-8 bytes). The body is a JSON:API resource object: `meta.event_name` names the event
// (also sent as `X-Event-Name`, which is not signed and so not read), `data` is the order,
// subscription, subscription invoice or license key it is about.
//
// No timestamp is signed, so there is no freshness window: replay protection is the host's
// dedup alone (`tolerance` is left unset). A redelivery (the dashboard's "resend", or one of
// the three retries) carries the same body.
//
// Lemon Squeezy sends no event id. The dedup key is built from fields that are stable across
// redeliveries and differ between two events: `EVENT_NAME:TYPE:ID:UPDATED_AT`, the event's
// name, the resource's JSON:API type and id, and its `attributes.updated_at` (each change to
// a resource updates it; `created_at` when a resource has no `updated_at`). Two events of the
// same name on the same resource within one second of each other would share a key and the
// second be taken as a duplicate; Lemon Squeezy's timestamps have microseconds, so in practice
// they do not.

import {
  description, signatureHeader, hexBytes, rawBody, hmacSha256, json, requiredString,
  optionalString, event, events, malformed,
} from './wharf.js';

export function describe() {
  return description({
    name: 'lemonsqueezy',
    version: '0.1.0',
    algorithms: ['hmac-sha256'],
    // Every event name is accepted: order_*, subscription_*, license_key_*, affiliate_*...
    eventTypes: [],
    // No signed timestamp: see above.
    tolerance: undefined,
  });
}

export function prepare(req) {
  const signature = hexBytes(signatureHeader(req, 'x-signature'), 'x-signature');
  return { checks: [hmacSha256([rawBody()], [signature])], timestamp: undefined };
}

export function parse(req) {
  const body = json(req);
  const name = requiredString(body, 'meta.event_name');
  const type = requiredString(body, 'data.type');
  const id = requiredString(body, 'data.id');
  const changed =
    optionalString(body, 'data.attributes.updated_at') ??
    optionalString(body, 'data.attributes.created_at');
  if (changed === undefined) {
    throw malformed('data.attributes has neither updated_at nor created_at');
  }
  return events(event(`${name}:${type}:${id}:${changed}`, name, `${type}/${id}`));
}
