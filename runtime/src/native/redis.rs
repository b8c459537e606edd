//! Counting in Redis: every limit of a request in one atomic script call
//! ([`scripts::COUNT_ALL`], EVALSHA, sent again as EVAL when Redis answers
//! NOSCRIPT), keys with one hash tag per request so a Redis Cluster keeps
//! them in one slot, the cluster's redirects followed (a resharding's ASK
//! and TRYAGAIN, a failover's MOVED), the refused-keys cache, the 500 ms
//! deadline. The cool-off of a troubled server is the limiter's own
//! ([`crate::Limiter::asks`], [`crate::breaker`]): this store asks only the
//! checks the limiter says to ask.
//!
//! Every answer goes into the request's [`Ask`] as the binding's answer
//! would, for [`crate::Limiter::conclude`]: Redis counts, and when it can't
//! be asked the limiter counts in the process's memory and logs the
//! connection once.
//!
//! Until Redis first answers, each ask dials it once (no connection
//! manager's background reconnects behind it), and the limiter cools a
//! Redis found `missing` off like a failed one: a Redis missing from the
//! start is dialled at most once per cool-off (10 s), not on every request.

use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use redis::aio::{ConnectionManager, ConnectionManagerConfig};
use redis::cluster::ClusterClient;
use redis::cluster_async::ClusterConnection;
use redis::{Cmd, ErrorKind, RedisError, ServerErrorKind};
use tokio::sync::OnceCell;

use super::refused::RefusedCache;
use super::scripts;
use crate::backend::{BackendAnswer, DEADLINE_MS, FallbackReason};
use crate::clock::{Clock, Reading};
use crate::config::RedisEndpoint;
use crate::keys;
use crate::limiter::{Ask, Now, Pending};

/// The deadline of one request's round trip, connecting included.
const DEADLINE: Duration = Duration::from_millis(DEADLINE_MS as u64);

/// How often a cluster call is sent again after a redirect or a node's
/// trouble: a MOVED or ASK is followed at once, a TRYAGAIN (a slot half
/// moved) after a short wait, a refused node after its slots are asked
/// again. Within [`DEADLINE`] in any case: the deadline ends the call.
const CLUSTER_RETRIES: u32 = 8;
/// The shortest and longest waits before a cluster call is sent again, in
/// ms: a slot moves in milliseconds, so the waits stay short.
const CLUSTER_RETRY_WAIT_MS: (u64, u64) = (5, 60);

/// Where the store's connection goes.
enum Target {
    /// One Redis server, through a reconnecting manager made once a first
    /// connection succeeds (inside the server's runtime, which the manager
    /// needs); until then each ask dials once.
    Single {
        client: redis::Client,
        config: ConnectionManagerConfig,
        manager: OnceCell<ConnectionManager>,
    },
    /// A Redis Cluster, connected on first use (and retried until it connects).
    Cluster {
        client: ClusterClient,
        connection: OnceCell<ClusterConnection>,
    },
    /// No server to reach: the connection has no URL, or one that does not parse.
    Nowhere(FallbackReason),
}

/// What the store remembers between requests, behind one short lock (never held across an await).
#[derive(Debug, Default)]
struct State {
    refused: RefusedCache,
    /// Whether Redis ever answered: a refused connection before that is `missing`, after it `failed`.
    ever_answered: bool,
}

/// One Redis connection of a native deployable, shared by its requests.
pub struct RedisStore {
    target: Target,
    /// The application's name, which its keys are named by.
    application: String,
    script: redis::Script,
    state: Mutex<State>,
    /// Connections attempted before one succeeded (a cluster's counted once).
    dials: AtomicU64,
}

impl std::fmt::Debug for RedisStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let target = match &self.target {
            Target::Single { .. } => "single",
            Target::Cluster { .. } => "cluster",
            Target::Nowhere(_) => "nowhere",
        };
        f.debug_struct("RedisStore")
            .field("target", &target)
            .finish()
    }
}

/// The URLs an endpoint dials.
fn endpoint_urls(endpoint: &RedisEndpoint) -> impl Iterator<Item = &str> {
    let urls: &[String] = match endpoint {
        RedisEndpoint::Single { url } => url.as_slice(),
        RedisEndpoint::Cluster { nodes } => nodes,
    };
    urls.iter().map(String::as_str)
}

/// Whether `url` is dialled over TLS (`rediss://`, `valkeys://`).
fn is_tls_url(url: &str) -> bool {
    url.split_once("://").is_some_and(|(scheme, _)| {
        scheme.eq_ignore_ascii_case("rediss") || scheme.eq_ignore_ascii_case("valkeys")
    })
}

/// What [`RedisStore::ask`] did: the time the request concludes at (read
/// once after a round trip, else the time before it), and how long the
/// round trip took when one was made and Redis answered (for operators'
/// metrics).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Asked {
    /// Both clocks after the round trip.
    pub(crate) now: Now,
    /// The round trip's time, from the request's first reading (read by
    /// the metrics alone).
    #[cfg_attr(not(feature = "metrics"), allow(dead_code))]
    pub(crate) round_trip: Option<Duration>,
}

/// One ask to count in Redis in this round trip, and its key.
struct Count<'a> {
    ask: Ask<'a>,
    redis_key: String,
}

/// What Redis said of one limit: whether the request is within it (and was
/// counted), and how many ms its window has left on Redis's clock.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Counted {
    within: bool,
    window_left_ms: u64,
}

/// Seeds the crypto provider's random generator now: its first use in a
/// process takes some 50 ms (aws-lc's one-time set-up, measured on the
/// 2-core machine, more under load), which the first TLS handshake would
/// otherwise spend inside the first request's 500 ms deadline.
fn warm_up_randomness() {
    if let Some(provider) = rustls::crypto::CryptoProvider::get_default() {
        let _ = provider.secure_random.fill(&mut [0; 32]);
    }
}

impl RedisStore {
    /// The store for `endpoint`, counting the keys of the application named
    /// `application` (its description's `name`). Nothing connects yet, so a
    /// server starts while Redis is down; [`RedisStore::connect`] or the
    /// first request connects (within its deadline).
    pub fn new(endpoint: &RedisEndpoint, application: &str) -> RedisStore {
        // The redis crate builds its TLS configuration on the process's
        // default provider, and a process with two (aws-lc-rs and ring, from
        // two dependencies) has none: for a TLS URL one is installed unless
        // one already is (and only then, so an application that installs its
        // own afterwards is not refused for a store that speaks no TLS).
        if endpoint_urls(endpoint).any(is_tls_url) {
            let _ = rustls::crypto::aws_lc_rs::default_provider().install_default();
            warm_up_randomness();
        }
        let target = match endpoint {
            RedisEndpoint::Cluster { nodes } => match ClusterClient::builder(nodes.clone())
                .connection_timeout(DEADLINE)
                .response_timeout(DEADLINE)
                .retries(CLUSTER_RETRIES)
                .min_retry_wait(CLUSTER_RETRY_WAIT_MS.0)
                .max_retry_wait(CLUSTER_RETRY_WAIT_MS.1)
                .retry_wait_formula(CLUSTER_RETRY_WAIT_MS.0, 2)
                .build()
            {
                Ok(client) => Target::Cluster {
                    client,
                    connection: OnceCell::new(),
                },
                Err(_) => Target::Nowhere(FallbackReason::Failed),
            },
            RedisEndpoint::Single { url: None } => Target::Nowhere(FallbackReason::Missing),
            RedisEndpoint::Single { url: Some(url) } => {
                // No response timeout of the connection's own: each round
                // trip runs under the request's deadline (`ask`), so a
                // second 500 ms timer a request would only cost time.
                let config = ConnectionManagerConfig::new()
                    .set_connection_timeout(Some(DEADLINE))
                    .set_response_timeout(None)
                    .set_number_of_retries(0)
                    .set_max_delay(DEADLINE);
                match redis::Client::open(url.as_str()) {
                    Ok(client) => Target::Single {
                        client,
                        config,
                        manager: OnceCell::new(),
                    },
                    Err(_) => Target::Nowhere(FallbackReason::Failed),
                }
            }
        };
        RedisStore {
            target,
            application: application.to_owned(),
            script: redis::Script::new(scripts::COUNT_ALL),
            state: Mutex::new(State::default()),
            dials: AtomicU64::new(0),
        }
    }

    /// How many times it dialled Redis so far: the rate at which a Redis
    /// that is not there is tried.
    pub fn dials(&self) -> u64 {
        self.dials.load(Ordering::Relaxed)
    }

    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        // A panic elsewhere cannot leave the state inconsistent: each update is one assignment.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Asks Redis what a request's [`Pending::asks`] ask (from
    /// [`crate::Limiter::asks`], at `before`, the clocks' reading the
    /// request was decided from) and answers each ask in place. A key
    /// refused earlier in its window is answered from the cache; the rest
    /// go in one script call, bounded by the deadline, which runs from
    /// `before`. Never fails: trouble is a [`BackendAnswer::Unavailable`].
    ///
    /// The clocks are read once more, after the round trip, and that one
    /// reading serves the refused-keys cache, the round trip's time and the
    /// request's conclusion ([`Asked`]).
    pub(crate) async fn ask(&self, pending: &mut Pending, clock: &Clock, before: Reading) -> Asked {
        // The refused-keys cache runs on the monotonic clock, which no step
        // of the wall clock moves; Redis's own clock decides the windows.
        let sent = clock.now_of(before);
        let sent_ms = sent.monotonic_ms;
        let tag = pending
            .checks()
            .first()
            .map(|c| keys::redis_tag(c.key()))
            .unwrap_or_default();
        let mut counts = Vec::new();
        {
            let state = self.state();
            for ask in pending.asks() {
                if state.refused.is_refused(ask.limit(), ask.key(), sent_ms) {
                    ask.answer(BackendAnswer::Remembered);
                    continue;
                }
                let redis_key = keys::redis_key(&self.application, &tag, ask.limit(), ask.key());
                counts.push(Count { ask, redis_key });
            }
            if counts.is_empty() {
                return Asked {
                    now: sent,
                    round_trip: None,
                };
            }
        }

        // The one timer of the round trip: the connection has none of its own.
        let deadline = tokio::time::Instant::from_std(before.instant) + DEADLINE;
        let shift_ms = clock.scenario_offset_ms();
        let result = match tokio::time::timeout_at(deadline, self.count(&counts, shift_ms)).await {
            Ok(result) => result,
            Err(_) => Err(Trouble::Deadline),
        };
        let after = clock.read_after(before);
        let now = clock.now_of(after);
        let done_ms = now.monotonic_ms;
        let mut state = self.state();
        let round_trip = match result {
            Ok(answers) => {
                state.ever_answered = true;
                for (count, answer) in counts.into_iter().zip(answers) {
                    if !answer.within {
                        // Until the window's end at the latest: Redis read its
                        // clock after the call was sent.
                        let (limit, key) = (count.ask.limit(), count.ask.key());
                        let until_ms = sent_ms.saturating_add(answer.window_left_ms);
                        state.refused.remember(limit, key, until_ms, done_ms);
                    }
                    count.ask.answer(BackendAnswer::Answered {
                        success: answer.within,
                    });
                }
                Some(after.instant.saturating_duration_since(before.instant))
            }
            Err(trouble) => {
                let reason = trouble.reason(state.ever_answered);
                for count in counts {
                    count.ask.answer(BackendAnswer::Unavailable(reason));
                }
                None
            }
        };
        Asked { now, round_trip }
    }

    /// One round trip: every pending check in one script call. After a
    /// NOSCRIPT (a restarted or flushed server, or a cluster node that never
    /// ran it, such as a promoted replica or a slot's new master), the same
    /// call again as EVAL, which also caches the script for the next EVALSHA.
    async fn count(&self, counts: &[Count<'_>], shift_ms: i64) -> Result<Vec<Counted>, Trouble> {
        if let Target::Nowhere(reason) = self.target {
            return Err(Trouble::Nowhere(reason));
        }
        let sha = Self::call("EVALSHA", self.script.get_hash(), counts, shift_ms);
        let replies = match self.query(&sha).await {
            Err(error) if error.kind() == ErrorKind::Server(ServerErrorKind::NoScript) => {
                let eval = Self::call("EVAL", scripts::COUNT_ALL, counts, shift_ms);
                self.query(&eval).await
            }
            other => other,
        }
        .map_err(Trouble::Redis)?;
        // Not one answer per limit (a proxy or a server that is not Redis):
        // trouble, not limits silently left to memory.
        answers(&replies, counts.len()).ok_or_else(|| {
            Trouble::Redis(RedisError::from((
                ErrorKind::Parse,
                "not one answer per limit",
            )))
        })
    }

    /// `command` (EVALSHA or EVAL) of `script` over every count's key, with
    /// the scenario clock's shift (0 in production), and each one's limit
    /// and window in ms.
    fn call(command: &str, script: &str, counts: &[Count<'_>], shift_ms: i64) -> Cmd {
        let mut call = redis::cmd(command);
        call.arg(script).arg(counts.len());
        for count in counts {
            call.arg(&count.redis_key);
        }
        call.arg(shift_ms);
        for count in counts {
            let limit = count.ask.limit();
            let window_ms = u64::from(limit.window_seconds.max(1)) * 1000;
            call.arg(limit.requests).arg(window_ms);
        }
        call
    }

    /// Connects now, within the deadline, so that the first request finds
    /// the connection made (a TLS handshake, a cluster's slot map). A
    /// failure is only returned: nothing is logged or counted, and the
    /// first request dials again.
    pub async fn connect(&self) -> Result<(), FallbackReason> {
        if let Target::Nowhere(reason) = self.target {
            return Err(reason);
        }
        let trouble = match tokio::time::timeout(DEADLINE, self.connection()).await {
            Ok(Ok(_)) => return Ok(()),
            Ok(Err(error)) => Trouble::Redis(error),
            Err(_) => Trouble::Deadline,
        };
        Err(trouble.reason(self.state().ever_answered))
    }

    /// The connection, made on first use: one dial per call until one
    /// succeeds (a failed one leaves the cell empty); then the single
    /// server's manager reconnects by itself, and the cluster's connection
    /// follows the cluster.
    async fn connection(&self) -> Result<Connection<'_>, RedisError> {
        match &self.target {
            Target::Single {
                client,
                config,
                manager,
            } => manager
                .get_or_try_init(|| {
                    self.dials.fetch_add(1, Ordering::Relaxed);
                    ConnectionManager::new_with_config(client.clone(), config.clone())
                })
                .await
                .map(Connection::Single),
            Target::Cluster { client, connection } => connection
                .get_or_try_init(|| {
                    self.dials.fetch_add(1, Ordering::Relaxed);
                    client.get_async_connection()
                })
                .await
                .map(Connection::Cluster),
            Target::Nowhere(_) => Err(RedisError::from((ErrorKind::Io, "no Redis to reach"))),
        }
    }

    async fn query(&self, call: &Cmd) -> Result<Vec<i64>, RedisError> {
        match self.connection().await? {
            Connection::Single(manager) => call.query_async(&mut manager.clone()).await,
            Connection::Cluster(connection) => call.query_async(&mut connection.clone()).await,
        }
    }
}

/// The script's reply read as one [`Counted`] per limit: two numbers each,
/// within (1 or 0) and the ms left of the window (at least 1). `None` when
/// it is not that, for `limits` limits.
fn answers(replies: &[i64], limits: usize) -> Option<Vec<Counted>> {
    if replies.len() != 2 * limits {
        return None;
    }
    replies
        .chunks_exact(2)
        .map(|pair| match *pair {
            [within @ (0 | 1), left] if left >= 1 => Some(Counted {
                within: within == 1,
                window_left_ms: u64::try_from(left).ok()?,
            }),
            _ => None,
        })
        .collect()
}

/// A made connection, to one server or to a cluster.
enum Connection<'a> {
    Single(&'a ConnectionManager),
    Cluster(&'a ClusterConnection),
}

/// Why a round trip gave no answer.
enum Trouble {
    /// The deadline passed first.
    Deadline,
    /// Redis (or the connection to it) answered with an error.
    Redis(RedisError),
    /// The connection has no server to reach, for this reason.
    Nowhere(FallbackReason),
}

impl Trouble {
    /// The reason logged: a server never reached is `missing`, one that
    /// answered before and now errs is `failed`.
    fn reason(&self, ever_answered: bool) -> FallbackReason {
        match self {
            Trouble::Deadline => FallbackReason::TimedOut,
            Trouble::Nowhere(reason) => *reason,
            Trouble::Redis(error) if error.is_timeout() => FallbackReason::TimedOut,
            Trouble::Redis(error) if !ever_answered && error.is_connection_refusal() => {
                FallbackReason::Missing
            }
            Trouble::Redis(_) => FallbackReason::Failed,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::breaker::COOL_OFF_MS;
    use crate::config::{Application, Counting};
    use crate::limiter::{Decision, Limiter};
    use crate::subject::Subject;

    /// A native API on Redis. Its store is built from a URL that does not
    /// parse (which validation refuses, so it is given to the store
    /// directly): every round trip fails.
    const APP: &str = "name = \"shop\"\n[connections.cache]\ndriver = \"redis\"\nurl = \"redis://127.0.0.1:1\"\n\
        [rate_limits]\nstore = \"cache\"\n\
        [[deployables]]\nname = \"api\"\ntarget = \"native\"\nserves_api = true\n";

    /// One request from `address` through the limiter and the store, as
    /// `NativeGate::decide` does it: whether it asked Redis, and the decision.
    async fn request(
        limiter: &mut Limiter,
        store: &RedisStore,
        clock: &Clock,
        address: &str,
    ) -> (bool, Decision) {
        let checks = limiter
            .checks(
                &Subject::of_request(None, Some(address)),
                "GET",
                "/api/items",
            )
            .expect("a short path");
        let before = clock.read();
        let mut pending = limiter.asks(checks, clock.now_of(before));
        let asked = pending.checks()[0].is_asked();
        let after = store.ask(&mut pending, clock, before).await.now;
        (asked, limiter.conclude(pending, after))
    }

    #[test]
    fn only_a_tls_url_needs_the_crypto_provider() {
        for tls in ["rediss://h:6380", "REDISS://h", "valkeys://h"] {
            assert!(is_tls_url(tls), "{tls}");
        }
        for plain in [
            "redis://h",
            "redis+unix:///s",
            "unix:///s",
            "h:6380",
            "rediss",
        ] {
            assert!(!is_tls_url(plain), "{plain}");
        }
        let cluster = RedisEndpoint::Cluster {
            nodes: vec!["redis://a:1".into(), "rediss://b:2".into()],
        };
        assert!(endpoint_urls(&cluster).any(is_tls_url));
        assert_eq!(
            endpoint_urls(&RedisEndpoint::Single { url: None }).count(),
            0
        );
    }

    #[test]
    fn a_reply_is_two_numbers_per_limit_or_no_answer() {
        let counted = |within, window_left_ms| Counted {
            within,
            window_left_ms,
        };
        assert_eq!(
            answers(&[1, 1_500, 0, 59_000], 2),
            Some(vec![counted(true, 1_500), counted(false, 59_000)])
        );
        // One number per limit (the reply before Redis's clock decided), a
        // window with nothing left, or a within that is neither 0 nor 1.
        for reply in [
            &[1, 0][..],
            &[1, 1_500, 0][..],
            &[1, 0, 0, 5][..],
            &[2, 5, 0, 5][..],
        ] {
            assert_eq!(answers(reply, 2), None, "{reply:?}");
        }
    }

    #[tokio::test]
    async fn a_probe_answered_from_the_refused_cache_does_not_close_the_cool_off() {
        let app = Application::from_toml(APP).expect("valid");
        let mut limiter = Limiter::new(&app, "api", 7).expect("api");
        assert!(
            matches!(limiter.counting(), Counting::Redis { .. }),
            "a native API on Redis counts in Redis"
        );
        let store = RedisStore::new(
            &RedisEndpoint::Single {
                url: Some("not a url".into()),
            },
            "shop",
        );
        let clock = Clock::default();
        let (asked, failed) = request(&mut limiter, &store, &clock, "192.0.2.1").await;
        assert!(
            asked && failed.logs.len() == 1,
            "the first request finds Redis failing"
        );
        // Redis refused 192.0.2.2 earlier in its window: the store remembers it.
        let refused = limiter
            .checks(
                &Subject::of_request(None, Some("192.0.2.2")),
                "GET",
                "/api/items",
            )
            .expect("a short path");
        let now = clock.monotonic_ms();
        store
            .state()
            .refused
            .remember(refused[0].limit(), refused[0].key(), now + 3_600_000, now);
        clock.set_offset_ms(i64::try_from(COOL_OFF_MS).expect("small") + 1);
        // The cool-off is over: this request is the probe, and the cache answers it.
        let (asked, cached) = request(&mut limiter, &store, &clock, "192.0.2.2").await;
        assert!(asked, "after the cool-off one request probes");
        assert!(cached.refusal.is_some(), "the remembered refusal stands");
        // No round trip was made, so nothing is known of Redis: still no asking.
        let (asked, _) = request(&mut limiter, &store, &clock, "192.0.2.3").await;
        assert!(!asked, "a refusal from the cache closed the cool-off");
    }
}
