//! The hardening every container the operator runs shares: the Pod Security Standards'
//! `restricted` profile and a read-only root filesystem.

use k8s_openapi::api::core::v1::{Capabilities, SeccompProfile, SecurityContext};

/// A container that may not gain privileges, write its root filesystem or keep any
/// capability.
pub fn restricted() -> SecurityContext {
    SecurityContext {
        allow_privilege_escalation: Some(false),
        privileged: Some(false),
        read_only_root_filesystem: Some(true),
        run_as_non_root: Some(true),
        capabilities: Some(Capabilities {
            drop: Some(vec!["ALL".to_owned()]),
            ..Capabilities::default()
        }),
        seccomp_profile: Some(runtime_default()),
        ..SecurityContext::default()
    }
}

/// [`restricted`], running as `uid` and its group.
pub fn restricted_as(uid: i64) -> SecurityContext {
    SecurityContext {
        run_as_user: Some(uid),
        run_as_group: Some(uid),
        ..restricted()
    }
}

/// The container runtime's default seccomp profile.
pub fn runtime_default() -> SeccompProfile {
    SeccompProfile {
        type_: "RuntimeDefault".to_owned(),
        ..SeccompProfile::default()
    }
}
