//! Built for wasm32 only.
