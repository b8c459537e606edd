//! How a scenario starts its native instances: the application description
//! with its store connection pointed at the scenario's Redis, written once,
//! and each instance (or restarted instance) a `native-fixture` process
//! taking the harness's control token, so the scenario clock reaches it.

use std::path::{Path, PathBuf};
use std::time::Instant;

use super::{NativeError, NativeProcess, fixture_path};
use crate::world::scenario_redis::StoreAddress;

/// Why a native scenario's instances could not be prepared.
#[derive(Debug, thiserror::Error)]
pub enum LaunchError {
    /// The fixture binary was not found.
    #[error(transparent)]
    Native(#[from] NativeError),
    /// The application description could not be rewritten for the scenario's Redis.
    #[error("the application description's store: {0}")]
    Store(String),
    /// The rewritten description could not be written.
    #[error("could not write the application description: {0}")]
    Write(std::io::Error),
}

/// Everything needed to start one more native instance of a scenario.
pub struct NativeLaunch {
    fixture: PathBuf,
    application: PathBuf,
    deployable: String,
    token: String,
    /// The authority the instances trust for a TLS Redis (`SSL_CERT_FILE`).
    trusted_ca: Option<PathBuf>,
    _dir: tempfile::TempDir,
}

impl NativeLaunch {
    /// Writes `application_toml` (its store pointed at `store`, when the
    /// scenario has a Redis) where the instances read it.
    pub fn new(
        application_toml: &str,
        deployable: &str,
        store: Option<&StoreAddress>,
        token: &str,
    ) -> Result<NativeLaunch, LaunchError> {
        let source = match store {
            Some(address) => with_store(application_toml, address).map_err(LaunchError::Store)?,
            None => application_toml.to_owned(),
        };
        let dir = tempfile::Builder::new()
            .prefix("harness-native-")
            .tempdir()
            .map_err(LaunchError::Write)?;
        let application = dir.path().join("application.toml");
        std::fs::write(&application, source).map_err(LaunchError::Write)?;
        Ok(NativeLaunch {
            fixture: fixture_path()?,
            application,
            deployable: deployable.to_owned(),
            token: token.to_owned(),
            trusted_ca: None,
            _dir: dir,
        })
    }

    /// Its instances verify a TLS Redis against `ca` (their `SSL_CERT_FILE`).
    pub fn trusting(self, ca: Option<PathBuf>) -> NativeLaunch {
        NativeLaunch {
            trusted_ca: ca,
            ..self
        }
    }

    /// Starts one instance and waits for it to listen.
    pub async fn start(&self, epoch: Instant) -> Result<NativeProcess, NativeError> {
        NativeProcess::start_controlled(
            &self.fixture,
            &self.application,
            &self.deployable,
            &self.token,
            self.trusted_ca.as_deref(),
            epoch,
        )
        .await
    }

    /// The description the instances read.
    pub fn application(&self) -> &Path {
        &self.application
    }
}

/// The description with its store connection pointed at `address`: `url`
/// for one server, `nodes` for a cluster (whichever it had before is dropped).
pub fn with_store(source: &str, address: &StoreAddress) -> Result<String, String> {
    let mut table: toml::Table = toml::from_str(source).map_err(|e| e.to_string())?;
    let store = table
        .get("rate_limits")
        .and_then(|r| r.get("store"))
        .and_then(|s| s.as_str())
        .ok_or("`rate_limits.store` names no connection")?
        .to_owned();
    let connection = table
        .get_mut("connections")
        .and_then(|c| c.get_mut(&store))
        .and_then(|c| c.as_table_mut())
        .ok_or_else(|| format!("there is no connection `{store}`"))?;
    connection.remove("nodes");
    connection.remove("url");
    let (field, value) = match address {
        StoreAddress::Url(url) => ("url", toml::Value::String(url.clone())),
        StoreAddress::Nodes(nodes) => (
            "nodes",
            toml::Value::Array(nodes.iter().cloned().map(toml::Value::String).collect()),
        ),
    };
    connection.insert(field.into(), value);
    toml::to_string(&table).map_err(|e| e.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    const APP: &str = "name = \"shop\"\n[connections.cache]\ndriver = \"redis\"\nurl = \"redis://old\"\n\
        [rate_limits]\nstore = \"cache\"\n";

    #[test]
    fn the_store_points_at_the_scenarios_redis() {
        let url = with_store(APP, &StoreAddress::Url("redis://127.0.0.1:7".into())).expect("ok");
        assert!(url.contains("url = \"redis://127.0.0.1:7\"") && !url.contains("old"));
        let nodes = StoreAddress::Nodes(vec!["redis://a:1".into(), "redis://b:2".into()]);
        let cluster = with_store(APP, &nodes).expect("ok");
        assert!(
            cluster.contains("nodes = [\"redis://a:1\", \"redis://b:2\"]"),
            "{cluster}"
        );
        assert!(!cluster.contains("url"), "{cluster}");
        assert!(with_store("[rate_limits]\nstore = \"x\"\n", &nodes).is_err());
    }
}
