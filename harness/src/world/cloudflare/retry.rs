//! When to ask Cloudflare's API again: a plain function of the attempt and
//! what it got, so every fault is decided the same way and tested without
//! a network.

use std::time::Duration;

/// How hard the client tries.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RetryPolicy {
    /// Attempts per request, the first included.
    pub attempts: u32,
    /// The wait after the first failed attempt; each later one doubles it.
    pub first_backoff: Duration,
    /// No wait is longer, whatever `Retry-After` asks.
    pub longest_wait: Duration,
}

impl Default for RetryPolicy {
    /// Five attempts, waiting 1, 2, 4 and 8 s (or what `Retry-After` asks,
    /// up to a minute): a fault that outlasts ~15 s of backoff is reported.
    fn default() -> RetryPolicy {
        RetryPolicy {
            attempts: 5,
            first_backoff: Duration::from_secs(1),
            longest_wait: Duration::from_secs(60),
        }
    }
}

/// What an attempt got, when it is worth another.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Transient {
    /// 429, with its `Retry-After` when it gave one.
    RateLimited {
        /// What its `Retry-After` asked, if it had one.
        retry_after: Option<Duration>,
    },
    /// A 5xx.
    ServerError,
    /// No answer: the connection failed or broke.
    ConnectionFailed,
}

/// What to do after a transient failure.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Next {
    /// Wait this long, then try again.
    RetryAfter(Duration),
    /// Stop: the attempts are spent.
    GiveUp,
}

impl RetryPolicy {
    /// After `attempt` (1 for the first) failed with `what`.
    pub fn next(&self, attempt: u32, what: Transient) -> Next {
        if attempt >= self.attempts {
            return Next::GiveUp;
        }
        let backoff = self
            .first_backoff
            .saturating_mul(2u32.saturating_pow(attempt.saturating_sub(1)));
        let wait = match what {
            Transient::RateLimited {
                retry_after: Some(asked),
            } => asked,
            Transient::RateLimited { retry_after: None }
            | Transient::ServerError
            | Transient::ConnectionFailed => backoff,
        };
        Next::RetryAfter(wait.min(self.longest_wait))
    }
}

/// A `Retry-After` header's seconds (an HTTP date is left to the backoff).
pub fn retry_after(value: &str) -> Option<Duration> {
    value.trim().parse::<u64>().ok().map(Duration::from_secs)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_doubles_retry_after_is_honoured_and_attempts_end() {
        let policy = RetryPolicy::default();
        let waits: Vec<Next> = (1..=5)
            .map(|n| policy.next(n, Transient::ServerError))
            .collect();
        assert_eq!(
            waits,
            [
                Next::RetryAfter(Duration::from_secs(1)),
                Next::RetryAfter(Duration::from_secs(2)),
                Next::RetryAfter(Duration::from_secs(4)),
                Next::RetryAfter(Duration::from_secs(8)),
                Next::GiveUp,
            ]
        );
        assert_eq!(
            policy.next(
                1,
                Transient::RateLimited {
                    retry_after: Some(Duration::from_secs(7))
                }
            ),
            Next::RetryAfter(Duration::from_secs(7))
        );
        assert_eq!(
            policy.next(
                1,
                Transient::RateLimited {
                    retry_after: Some(Duration::from_secs(3600))
                }
            ),
            Next::RetryAfter(Duration::from_secs(60))
        );
        assert_eq!(
            policy.next(2, Transient::ConnectionFailed),
            Next::RetryAfter(Duration::from_secs(2))
        );
        assert_eq!(retry_after(" 12 "), Some(Duration::from_secs(12)));
        assert_eq!(retry_after("Wed, 21 Oct 2015 07:28:00 GMT"), None);
    }
}
