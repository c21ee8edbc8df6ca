//! Names shared by the controller, the webhook and the manifests.

/// API group of the `Database` resource.
pub const GROUP: &str = "mycompany.io";
/// API version of the `Database` resource.
pub const VERSION: &str = "v1";
/// Name of the CustomResourceDefinition (`<plural>.<group>`).
pub const CRD_NAME: &str = "databases.mycompany.io";
/// Finalizer the controller holds until a Database's data has been dealt with.
pub const FINALIZER: &str = "databases.mycompany.io/finalizer";
/// The one field manager the controller applies with.
pub const FIELD_MANAGER: &str = "database-controller";
/// Annotation that pauses reconciliation of one Database when set to `"true"`.
pub const PAUSED_ANNOTATION: &str = "mycompany.io/paused";

/// The recommended `app.kubernetes.io/*` label keys and the values the operator uses.
pub mod labels {
    /// The engine (`postgres`, `mysql`, `mongodb`).
    pub const NAME: &str = "app.kubernetes.io/name";
    /// The Database's name.
    pub const INSTANCE: &str = "app.kubernetes.io/instance";
    /// The engine version.
    pub const VERSION: &str = "app.kubernetes.io/version";
    /// Always [`COMPONENT_VALUE`] on objects the operator creates.
    pub const COMPONENT: &str = "app.kubernetes.io/component";
    /// Always [`MANAGED_BY_VALUE`] on objects the operator creates.
    pub const MANAGED_BY: &str = "app.kubernetes.io/managed-by";
    /// Value of [`COMPONENT`].
    pub const COMPONENT_VALUE: &str = "database";
    /// Value of [`MANAGED_BY`].
    pub const MANAGED_BY_VALUE: &str = "database-operator";
}
