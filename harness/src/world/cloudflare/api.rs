//! Cloudflare's API, as far as a run needs it: upload a Worker, give it its
//! `workers.dev` URL, open and close a tail, delete it, list scripts and
//! read one's settings back (for `clean`'s marker). Every
//! request goes through one loop that retries what is transient
//! ([`RetryPolicy`]) and turns the rest into one line ([`ApiError`]) naming
//! the request and the API's own message, never the token.

use std::fmt;
use std::time::Duration;

use serde::Deserialize;

use crate::world::cloudflare::credentials::{Credentials, PERMISSION};
use crate::world::cloudflare::retry::{self, Next, RetryPolicy, Transient};
use crate::world::cloudflare::upload::{Binding, Upload};
use crate::world::text::{error_chain, shortened};

/// One request of the API, by what it does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Endpoint<'a> {
    /// `GET /accounts/{id}/workers/subdomain`: the account's workers.dev subdomain.
    AccountSubdomain,
    /// `PUT /accounts/{id}/workers/scripts/{name}`: the upload.
    Upload(&'a str),
    /// `POST /accounts/{id}/workers/scripts/{name}/subdomain`: its workers.dev route.
    EnableSubdomain(&'a str),
    /// `POST /accounts/{id}/workers/scripts/{name}/tails`: a tail.
    CreateTail(&'a str),
    /// `DELETE /accounts/{id}/workers/scripts/{name}/tails/{tail}`.
    DeleteTail(&'a str, &'a str),
    /// `DELETE /accounts/{id}/workers/scripts/{name}?force=true`.
    DeleteScript(&'a str),
    /// `GET /accounts/{id}/workers/scripts`.
    ListScripts,
    /// `GET /accounts/{id}/workers/scripts/{name}/settings`: its bindings, read back.
    ScriptSettings(&'a str),
}

impl Endpoint<'_> {
    /// Its HTTP method.
    pub fn method(self) -> reqwest::Method {
        match self {
            Endpoint::AccountSubdomain | Endpoint::ListScripts | Endpoint::ScriptSettings(_) => {
                reqwest::Method::GET
            }
            Endpoint::Upload(_) => reqwest::Method::PUT,
            Endpoint::EnableSubdomain(_) | Endpoint::CreateTail(_) => reqwest::Method::POST,
            Endpoint::DeleteTail(..) | Endpoint::DeleteScript(_) => reqwest::Method::DELETE,
        }
    }

    /// The path below the base URL, for `account`.
    pub fn path(self, account: &str) -> String {
        let scripts = format!("/accounts/{account}/workers/scripts");
        match self {
            Endpoint::AccountSubdomain => format!("/accounts/{account}/workers/subdomain"),
            Endpoint::ListScripts => scripts,
            Endpoint::Upload(name) => format!("{scripts}/{name}"),
            Endpoint::EnableSubdomain(name) => format!("{scripts}/{name}/subdomain"),
            Endpoint::ScriptSettings(name) => format!("{scripts}/{name}/settings"),
            Endpoint::CreateTail(name) => format!("{scripts}/{name}/tails"),
            Endpoint::DeleteTail(name, tail) => format!("{scripts}/{name}/tails/{tail}"),
            Endpoint::DeleteScript(name) => format!("{scripts}/{name}?force=true"),
        }
    }
}

impl fmt::Display for Endpoint<'_> {
    /// `PUT /accounts/…/workers/scripts/NAME`: the account's id left out of messages.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {}", self.method(), self.path("…"))
    }
}

/// One of the API's error objects.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct ApiMessage {
    /// Cloudflare's error code.
    #[serde(default)]
    pub code: i64,
    /// What it says.
    #[serde(default)]
    pub message: String,
}

impl fmt::Display for ApiMessage {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // One line, whatever the API put in it.
        let message = self
            .message
            .split_whitespace()
            .collect::<Vec<_>>()
            .join(" ");
        write!(f, "{}: {message}", self.code)
    }
}

/// The API's messages, as one line.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ApiMessages(pub Vec<ApiMessage>);

impl fmt::Display for ApiMessages {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.0.is_empty() {
            return f.write_str("no message");
        }
        let all: Vec<String> = self.0.iter().map(ToString::to_string).collect();
        f.write_str(&all.join("; "))
    }
}

/// Why a request failed, in one line.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ApiError {
    /// 401 or 403: the token is wrong, or lacks the permission.
    #[error(
        "Cloudflare refused the token ({status} on {endpoint}): it needs the permission \"{PERMISSION}\" on the account [{messages}]"
    )]
    Refused {
        /// The HTTP status.
        status: u16,
        /// The request, the account left out.
        endpoint: String,
        /// The API's own messages.
        messages: ApiMessages,
    },
    /// 429 on every attempt.
    #[error(
        "Cloudflare's API answered 429 (too many requests) to {endpoint} on all {attempts} attempts, waiting what Retry-After asked: try again later"
    )]
    RateLimited {
        /// The request, the account left out.
        endpoint: String,
        /// How many were made.
        attempts: u32,
    },
    /// A 5xx on every attempt.
    #[error(
        "Cloudflare's API answered {status} to {endpoint} on all {attempts} attempts (backing off between them) [{messages}]"
    )]
    ServerError {
        /// The HTTP status.
        status: u16,
        /// The request, the account left out.
        endpoint: String,
        /// How many were made.
        attempts: u32,
        /// The API's own messages.
        messages: ApiMessages,
    },
    /// No answer on any attempt.
    #[error(
        "cannot reach Cloudflare's API for {endpoint} ({detail}) after {attempts} attempts: check the network, or CLOUDFLARE_API_BASE_URL"
    )]
    Unreachable {
        /// The request, the account left out.
        endpoint: String,
        /// How many were made.
        attempts: u32,
        /// What went wrong.
        detail: String,
    },
    /// The upload was rejected for one of its bindings.
    #[error(
        "Cloudflare rejected the upload of {script} for its binding {binding} ({status}) [{messages}]"
    )]
    BindingRejected {
        /// The script.
        script: String,
        /// The binding the API named.
        binding: String,
        /// The HTTP status.
        status: u16,
        /// The API's own messages.
        messages: ApiMessages,
    },
    /// Any other refusal, with the API's message.
    #[error("Cloudflare rejected {endpoint} ({status}) [{messages}]")]
    Rejected {
        /// The HTTP status.
        status: u16,
        /// The request, the account left out.
        endpoint: String,
        /// The API's own messages.
        messages: ApiMessages,
    },
    /// An answer that is not the API's envelope, or lacks what it should hold.
    #[error("Cloudflare's answer to {endpoint} is not what its API documents: {detail}")]
    Unexpected {
        /// The request, the account left out.
        endpoint: String,
        /// What went wrong.
        detail: String,
    },
    /// The HTTP client could not be built.
    #[error("cannot build the HTTP client: {0}")]
    Client(String),
}

/// The API's envelope: `{"success", "errors", "messages", "result"}`.
#[derive(Debug, Deserialize)]
struct Envelope {
    #[serde(default)]
    success: bool,
    #[serde(default)]
    errors: Vec<ApiMessage>,
    #[serde(default)]
    result: serde_json::Value,
}

/// What one answer means, decided from its status, `Retry-After` and body.
#[derive(Debug, Clone, PartialEq)]
pub enum Answer {
    /// Success: the envelope's `result`.
    Done(serde_json::Value),
    /// Worth another attempt.
    Transient(Transient, u16, ApiMessages),
    /// 401 or 403.
    Refused(u16, ApiMessages),
    /// Any other refusal.
    Rejected(u16, ApiMessages),
    /// Not the API's envelope.
    Unexpected(String),
}

/// Reads one answer (no I/O).
pub fn read_answer(status: u16, retry_after: Option<&str>, body: &str) -> Answer {
    let envelope = serde_json::from_str::<Envelope>(body).ok();
    let messages = ApiMessages(
        envelope
            .as_ref()
            .map(|e| e.errors.clone())
            .unwrap_or_default(),
    );
    match status {
        401 | 403 => Answer::Refused(status, messages),
        429 => Answer::Transient(
            Transient::RateLimited {
                retry_after: retry_after.and_then(retry::retry_after),
            },
            status,
            messages,
        ),
        500..=599 => Answer::Transient(Transient::ServerError, status, messages),
        200..=299 => match envelope {
            Some(e) if e.success => Answer::Done(e.result),
            Some(_) => Answer::Rejected(status, messages),
            None => Answer::Unexpected(format!(
                "{status} with a body that is no API envelope: {}",
                shortened(body, 300)
            )),
        },
        _ => Answer::Rejected(status, messages),
    }
}

/// The binding an upload's rejection is about: the first binding named in
/// the API's messages, or the one at an index they give (`bindings[2]`).
pub fn rejected_binding<'a>(messages: &ApiMessages, bindings: &'a [Binding]) -> Option<&'a str> {
    let text: String = messages
        .0
        .iter()
        .map(|m| m.message.as_str())
        .collect::<Vec<_>>()
        .join("\n");
    let mut names: Vec<&str> = bindings.iter().map(Binding::name).collect();
    // The longest first, so `LIMITS_20_PER_10S` is not found inside a longer name.
    names.sort_by_key(|n| std::cmp::Reverse(n.len()));
    if let Some(name) = names.into_iter().find(|n| text.contains(n)) {
        return Some(name);
    }
    let index = text.split("bindings").skip(1).find_map(|rest| {
        let rest = rest.trim_start_matches(['[', '.']);
        let digits: String = rest.chars().take_while(char::is_ascii_digit).collect();
        digits.parse::<usize>().ok()
    })?;
    bindings.get(index).map(Binding::name)
}

/// A tail opened on a script.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct TailTicket {
    /// Its id, for deleting it.
    pub id: String,
    /// The WebSocket to connect to, whatever the API says.
    pub url: String,
    /// When it closes by itself.
    #[serde(default)]
    pub expires_at: Option<String>,
}

/// The API client: one account, one token, one retry policy.
#[derive(Debug, Clone)]
pub struct Api {
    http: reqwest::Client,
    base: String,
    credentials: Credentials,
    retry: RetryPolicy,
}

/// How long one API request may take.
const API_TIMEOUT: Duration = Duration::from_secs(60);

impl Api {
    /// A client of the API at `base` (such as `https://api.cloudflare.com/client/v4`).
    pub fn new(credentials: Credentials, base: &str, retry: RetryPolicy) -> Result<Api, ApiError> {
        let http = reqwest::Client::builder()
            .timeout(API_TIMEOUT)
            .build()
            .map_err(|e| ApiError::Client(e.without_url().to_string()))?;
        Ok(Api {
            http,
            base: base.trim_end_matches('/').to_owned(),
            credentials,
            retry,
        })
    }

    /// Sends one request with the token, retrying what is transient.
    async fn request(
        &self,
        endpoint: Endpoint<'_>,
        body: Option<(&str, &[u8])>,
    ) -> Result<serde_json::Value, ApiError> {
        let auth = self
            .credentials
            .token
            .header_value()
            .map_err(|e| ApiError::Client(e.to_string()))?;
        let url = format!(
            "{}{}",
            self.base,
            endpoint.path(&self.credentials.account_id)
        );
        let shown = endpoint.to_string();
        let mut attempt = 0;
        loop {
            attempt += 1;
            let mut request = self
                .http
                .request(endpoint.method(), &url)
                .header(reqwest::header::AUTHORIZATION, auth.clone());
            if let Some((content_type, bytes)) = body {
                request = request
                    .header(reqwest::header::CONTENT_TYPE, content_type)
                    .body(bytes.to_vec());
            }
            let (transient, status, messages) = match request.send().await {
                Err(e) => (
                    Transient::ConnectionFailed,
                    0,
                    ApiMessages(vec![ApiMessage {
                        code: 0,
                        message: error_chain(&e.without_url()),
                    }]),
                ),
                Ok(response) => {
                    let status = response.status().as_u16();
                    let retry_after = response
                        .headers()
                        .get(reqwest::header::RETRY_AFTER)
                        .and_then(|v| v.to_str().ok())
                        .map(str::to_owned);
                    let text = response.text().await.unwrap_or_default();
                    let endpoint = shown.clone();
                    match read_answer(status, retry_after.as_deref(), &text) {
                        Answer::Done(result) => return Ok(result),
                        Answer::Transient(t, status, messages) => (t, status, messages),
                        Answer::Refused(status, messages) => {
                            return Err(ApiError::Refused {
                                status,
                                endpoint,
                                messages,
                            });
                        }
                        Answer::Rejected(status, messages) => {
                            return Err(ApiError::Rejected {
                                status,
                                endpoint,
                                messages,
                            });
                        }
                        Answer::Unexpected(detail) => {
                            return Err(ApiError::Unexpected { endpoint, detail });
                        }
                    }
                }
            };
            match self.retry.next(attempt, transient) {
                Next::RetryAfter(wait) => tokio::time::sleep(wait).await,
                Next::GiveUp => {
                    let (endpoint, attempts) = (shown, attempt);
                    return Err(match transient {
                        Transient::RateLimited { .. } => {
                            ApiError::RateLimited { endpoint, attempts }
                        }
                        Transient::ServerError => ApiError::ServerError {
                            status,
                            endpoint,
                            attempts,
                            messages,
                        },
                        Transient::ConnectionFailed => ApiError::Unreachable {
                            endpoint,
                            attempts,
                            detail: messages
                                .0
                                .first()
                                .map(|m| m.message.clone())
                                .unwrap_or_default(),
                        },
                    });
                }
            }
        }
    }

    async fn json(
        &self,
        endpoint: Endpoint<'_>,
        body: &serde_json::Value,
    ) -> Result<serde_json::Value, ApiError> {
        let bytes = body.to_string().into_bytes();
        self.request(endpoint, Some(("application/json", &bytes)))
            .await
    }

    /// The account's `workers.dev` subdomain (`NAME` of `NAME.workers.dev`).
    pub async fn account_subdomain(&self) -> Result<String, ApiError> {
        let endpoint = Endpoint::AccountSubdomain;
        let result = self.request(endpoint, None).await?;
        result["subdomain"]
            .as_str()
            .filter(|s| !s.is_empty())
            .map(str::to_owned)
            .ok_or_else(|| ApiError::Unexpected {
                endpoint: endpoint.to_string(),
                detail: format!(
                    "no `subdomain` in {result}: give the account a workers.dev subdomain in the dashboard (Workers & Pages)"
                ),
            })
    }

    /// Uploads `script`; a rejection that names a binding says which.
    pub async fn upload(&self, script: &str, upload: &Upload) -> Result<(), ApiError> {
        let multipart = upload.multipart();
        let body = Some((multipart.content_type.as_str(), multipart.body.as_slice()));
        match self.request(Endpoint::Upload(script), body).await {
            Ok(_) => Ok(()),
            Err(ApiError::Rejected {
                status,
                endpoint,
                messages,
            }) => Err(
                match rejected_binding(&messages, &upload.metadata.bindings) {
                    Some(binding) => ApiError::BindingRejected {
                        script: script.to_owned(),
                        binding: binding.to_owned(),
                        status,
                        messages,
                    },
                    None => ApiError::Rejected {
                        status,
                        endpoint,
                        messages,
                    },
                },
            ),
            Err(error) => Err(error),
        }
    }

    /// Turns on `script`'s `workers.dev` route.
    pub async fn enable_subdomain(&self, script: &str) -> Result<(), ApiError> {
        self.json(
            Endpoint::EnableSubdomain(script),
            &serde_json::json!({ "enabled": true, "previews_enabled": false }),
        )
        .await
        .map(drop)
    }

    /// Opens a tail on `script`.
    pub async fn create_tail(&self, script: &str) -> Result<TailTicket, ApiError> {
        let endpoint = Endpoint::CreateTail(script);
        let result = self
            .json(endpoint, &serde_json::json!({ "filters": [] }))
            .await?;
        serde_json::from_value(result.clone()).map_err(|e| ApiError::Unexpected {
            endpoint: endpoint.to_string(),
            detail: format!("{e} in {}", shortened(&result.to_string(), 300)),
        })
    }

    /// Closes a tail; one already gone is fine.
    pub async fn delete_tail(&self, script: &str, tail: &str) -> Result<(), ApiError> {
        gone_is_fine(self.request(Endpoint::DeleteTail(script, tail), None).await)
    }

    /// Deletes `script` (and whatever hangs on it); one already gone is fine.
    pub async fn delete_script(&self, script: &str) -> Result<(), ApiError> {
        gone_is_fine(self.request(Endpoint::DeleteScript(script), None).await)
    }

    /// `script`'s settings as the API gives them: `bindings` among them,
    /// a `plain_text` one with its `text`.
    pub async fn script_settings(&self, script: &str) -> Result<serde_json::Value, ApiError> {
        let endpoint = Endpoint::ScriptSettings(script);
        let result = self.request(endpoint, None).await?;
        if result.is_object() {
            Ok(result)
        } else {
            Err(ApiError::Unexpected {
                endpoint: endpoint.to_string(),
                detail: format!(
                    "`result` is not an object: {}",
                    shortened(&result.to_string(), 300)
                ),
            })
        }
    }

    /// The names of the account's scripts.
    pub async fn list_scripts(&self) -> Result<Vec<String>, ApiError> {
        let endpoint = Endpoint::ListScripts;
        let result = self.request(endpoint, None).await?;
        let scripts = result.as_array().ok_or_else(|| ApiError::Unexpected {
            endpoint: endpoint.to_string(),
            detail: format!(
                "`result` is not a list: {}",
                shortened(&result.to_string(), 300)
            ),
        })?;
        Ok(scripts
            .iter()
            .filter_map(|s| s["id"].as_str().map(str::to_owned))
            .collect())
    }
}

fn gone_is_fine(result: Result<serde_json::Value, ApiError>) -> Result<(), ApiError> {
    match result {
        Ok(_) | Err(ApiError::Rejected { status: 404, .. }) => Ok(()),
        Err(e) => Err(e),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::world::cloudflare::upload::Simple;

    #[test]
    fn answers_are_read_by_status_and_envelope() {
        let ok = r#"{"success":true,"errors":[],"messages":[],"result":{"subdomain":"acct"}}"#;
        assert_eq!(
            read_answer(200, None, ok),
            Answer::Done(serde_json::json!({"subdomain":"acct"}))
        );
        let denied =
            r#"{"success":false,"errors":[{"code":10000,"message":"Authentication error"}]}"#;
        assert!(matches!(
            read_answer(403, None, denied),
            Answer::Refused(403, _)
        ));
        assert!(matches!(
            read_answer(429, Some("3"), ""),
            Answer::Transient(
                Transient::RateLimited {
                    retry_after: Some(d)
                },
                429,
                _
            ) if d == Duration::from_secs(3)
        ));
        assert!(matches!(
            read_answer(502, None, "<html>"),
            Answer::Transient(Transient::ServerError, 502, _)
        ));
        assert!(matches!(
            read_answer(200, None, "<html>"),
            Answer::Unexpected(_)
        ));
        assert!(matches!(
            read_answer(200, None, r#"{"success":false,"errors":[]}"#),
            Answer::Rejected(200, _)
        ));
    }

    #[test]
    fn a_rejection_names_its_binding_by_name_or_by_index() {
        let bindings = vec![
            Binding::Ratelimit {
                name: "LIMITS_20_PER_10S".into(),
                namespace_id: "7".into(),
                simple: Simple {
                    limit: 20,
                    period: 10,
                },
            },
            Binding::Ratelimit {
                name: "LIMITS_120_PER_60S".into(),
                namespace_id: "8".into(),
                simple: Simple {
                    limit: 120,
                    period: 60,
                },
            },
        ];
        let said = |message: &str| {
            ApiMessages(vec![ApiMessage {
                code: 10021,
                message: message.to_owned(),
            }])
        };
        assert_eq!(
            rejected_binding(
                &said("binding LIMITS_120_PER_60S: namespace_id invalid"),
                &bindings
            ),
            Some("LIMITS_120_PER_60S")
        );
        assert_eq!(
            rejected_binding(
                &said("metadata.bindings[1].simple.period must be 10 or 60"),
                &bindings
            ),
            Some("LIMITS_120_PER_60S")
        );
        assert_eq!(rejected_binding(&said("script too large"), &bindings), None);
    }

    #[test]
    fn endpoints_leave_the_account_out_of_messages() {
        assert_eq!(
            Endpoint::DeleteScript("s-1").to_string(),
            "DELETE /accounts/…/workers/scripts/s-1?force=true"
        );
        assert_eq!(
            Endpoint::Upload("s-1").path("abc"),
            "/accounts/abc/workers/scripts/s-1"
        );
    }
}
