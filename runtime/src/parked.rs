//! The requests a Workers gate keeps while their bindings are asked, each
//! under a ticket until `ask-bindings.js` resumes it (wasm32; compiled for
//! the native tests too, since it is plain Rust).
//!
//! A request workerd cancelled (its client went away) is never resumed: its
//! timers die with it, so its slot must be taken back or cancelled requests
//! would grow the table. No clock can tell such a request from a live one
//! whose deadline timer has not run yet: after an event-loop stall (a
//! CPU-heavy request, a paused isolate) every request parked before it looks
//! seconds old, and taking one back fails it when its resume comes. So only
//! the oldest of the requests older than [`STALE_MS`] beyond the first
//! [`MAX_STALE`] are taken back: a stall that leaves up to [`MAX_STALE`]
//! requests waiting costs none of them (each resumes, its asks timed out,
//! and is counted in memory), and cancelled requests hold at most
//! [`MAX_STALE`] slots.

use crate::backend::DEADLINE_MS;

/// Slots kept before stale ones are looked for.
const SWEEP_AT: usize = 64;

/// A request still waiting this long after it parked has missed its 500 ms
/// deadline tenfold: cancelled, or held up by a stall.
pub(crate) const STALE_MS: f64 = 10.0 * DEADLINE_MS as f64;

/// How many stale requests are kept, in case a stall (not a cancellation)
/// made them stale.
pub(crate) const MAX_STALE: usize = 64;

/// One parked request, and when it parked on the isolate's clock.
pub(crate) struct Parked<T> {
    ticket: u32,
    /// `Date.now()` when it parked.
    pub(crate) parked_at_ms: f64,
    /// What its resume needs.
    pub(crate) item: T,
}

/// The parked requests, by ticket.
pub(crate) struct ParkedRequests<T> {
    slots: Vec<Option<Parked<T>>>,
    next_ticket: u32,
}

impl<T> ParkedRequests<T> {
    /// No request parked.
    pub(crate) const fn new() -> Self {
        ParkedRequests {
            slots: Vec::new(),
            next_ticket: 0,
        }
    }

    /// Parks `item` at `now_ms` and returns its ticket: never the ticket of
    /// another request parked at once (tickets wrap after 2^32 requests), so
    /// a late resume cannot take another request's slot.
    pub(crate) fn park(&mut self, item: T, now_ms: f64) -> u32 {
        let ticket = self.next_ticket;
        self.next_ticket = ticket.wrapping_add(1);
        if self.slots.len() >= SWEEP_AT && self.slots.iter().all(Option::is_some) {
            self.sweep(now_ms);
        }
        let parked = Some(Parked {
            ticket,
            parked_at_ms: now_ms,
            item,
        });
        match self.slots.iter_mut().find(|slot| slot.is_none()) {
            Some(slot) => *slot = parked,
            None => self.slots.push(parked),
        }
        ticket
    }

    /// Takes back the oldest stale requests beyond the first [`MAX_STALE`].
    fn sweep(&mut self, now_ms: f64) {
        let mut stale: Vec<(f64, usize)> = self
            .slots
            .iter()
            .enumerate()
            .filter_map(|(index, slot)| {
                let parked_at = slot.as_ref()?.parked_at_ms;
                (now_ms - parked_at > STALE_MS).then_some((parked_at, index))
            })
            .collect();
        let Some(beyond) = stale.len().checked_sub(MAX_STALE) else {
            return;
        };
        stale.sort_by(|a, b| a.0.total_cmp(&b.0));
        for &(_, index) in &stale[..beyond] {
            self.slots[index] = None;
        }
    }

    /// Takes the request of `ticket` out of its slot.
    pub(crate) fn take(&mut self, ticket: u32) -> Option<Parked<T>> {
        self.slots
            .iter_mut()
            .find(|slot| slot.as_ref().is_some_and(|p| p.ticket == ticket))?
            .take()
    }

    /// How many requests are parked.
    #[cfg(test)]
    fn len(&self) -> usize {
        self.slots.iter().filter(|slot| slot.is_some()).count()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_held_up_by_a_five_second_stall_all_resume() {
        let mut parked = ParkedRequests::new();
        // A full table of live requests, then the event loop stalls 5 s: the
        // first request parked after it finds every one of them stale.
        let tickets: Vec<u32> = (0..SWEEP_AT)
            .map(|i| parked.park(i, 1_000.0 + i as f64))
            .collect();
        let after_stall = 1_000.0 + SWEEP_AT as f64 + STALE_MS + 1.0;
        let late = parked.park(999, after_stall);
        for (i, ticket) in tickets.into_iter().enumerate() {
            let request = parked.take(ticket).map(|p| p.item);
            assert_eq!(
                request,
                Some(i),
                "request {i} was taken back after the stall"
            );
        }
        assert_eq!(parked.take(late).map(|p| p.item), Some(999));
    }

    #[test]
    fn cancelled_requests_hold_at_most_max_stale_slots() {
        let mut parked = ParkedRequests::new();
        // Requests cancelled as they wait (never resumed), one every 10 ms for
        // a minute, beside a live one resumed after each.
        let mut now = 0.0;
        for n in 0..6_000 {
            parked.park(n, now);
            let live = parked.park(usize::MAX, now);
            assert!(parked.take(live).is_some());
            now += 10.0;
        }
        // Those younger than STALE_MS are kept, as live ones would be; of the
        // older, the newest MAX_STALE.
        let young = (STALE_MS / 10.0) as usize + 1;
        assert!(
            parked.len() <= young + MAX_STALE,
            "{} parked, at most {} expected",
            parked.len(),
            young + MAX_STALE
        );
        // The oldest went first: the first requests' tickets are gone.
        assert!(parked.take(0).is_none());
    }

    #[test]
    fn a_ticket_is_never_given_twice_while_parked() {
        let mut parked = ParkedRequests::new();
        parked.next_ticket = u32::MAX;
        let last = parked.park("a", 0.0);
        let wrapped = parked.park("b", 0.0);
        assert_ne!(last, wrapped);
        assert_eq!(parked.take(last).map(|p| p.item), Some("a"));
        assert_eq!(parked.take(wrapped).map(|p| p.item), Some("b"));
        assert!(parked.take(last).is_none(), "a ticket resumes once");
    }
}
