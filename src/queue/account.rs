//! An account's standing and name: the rules the operator API checks before a change is stored.

use serde::Serialize;

use super::{invalid, Invalid};

/// Whether an account is served. A suspended account's requests are refused and its deliveries stop;
/// nothing of it is deleted, and resuming serves it again as it was. A deleted one is refused from the
/// moment the operator deletes it, while its data is removed (`Deleting`), and for good after
/// (`Deleted`, the row kept as the record that it was).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum AccountStatus {
    Active,
    Suspended,
    Deleting,
    Deleted,
}

impl AccountStatus {
    pub fn parse(raw: &str) -> Result<Self, Invalid> {
        match raw {
            "active" => Ok(Self::Active),
            "suspended" => Ok(Self::Suspended),
            "deleting" => Ok(Self::Deleting),
            "deleted" => Ok(Self::Deleted),
            other => Err(invalid(format!("status must be active, suspended, deleting or deleted, got {other:?}"))),
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Self::Active => "active",
            Self::Suspended => "suspended",
            Self::Deleting => "deleting",
            Self::Deleted => "deleted",
        }
    }
}

/// An account's name: 1-120 characters, no control characters, not blank.
pub fn account_name(raw: &str) -> Result<&str, Invalid> {
    if raw.trim().is_empty() || raw.chars().count() > 120 || raw.chars().any(char::is_control) {
        return Err(invalid("name is required: 1-120 characters, no control characters"));
    }
    Ok(raw)
}

/// The operator's reason for a suspension: at most 500 characters, no control characters but newlines.
pub fn status_reason(raw: &str) -> Result<&str, Invalid> {
    if raw.chars().count() > 500 || raw.chars().any(|c| c.is_control() && c != '\n') {
        return Err(invalid("reason must be at most 500 characters, without control characters"));
    }
    Ok(raw)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn statuses_parse_back_and_names_are_checked() {
        for status in [AccountStatus::Active, AccountStatus::Suspended, AccountStatus::Deleting, AccountStatus::Deleted]
        {
            assert_eq!(AccountStatus::parse(status.as_str()), Ok(status));
        }
        assert!(AccountStatus::parse("gone").unwrap_err().message.contains("active, suspended, deleting or deleted"));
        assert!(account_name(" ").is_err() && account_name(&"x".repeat(121)).is_err());
        assert!(account_name("a\u{7}").is_err());
        assert_eq!(account_name("Acme"), Ok("Acme"));
        assert!(status_reason("spam\nreported").is_ok() && status_reason("\u{0}").is_err());
    }
}
