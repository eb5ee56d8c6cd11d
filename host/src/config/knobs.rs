//! `section!`: one declaration per config table, in which each field carries its default
//! (`= 30`) and its allowed range (`; 1..=3600`). Adding a knob is one line: the serde
//! default, `Default` and the range check are all derived from it.

/// Declares a config table.
///
/// ```text
/// section! {
///     #[derive(Debug, Clone)]
///     pub struct RetentionConfig as r: Default {
///         /// Docs, as on any field.
///         pub payload_days: u32 = 30; 1..=3650,
///         pub event_days: u32 = 30; r.payload_days..=3650; "at least payload_days",
///         pub key_file: Option<PathBuf>,
///     }
/// }
/// ```
///
/// A field without `= default` is required (an `Option` one may be left out: `None`). A range
/// may read the table's other fields through the name after `as`; a quoted note after it is
/// shown in the message, after the key. The macro writes `Deserialize` (unknown keys refused,
/// serde's own messages), `Default` when the header ends in `: Default`, and `knob_problems`,
/// which checks every range in field order.
macro_rules! section {
    (
        $(#[$attr:meta])*
        pub struct $name:ident as $this:ident: Default {
            $(
                $(#[$fattr:meta])*
                pub $field:ident: $ty:ty $(= $default:expr)? $(; $range:expr $(; $note:literal)?)?
            ),* $(,)?
        }
    ) => {
        section! {
            $(#[$attr])*
            pub struct $name as $this {
                $(
                    $(#[$fattr])*
                    pub $field: $ty $(= $default)? $(; $range $(; $note)?)?
                ),*
            }
        }

        impl Default for $name {
            fn default() -> Self {
                Self { $($field: section!(@default $ty $(, $default)?)),* }
            }
        }
    };
    (
        $(#[$attr:meta])*
        pub struct $name:ident as $this:ident {
            $(
                $(#[$fattr:meta])*
                pub $field:ident: $ty:ty $(= $default:expr)? $(; $range:expr $(; $note:literal)?)?
            ),* $(,)?
        }
    ) => {
        $(#[$attr])*
        pub struct $name {
            $($(#[$fattr])* pub $field: $ty),*
        }

        impl<'de> serde::Deserialize<'de> for $name {
            fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
                // The file's table, defaults not yet filled in. The same name, so that serde's
                // messages ("expected struct ...") read as they would for a derive.
                #[derive(serde::Deserialize)]
                #[serde(deny_unknown_fields)]
                struct $name {
                    $($field: section!(@read $ty $(, $default)?)),*
                }
                let read = $name::deserialize(deserializer)?;
                Ok(Self { $($field: section!(@value read.$field $(, $default)?)),* })
            }
        }

        impl $name {
            /// Every knob with a range within it, in field order.
            #[allow(unused_variables)]
            pub(super) fn knob_problems(
                &self,
                p: &mut $crate::config::problems::Problems,
                at: &$crate::config::problems::Place,
            ) {
                let $this = self;
                $($(
                    p.knob(at, stringify!($field), section!(@label $field $(, $note)?), &$this.$field, $range);
                )?)*
            }
        }
    };
    (@read $ty:ty, $default:expr) => { Option<$ty> };
    (@read $ty:ty) => { $ty };
    (@value $read:expr, $default:expr) => { $read.unwrap_or_else(|| $default) };
    (@value $read:expr) => { $read };
    (@default $ty:ty, $default:expr) => { $default };
    (@default $ty:ty) => { <$ty>::default() };
    (@label $field:ident, $note:literal) => { concat!(stringify!($field), " (", $note, ")") };
    (@label $field:ident) => { stringify!($field) };
}
