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

/// Annotation the controller sets on a mysql Database created before its data moved
/// into a subfolder of the volume (`volume-root`): that data stays where it is.
pub const MYSQL_DATADIR_ANNOTATION: &str = "mycompany.io/mysql-datadir";
/// Value of [`MYSQL_DATADIR_ANNOTATION`] for data at the volume's root.
pub const MYSQL_DATADIR_VOLUME_ROOT: &str = "volume-root";

/// Annotation on a credentials Secret kept after its Database was deleted with its data
/// retained: the version the data was written by.
pub const RETAINED_VERSION_ANNOTATION: &str = "mycompany.io/retained-version";

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
