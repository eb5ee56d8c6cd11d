//! Secret sets (versions, expiry, public keys) and endpoints, written as the secrets file and
//! the `[[endpoint]]` tables a test app or a [`super::offline::Verifier`] reads.

use super::app::TestApp;
use super::offline::Verifier;
use super::signing::{default_secrets, now};

/// Long past, for a version that has expired whatever clock a test pins.
pub const EXPIRED: &str = "2001-01-01T00:00:00Z";
/// Far ahead, for an older version still trusted during a rotation.
pub const UNEXPIRED: &str = "2999-01-01T00:00:00Z";

/// One version of a secret set.
#[derive(Clone, Debug)]
pub struct Version {
    name: String,
    /// `value` (a shared secret) or `public_key`.
    field: &'static str,
    secret: String,
    expires_at: Option<String>,
}

/// A shared-secret version.
pub fn value(version: &str, secret: &str) -> Version {
    Version {
        name: version.to_owned(),
        field: "value",
        secret: secret.to_owned(),
        expires_at: None,
    }
}

/// A public-key version.
pub fn public_key(version: &str, key: &str) -> Version {
    Version {
        field: "public_key",
        ..value(version, key)
    }
}

impl Version {
    /// This version expires (or expired) at `at` (RFC 3339).
    pub fn expires(mut self, at: &str) -> Self {
        self.expires_at = Some(at.to_owned());
        self
    }
}

/// A secrets file's text, built set by set.
#[derive(Clone, Debug)]
pub struct SecretsFile(String);

impl SecretsFile {
    /// The default sets ([`default_secrets`]) and nothing else yet.
    pub fn new() -> Self {
        Self(default_secrets())
    }

    /// Set `name`, newest version first.
    pub fn set(mut self, name: &str, versions: impl IntoIterator<Item = Version>) -> Self {
        for v in versions {
            self.0.push_str(&format!(
                "\n[[{name}]]\nversion = \"{}\"\n{} = \"{}\"\n",
                v.name, v.field, v.secret
            ));
            if let Some(at) = &v.expires_at {
                self.0.push_str(&format!("expires_at = \"{at}\"\n"));
            }
        }
        self
    }

    /// The three sets a provider test checks keys with: `name` holding `current` only,
    /// `{name}-rolled` holding `other` as `current` then `current` as `previous` (a rotation
    /// under way), and `{name}-expired` the same with `previous` expired.
    pub fn rotations(self, name: &str, current: &str, other: &str) -> Self {
        self.set(name, [value("v1", current)])
            .set(
                &format!("{name}-rolled"),
                [value("current", other), value("previous", current)],
            )
            .set(
                &format!("{name}-expired"),
                [
                    value("current", other),
                    value("previous", current).expires(EXPIRED),
                ],
            )
    }

    pub fn text(&self) -> String {
        self.0.clone()
    }
}

impl Default for SecretsFile {
    fn default() -> Self {
        Self::new()
    }
}

impl From<SecretsFile> for String {
    fn from(file: SecretsFile) -> String {
        file.0
    }
}

/// One `[[endpoint]]` table.
#[derive(Clone, Debug)]
pub struct Endpoint {
    id: String,
    adapter: String,
    secret: String,
    lines: String,
}

/// Endpoint `id` on `adapter`, verified with the set named like it.
pub fn endpoint(id: &str, adapter: &str) -> Endpoint {
    Endpoint {
        id: id.to_owned(),
        adapter: adapter.to_owned(),
        secret: id.to_owned(),
        lines: String::new(),
    }
}

impl Endpoint {
    /// Verified with set `name` instead.
    pub fn secret(mut self, name: &str) -> Self {
        self.secret = name.to_owned();
        self
    }

    pub fn public_url(self, url: &str) -> Self {
        self.line(&format!("public_url = \"{url}\""))
    }

    /// Any further line of the table, as TOML.
    pub fn line(mut self, toml: &str) -> Self {
        self.lines.push_str(toml);
        self.lines.push('\n');
        self
    }

    pub fn toml(&self) -> String {
        format!(
            "\n[[endpoint]]\nid = \"{}\"\nadapter = \"{}\"\nsecret = \"{}\"\n{}",
            self.id, self.adapter, self.secret, self.lines
        )
    }
}

/// The tables of `endpoints`, in order.
pub fn endpoints(endpoints: impl IntoIterator<Item = Endpoint>) -> String {
    endpoints.into_iter().map(|e| e.toml()).collect()
}

/// One endpoint per id on `adapter`, each verified with the set named like it.
pub fn endpoints_on(adapter: &str, ids: &[&str]) -> String {
    endpoints(ids.iter().map(|id| endpoint(id, adapter)))
}

/// The endpoints of [`SecretsFile::rotations`] on `adapter`: `name`, `{name}-rolled` and
/// `{name}-expired` at `public_url`, and `{name}-no-url` on set `name` with none.
pub fn rotation_endpoints(name: &str, adapter: &str, public_url: &str) -> String {
    let at = |id: String| endpoint(&id, adapter).public_url(public_url);
    endpoints([
        at(name.to_owned()),
        at(format!("{name}-rolled")),
        at(format!("{name}-expired")),
        endpoint(&format!("{name}-no-url"), adapter).secret(name),
    ])
}

/// One provider's keys in rotation: the sets of [`SecretsFile::rotations`] and the endpoints
/// of [`rotation_endpoints`].
pub struct Rotations {
    pub endpoints: String,
    pub secrets: SecretsFile,
}

/// `name`'s rotation sets (`current`, and `other` beside it) and endpoints at `public_url`.
pub fn rotations(
    name: &str,
    adapter: &str,
    public_url: &str,
    current: &str,
    other: &str,
) -> Rotations {
    Rotations {
        endpoints: rotation_endpoints(name, adapter, public_url),
        secrets: SecretsFile::new().rotations(name, current, other),
    }
}

impl Rotations {
    /// A test app with `adapter` (`square.wasm`) loaded.
    pub async fn app(&self, adapter: &'static str) -> TestApp {
        TestApp::builder()
            .add_adapter(adapter)
            .add_endpoints(self.endpoints.clone())
            .secrets_file(self.secrets.clone())
            .start()
            .await
    }

    /// The same, with no database, verifying at the current time.
    pub async fn verifier(&self, adapter: &str) -> Verifier {
        Verifier::of(adapter, &self.endpoints, self.secrets.clone(), now()).await
    }
}
