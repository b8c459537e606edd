//! The world a scenario runs in: workerd (found, configured, started), the
//! count servers that keep an emulated binding's count (the harness's own
//! and Cloudflare's simulator, the reference core), `native-fixture`
//! instances, real `redis-server`s, the wasm build of the Workers, the npm
//! pins installed when missing, where the repository keeps its files, and
//! Cloudflare itself (its API and a Worker's tail). Processes, files and
//! networks: the I/O.
//!
//! It may use [`crate::language`] and nothing above; what a scenario asks of
//! the world comes down as plain values (bindings, behaviours, addresses).

pub mod cargo_build;
pub mod cloudflare;
pub mod instance;
pub mod metrics;
pub mod native;
pub mod npm;
pub mod paths;
pub mod proc;
pub mod process;
pub mod redis;
pub mod redis_cluster;
pub mod scenario_redis;
pub mod text;
pub mod tls;
pub mod wasm;
pub mod workerd;
