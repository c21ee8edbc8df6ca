//! `pause NAME` / `resume NAME`: sets or removes the annotation that holds the
//! operator's hands off one Database (for maintenance by hand), and says which state
//! the Database is in afterwards, as the API server stored it.

use database_api::Database;
use database_api::constants::PAUSED_ANNOTATION;
use kube::ResourceExt;

use crate::cluster::Target;
use crate::database;
use crate::error::Error;

/// Whether the operator leaves `db` alone: the annotation is exactly `"true"`, as the
/// operator reads it.
pub fn is_paused(db: &Database) -> bool {
    db.annotations().get(PAUSED_ANNOTATION).map(String::as_str) == Some("true")
}

/// The state of `db` as a sentence.
pub fn state(db: &Database) -> String {
    let name = db.name_any();
    if is_paused(db) {
        format!(
            "Database {name} is paused ({PAUSED_ANNOTATION}=true): the operator changes nothing \
             in it until `kubectl database resume {name}`.\n"
        )
    } else {
        format!("Database {name} is not paused: the operator reconciles it.\n")
    }
}

/// Pauses (`paused`) or resumes Database `name`.
pub async fn run(target: &Target, name: &str, paused: bool) -> Result<String, Error> {
    let value = paused.then_some("true");
    let db = database::annotate(target, name, PAUSED_ANNOTATION, value).await?;
    Ok(state(&db))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::instances::fixtures::replicated;

    fn with_annotation(value: &str) -> Database {
        let mut db = replicated();
        db.annotations_mut()
            .insert(PAUSED_ANNOTATION.to_owned(), value.to_owned());
        db
    }

    #[test]
    fn only_true_pauses() {
        assert!(is_paused(&with_annotation("true")));
        assert!(!is_paused(&with_annotation("yes")));
        assert!(!is_paused(&replicated()));
    }

    #[test]
    fn the_state_says_how_to_undo_a_pause() {
        assert_eq!(
            state(&with_annotation("true")),
            "Database orders is paused (mycompany.io/paused=true): the operator changes nothing \
             in it until `kubectl database resume orders`.\n"
        );
        assert_eq!(
            state(&replicated()),
            "Database orders is not paused: the operator reconciles it.\n"
        );
    }
}
