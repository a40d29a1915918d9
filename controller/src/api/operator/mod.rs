//! What operators read and write (pamctl, the dashboard): the stored
//! objects of every kind ([`served`], [`objects`]) and each kind's own
//! routes, apply, the verbs on objects ([`actions`]), events, charts and
//! attach. Each handler extracts, authorizes, calls the layer below and
//! answers.

pub mod actions;
pub mod apply;
pub mod attach;
pub mod charts;
pub mod events;
pub mod hosts;
pub mod list;
pub mod lookup;
pub mod objects;
pub mod projects;
pub mod runs;
pub mod schedules;
pub mod secrets;
pub mod served;
pub mod sources;
pub mod tasks;
pub mod tokens;
pub mod webhooks;
