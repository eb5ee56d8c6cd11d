//! What an adapter implements, and the macro that exports it as the WIT world's three
//! functions, so authors never see the generated bindings.

use crate::{Description, Parsed, Prepared, Rejection, Request};

/// A provider adapter: it only describes. The host holds every key and does every check.
pub trait Adapter {
    /// Static facts, asked once when the component is loaded. The name and version default to
    /// the adapter package's (`CARGO_PKG_NAME`, `CARGO_PKG_VERSION`).
    fn describe() -> Description;

    /// Before verification: where the signatures are and which bytes they sign. Every
    /// rejection here is answered 401 `invalid_signature`.
    fn prepare(request: &Request) -> Result<Prepared, Rejection>;

    /// After verification: what the verified request means (events, or a handshake answer).
    fn parse(request: &Request) -> Result<Parsed, Rejection>;
}

/// Exports `$adapter` (a type implementing [`Adapter`]) as this component's `describe`,
/// `prepare` and `parse`, naming it after the package that invokes the macro.
#[macro_export]
macro_rules! export {
    ($adapter:ty) => {
        const _: () = {
            // A name of its own, so that the adapter's type may be called anything.
            struct __WharfExport;
            impl $crate::__bindings::Guest for __WharfExport {
                fn describe() -> $crate::Description {
                    $crate::__packaged(
                        <$adapter as $crate::Adapter>::describe(),
                        ::core::env!("CARGO_PKG_NAME"),
                        ::core::env!("CARGO_PKG_VERSION"),
                    )
                }
                fn prepare(
                    request: &$crate::Request,
                ) -> ::core::result::Result<$crate::Prepared, $crate::Rejection> {
                    <$adapter as $crate::Adapter>::prepare(request)
                }
                fn parse(
                    request: &$crate::Request,
                ) -> ::core::result::Result<$crate::Parsed, $crate::Rejection> {
                    <$adapter as $crate::Adapter>::parse(request)
                }
            }
            $crate::__bindings::export_adapter! {
                __WharfExport with_types_in $crate::__bindings
            }
        };
    };
}

/// The description with the package's name and version where the adapter set none.
#[doc(hidden)]
pub fn __packaged(description: Description, name: &str, version: &str) -> Description {
    let fill = |set: String, default: &str| {
        if set.is_empty() {
            default.to_owned()
        } else {
            set
        }
    };
    Description {
        name: fill(description.name, name),
        version: fill(description.version, version),
        ..description
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Algorithm;

    #[test]
    fn the_package_names_what_the_adapter_does_not() {
        let d = __packaged(Description::new(Algorithm::HmacSha256), "acme", "0.3.0");
        assert_eq!((d.name.as_str(), d.version.as_str()), ("acme", "0.3.0"));
        let d = Description::new(Algorithm::HmacSha256).version("reload-v01");
        let d = __packaged(d.name("other"), "acme", "0.3.0");
        assert_eq!(
            (d.name.as_str(), d.version.as_str()),
            ("other", "reload-v01")
        );
    }
}
