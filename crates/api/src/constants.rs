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
