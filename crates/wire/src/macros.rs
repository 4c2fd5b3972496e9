/// Declares a `Copy` enum over an integer type with named code points plus `Unknown(raw)`, and lossless
/// `From` conversions both ways (the smoltcp `enum_with_unknown` idea: unknown code points are carried,
/// not refused). Named values must be distinct; `Unknown` is never produced for a named value.
macro_rules! enum_with_unknown {
    (
        $( #[$enum_attr:meta] )*
        pub enum $name:ident($ty:ty) {
            $(
                $( #[$variant_attr:meta] )*
                $variant:ident = $value:expr
            ),+ $(,)?
        }
    ) => {
        $( #[$enum_attr] )*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
        pub enum $name {
            $(
                $( #[$variant_attr] )*
                $variant,
            )+
            /// A code point this crate has no name for, carried as is.
            Unknown($ty),
        }

        impl ::core::convert::From<$ty> for $name {
            fn from(value: $ty) -> Self {
                match value {
                    $( v if v == $value => $name::$variant, )+
                    other => $name::Unknown(other),
                }
            }
        }

        impl ::core::convert::From<$name> for $ty {
            fn from(value: $name) -> Self {
                match value {
                    $( $name::$variant => $value, )+
                    $name::Unknown(other) => other,
                }
            }
        }
    };
}
