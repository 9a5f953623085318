//! toy
