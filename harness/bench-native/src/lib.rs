//! Benchmarks only: see `benches/native.rs`.
