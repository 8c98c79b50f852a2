//! The tonic services: thin shims that validate, call the journey core and
//! convert. The work lives in plain async functions that tests can call.

pub mod deadline;
pub mod validate;
