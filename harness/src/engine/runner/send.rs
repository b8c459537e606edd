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
        let method = send.http_method().map_err(|_| EngineError::InvalidStep {
            step: step + 1,
            message: "`method` is no method the harness sends",
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
            let url = format!("{}{}", target.process.url(), send.path);
            let verbatim = (!url_keeps_path(&send.path)).then(|| Verbatim {
                url: url.clone(),
                path: send.path.clone(),
                peer,
            });
            let request = self.request(client.request(method.clone(), url), send, &chain);
            let Ok(permit) = semaphore.clone().acquire_owned().await else {
                break;
            };
            let left = waiting_left.clone();
            let epoch = self.epoch;
            tasks.push(tokio::spawn(async move {
                let started = Instant::now();
                let sent = started.saturating_duration_since(epoch);
                let record = match verbatim {
                    None => answer(request.send().await).await,
                    Some(verbatim) => verbatim.send(request).await,
                };
                let latency = started.elapsed();
                if number <= waiting {
                    left.fetch_sub(1, Ordering::SeqCst);
                }
                drop(permit);
                (number, isolate, record, latency, sent)
            }));
            if send.spacing_ms > 0 && number < send.requests {
                tokio::time::sleep(Duration::from_millis(send.spacing_ms)).await;
            }
        }
        for task in tasks {
            if let Ok((number, isolate, (outcome, headers, body), latency, sent)) = task.await {
                self.observation.requests.push(RequestRecord {
                    step,
                    number,
                    isolate,
                    outcome,
                    headers,
                    body,
                    latency,
                    sent,
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

    /// `request` with the step's headers: its chain, caller, address (a
    /// fresh one for `distinct_addresses`) and its own; every subject sent
    /// is noted, never to be logged.
    fn request(
        &mut self,
        mut request: reqwest::RequestBuilder,
        send: &SendRequests,
        chain: &str,
    ) -> reqwest::RequestBuilder {
        if !chain.is_empty() {
            request = request.header(
                runtime::unstable_for_tools::address::FORWARDED_FOR_HEADER,
                chain,
            );
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
        request
    }

    fn fresh_address(&mut self) -> String {
        let n = self.next_address;
        self.next_address += 1;
        format!("10.{}.{}.{}", (n >> 16) & 255, (n >> 8) & 255, n & 255)
    }
}

/// Whether reqwest sends `path` as written. Its `url` crate parses as
/// WHATWG says, so it removes dot segments and turns `\` into `/` before
/// a byte leaves: a step spelling a path that way (to show what the
/// deployable does with it) is sent by [`Verbatim`] instead.
fn url_keeps_path(path: &str) -> bool {
    reqwest::Url::parse(&format!("http://h{path}")).is_ok_and(|url| {
        let query = url.query().map(|q| format!("?{q}")).unwrap_or_default();
        format!("{}{query}", url.path()) == path
    })
}

/// A request whose path goes on the wire exactly as the step writes it:
/// one HTTP/1.1 connection of hyper's own (whose request target is kept
/// as given), from the step's `peer`, with the headers reqwest would send.
struct Verbatim {
    url: String,
    path: String,
    peer: Option<Ipv4Addr>,
}

impl Verbatim {
    /// Sends it, with the headers `request` carries; the answer as [`answer`] gives it.
    async fn send(self, request: reqwest::RequestBuilder) -> Answer {
        match self.exchange(request).await {
            Ok(answered) => answered,
            Err(why) => (Err(why), BTreeMap::new(), String::new()),
        }
    }

    async fn exchange(self, request: reqwest::RequestBuilder) -> Result<Answer, String> {
        use http_body_util::BodyExt;
        let built = request.build().map_err(|e| error_chain(&e))?;
        let url = reqwest::Url::parse(&self.url).map_err(|e| e.to_string())?;
        let host = url.host_str().unwrap_or("127.0.0.1").to_owned();
        let port = url.port_or_known_default().unwrap_or(80);
        let address = tokio::net::lookup_host((host.as_str(), port))
            .await
            .map_err(|e| e.to_string())?
            .next()
            .ok_or("no address")?;
        let socket = tokio::net::TcpSocket::new_v4().map_err(|e| e.to_string())?;
        if let Some(peer) = self.peer {
            socket
                .bind((peer, 0).into())
                .map_err(|e| format!("binding {peer}: {e}"))?;
        }
        let exchange = async {
            let stream = socket.connect(address).await.map_err(|e| e.to_string())?;
            let (mut sender, connection) =
                hyper::client::conn::http1::handshake(hyper_util::rt::TokioIo::new(stream))
                    .await
                    .map_err(|e| e.to_string())?;
            let connection = tokio::spawn(connection);
            let mut outgoing = http::Request::builder()
                .method(built.method().clone())
                .uri(self.path.as_str())
                .header(http::header::HOST, format!("{host}:{port}"));
            for (name, value) in built.headers() {
                outgoing = outgoing.header(name, value);
            }
            let outgoing = outgoing
                .body(http_body_util::Empty::<bytes::Bytes>::new())
                .map_err(|e| format!("path `{}`: {e}", self.path))?;
            let response = sender
                .send_request(outgoing)
                .await
                .map_err(|e| e.to_string())?;
            let status = response.status().as_u16();
            let headers = lower_case_headers(response.headers());
            let body = response
                .into_body()
                .collect()
                .await
                .map(|b| String::from_utf8_lossy(&b.to_bytes()).into_owned())
                .unwrap_or_default();
            connection.abort();
            Ok((Ok(status), headers, body))
        };
        tokio::time::timeout(super::REQUEST_TIMEOUT, exchange)
            .await
            .map_err(|_| "timed out".to_owned())?
    }
}

/// A response's headers as the judge reads them: names in lower case (as
/// `http` keeps them), values as text (empty where they are not).
fn lower_case_headers(headers: &http::HeaderMap) -> BTreeMap<String, String> {
    headers
        .iter()
        .map(|(k, v)| (k.as_str().to_owned(), v.to_str().unwrap_or("").to_owned()))
        .collect()
}

/// What a request came to: its status or why none came, its headers and body.
type Answer = (Result<u16, String>, BTreeMap<String, String>, String);

/// A response's status, headers (names in lower case) and body, or why none came.
pub(in crate::engine) async fn answer(result: Result<reqwest::Response, reqwest::Error>) -> Answer {
    match result {
        Ok(response) => {
            let status = response.status().as_u16();
            let headers = lower_case_headers(response.headers());
            let body = response.text().await.unwrap_or_default();
            (Ok(status), headers, body)
        }
        Err(e) => (Err(error_chain(&e)), BTreeMap::new(), String::new()),
    }
}

#[cfg(test)]
mod tests {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    use super::*;

    #[test]
    fn reqwest_keeps_a_plain_path_and_rewrites_dot_segments_and_backslashes() {
        for kept in [
            "/api/items",
            "/api//login/",
            "/api/%6cogin?next=/",
            "/api/login%2F",
        ] {
            assert!(url_keeps_path(kept), "{kept}");
        }
        for rewritten in [
            "/api/./login",
            "/api/x/../login",
            "/api/x\\..\\login",
            "/a b",
        ] {
            assert!(!url_keeps_path(rewritten), "{rewritten}");
        }
    }

    /// The request line a server reads is the step's path, byte for byte,
    /// and the headers reqwest would have sent go with it.
    #[tokio::test]
    async fn a_verbatim_request_carries_its_path_as_written() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind");
        let url = format!("http://{}", listener.local_addr().expect("addr"));
        let server = tokio::spawn(async move {
            let (mut stream, peer) = listener.accept().await.expect("accept");
            let mut head = Vec::new();
            let mut buf = [0; 1024];
            while !head.windows(4).any(|w| w == b"\r\n\r\n") {
                let n = stream.read(&mut buf).await.expect("read");
                head.extend_from_slice(&buf[..n]);
            }
            stream
                .write_all(b"HTTP/1.1 429 Too Many Requests\r\nretry-after: 60\r\ncontent-length: 2\r\n\r\n{}")
                .await
                .expect("write");
            (String::from_utf8_lossy(&head).into_owned(), peer)
        });
        let path = "/api/x\\..\\./login";
        let client = reqwest::Client::new();
        let request = client
            .get(format!("{url}{path}"))
            .header("cf-connecting-ip", "192.0.2.9");
        let verbatim = Verbatim {
            url: format!("{url}{path}"),
            path: path.to_owned(),
            peer: Some(Ipv4Addr::new(127, 0, 0, 2)),
        };
        let (status, headers, body) = verbatim.send(request).await;
        let (head, peer) = server.await.expect("served");
        assert!(
            head.starts_with(&format!("GET {path} HTTP/1.1\r\n")),
            "{head}"
        );
        assert!(head.contains("cf-connecting-ip: 192.0.2.9\r\n"), "{head}");
        assert_eq!(peer.ip(), Ipv4Addr::new(127, 0, 0, 2));
        assert_eq!(status, Ok(429));
        assert_eq!(headers.get("retry-after").map(String::as_str), Some("60"));
        assert_eq!(body, "{}");
    }
}
