//! Real `redis-server` processes for the native scenarios and tests: one
//! server (or the nodes of a [`crate::world::redis_cluster`]) per scenario, on a free port,
//! with `--save ""` and a temporary directory, killed with the scenario and
//! never outliving the harness ([`die_with_harness`]). Its faults are real:
//! killed (`down`), SIGSTOP (`hanging`) and SIGCONT (`healthy`),
//! `CLIENT PAUSE` (`slow`), a fresh server on the same port (`restarted`),
//! `SCRIPT FLUSH` (`scripts_flushed`). The harness drives them through the
//! `redis` crate (a process per command cost the suite ~4 % of its CPU).

use crate::world::process::child_command;
use std::net::TcpListener;
use std::path::PathBuf;
use std::process::Stdio;
use std::sync::Arc;
use std::time::{Duration, Instant};

use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;
use tokio::process::{Child, Command};

use crate::world::process::die_with_harness;
use crate::world::tls::TlsFiles;

/// How long a server may take to answer PING, or a cluster to become ok;
/// and how long one command may take (a stopped server answers nothing).
const READY_TIMEOUT: Duration = Duration::from_secs(15);
/// How often a starting server or cluster is asked whether it is ready.
const READY_POLL: Duration = Duration::from_millis(10);
/// How long one PING of a starting server may take before it is asked again.
const PING_TIMEOUT: Duration = Duration::from_secs(1);
/// How many free ports a new server tries: another process may take the
/// port between [`free_port`] and the server's bind (the server then exits).
const START_ATTEMPTS: usize = 5;
/// How long a cluster node may be silent before the others take it for
/// failed and its replica is promoted (Redis's default is 15 s; short here so
/// a failover takes seconds, as the failover scenarios wait for one).
const CLUSTER_NODE_TIMEOUT_MS: u64 = 1_000;

/// Why Redis could not be started or driven.
#[derive(Debug, thiserror::Error)]
pub enum RedisError {
    /// `redis-server` is not on PATH, and the harness could not install it.
    #[error(
        "redis-server is not installed and {why}: run `{INSTALL_COMMAND}` (or put Redis 7's redis-server on PATH), then run again"
    )]
    NotInstalled {
        /// Why it could not be installed here.
        why: String,
    },
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
    #[error("redis on port {port} was not ready within {within:?}")]
    NotReady {
        /// The server's port.
        port: u16,
        /// How long it was waited for.
        within: Duration,
    },
    /// The server exited before it answered PING (its port taken, for one).
    #[error(
        "redis-server on port {port} exited before it was ready ({status}); its log ends:\n{log}"
    )]
    Exited {
        /// The server's port.
        port: u16,
        /// Its exit status.
        status: String,
        /// The end of its log file.
        log: String,
    },
    /// A command failed, or got no answer within [`READY_TIMEOUT`].
    #[error("redis command {command} on port {port} failed: {reason}")]
    Command {
        /// The command and its arguments.
        command: String,
        /// The server's port.
        port: u16,
        /// Redis's error, or "no answer".
        reason: String,
    },
}

/// The command a person runs to install `redis-server` where the harness
/// cannot (Debian's package; Ubuntu's is the same).
pub const INSTALL_COMMAND: &str = "sudo apt-get install redis-server";

/// What the harness does about a missing `redis-server`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MissingRedis {
    /// Install Debian's package with apt-get, as the README says the tests do.
    AptGet,
    /// Stop, saying why it cannot install it here.
    Refuse(String),
}

/// Root with apt-get installs Debian's package (this project's machines and
/// CI); anyone else is told the one command to run, before any scenario
/// starts, rather than sudo being asked for behind their back.
pub fn missing_redis(is_root: bool, has_apt_get: bool) -> MissingRedis {
    match (is_root, has_apt_get) {
        (true, true) => MissingRedis::AptGet,
        (false, _) => MissingRedis::Refuse("installing it needs root".into()),
        (true, false) => MissingRedis::Refuse("this machine has no apt-get".into()),
    }
}

/// `redis-server`, installing Debian's `redis-server` package when it is
/// missing and the harness runs as root with apt-get, saying so: the tests
/// set up what they need, as the harness installs workerd with npm.
pub fn redis_server() -> Result<PathBuf, RedisError> {
    const NAME: &str = "redis-server";
    if let Ok(path) = which::which(NAME) {
        return Ok(path);
    }
    let is_root = nix::unistd::geteuid().is_root();
    match missing_redis(is_root, which::which("apt-get").is_ok()) {
        MissingRedis::AptGet => install_redis_server(NAME)?,
        MissingRedis::Refuse(why) => return Err(RedisError::NotInstalled { why }),
    }
    which::which(NAME).map_err(|_| RedisError::NotInstalled {
        why: "apt-get installed no redis-server on PATH".into(),
    })
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
        let output = child_command("apt-get")
            .args(args)
            .env("DEBIAN_FRONTEND", "noninteractive")
            .output()
            .map_err(|e| RedisError::NotInstalled {
                why: format!("apt-get could not be run ({e})"),
            })?;
        if !output.status.success() {
            let said = String::from_utf8_lossy(&output.stderr);
            let said = said.lines().last().unwrap_or("").trim();
            return Err(RedisError::NotInstalled {
                why: format!("`apt-get {}` failed ({said})", args.join(" ")),
            });
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
    /// A TLS port beside the plain one, where the deployable connects; the
    /// plain port stays the harness's own (PING, INFO, CLIENT PAUSE).
    tls: Option<TlsPort>,
    dir: tempfile::TempDir,
}

/// A server's TLS port and the certificates it shows there.
struct TlsPort {
    port: u16,
    files: Arc<TlsFiles>,
}

impl RedisServer {
    /// Starts a server on a free port and waits until it answers PING.
    pub async fn start() -> Result<RedisServer, RedisError> {
        Self::start_free(false, None).await
    }

    /// Starts a server that also speaks TLS, with `files`' certificate, on
    /// a port of its own ([`RedisServer::tls_url`]).
    pub async fn start_tls(files: Arc<TlsFiles>) -> Result<RedisServer, RedisError> {
        Self::start_free(false, Some(files)).await
    }

    /// Starts a server on a free port, on another one when the server exits
    /// before it is ready (the port was taken meanwhile).
    pub(crate) async fn start_free(
        cluster: bool,
        tls: Option<Arc<TlsFiles>>,
    ) -> Result<RedisServer, RedisError> {
        let mut attempt = 1;
        loop {
            let tls = match &tls {
                Some(files) => Some(TlsPort {
                    port: free_port()?,
                    files: files.clone(),
                }),
                None => None,
            };
            match Self::start_on(free_port()?, cluster, tls).await {
                Err(RedisError::Exited { .. }) if attempt < START_ATTEMPTS => attempt += 1,
                started => return started,
            }
        }
    }

    async fn start_on(
        port: u16,
        cluster: bool,
        tls: Option<TlsPort>,
    ) -> Result<RedisServer, RedisError> {
        let dir = tempfile::tempdir().map_err(RedisError::Setup)?;
        let mut server = RedisServer {
            child: None,
            port,
            cluster,
            tls,
            dir,
        };
        server.spawn().await?;
        Ok(server)
    }

    async fn spawn(&mut self) -> Result<(), RedisError> {
        let mut command = Command::from(child_command(redis_server()?));
        command
            .args(["--port", &self.port.to_string()])
            .args(["--bind", "127.0.0.1", "--save", "", "--appendonly", "no"])
            .arg("--dir")
            .arg(self.dir.path())
            .arg("--logfile")
            .arg(self.log_path())
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        if let Some(tls) = &self.tls {
            command
                .args(["--tls-port", &tls.port.to_string()])
                .arg("--tls-cert-file")
                .arg(tls.files.certificate())
                .arg("--tls-key-file")
                .arg(tls.files.key())
                .arg("--tls-ca-cert-file")
                .arg(tls.files.ca())
                .args(["--tls-auth-clients", "no"]);
        }
        if self.cluster {
            command.args([
                "--cluster-enabled",
                "yes",
                "--cluster-config-file",
                "nodes.conf",
                "--cluster-node-timeout",
                &CLUSTER_NODE_TIMEOUT_MS.to_string(),
                // A replica's first sync starts at once, where Redis waits
                // 5 s for more replicas to share the transfer.
                "--repl-diskless-sync-delay",
                "0",
                // A replica fails over however long its master's link has
                // been down: with the default factor (10 node timeouts
                // and a ping period, 20 s here) a machine too loaded to
                // gossip the failure in time left the replica refusing to
                // be elected, and the failover waited out its 60 s.
                "--cluster-replica-validity-factor",
                "0",
            ]);
            if self.tls.is_some() {
                // The bus and the replication links speak TLS too, and
                // the cluster tells a TLS client each node's TLS port.
                command.args(["--tls-cluster", "yes", "--tls-replication", "yes"]);
            }
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
                .command_within(&["PING"], PING_TIMEOUT)
                .await
                .is_ok_and(|reply| reply == "PONG")
            {
                return Ok(());
            }
            if let Some(status) = self
                .child
                .as_mut()
                .and_then(|c| c.try_wait().ok().flatten())
            {
                self.child = None;
                return Err(RedisError::Exited {
                    port: self.port,
                    status: status.to_string(),
                    log: self.log_tail(),
                });
            }
            tokio::time::sleep(READY_POLL).await;
        }
        Err(RedisError::NotReady {
            port: self.port,
            within: READY_TIMEOUT,
        })
    }

    fn log_path(&self) -> PathBuf {
        self.dir.path().join("redis.log")
    }

    /// The last lines of its log file.
    fn log_tail(&self) -> String {
        let log = std::fs::read_to_string(self.log_path()).unwrap_or_default();
        let lines: Vec<&str> = log.lines().collect();
        lines[lines.len().saturating_sub(10)..].join("\n")
    }

    /// Its port.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// Its URL, `redis://127.0.0.1:PORT`.
    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}", self.port)
    }

    /// Its TLS URL, `rediss://localhost:PORT` (the name its certificate
    /// is for), when it speaks TLS.
    pub fn tls_url(&self) -> Option<String> {
        self.tls_port()
            .map(|port| format!("rediss://localhost:{port}"))
    }

    /// Its TLS port, when it speaks TLS.
    pub fn tls_port(&self) -> Option<u16> {
        self.tls.as_ref().map(|tls| tls.port)
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
        self.command(&["CLIENT", "PAUSE", &ms.to_string(), "ALL"])
            .await
            .map(drop)
    }

    /// Lets it answer again at once (`healthy` after `slow`).
    pub async fn unpause(&self) -> Result<(), RedisError> {
        self.command(&["CLIENT", "UNPAUSE"]).await.map(drop)
    }

    /// Forgets every cached script (`scripts_flushed`): the next EVALSHA is NOSCRIPT.
    pub async fn flush_scripts(&self) -> Result<(), RedisError> {
        self.command(&["SCRIPT", "FLUSH"]).await.map(drop)
    }

    /// How many times `command` ran, from `INFO commandstats` (`evalsha` ->
    /// calls): the round trips a client made.
    pub async fn command_calls(&self, command: &str) -> Result<u64, RedisError> {
        Ok(self.commands_calls(&[command]).await?[0])
    }

    /// [`RedisServer::command_calls`] for each of `commands`, from one `INFO`.
    pub async fn commands_calls(&self, commands: &[&str]) -> Result<Vec<u64>, RedisError> {
        let info = self.command(&["INFO", "commandstats"]).await?;
        Ok(commands
            .iter()
            .map(|command| {
                let prefix = format!("cmdstat_{}:calls=", command.to_ascii_lowercase());
                info.lines()
                    .find_map(|line| line.trim().strip_prefix(&prefix))
                    .and_then(|rest| rest.split(',').next())
                    .and_then(|calls| calls.parse().ok())
                    .unwrap_or(0)
            })
            .collect())
    }

    /// Runs one command on a connection of its own, returning the reply as
    /// text (a number as its digits, `OK` for a status reply).
    pub async fn command(&self, args: &[&str]) -> Result<String, RedisError> {
        self.command_within(args, READY_TIMEOUT).await
    }

    /// Runs one command whose reply is a list (`KEYS`, `CLUSTER GETKEYSINSLOT`).
    pub async fn list(&self, args: &[&str]) -> Result<Vec<String>, RedisError> {
        self.query_within(args, READY_TIMEOUT).await
    }

    /// [`RedisServer::command`], given up after `timeout`.
    async fn command_within(&self, args: &[&str], timeout: Duration) -> Result<String, RedisError> {
        self.query_within(args, timeout).await
    }

    /// One command on a connection of its own, its reply read as a `T`,
    /// given up after `timeout`.
    async fn query_within<T: redis::FromRedisValue>(
        &self,
        args: &[&str],
        timeout: Duration,
    ) -> Result<T, RedisError> {
        let failed = |reason: String| RedisError::Command {
            command: args.join(" "),
            port: self.port,
            reason,
        };
        let (name, rest) = args
            .split_first()
            .ok_or_else(|| failed("no command".into()))?;
        let mut command = redis::cmd(name);
        command.arg(rest);
        let client = redis::Client::open(self.url()).map_err(|e| failed(e.to_string()))?;
        let asked = async {
            let mut connection = client.get_multiplexed_async_connection().await?;
            command.query_async::<T>(&mut connection).await
        };
        tokio::time::timeout(timeout, asked)
            .await
            .map_err(|_| failed("no answer".into()))?
            .map_err(|e| failed(e.to_string()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_missing_redis_is_installed_only_by_root_with_apt_get() {
        assert_eq!(missing_redis(true, true), MissingRedis::AptGet);
        for (is_root, has_apt_get) in [(false, true), (false, false), (true, false)] {
            let MissingRedis::Refuse(why) = missing_redis(is_root, has_apt_get) else {
                panic!("installs as root={is_root}, apt-get={has_apt_get}");
            };
            let line = RedisError::NotInstalled { why }.to_string();
            assert!(!line.contains('\n'), "{line}");
            assert!(line.contains(INSTALL_COMMAND), "{line}");
        }
    }

    #[tokio::test]
    async fn a_server_whose_port_is_taken_is_reported_at_once_with_its_log() {
        let taken = TcpListener::bind("127.0.0.1:0").expect("bind");
        let port = taken.local_addr().expect("address").port();
        let started = Instant::now();
        let error = match RedisServer::start_on(port, false, None).await {
            Ok(_) => panic!("a second server started on a taken port"),
            Err(error) => error,
        };
        assert!(
            started.elapsed() < READY_TIMEOUT / 2,
            "waited {:?} for a server that had exited",
            started.elapsed()
        );
        match error {
            RedisError::Exited { port: p, log, .. } => {
                assert_eq!(p, port);
                assert!(log.contains("in use"), "log: {log}");
            }
            other => panic!("not Exited: {other}"),
        }
    }

    #[tokio::test]
    async fn a_fresh_server_answers() {
        let server = RedisServer::start().await.expect("start");
        assert_eq!(server.command(&["PING"]).await.expect("PING"), "PONG");
        assert_eq!(server.command(&["DBSIZE"]).await.expect("DBSIZE"), "0");
    }
}
