//! The body of a Worker's upload (`PUT .../workers/scripts/{name}`), as
//! Cloudflare's API documents it and wrangler sends it: multipart/form-data
//! with a `metadata` part (`main_module`, `compatibility_date`, `bindings`)
//! and one part per module. Built as bytes here, with no I/O, so a dry run
//! writes exactly what a run sends.

use std::hash::{Hash, Hasher};

use serde::Serialize;

/// One binding of the upload's metadata, as the API takes it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Binding {
    /// A Rate Limiting binding: `namespace_id` a string holding a positive
    /// integer, `simple.period` 10 or 60.
    Ratelimit {
        /// The name the Worker sees it under in `env`.
        name: String,
        /// Its namespace: a string holding a positive integer.
        namespace_id: String,
        /// Its limit.
        simple: Simple,
    },
    /// A Workers Analytics Engine dataset the Worker writes data points to.
    AnalyticsEngine {
        /// The name the Worker sees it under in `env`.
        name: String,
        /// The dataset's name.
        dataset: String,
    },
    /// A text the Worker reads from `env`.
    PlainText {
        /// The name the Worker sees it under in `env`.
        name: String,
        /// The text.
        text: String,
    },
}

impl Binding {
    /// The name the Worker sees it under.
    pub fn name(&self) -> &str {
        match self {
            Binding::Ratelimit { name, .. }
            | Binding::AnalyticsEngine { name, .. }
            | Binding::PlainText { name, .. } => name,
        }
    }
}

/// A ratelimit binding's limit.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Simple {
    /// Requests...
    pub limit: u32,
    /// ...per this many seconds (10 or 60).
    pub period: u32,
}

/// The `metadata` part.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Metadata {
    /// The module the Worker starts from.
    pub main_module: String,
    /// The runtime's behaviour, by date.
    pub compatibility_date: String,
    /// None: as wrangler sends them.
    pub compatibility_flags: Vec<String>,
    /// What the Worker finds in `env`.
    pub bindings: Vec<Binding>,
}

/// What a module part holds, which gives its content type.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ModuleKind {
    /// An ES module: `application/javascript+module`.
    EsModule,
    /// A WebAssembly module: `application/wasm`.
    Wasm,
}

impl ModuleKind {
    /// Its part's `Content-Type`.
    pub fn content_type(self) -> &'static str {
        match self {
            ModuleKind::EsModule => "application/javascript+module",
            ModuleKind::Wasm => "application/wasm",
        }
    }
}

/// One module of the Worker, named as the others import it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Module {
    /// Its name, as the others import it.
    pub name: String,
    /// What it holds.
    pub kind: ModuleKind,
    /// Its contents.
    pub bytes: Vec<u8>,
}

/// A whole upload.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Upload {
    /// The `metadata` part.
    pub metadata: Metadata,
    /// One part each.
    pub modules: Vec<Module>,
}

/// An encoded multipart body and the `Content-Type` that names its boundary.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Multipart {
    /// `multipart/form-data; boundary=...`
    pub content_type: String,
    /// The body.
    pub body: Vec<u8>,
}

impl Upload {
    /// The metadata as the `metadata` part holds it.
    pub fn metadata_json(&self) -> String {
        // Strings, numbers and lists of them always serialise.
        serde_json::to_string(&self.metadata).unwrap_or_default()
    }

    /// The multipart body. Its boundary is a digest of the parts (and
    /// appears in none of them), so the same upload is the same bytes.
    pub fn multipart(&self) -> Multipart {
        let metadata = self.metadata_json();
        let mut digest = std::collections::hash_map::DefaultHasher::new();
        metadata.hash(&mut digest);
        for module in &self.modules {
            module.name.hash(&mut digest);
            module.bytes.hash(&mut digest);
        }
        let mut salt = digest.finish();
        let boundary = loop {
            let candidate = format!("----harness-upload-{salt:016x}");
            let clashes = metadata.contains(&candidate)
                || self
                    .modules
                    .iter()
                    .any(|m| contains(&m.bytes, candidate.as_bytes()));
            if !clashes {
                break candidate;
            }
            salt = salt.wrapping_add(1);
        };
        let mut body = Vec::new();
        let mut part = |headers: String, content: &[u8]| {
            body.extend_from_slice(format!("--{boundary}\r\n{headers}\r\n").as_bytes());
            body.extend_from_slice(content);
            body.extend_from_slice(b"\r\n");
        };
        part(
            "Content-Disposition: form-data; name=\"metadata\"\r\n".to_owned(),
            metadata.as_bytes(),
        );
        for module in &self.modules {
            part(
                format!(
                    "Content-Disposition: form-data; name=\"{name}\"; filename=\"{name}\"\r\nContent-Type: {}\r\n",
                    module.kind.content_type(),
                    name = module.name
                ),
                &module.bytes,
            );
        }
        body.extend_from_slice(format!("--{boundary}--\r\n").as_bytes());
        Multipart {
            content_type: format!("multipart/form-data; boundary={boundary}"),
            body,
        }
    }
}

fn contains(haystack: &[u8], needle: &[u8]) -> bool {
    haystack.windows(needle.len()).any(|w| w == needle)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn upload() -> Upload {
        Upload {
            metadata: Metadata {
                main_module: "entry.js".into(),
                compatibility_date: "2026-11-17".into(),
                compatibility_flags: Vec::new(),
                bindings: vec![
                    Binding::Ratelimit {
                        name: "LIMITS_120_PER_60S".into(),
                        namespace_id: "7".into(),
                        simple: Simple {
                            limit: 120,
                            period: 60,
                        },
                    },
                    Binding::PlainText {
                        name: "PLAN".into(),
                        text: "rate-limits-plan 2\ndeployable edge\n".into(),
                    },
                    Binding::AnalyticsEngine {
                        name: "RATE_LIMIT_DATA_POINTS".into(),
                        dataset: "rate_limits".into(),
                    },
                ],
            },
            modules: vec![
                Module {
                    name: "entry.js".into(),
                    kind: ModuleKind::EsModule,
                    bytes: b"export default {}".to_vec(),
                },
                Module {
                    name: "deployable_bg.wasm".into(),
                    kind: ModuleKind::Wasm,
                    bytes: vec![0, 97, 115, 109],
                },
            ],
        }
    }

    #[test]
    fn bindings_are_shaped_as_the_api_takes_them() {
        let json: serde_json::Value =
            serde_json::from_str(&upload().metadata_json()).expect("JSON");
        assert_eq!(
            json["bindings"][0],
            serde_json::json!({"type":"ratelimit","name":"LIMITS_120_PER_60S","namespace_id":"7","simple":{"limit":120,"period":60}})
        );
        assert_eq!(
            json["bindings"][1],
            serde_json::json!({"type":"plain_text","name":"PLAN","text":"rate-limits-plan 2\ndeployable edge\n"})
        );
        assert_eq!(
            json["bindings"][2],
            serde_json::json!({"type":"analytics_engine","name":"RATE_LIMIT_DATA_POINTS","dataset":"rate_limits"})
        );
        assert_eq!(json["main_module"], "entry.js");
    }

    #[test]
    fn the_body_has_a_metadata_part_and_one_typed_part_per_module() {
        let multipart = upload().multipart();
        let boundary = multipart
            .content_type
            .strip_prefix("multipart/form-data; boundary=")
            .expect("a boundary");
        let text = String::from_utf8_lossy(&multipart.body);
        assert!(text.starts_with(&format!(
            "--{boundary}\r\nContent-Disposition: form-data; name=\"metadata\"\r\n\r\n{{"
        )));
        assert!(text.contains("name=\"entry.js\"; filename=\"entry.js\"\r\nContent-Type: application/javascript+module\r\n\r\nexport default {}\r\n"));
        assert!(text.contains("Content-Type: application/wasm\r\n"));
        assert!(text.ends_with(&format!("--{boundary}--\r\n")));
        assert_eq!(text.matches(&format!("--{boundary}\r\n")).count(), 3);
        // The same upload is the same bytes.
        assert_eq!(upload().multipart(), multipart);
    }
}
