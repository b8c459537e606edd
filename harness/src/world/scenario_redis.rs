//! A native scenario's Redis: one real `redis-server` ([`crate::world::redis`])
//! or a real cluster of three masters and their replicas
//! ([`crate::world::redis_cluster`]) started for the scenario and stopped with it,
//! or nothing at all for a `missing` store, and the store behaviours of the
//! scenario language done to it for real ([`RedisBehaviour`]).

use std::path::PathBuf;
use std::sync::Arc;

use crate::language::scenario::{RedisBehaviour, RedisCalls, RedisKind, RedisTls};
use crate::world::redis::{RedisError, RedisServer};
use crate::world::redis_cluster::RedisCluster;
use crate::world::tls::{TlsError, TlsFiles};

/// Where the native instances' store connection points.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StoreAddress {
    /// `url = "redis://…"`: one server (or nothing listening there).
    Url(String),
    /// `nodes = [...]`: a cluster's nodes.
    Nodes(Vec<String>),
}

enum Topology {
    /// Boxed: a server is far larger than the other two.
    Server(Box<RedisServer>),
    Cluster(RedisCluster),
    /// Nothing listens at this port, from start to end: the harness holds
    /// it bound (never listening), so a connection to it is refused and no
    /// other process of the run can listen there meanwhile (another
    /// scenario's `redis-server`, or a cluster node's bus at its port +
    /// 10000, once answered on a port that was only picked free).
    Missing(HeldPort),
}

/// A local TCP port bound and never listened on: connections to it are
/// refused for as long as it is held, and nothing else can bind it.
struct HeldPort {
    port: u16,
    _socket: socket2::Socket,
}

impl HeldPort {
    fn bind() -> Result<HeldPort, RedisError> {
        use socket2::{Domain, Socket, Type};
        // No SO_REUSEADDR: a listener that sets it (redis-server does) still
        // conflicts with this socket.
        let socket = Socket::new(Domain::IPV4, Type::STREAM, None).map_err(RedisError::Setup)?;
        let any_port = std::net::SocketAddr::from(([127, 0, 0, 1], 0));
        socket.bind(&any_port.into()).map_err(RedisError::Setup)?;
        let port = socket
            .local_addr()
            .map_err(RedisError::Setup)?
            .as_socket()
            .map(|address| address.port())
            .ok_or_else(|| RedisError::Setup(std::io::Error::other("not an IP socket")))?;
        Ok(HeldPort {
            port,
            _socket: socket,
        })
    }
}

/// The Redis of one native scenario.
pub struct ScenarioRedis {
    topology: Topology,
    /// Its certificates and whom the instances trust, when it speaks TLS.
    tls: Option<(Arc<TlsFiles>, RedisTls)>,
}

/// Why a store behaviour could not be done.
#[derive(Debug, thiserror::Error)]
pub enum ScenarioRedisError {
    /// Starting, stopping or commanding redis-server failed.
    #[error(transparent)]
    Redis(#[from] RedisError),
    /// A TLS Redis's certificates could not be made.
    #[error(transparent)]
    Tls(#[from] TlsError),
    /// The behaviour makes no sense for this store (the scenario's checks refuse these first).
    #[error("`{behaviour}` cannot be done to {store}")]
    Unsupported {
        /// The behaviour.
        behaviour: RedisBehaviour,
        /// The store, such as `a missing store`.
        store: &'static str,
    },
}

impl ScenarioRedis {
    /// Starts the scenario's Redis (`kind`, speaking TLS when `tls` says
    /// whom the instances trust) already behaving as `initial`.
    pub async fn start(
        kind: RedisKind,
        tls: Option<RedisTls>,
        initial: RedisBehaviour,
    ) -> Result<ScenarioRedis, ScenarioRedisError> {
        let tls = match tls {
            Some(trust) => Some((Arc::new(TlsFiles::make()?), trust)),
            None => None,
        };
        let topology = match (initial, kind, &tls) {
            (RedisBehaviour::Missing, _, _) => Topology::Missing(HeldPort::bind()?),
            (_, RedisKind::Server, Some((files, _))) => {
                Topology::Server(Box::new(RedisServer::start_tls(files.clone()).await?))
            }
            (_, RedisKind::Server, None) => Topology::Server(Box::new(RedisServer::start().await?)),
            (_, RedisKind::Cluster, files) => Topology::Cluster(
                RedisCluster::start(files.as_ref().map(|(files, _)| files.clone())).await?,
            ),
        };
        let mut redis = ScenarioRedis { topology, tls };
        match initial {
            RedisBehaviour::Healthy | RedisBehaviour::Missing => {}
            other => redis.apply(other).await?,
        }
        Ok(redis)
    }

    /// Where the instances connect (a TLS server's TLS port).
    pub fn address(&self) -> StoreAddress {
        match &self.topology {
            Topology::Server(server) => {
                StoreAddress::Url(server.tls_url().unwrap_or_else(|| server.url()))
            }
            Topology::Cluster(cluster) => StoreAddress::Nodes(cluster.urls()),
            Topology::Missing(held) => {
                StoreAddress::Url(format!("redis://127.0.0.1:{}", held.port))
            }
        }
    }

    /// The authority file the instances trust (their `SSL_CERT_FILE`), for
    /// a TLS Redis: the one that signed its certificate, or another.
    pub fn trusted_ca(&self) -> Option<PathBuf> {
        self.tls.as_ref().map(|(files, trust)| match trust {
            RedisTls::Trusted => files.ca(),
            RedisTls::Untrusted => files.other_ca(),
        })
    }

    fn servers_mut(&mut self) -> Vec<&mut RedisServer> {
        match &mut self.topology {
            Topology::Server(server) => vec![server],
            Topology::Cluster(cluster) => cluster.servers_mut().collect(),
            Topology::Missing(_) => Vec::new(),
        }
    }

    fn servers(&self) -> Vec<&RedisServer> {
        match &self.topology {
            Topology::Server(server) => vec![server],
            Topology::Cluster(cluster) => cluster.servers().collect(),
            Topology::Missing(_) => Vec::new(),
        }
    }

    /// Does `behaviour` to every server of the store.
    pub async fn apply(&mut self, behaviour: RedisBehaviour) -> Result<(), ScenarioRedisError> {
        let unsupported = |store| ScenarioRedisError::Unsupported { behaviour, store };
        match (&mut self.topology, behaviour) {
            (Topology::Missing(_), _) => return Err(unsupported("a missing store")),
            (Topology::Cluster(_), RedisBehaviour::Restarted) => {
                return Err(unsupported("a cluster"));
            }
            (_, RedisBehaviour::Missing) => return Err(unsupported("a running store")),
            (Topology::Cluster(cluster), RedisBehaviour::FailedOver) => {
                return Ok(cluster.fail_over().await?);
            }
            (Topology::Cluster(cluster), RedisBehaviour::Migrating) => {
                return Ok(cluster.start_resharding().await?);
            }
            (Topology::Cluster(cluster), RedisBehaviour::Resharded) => {
                return Ok(cluster.finish_resharding().await?);
            }
            (
                Topology::Server(_),
                RedisBehaviour::FailedOver | RedisBehaviour::Migrating | RedisBehaviour::Resharded,
            ) => return Err(unsupported("one server")),
            // A failed-over master is started again only once its replica
            // is promoted; then every node is resumed as below.
            (Topology::Cluster(cluster), RedisBehaviour::Healthy) => cluster.heal().await?,
            _ => {}
        }
        for server in self.servers_mut() {
            apply_to_server(server, behaviour).await?;
        }
        Ok(())
    }

    /// How many EVALSHA and EVAL calls the store has run so far (`INFO
    /// commandstats`, summed over a cluster's nodes: a replica is sent a
    /// script's writes, never the script, so it adds none).
    pub async fn calls(&self) -> Result<RedisCalls, ScenarioRedisError> {
        let (mut evalsha, mut eval) = (0, 0);
        for server in self.servers() {
            let calls = server.commands_calls(&["evalsha", "eval"]).await?;
            evalsha += calls[0];
            eval += calls[1];
        }
        Ok(RedisCalls {
            evalsha: Some(evalsha),
            eval: Some(eval),
        })
    }

    /// Stops every server and waits for them to go.
    pub async fn stop(mut self) {
        for server in self.servers_mut() {
            server.kill().await;
        }
    }
}

async fn apply_to_server(
    server: &mut RedisServer,
    behaviour: RedisBehaviour,
) -> Result<(), RedisError> {
    match behaviour {
        RedisBehaviour::Healthy if server.pid().is_none() => server.restart().await,
        RedisBehaviour::Healthy => {
            server.resume();
            server.unpause().await
        }
        RedisBehaviour::Down => {
            server.kill().await;
            Ok(())
        }
        RedisBehaviour::Hanging => {
            server.hang();
            Ok(())
        }
        RedisBehaviour::Slow { ms } => server.pause(ms).await,
        RedisBehaviour::Restarted => server.restart().await,
        RedisBehaviour::ScriptsFlushed => server.flush_scripts().await,
        // Refused or done by `apply` before any server is touched.
        RedisBehaviour::Missing
        | RedisBehaviour::FailedOver
        | RedisBehaviour::Migrating
        | RedisBehaviour::Resharded => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::HeldPort;
    use std::io::ErrorKind;
    use std::net::{TcpListener, TcpStream};

    #[test]
    fn a_held_port_refuses_connections_and_cannot_be_listened_on() {
        let held = HeldPort::bind().expect("a port to hold");
        let error = TcpStream::connect(("127.0.0.1", held.port)).expect_err("nothing listens");
        assert_eq!(error.kind(), ErrorKind::ConnectionRefused);
        // std's listener sets SO_REUSEADDR, as redis-server's does.
        let taken = TcpListener::bind(("127.0.0.1", held.port)).expect_err("the port is held");
        assert_eq!(taken.kind(), ErrorKind::AddrInUse);
        drop(held);
    }
}
