//! Shared helpers for the cross-crate tests in `tests/tests/`.
#![forbid(unsafe_code)]
