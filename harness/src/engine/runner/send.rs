//! `send`: a step's requests fired at the isolates, every answer recorded,
//! and the isolate probed while the first requests wait for a deadline.

use std::collections::BTreeMap;
use std::net::{IpAddr, Ipv4Addr};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use tokio::sync::Semaphore;

use super::{CALLER_HEADER, EngineError, Runner, http_client};
use crate::engine::load_probe::probe_while_waiting;
use crate::engine::observation::RequestRecord;
use crate::language::scenario::SendRequests;
use crate::world::text::error_chain;

impl Runner<'_> {
    /// The client connecting from `peer`, made the first time it is asked for.
    fn client_from(&mut self, peer: Option<Ipv4Addr>) -> Result<reqwest::Client, EngineError> {
        let Some(peer) = peer else {
            return Ok(self.client.clone());
        };
        if let Some(client) = self.peer_clients.get(&peer) {
            return Ok(client.clone());
        }
        let client = http_client(Some(peer)).map_err(EngineError::HttpClient)?;
        self.peer_clients.insert(peer, client.clone());
        Ok(client)
    }

    /// `send`: fires the requests (round-robin over the isolates unless one is
    /// named), from its `peer`, `concurrency` at a time, and records every
    /// answer. While the first `waiting` wait (for a `deadline`), their
    /// isolate is probed.
    pub(super) async fn send(
        &mut self,
        step: usize,
        send: &SendRequests,
        waiting: usize,
    ) -> Result<(), EngineError> {
        let peer = send.peer_address().map_err(|_| EngineError::InvalidStep {
            step: step + 1,
            message: "`peer` is not a loopback address",
        })?;
        let client = self.client_from(peer)?;
        if let Some(peer) = peer {
            self.observation.sent_subjects.insert(peer.to_string());
        }
        // The chain's addresses are keys the instance may count: none may be logged.
        let chain = send.chain().join(", ");
        self.observation.sent_subjects.extend(
            send.chain()
                .iter()
                .filter(|entry| entry.trim().parse::<IpAddr>().is_ok())
                .map(|entry| entry.trim().to_owned()),
        );
        let semaphore = Arc::new(Semaphore::new(send.concurrency));
        let waiting_left = Arc::new(AtomicUsize::new(waiting));
        let probing = self
            .isolates
            .get(send.isolate.unwrap_or(0))
            .filter(|_| waiting > 0)
            .map(|isolate| {
                tokio::spawn(probe_while_waiting(
                    self.client.clone(),
                    isolate.process.url(),
                    waiting_left.clone(),
                ))
            });
        let mut tasks = Vec::with_capacity(send.requests);
        for number in 1..=send.requests {
            let isolate = send.isolate.unwrap_or((number - 1) % self.isolates.len());
            let Some(target) = self.isolates.get_mut(isolate) else {
                continue;
            };
            target.served = true;
            let mut request = client.get(format!("{}{}", target.process.url(), send.path));
            if !chain.is_empty() {
                request = request.header(runtime::address::FORWARDED_FOR_HEADER, &chain);
            }
            if let Some(caller) = &send.caller {
                request = request.header(CALLER_HEADER, caller);
                self.observation.sent_subjects.insert(caller.clone());
            }
            let address = match (&send.address, send.distinct_addresses) {
                (Some(address), _) => Some(address.get_ref().clone()),
                (None, true) => Some(self.fresh_address()),
                (None, false) => None,
            };
            if let Some(address) = address {
                request = request.header(runtime::limiter::ADDRESS_HEADER, &address);
                self.observation.sent_subjects.insert(address);
            }
            for (name, value) in &send.headers {
                request = request.header(name, value);
            }
            let Ok(permit) = semaphore.clone().acquire_owned().await else {
                break;
            };
            let left = waiting_left.clone();
            tasks.push(tokio::spawn(async move {
                let started = Instant::now();
                let record = answer(request.send().await).await;
                let latency = started.elapsed();
                if number <= waiting {
                    left.fetch_sub(1, Ordering::SeqCst);
                }
                drop(permit);
                (number, isolate, record, latency)
            }));
            if send.spacing_ms > 0 && number < send.requests {
                tokio::time::sleep(Duration::from_millis(send.spacing_ms)).await;
            }
        }
        for task in tasks {
            if let Ok((number, isolate, (outcome, headers, body), latency)) = task.await {
                self.observation.requests.push(RequestRecord {
                    step,
                    number,
                    isolate,
                    outcome,
                    headers,
                    body,
                    latency,
                });
            }
        }
        if let Some(probing) = probing {
            // Every request is answered: the probes stop even if one was never sent.
            waiting_left.store(0, Ordering::SeqCst);
            if let Ok(probes) = probing.await {
                self.observation.load_probes.insert(step, probes);
            }
        }
        Ok(())
    }

    fn fresh_address(&mut self) -> String {
        let n = self.next_address;
        self.next_address += 1;
        format!("10.{}.{}.{}", (n >> 16) & 255, (n >> 8) & 255, n & 255)
    }
}

/// A response's status, headers (names in lower case) and body, or why none came.
pub(in crate::engine) async fn answer(
    result: Result<reqwest::Response, reqwest::Error>,
) -> (Result<u16, String>, BTreeMap<String, String>, String) {
    match result {
        Ok(response) => {
            let status = response.status().as_u16();
            let headers = response
                .headers()
                .iter()
                .map(|(k, v)| (k.as_str().to_owned(), v.to_str().unwrap_or("").to_owned()))
                .collect();
            let body = response.text().await.unwrap_or_default();
            (Ok(status), headers, body)
        }
        Err(e) => (Err(error_chain(&e)), BTreeMap::new(), String::new()),
    }
}
