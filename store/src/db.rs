//! Database setup: the embedded migrations and pool construction.

use sqlx::migrate::Migrator;

/// Every file in `migrations/`, embedded at compile time. An applied
/// migration is never edited; schema changes go in a new file.
pub static MIGRATOR: Migrator = sqlx::migrate!("../migrations");
