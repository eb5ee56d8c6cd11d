//! GitLab, secret token: `X-Gitlab-Token: <token>`, the hook's secret token sent as is. The
//! host compares it with the endpoint's secret (its UTF-8 bytes, `raw`) in constant time; the
//! adapter never sees the secret.
//!
//! A token signs nothing: it proves the sender knows the token, but does not protect the body
//! (anyone who sees one request can send any body with it), and there is no timestamp, so
//! replay protection is dedup alone. GitLab's newer *signing tokens* (`webhook-id`,
//! `webhook-timestamp`, `webhook-signature: v1,...`) are Standard Webhooks: point such a hook
//! at an endpoint of the `standard-webhooks` adapter with the `whsec_...` signing token as its
//! secret, which verifies the body and the timestamp.
//!
//! Event id: `Idempotency-Key` (GitLab 17.4+), kept on automatic retries and on a manual
//! "Resend Request". Without it (older GitLab), `webhook-uuid:` + `X-Gitlab-Webhook-UUID`,
//! which is unique per request: nothing is merged by mistake, but a retry from such an instance
//! is stored as a new event. `X-Gitlab-Event-UUID` is never used: recursive hooks share it and
//! it is not documented as stable across retries. Type: `X-Gitlab-Event` (`Push Hook`), else the
//! body's `object_kind` (custom templates may drop both, then 400).

use wharf_adapter_sdk::*;

struct GitLab;
export!(GitLab);

impl Adapter for GitLab {
    fn describe() -> Description {
        Description::new(Algorithm::Token)
    }

    fn prepare(req: &Request) -> Result<Prepared, Rejection> {
        let token = signature_header(req, "x-gitlab-token")?;
        Ok(token_check(candidates(vec![token])?).into())
    }

    fn parse(req: &Request) -> Result<Parsed, Rejection> {
        let id = if req.header_values("idempotency-key").is_empty() {
            let uuid = required_header(req, "x-gitlab-webhook-uuid")
                .map_err(|_| malformed("neither Idempotency-Key nor X-Gitlab-Webhook-UUID"))?;
            format!("webhook-uuid:{uuid}")
        } else {
            required_header(req, "idempotency-key")?
        };
        let event_type = if req.header_values("x-gitlab-event").is_empty() {
            let [kind] = json_fields(&req.body(), ["object_kind"])
                .or_malformed("no X-Gitlab-Event and the body is not JSON")?;
            kind.required_str()?.to_owned()
        } else {
            required_header(req, "x-gitlab-event")?
        };
        Ok(event(id, event_type).into())
    }
}
