//! The contract's error kinds: a reply names the Python exception type the
//! seed raises in the same case, so the oracle can compare outcomes.

use std::fmt;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoreError {
    /// The seed's exception type, e.g. "ValueError", "MemoryError".
    pub kind: &'static str,
    pub message: String,
}

impl StoreError {
    pub fn new(kind: &'static str, message: impl Into<String>) -> Self {
        StoreError { kind, message: message.into() }
    }
}

impl fmt::Display for StoreError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.kind, self.message)
    }
}

pub type Result<T> = std::result::Result<T, StoreError>;

pub fn value_error(m: impl Into<String>) -> StoreError {
    StoreError::new("ValueError", m)
}
pub fn assertion(m: impl Into<String>) -> StoreError {
    StoreError::new("AssertionError", m)
}
pub fn key_error(key: &str) -> StoreError {
    StoreError::new("KeyError", format!("{key:?}"))
}
pub fn attribute_error(what: &str) -> StoreError {
    StoreError::new("AttributeError", format!("a reader storage has no {what}"))
}
pub fn overflow(m: impl Into<String>) -> StoreError {
    StoreError::new("OverflowError", m)
}
