// Helpers for Wharf adapters written in JavaScript. The adapter describes; the host holds
// every secret and computes every MAC. Types follow wit/adapter.wit (jco's mapping): records
// are objects with camelCase fields, enums are strings ('hmac-sha256'), variants are
// { tag, val }, options are a value or undefined, u64/s64 are BigInt, list<u8> is Uint8Array.

const encoder = new TextEncoder();
const decoder = new TextDecoder();

/** Thrown from `prepare` or `parse`: the request is refused (never echo the body or a secret). */
export class Rejection extends Error {
  constructor(kind, detail) {
    super(detail);
    this.kind = kind;
    this.detail = detail;
    // What the binding generator lifts as the `rejection` record.
    this.payload = { kind, detail };
  }
}

/** 401 `invalid_signature`: missing or unparseable signature metadata. */
export const invalid = (detail) => new Rejection('invalid-signature', detail);
/** 400 `malformed`: a verified body whose envelope cannot be read. */
export const malformed = (detail) => new Rejection('malformed', detail);
/** 422 `unsupported_event_type` (or ignored, per endpoint). */
export const unsupported = (detail) => new Rejection('unsupported-event-type', detail);

export const bytes = (text) => encoder.encode(text);
export const text = (bytes) => decoder.decode(bytes);

/** A header that must appear exactly once and be non-empty, as text; else 401. */
export function signatureHeader(req, name) {
  const value = req.header(name);
  if (value === undefined || value.length === 0) {
    throw invalid(`${name} missing, empty or repeated`);
  }
  return text(value).trim();
}

/** Lowercase or uppercase hex to bytes; else 401. */
export function hexBytes(hex, what) {
  if (hex.length === 0 || hex.length % 2 !== 0 || !/^[0-9a-fA-F]+$/.test(hex)) {
    throw invalid(`${what} is not hex`);
  }
  const out = new Uint8Array(hex.length / 2);
  for (let i = 0; i < out.length; i++) out[i] = parseInt(hex.substr(i * 2, 2), 16);
  return out;
}

/** Standard base64 (padding optional) to bytes; else 401. */
export function base64Bytes(b64, what) {
  const s = b64.replace(/=+$/, '');
  if (s.length === 0 || s.length % 4 === 1 || !/^[A-Za-z0-9+/]+$/.test(s)) {
    throw invalid(`${what} is not base64`);
  }
  const table = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/';
  const out = new Uint8Array(Math.floor((s.length * 3) / 4));
  let bits = 0, acc = 0, n = 0;
  for (const c of s) {
    acc = (acc << 6) | table.indexOf(c);
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      out[n++] = (acc >> bits) & 0xff;
    }
  }
  return out;
}

/** `name: PREFIX<hex>` (for example `sha256=`) to the signature's bytes; else 401. */
export function prefixedHex(req, name, prefix) {
  const value = signatureHeader(req, name);
  if (!value.startsWith(prefix)) throw invalid(`${name} lacks ${prefix}`);
  return hexBytes(value.slice(prefix.length), name);
}

/** Unix seconds, as the decimal text the provider signed; else 401. */
export function unixTimestamp(text) {
  if (!/^-?[0-9]{1,18}$/.test(text)) throw invalid('timestamp is not an integer');
  return BigInt(text);
}

/** Message parts: bytes the host signs in order (`literal`) and the raw body by reference. */
export const literal = (value) => ({ tag: 'literal', val: typeof value === 'string' ? bytes(value) : value });
export const rawBody = () => ({ tag: 'raw-body' });

/** One HMAC-SHA256 check under the endpoint's secret. */
export function hmacSha256(message, signatures) {
  return { algorithm: 'hmac-sha256', message, signatures, key: undefined, bodySha256Param: undefined };
}

/** The verified body as JSON; else 400. */
export function json(req) {
  try {
    return JSON.parse(text(req.body()));
  } catch {
    throw malformed('body is not JSON');
  }
}

/** `a.b.c` in a parsed JSON value, or undefined. */
export function field(value, path) {
  let v = value;
  for (const key of path.split('.')) {
    if (v === null || typeof v !== 'object') return undefined;
    v = v[key];
  }
  return v;
}

/** A field that must be a non-empty string (a number is taken as its decimal text); else 400. */
export function requiredString(value, path) {
  const v = field(value, path);
  if (typeof v === 'number' && Number.isFinite(v)) return String(v);
  if (typeof v !== 'string' || v.length === 0) throw malformed(`${path} missing`);
  return v;
}

/** A field that may be absent: its text or undefined. */
export function optionalString(value, path) {
  const v = field(value, path);
  if (typeof v === 'number' && Number.isFinite(v)) return String(v);
  return typeof v === 'string' && v.length > 0 ? v : undefined;
}

/** One event for the whole body. */
export function event(eventId, eventType, objectId) {
  return {
    eventId,
    eventType,
    objectId,
    objectVersion: undefined,
    createdAt: undefined,
    route: undefined,
    span: undefined,
    signedBy: undefined,
  };
}

/** `parse`'s answer for one or more events. */
export const events = (...list) => ({ tag: 'events', val: list });

/** `describe`'s answer: fill in what differs from a typical HMAC-SHA256 scheme. */
export function description(fields) {
  return {
    eventTypes: [],
    maxBodyBytes: undefined,
    algorithms: ['hmac-sha256'],
    secretEncoding: 'raw',
    publicKeyEncoding: undefined,
    tolerance: undefined,
    ordering: 'none',
    servesGet: false,
    acknowledgement: undefined,
    ...fields,
  };
}

/** How far a signed timestamp may lie in the past and future, in seconds. */
export const tolerance = (pastSecs, futureSecs) => ({
  pastSecs: BigInt(pastSecs),
  futureSecs: BigInt(futureSecs),
});
