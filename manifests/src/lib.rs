pub mod state;
pub mod protocol;
