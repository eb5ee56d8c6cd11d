//! What every new project holds beside its source, whatever its language: a README with the
//! three commands an author lives in, and `ci.sh`, the same two checks for a team's pipeline.

use super::manifest::Lang;

/// `(path in the project, contents, executable)`.
pub(super) fn files(name: &str, lang: Lang) -> Vec<(&'static str, String, bool)> {
    vec![
        ("README.md", readme(name, lang), false),
        ("ci.sh", ci_script(name, lang), true),
    ]
}

/// The toolchain line of the README, and the command that installs it.
fn toolchain(lang: Lang) -> (&'static str, &'static str) {
    match lang {
        Lang::Rust => (
            "Rust (https://rustup.rs) with the `wasm32-wasip2` target",
            "rustup target add wasm32-wasip2",
        ),
        Lang::Js => (
            "Node.js with npm; `wharf adapter build --install-toolchain` installs componentize-js \
             and jco into the project",
            "wharf adapter build --install-toolchain",
        ),
        Lang::Python => (
            "Python 3 with pip; `wharf adapter build --install-toolchain` installs \
             componentize-py into the project",
            "wharf adapter build --install-toolchain",
        ),
    }
}

fn source(lang: Lang) -> &'static str {
    match lang {
        Lang::Rust => "`src/lib.rs` (on `wharf-adapter-sdk`; `cargo doc --open` lists its helpers)",
        Lang::Js => "the project's JavaScript source",
        Lang::Python => "the project's Python source",
    }
}

fn readme(name: &str, lang: Lang) -> String {
    let (needs, install) = toolchain(lang);
    let source = source(lang);
    format!(
        "# {name}: a Wharf provider adapter\n\n\
         Made by `wharf adapter new`. It verifies `X-Webhook-Signature: sha256=<hex>`, an \
         HMAC-SHA256 over\n`timestamp.body` with the timestamp in `X-Webhook-Timestamp`: change \
         {source}\nto your provider's scheme, then the cases in `fixtures/` to your provider's \
         requests.\n\n\
         Needs: the `wharf` binary, and {needs}.\n\n\
         ```sh\n{install}\n\
         wharf adapter build            # the component: dist/{name}.wasm\n\
         wharf adapter test             # runs fixtures/ through the host's verification path\n\
         wharf adapter watch --into /opt/wharf/adapters\n\
         \x20                              # on every change: build, test, and when green copy\n\
         \x20                              # dist/{name}.wasm and its fixtures into a running\n\
         \x20                              # receiver's adapters folder, which hot-reloads it\n\
         ```\n\n\
         A receiver serves it on an endpoint that names it, with the secret set the provider \
         signs with:\n\n\
         ```toml\n[[endpoint]]\nid = \"{name}\"\nadapter = \"{name}\"\nsecret = \"{name}\"\n```\n\n\
         `fixtures/<case>/` holds `request.toml` (clock, headers, secrets), `body`, and \
         `expected.toml`\n(the outcome: accepted with its events, or the rejection's code). \
         `./ci.sh` runs the build and the\nfixtures in a pipeline (`WHARF=/path/to/wharf \
         ./ci.sh` when `wharf` is not on `PATH`).\n"
    )
}

fn ci_script(name: &str, lang: Lang) -> String {
    let setup = match lang {
        Lang::Rust => "rustup target add wasm32-wasip2\n\"$WHARF\" adapter build .\n",
        Lang::Js | Lang::Python => "\"$WHARF\" adapter build --install-toolchain .\n",
    };
    format!(
        "#!/bin/sh\n\
         # CI for the {name} adapter: build the component, then run its fixtures through the \
         host's\n# verification path; a failing case fails the job. Needs the `wharf` binary \
         (a release tarball's\n# bin/wharf): on PATH, or named by WHARF.\n\
         set -eu\ncd \"$(dirname \"$0\")\"\nWHARF=\"${{WHARF:-wharf}}\"\n\n\
         {setup}\"$WHARF\" adapter test .\n\
         # Signed releases: sign dist/{name}.wasm here once the receiver requires trusted keys.\n"
    )
}
