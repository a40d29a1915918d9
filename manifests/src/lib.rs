//! pam's manifest layer: kinds, names, state machines, positioned YAML
//! loading, batch validation and JSON Schemas. No I/O, no tokio.

pub mod capabilities;
pub mod conditions;
pub mod duration;
pub mod error;
pub mod event_words;
pub mod kinds;
pub mod limits;
pub mod load;
pub mod names;
pub mod protocol;
pub mod schema;
pub mod state;
pub mod urls;
pub mod validate;
pub mod versions;

pub use error::ManifestError;
pub use kinds::{Kind, Manifest};
pub use load::{parse_documents, Document};
pub use names::{LabelKey, LabelSelector, LabelValue, Labels, Name};
pub use validate::{immutable_changes, validate_batch, ExistingState};
