//! Real `redis-server` processes for the native scenarios and tests: one
//! server (or a three-master Redis Cluster) per scenario, on a free port,
//! with `--save ""` and a temporary directory, killed with the scenario and
//! never outliving the harness ([`die_with_harness`]). Its faults are real:
//! killed (`down`), SIGSTOP (`hanging`) and SIGCONT (`healthy`),
//! `CLIENT PAUSE` (`slow`), a fresh server on the same port (`restarted`),
//! `SCRIPT FLUSH` (`scripts_flushed`).

use std::net::TcpListener;
use std::path::PathBuf;
use std::process::Stdio;
use std::time::{Duration, Instant};

use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;
use tokio::process::{Child, Command};

use crate::workerd::process::die_with_harness;

/// How long a server may take to answer PING, or a cluster to become ok.
const READY_TIMEOUT: Duration = Duration::from_secs(15);

/// Why Redis could not be started or driven.
#[derive(Debug, thiserror::Error)]
pub enum RedisError {
    /// `redis-server` or `redis-cli` is not on PATH.
    #[error("{0} is not on PATH: install Debian's redis-server (`apt-get install redis-server`)")]
    NotInstalled(&'static str),
    /// A process could not be spawned or waited for.
    #[error("could not run {program}: {source}")]
    Spawn {
        /// The program.
        program: &'static str,
        /// The failure.
        source: std::io::Error,
    },
    /// No free port or temporary directory.
    #[error("could not set up a server: {0}")]
    Setup(std::io::Error),
    /// The server did not answer PING (or the cluster did not become ok) in time.
    #[error("redis on port {port} was not ready within {READY_TIMEOUT:?}")]
    NotReady {
        /// The server's port.
        port: u16,
    },
    /// A `redis-cli` command failed.
    #[error("redis-cli {args} failed: {output}")]
    Command {
        /// The command's arguments.
        args: String,
        /// What it wrote.
        output: String,
    },
}

/// `redis-server` or `redis-cli`, installing Debian's `redis-server` package
/// (which brings both) when it is missing, saying so: the tests set up what
/// they need, as the harness installs workerd with npm.
fn program(name: &'static str) -> Result<PathBuf, RedisError> {
    if let Ok(path) = which::which(name) {
        return Ok(path);
    }
    install_redis_server(name)?;
    which::which(name).map_err(|_| RedisError::NotInstalled(name))
}

/// Runs `apt-get update` and `apt-get install redis-server`, once for every
/// test process at the same time: under an exclusive lock in the temporary
/// directory, looking again for `name` once the lock is held.
fn install_redis_server(name: &'static str) -> Result<(), RedisError> {
    let lock = std::fs::File::options()
        .create(true)
        .truncate(false)
        .write(true)
        .open(std::env::temp_dir().join("harness-apt-redis.lock"))
        .and_then(|file| file.lock().map(|()| file))
        .map_err(RedisError::Setup)?;
    if which::which(name).is_ok() {
        return Ok(());
    }
    eprintln!(
        "harness: {name} is not installed; running `apt-get update` and `apt-get install redis-server`"
    );
    for args in [
        &["update", "-qq"][..],
        &["install", "-y", "-qq", "redis-server"][..],
    ] {
        let output = std::process::Command::new("apt-get")
            .args(args)
            .env("DEBIAN_FRONTEND", "noninteractive")
            .output()
            .map_err(|_| RedisError::NotInstalled(name))?;
        if !output.status.success() {
            eprintln!(
                "harness: apt-get {} failed: {}",
                args.join(" "),
                String::from_utf8_lossy(&output.stderr).trim()
            );
            return Err(RedisError::NotInstalled(name));
        }
    }
    drop(lock);
    Ok(())
}

/// A free loopback port below 55536, so a cluster's bus port (+10000) exists too.
pub fn free_port() -> Result<u16, RedisError> {
    loop {
        let listener = TcpListener::bind("127.0.0.1:0").map_err(RedisError::Setup)?;
        let port = listener.local_addr().map_err(RedisError::Setup)?.port();
        if port < 55_536 {
            return Ok(port);
        }
    }
}

/// One running `redis-server`.
pub struct RedisServer {
    child: Option<Child>,
    port: u16,
    cluster: bool,
    dir: tempfile::TempDir,
}

impl RedisServer {
    /// Starts a server on a free port and waits until it answers PING.
    pub async fn start() -> Result<RedisServer, RedisError> {
        Self::start_on(free_port()?, false).await
    }

    async fn start_on(port: u16, cluster: bool) -> Result<RedisServer, RedisError> {
        let dir = tempfile::tempdir().map_err(RedisError::Setup)?;
        let mut server = RedisServer {
            child: None,
            port,
            cluster,
            dir,
        };
        server.spawn().await?;
        Ok(server)
    }

    async fn spawn(&mut self) -> Result<(), RedisError> {
        let mut command = Command::new(program("redis-server")?);
        command
            .args(["--port", &self.port.to_string()])
            .args(["--bind", "127.0.0.1", "--save", "", "--appendonly", "no"])
            .arg("--dir")
            .arg(self.dir.path())
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        if self.cluster {
            command.args([
                "--cluster-enabled",
                "yes",
                "--cluster-config-file",
                "nodes.conf",
            ]);
        }
        die_with_harness(&mut command);
        let child = command.spawn().map_err(|source| RedisError::Spawn {
            program: "redis-server",
            source,
        })?;
        self.child = Some(child);
        let deadline = Instant::now() + READY_TIMEOUT;
        while Instant::now() < deadline {
            if self
                .cli(&["PING"])
                .await
                .is_ok_and(|reply| reply.trim() == "PONG")
            {
                return Ok(());
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        Err(RedisError::NotReady { port: self.port })
    }

    /// Its port.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// Its URL, `redis://127.0.0.1:PORT`.
    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}", self.port)
    }

    /// Its process id, while it runs.
    pub fn pid(&self) -> Option<u32> {
        self.child.as_ref().and_then(Child::id)
    }

    /// Kills it and waits for it to go (`down`): nothing listens on its port.
    pub async fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            // A stopped process dies of SIGKILL too.
            let _ = child.kill().await;
        }
    }

    /// A fresh server on the same port (`restarted`): every count is gone.
    pub async fn restart(&mut self) -> Result<(), RedisError> {
        self.kill().await;
        self.spawn().await
    }

    fn signal(&self, signal: Signal) {
        if let Some(pid) = self.pid().and_then(|p| i32::try_from(p).ok()) {
            let _ = kill(Pid::from_raw(pid), signal);
        }
    }

    /// Stops it with SIGSTOP (`hanging`): connections stay open, nothing answers.
    pub fn hang(&self) {
        self.signal(Signal::SIGSTOP);
    }

    /// Resumes it with SIGCONT (`healthy` after `hanging`).
    pub fn resume(&self) {
        self.signal(Signal::SIGCONT);
    }

    /// Makes it answer nothing for `ms` (`slow`: `CLIENT PAUSE ms ALL`).
    pub async fn pause(&self, ms: u64) -> Result<(), RedisError> {
        self.cli(&["CLIENT", "PAUSE", &ms.to_string(), "ALL"])
            .await
            .map(drop)
    }

    /// Forgets every cached script (`scripts_flushed`): the next EVALSHA is NOSCRIPT.
    pub async fn flush_scripts(&self) -> Result<(), RedisError> {
        self.cli(&["SCRIPT", "FLUSH"]).await.map(drop)
    }

    /// How many times each command ran, from `INFO commandstats`
    /// (`evalsha` -> calls): the round trips a client made.
    pub async fn command_calls(&self, command: &str) -> Result<u64, RedisError> {
        let info = self.cli(&["INFO", "commandstats"]).await?;
        let prefix = format!("cmdstat_{}:calls=", command.to_ascii_lowercase());
        Ok(info
            .lines()
            .find_map(|line| line.trim().strip_prefix(&prefix))
            .and_then(|rest| rest.split(',').next())
            .and_then(|calls| calls.parse().ok())
            .unwrap_or(0))
    }

    /// Runs one `redis-cli` command against it, returning what it printed.
    pub async fn cli(&self, args: &[&str]) -> Result<String, RedisError> {
        cli(&["-p", &self.port.to_string()], args).await
    }
}

async fn cli(connection: &[&str], args: &[&str]) -> Result<String, RedisError> {
    let mut command = Command::new(program("redis-cli")?);
    command.args(connection).args(args).stdin(Stdio::null());
    die_with_harness(&mut command);
    let output = tokio::time::timeout(READY_TIMEOUT, command.output())
        .await
        .map_err(|_| RedisError::Command {
            args: args.join(" "),
            output: "no answer".into(),
        })?
        .map_err(|source| RedisError::Spawn {
            program: "redis-cli",
            source,
        })?;
    let text = String::from_utf8_lossy(&output.stdout).into_owned();
    if output.status.success() && !text.starts_with("ERR") {
        Ok(text)
    } else {
        Err(RedisError::Command {
            args: args.join(" "),
            output: format!("{text}{}", String::from_utf8_lossy(&output.stderr)),
        })
    }
}

/// A real three-master Redis Cluster (`redis-cli --cluster create`), every
/// slot covered, ready to count.
pub struct RedisCluster {
    nodes: Vec<RedisServer>,
}

impl RedisCluster {
    /// Starts three cluster-enabled servers and joins them into one cluster.
    pub async fn start() -> Result<RedisCluster, RedisError> {
        let mut nodes = Vec::new();
        for _ in 0..3 {
            nodes.push(RedisServer::start_on(free_port()?, true).await?);
        }
        let addresses: Vec<String> = nodes
            .iter()
            .map(|n| format!("127.0.0.1:{}", n.port))
            .collect();
        let mut args = vec!["--cluster", "create"];
        args.extend(addresses.iter().map(String::as_str));
        args.push("--cluster-yes");
        cli(&[], &args).await?;
        let deadline = Instant::now() + READY_TIMEOUT;
        for node in &nodes {
            loop {
                let info = node.cli(&["CLUSTER", "INFO"]).await.unwrap_or_default();
                if info.contains("cluster_state:ok") {
                    break;
                }
                if Instant::now() > deadline {
                    return Err(RedisError::NotReady { port: node.port });
                }
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        }
        Ok(RedisCluster { nodes })
    }

    /// The nodes' URLs, as a connection's `nodes = [...]` lists them.
    pub fn urls(&self) -> Vec<String> {
        self.nodes.iter().map(RedisServer::url).collect()
    }

    /// The nodes.
    pub fn nodes(&self) -> &[RedisServer] {
        &self.nodes
    }

    /// The nodes, to kill, stop or pause them.
    pub fn nodes_mut(&mut self) -> &mut [RedisServer] {
        &mut self.nodes
    }
}
