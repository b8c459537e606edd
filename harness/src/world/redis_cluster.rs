//! A real Redis Cluster as production runs one: three masters sharing the
//! hash slots, each with a replica, a short node timeout so a failover takes
//! seconds, over TLS when asked. What is done to it is what operators do or
//! suffer: a master killed and its replica promoted (a failover), and slots
//! moved from one master to another (a resharding, the steps `redis-cli
//! --cluster reshard` takes: `CLUSTER SETSLOT ... IMPORTING` / `MIGRATING`,
//! `MIGRATE`, `CLUSTER SETSLOT ... NODE`).

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::world::redis::{RedisError, RedisServer};
use crate::world::tls::TlsFiles;

/// The hash slots of a Redis Cluster, shared out among its masters.
const CLUSTER_SLOTS: u16 = 16_384;
/// The cluster's masters (each with one replica).
const MASTERS: usize = 3;
/// How long a cluster may take to become ok, or a failover to end: on a
/// loaded machine a TLS cluster took over 20 s to settle.
const SETTLE_TIMEOUT: Duration = Duration::from_secs(60);
/// How often a settling cluster is asked whether it is ok.
const SETTLE_POLL: Duration = Duration::from_millis(20);
/// How long one MIGRATE may take, in ms.
const MIGRATE_TIMEOUT_MS: &str = "5000";

/// One node: its server and its id in the cluster.
struct Node {
    server: RedisServer,
    id: String,
}

/// A real Redis Cluster of three masters and a replica each.
pub struct RedisCluster {
    /// Masters first (in slot order), then the replica of each, in the same order.
    nodes: Vec<Node>,
    /// Whether it speaks TLS to its clients (and among its nodes).
    tls: bool,
    /// The node killed by [`RedisCluster::fail_over`], until its replica is
    /// promoted and it is back ([`RedisCluster::heal`]).
    failed: Option<usize>,
}

/// A slot moved, or half moved, by [`RedisCluster::start_resharding`] and [`RedisCluster::finish_resharding`].
#[derive(Debug, Clone, PartialEq, Eq)]
struct Move {
    slot: u16,
    from: usize,
    to: usize,
}

impl RedisCluster {
    /// Starts six cluster-enabled servers at once (speaking TLS with
    /// `tls`' certificate when given) and joins them: each master takes a
    /// third of the slots, every node meets every other, each replica
    /// follows its master, and the cluster is ready when every node says
    /// `cluster_state:ok` and every replica's link to its master is up.
    pub async fn start(tls: Option<Arc<TlsFiles>>) -> Result<RedisCluster, RedisError> {
        // Two servers given the same port: one exits, and tries another.
        let servers = futures::future::try_join_all(
            (0..2 * MASTERS).map(|_| RedisServer::start_free(true, tls.clone())),
        )
        .await?;
        let mut nodes = Vec::with_capacity(servers.len());
        for server in servers {
            let id = server.command(&["CLUSTER", "MYID"]).await?;
            nodes.push(Node { server, id });
        }
        let cluster = RedisCluster {
            nodes,
            tls: tls.is_some(),
            failed: None,
        };
        cluster.share_slots().await?;
        cluster.meet().await?;
        cluster.settle(|_| true).await?;
        for (replica, master) in cluster.nodes[MASTERS..].iter().zip(&cluster.nodes) {
            replica
                .server
                .command(&["CLUSTER", "REPLICATE", &master.id])
                .await?;
        }
        cluster.settle(|_| true).await?;
        Ok(cluster)
    }

    /// Gives each master a third of the slots and a config epoch of its own
    /// (as `redis-cli --cluster create` does: with all at 0 the nodes first
    /// settle the collision among themselves).
    async fn share_slots(&self) -> Result<(), RedisError> {
        let share = CLUSTER_SLOTS / MASTERS as u16;
        for (i, master) in self.nodes[..MASTERS].iter().enumerate() {
            let first = share * i as u16;
            let last = if i + 1 == MASTERS {
                CLUSTER_SLOTS - 1
            } else {
                first + share - 1
            };
            let (first, last) = (first.to_string(), last.to_string());
            master
                .server
                .command(&["CLUSTER", "ADDSLOTSRANGE", &first, &last])
                .await?;
            master
                .server
                .command(&["CLUSTER", "SET-CONFIG-EPOCH", &(i + 1).to_string()])
                .await?;
        }
        Ok(())
    }

    /// Every node meets every other, so none waits for gossip to learn of
    /// another (with one meeting all, a node now and then came ready a
    /// second or more after the others). Over TLS a node is met at its TLS
    /// port: the bus of a TLS cluster is beside that port.
    async fn meet(&self) -> Result<(), RedisError> {
        for (i, node) in self.nodes.iter().enumerate() {
            for other in &self.nodes[i + 1..] {
                let port = match other.server.tls_port() {
                    Some(port) if self.tls => port,
                    _ => other.server.port(),
                };
                node.server
                    .command(&["CLUSTER", "MEET", "127.0.0.1", &port.to_string()])
                    .await?;
            }
        }
        Ok(())
    }

    /// Waits until every running node knows every node, says
    /// `cluster_state:ok`, has every replica's link up, and `also` holds
    /// of its `CLUSTER NODES`.
    async fn settle(&self, also: impl Fn(&str) -> bool) -> Result<(), RedisError> {
        let deadline = Instant::now() + SETTLE_TIMEOUT;
        for (i, node) in self.nodes.iter().enumerate() {
            if self.failed == Some(i) {
                continue;
            }
            loop {
                if self.node_settled(node, &also).await {
                    break;
                }
                if Instant::now() > deadline {
                    return Err(RedisError::NotReady {
                        port: node.server.port(),
                        within: SETTLE_TIMEOUT,
                    });
                }
                tokio::time::sleep(SETTLE_POLL).await;
            }
        }
        Ok(())
    }

    async fn node_settled(&self, node: &Node, also: &impl Fn(&str) -> bool) -> bool {
        let server = &node.server;
        let info = server.command(&["CLUSTER", "INFO"]).await;
        let known = server.command(&["CLUSTER", "NODES"]).await;
        let replication = server.command(&["INFO", "replication"]).await;
        let (Ok(info), Ok(known), Ok(replication)) = (info, known, replication) else {
            return false;
        };
        let is_replica = replication.contains("role:slave");
        info.contains("cluster_state:ok")
            && known.lines().count() == self.nodes.len()
            && (!is_replica || replication.contains("master_link_status:up"))
            && also(&known)
    }

    /// The URLs the deployable is given, as a connection's `nodes = [...]`
    /// lists them: the masters' (`rediss://` at their TLS ports over TLS).
    pub fn urls(&self) -> Vec<String> {
        self.nodes[..MASTERS]
            .iter()
            .map(|node| match node.server.tls_port() {
                Some(port) if self.tls => format!("rediss://127.0.0.1:{port}"),
                _ => node.server.url(),
            })
            .collect()
    }

    /// Every node, masters and replicas, to kill, stop or pause them all.
    pub fn servers_mut(&mut self) -> impl Iterator<Item = &mut RedisServer> {
        self.nodes.iter_mut().map(|node| &mut node.server)
    }

    /// Every node, masters and replicas, to ask them all.
    pub fn servers(&self) -> impl Iterator<Item = &RedisServer> {
        self.nodes.iter().map(|node| &node.server)
    }

    /// The nodes that serve clients' writes now (a promoted replica among
    /// them), to count their script calls.
    pub async fn masters(&self) -> Result<Vec<&RedisServer>, RedisError> {
        let mut masters = Vec::new();
        for (i, node) in self.nodes.iter().enumerate() {
            if self.failed != Some(i) && self.is_master(node).await? {
                masters.push(&node.server);
            }
        }
        Ok(masters)
    }

    async fn is_master(&self, node: &Node) -> Result<bool, RedisError> {
        let replication = node.server.command(&["INFO", "replication"]).await?;
        Ok(replication.contains("role:master"))
    }

    /// `failed_over`: kills the master holding the most keys (the one a
    /// scenario's traffic went to) with SIGKILL once its replica has every
    /// write it took, as a crash of a healthy master finds it. The
    /// others mark it failed after the node timeout and its replica is
    /// promoted; [`RedisCluster::heal`] waits for that.
    pub async fn fail_over(&mut self) -> Result<(), RedisError> {
        if let Some(failed) = self.failed {
            // With two masters of three down, no replica can be elected.
            return Err(RedisError::Command {
                command: "failed_over".into(),
                port: self.nodes[failed].server.port(),
                reason: "a master is failed over already: `healthy` first".into(),
            });
        }
        let mut busiest = None;
        for (i, node) in self.nodes.iter().enumerate() {
            if self.failed == Some(i) || !self.is_master(node).await? {
                continue;
            }
            let keys = key_count(&node.server).await?;
            if busiest.is_none_or(|(_, most)| keys > most) {
                busiest = Some((i, keys));
            }
        }
        let Some((victim, _)) = busiest else {
            return Ok(());
        };
        self.replicated(&self.nodes[victim].server).await?;
        self.nodes[victim].server.kill().await;
        self.failed = Some(victim);
        Ok(())
    }

    /// Waits until `master`'s replica has every write the master took, by
    /// the replication offsets `INFO replication` gives (`WAIT` would only
    /// wait for the writes of its own connection, and the harness's wrote
    /// none).
    async fn replicated(&self, master: &RedisServer) -> Result<(), RedisError> {
        let deadline = Instant::now() + SETTLE_TIMEOUT;
        loop {
            let info = master.command(&["INFO", "replication"]).await?;
            let field = |line: &str, name: &str| -> Option<u64> {
                line.split(',')
                    .find_map(|part| part.strip_prefix(name))
                    .and_then(|value| value.trim().parse().ok())
            };
            let offset = info
                .lines()
                .find_map(|line| line.strip_prefix("master_repl_offset:"))
                .and_then(|value| value.trim().parse::<u64>().ok());
            let replica = info
                .lines()
                .filter(|line| line.starts_with("slave"))
                .filter_map(|line| field(line, "offset="))
                .max();
            if let (Some(offset), Some(replica)) = (offset, replica)
                && replica >= offset
            {
                return Ok(());
            }
            if Instant::now() > deadline {
                return Err(RedisError::NotReady {
                    port: master.port(),
                    within: SETTLE_TIMEOUT,
                });
            }
            tokio::time::sleep(SETTLE_POLL).await;
        }
    }

    /// `healthy` after `failed_over`: waits until the killed master's
    /// replica is promoted and every other node says the cluster is ok,
    /// then starts the killed one again, which comes back as the new
    /// master's replica (its counts were on the replica already).
    pub async fn heal(&mut self) -> Result<(), RedisError> {
        let Some(victim) = self.failed else {
            return Ok(());
        };
        self.promoted().await?;
        self.nodes[victim].server.restart().await?;
        self.failed = None;
        // Back from its nodes.conf it still takes itself for the slots'
        // master, empty (nothing was saved), until the others tell it
        // otherwise: settled only once every node, itself included, lists
        // it as a replica.
        let back = self.nodes[victim].id.clone();
        self.settle(|nodes| {
            nodes
                .lines()
                .find(|line| line.starts_with(back.as_str()))
                .is_some_and(|line| line.contains("slave"))
        })
        .await
    }

    /// Waits, after [`RedisCluster::fail_over`], until the killed master's
    /// replica is promoted: every running node flags the dead one failed,
    /// sees it hold no slots (a line of `CLUSTER NODES` lists its slots
    /// after 8 fields) and says the cluster is ok.
    pub async fn promoted(&self) -> Result<(), RedisError> {
        let Some(victim) = self.failed else {
            return Ok(());
        };
        let dead = self.nodes[victim].id.as_str();
        self.settle(|nodes| {
            nodes
                .lines()
                .find(|line| line.starts_with(dead))
                .is_some_and(|line| line.contains("fail") && line.split(' ').count() <= 8)
        })
        .await
    }

    /// `migrating`: starts moving every slot that holds keys to the next
    /// master, as a resharding does, and stops half way: the new master
    /// imports the slot, the old one migrates it, and every key of the slot
    /// is moved (in one MIGRATE, so a request's keys stay together), but
    /// the slot still belongs to the old master. A client asking the old
    /// master is sent on with ASK.
    pub async fn start_resharding(&self) -> Result<(), RedisError> {
        for moving in self.slots_to_move().await? {
            let (from, to) = (&self.nodes[moving.from], &self.nodes[moving.to]);
            let slot = moving.slot.to_string();
            to.server
                .command(&["CLUSTER", "SETSLOT", &slot, "IMPORTING", &from.id])
                .await?;
            from.server
                .command(&["CLUSTER", "SETSLOT", &slot, "MIGRATING", &to.id])
                .await?;
            self.migrate_keys(&moving).await?;
        }
        Ok(())
    }

    /// `resharded`: ends a resharding: every slot being moved (after
    /// `migrating`), or else every slot that holds keys, belongs to its new
    /// master, told to the new master, the old one and the third (as
    /// `redis-cli` does). A client asking the old master is sent on with MOVED.
    pub async fn finish_resharding(&mut self) -> Result<(), RedisError> {
        if self.slots_being_moved().await?.is_empty() {
            self.start_resharding().await?;
        }
        for moving in self.slots_being_moved().await? {
            let slot = moving.slot.to_string();
            let owner = self.nodes[moving.to].id.clone();
            let order = [moving.to, moving.from]
                .into_iter()
                .chain((0..self.nodes.len()).filter(|i| *i != moving.to && *i != moving.from));
            for i in order {
                if self.failed == Some(i) || !self.is_master(&self.nodes[i]).await? {
                    continue;
                }
                self.nodes[i]
                    .server
                    .command(&["CLUSTER", "SETSLOT", &slot, "NODE", &owner])
                    .await?;
            }
        }
        self.settle(|nodes| !nodes.contains("->-") && !nodes.contains("-<-"))
            .await
    }

    /// Moves every key of `moving`'s slot to its new master, in one MIGRATE.
    async fn migrate_keys(&self, moving: &Move) -> Result<(), RedisError> {
        let (from, to) = (&self.nodes[moving.from], &self.nodes[moving.to]);
        let slot = moving.slot.to_string();
        let keys = from
            .server
            .list(&["CLUSTER", "GETKEYSINSLOT", &slot, "1000"])
            .await?;
        if keys.is_empty() {
            return Ok(());
        }
        // Node to node, a TLS cluster speaks TLS (MIGRATE included).
        let port = match to.server.tls_port() {
            Some(port) if self.tls => port,
            _ => to.server.port(),
        }
        .to_string();
        let mut migrate = vec![
            "MIGRATE",
            "127.0.0.1",
            &port,
            "",
            "0",
            MIGRATE_TIMEOUT_MS,
            "KEYS",
        ];
        migrate.extend(keys.iter().map(String::as_str));
        from.server.command(&migrate).await.map(drop)
    }

    /// Every slot that holds a key, with its master and the next master
    /// (in the nodes' order) it moves to.
    async fn slots_to_move(&self) -> Result<Vec<Move>, RedisError> {
        let mut masters = Vec::new();
        for (i, node) in self.nodes.iter().enumerate() {
            if self.failed != Some(i) && self.is_master(node).await? {
                masters.push(i);
            }
        }
        let mut moves = BTreeMap::new();
        for (at, &from) in masters.iter().enumerate() {
            let to = masters[(at + 1) % masters.len()];
            let server = &self.nodes[from].server;
            for key in server.list(&["KEYS", "*"]).await? {
                let slot = server.command(&["CLUSTER", "KEYSLOT", &key]).await?;
                let slot: u16 = slot.parse().map_err(|_| RedisError::Command {
                    command: "CLUSTER KEYSLOT".into(),
                    port: server.port(),
                    reason: format!("not a slot: {slot}"),
                })?;
                moves.entry(slot).or_insert(Move { slot, from, to });
            }
        }
        Ok(moves.into_values().collect())
    }

    /// The slots a `migrating` left half moved, read from the old masters'
    /// `CLUSTER NODES` (`[slot->-id]`).
    async fn slots_being_moved(&self) -> Result<Vec<Move>, RedisError> {
        let mut moves = Vec::new();
        for (from, node) in self.nodes.iter().enumerate() {
            if self.failed == Some(from) {
                continue;
            }
            let known = node.server.command(&["CLUSTER", "NODES"]).await?;
            let Some(own) = known.lines().find(|line| line.contains("myself")) else {
                continue;
            };
            for field in own.split(' ') {
                let Some((slot, to_id)) = field
                    .strip_prefix('[')
                    .and_then(|f| f.strip_suffix(']'))
                    .and_then(|f| f.split_once("->-"))
                else {
                    continue;
                };
                let to = self.nodes.iter().position(|n| n.id == to_id);
                if let (Ok(slot), Some(to)) = (slot.parse(), to) {
                    moves.push(Move { slot, from, to });
                }
            }
        }
        Ok(moves)
    }
}

/// How many keys a server holds.
async fn key_count(server: &RedisServer) -> Result<u64, RedisError> {
    let size = server.command(&["DBSIZE"]).await?;
    Ok(size.trim().parse().unwrap_or(0))
}
