//! The API's enum values spelled as the API writes them, for text a person reads.

use database_api::Phase;
use database_api::replication::Role;

/// A Database's phase.
pub fn phase(phase: Phase) -> &'static str {
    match phase {
        Phase::Pending => "Pending",
        Phase::Creating => "Creating",
        Phase::Running => "Running",
        Phase::Upgrading => "Upgrading",
        Phase::Failed => "Failed",
        Phase::Terminating => "Terminating",
    }
}

/// An instance's role.
pub fn role(role: Role) -> &'static str {
    match role {
        Role::Primary => "Primary",
        Role::Replica => "Replica",
        Role::Unknown => "Unknown",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_the_serialized_values() {
        for value in [
            Phase::Pending,
            Phase::Creating,
            Phase::Running,
            Phase::Upgrading,
            Phase::Failed,
            Phase::Terminating,
        ] {
            assert_eq!(serde_json::to_value(value).unwrap(), phase(value));
        }
        for value in [Role::Primary, Role::Replica, Role::Unknown] {
            assert_eq!(serde_json::to_value(value).unwrap(), role(value));
        }
    }
}
