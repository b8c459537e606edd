//! What a description's problems are reported as: a stable [`Code`], a
//! message and a place ([`Location`]), every one of them at once
//! ([`Diagnostics`]). The codes' strings are the framework's interface.

use std::fmt;
use std::path::PathBuf;
use std::str::FromStr;

/// A stable diagnostic code. The strings are part of the framework's
/// interface: scripts and scenario files match on them, so they never change.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Code {
    /// The description is not valid TOML or does not have the expected shape.
    InvalidToml,
    /// `rate_limits.store` is not the name of one redis or cloudflare_rate_limits connection.
    StoreInvalid,
    /// A Workers deployable serves an API and there is no store.
    StoreRequired,
    /// A native deployable serves an API with Cloudflare's binding as its store.
    TargetUnsupported,
    /// A cloudflare_rate_limits connection's namespace is missing, not whole, or below 1.
    NamespaceInvalid,
    /// A Workers deployable serves an API with a Redis store and has not declined this.
    CountedInMemory,
    /// A route's window is one Cloudflare's binding cannot count.
    WindowUnsupported,
    /// A route's rate_limit has a request count or window below 1.
    LimitInvalid,
    /// A deployable declines something that is not a declinable judgement call.
    DeclineUnknown,
    /// Two deployables share a name.
    DeployableDuplicate,
    /// Two routes share a path and a method (every method, for a limit
    /// that names none).
    RouteDuplicate,
    /// A Cloudflare connection's name gives binding names that are no JavaScript identifiers.
    BindingNameInvalid,
    /// A deployable's `client_address` is no source, names a network that is
    /// not one, or is not Cloudflare's header on Workers.
    ClientAddressInvalid,
    /// A route's path does not start with `/`, or holds a character no
    /// request's path holds or the keys reserve (`|`).
    RoutePathInvalid,
    /// `rate_limits.data_points` is no Workers Analytics Engine dataset name.
    DataPointsInvalid,
    /// A deployable's `memory_budget_mib` is no whole number of MiB from 1
    /// on, or is more than its target allows (32 on Workers).
    MemoryBudgetInvalid,
    /// The routes' limits cannot share a deployable's in-memory budget with
    /// each route's sketch sized for its fewest keys.
    MemoryOverBudget,
    /// The application's `name` is missing where a deployable counts in
    /// Redis (which other applications may share), or is no name its keys
    /// can hold.
    ApplicationNameInvalid,
    /// A route limit's `methods` is no list of methods it can name, once
    /// each (`GET` stands for `HEAD` too).
    MethodsInvalid,
    /// A `shadow` setting is not what it may be: a route limit's is `true`
    /// or `false`; `rate_limits.shadow` a list of built-in limits
    /// (`"caller"`, `"address"`), each once.
    ShadowInvalid,
}

impl Code {
    /// Every code, for listing and for parsing scenario expectations.
    pub const ALL: [Code; 20] = [
        Code::InvalidToml,
        Code::StoreInvalid,
        Code::StoreRequired,
        Code::TargetUnsupported,
        Code::NamespaceInvalid,
        Code::CountedInMemory,
        Code::WindowUnsupported,
        Code::LimitInvalid,
        Code::DeclineUnknown,
        Code::DeployableDuplicate,
        Code::RouteDuplicate,
        Code::BindingNameInvalid,
        Code::ClientAddressInvalid,
        Code::RoutePathInvalid,
        Code::DataPointsInvalid,
        Code::MemoryBudgetInvalid,
        Code::MemoryOverBudget,
        Code::ApplicationNameInvalid,
        Code::MethodsInvalid,
        Code::ShadowInvalid,
    ];

    /// The stable string form, such as `rate_limits.store_invalid`.
    pub fn as_str(self) -> &'static str {
        match self {
            Code::InvalidToml => "application.invalid_toml",
            Code::StoreInvalid => "rate_limits.store_invalid",
            Code::StoreRequired => "rate_limits.store_required",
            Code::TargetUnsupported => "deployable.target_unsupported",
            Code::NamespaceInvalid => "rate_limits.namespace_invalid",
            Code::CountedInMemory => "rate_limits.counted_in_memory",
            Code::WindowUnsupported => "rate_limits.window_unsupported",
            Code::LimitInvalid => "rate_limits.limit_invalid",
            Code::DeclineUnknown => "deployable.decline_unknown",
            Code::DeployableDuplicate => "deployable.duplicate",
            Code::RouteDuplicate => "rate_limits.route_duplicate",
            Code::BindingNameInvalid => "rate_limits.binding_name_invalid",
            Code::ClientAddressInvalid => "rate_limits.client_address_invalid",
            Code::RoutePathInvalid => "rate_limits.route_path_invalid",
            Code::DataPointsInvalid => "rate_limits.data_points_invalid",
            Code::MemoryBudgetInvalid => "deployable.memory_budget_invalid",
            Code::MemoryOverBudget => "rate_limits.memory_over_budget",
            Code::ApplicationNameInvalid => "application.name_invalid",
            Code::MethodsInvalid => "rate_limits.methods_invalid",
            Code::ShadowInvalid => "rate_limits.shadow_invalid",
        }
    }

    /// Judgement calls a deployable may decline with a decline line.
    #[doc(hidden)]
    pub fn is_declinable(self) -> bool {
        matches!(self, Code::CountedInMemory)
    }
}

impl fmt::Display for Code {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The error for a string that is no diagnostic code.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("`{0}` is not a diagnostic code")]
pub struct UnknownCode(pub String);

impl FromStr for Code {
    type Err = UnknownCode;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Code::ALL
            .into_iter()
            .find(|code| code.as_str() == s)
            .ok_or_else(|| UnknownCode(s.to_owned()))
    }
}

/// A 1-based position in the description's text.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Location {
    /// The line, from 1.
    pub line: usize,
    /// The column in characters (not bytes), from 1, as editors count it.
    pub column: usize,
}

impl Location {
    /// The line and column of a byte offset in `source`.
    #[doc(hidden)]
    pub fn of_offset(source: &str, offset: usize) -> Location {
        let offset = offset.min(source.len());
        let before = source.get(..offset).unwrap_or(source);
        let line = before.matches('\n').count() + 1;
        let line_start = before.rfind('\n').map_or(0, |i| i + 1);
        let column = before[line_start..].chars().count() + 1;
        Location { line, column }
    }
}

impl Location {
    /// Where the TOML reader's `error` is in `source`. The reader gives most
    /// errors a span; the one it gives none, a dotted key of more parts than
    /// it nests (`a.b.c...`, a table header's included), is placed at the
    /// first part past that limit. Only an error the reader gives no span
    /// and no key explains is placed at the document's start.
    #[doc(hidden)]
    pub fn of_toml_error(source: &str, error: &toml::de::Error) -> Location {
        let offset = error
            .span()
            .map(|span| span.start)
            .or_else(|| key_past_nesting_limit(source))
            .unwrap_or(0);
        Location::of_offset(source, offset)
    }
}

/// The most parts a dotted key may have in the TOML reader (toml 1.x's
/// `de::parser::LIMIT`, private there): one more is its spanless
/// `recursion limit` error. A test pins the figure to the reader's.
pub const TOML_KEY_NESTING_LIMIT: usize = 80;

/// The byte offset of the first key part past [`TOML_KEY_NESTING_LIMIT`]
/// in `source`, read with the TOML reader's own event parser, so every
/// spelling of a key (quoted parts, whitespace around the dots, table
/// headers, inline tables) counts as the reader counts it.
fn key_past_nesting_limit(source: &str) -> Option<usize> {
    use toml_parser::parser::{EventReceiver, parse_document};
    use toml_parser::{ErrorSink, Span, decoder::Encoding};

    /// Counts the parts of the key being read; any event but a part, a dot
    /// or whitespace ends it.
    #[derive(Default)]
    struct Parts {
        parts: usize,
        after_dot: bool,
        found: Option<usize>,
    }
    impl Parts {
        fn end_key(&mut self) {
            self.parts = 0;
            self.after_dot = false;
        }
    }
    impl EventReceiver for Parts {
        fn simple_key(&mut self, span: Span, _: Option<Encoding>, _: &mut dyn ErrorSink) {
            self.parts = if self.after_dot { self.parts + 1 } else { 1 };
            self.after_dot = false;
            if self.parts == TOML_KEY_NESTING_LIMIT + 1 && self.found.is_none() {
                self.found = Some(span.start());
            }
        }
        fn key_sep(&mut self, _: Span, _: &mut dyn ErrorSink) {
            self.after_dot = true;
        }
        fn std_table_open(&mut self, _: Span, _: &mut dyn ErrorSink) {
            self.end_key();
        }
        fn std_table_close(&mut self, _: Span, _: &mut dyn ErrorSink) {
            self.end_key();
        }
        fn array_table_open(&mut self, _: Span, _: &mut dyn ErrorSink) {
            self.end_key();
        }
        fn array_table_close(&mut self, _: Span, _: &mut dyn ErrorSink) {
            self.end_key();
        }
        fn inline_table_open(&mut self, _: Span, _: &mut dyn ErrorSink) -> bool {
            self.end_key();
            true
        }
        fn inline_table_close(&mut self, _: Span, _: &mut dyn ErrorSink) {
            self.end_key();
        }
        fn array_open(&mut self, _: Span, _: &mut dyn ErrorSink) -> bool {
            self.end_key();
            true
        }
        fn key_val_sep(&mut self, _: Span, _: &mut dyn ErrorSink) {
            self.end_key();
        }
        fn scalar(&mut self, _: Span, _: Option<Encoding>, _: &mut dyn ErrorSink) {
            self.end_key();
        }
        fn value_sep(&mut self, _: Span, _: &mut dyn ErrorSink) {
            self.end_key();
        }
        fn newline(&mut self, _: Span, _: &mut dyn ErrorSink) {
            self.end_key();
        }
        fn error(&mut self, _: Span, _: &mut dyn ErrorSink) {
            self.end_key();
        }
    }

    let source = toml_parser::Source::new(source);
    let tokens = source.lex().into_vec();
    let mut parts = Parts::default();
    parse_document(&tokens, &mut parts, &mut ());
    parts.found
}

impl fmt::Display for Location {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.line, self.column)
    }
}

/// One problem with an application description.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Diagnostic {
    /// The stable code, which tools match on and deployables may decline.
    pub code: Code,
    /// What is wrong and how to fix it, in the description's own words.
    pub message: String,
    /// Where in the description, when the problem has a place.
    pub location: Option<Location>,
}

/// Every diagnostic of a description that did not validate. Its `Display`
/// and its `Debug` are the same lines, `CODE: line:col: message`, so a
/// `main` returning it with `?` (which prints `Debug`) reads as `anyhow`
/// and `miette` print it (`Display`); [`Application::from_file`] names the
/// file as well ([`FileError`]).
///
/// [`Application::from_file`]: crate::config::Application::from_file
#[derive(Clone, PartialEq, Eq, thiserror::Error)]
#[error("{}", self.lines(None))]
pub struct Diagnostics(pub Vec<Diagnostic>);

impl fmt::Debug for Diagnostics {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

impl Diagnostics {
    /// The codes, in the order reported.
    pub fn codes(&self) -> Vec<Code> {
        self.0.iter().map(|d| d.code).collect()
    }

    /// One `CODE: file:line:col: message` line for each diagnostic, as
    /// `harness validate` prints them.
    pub fn render(&self, file_name: &str) -> String {
        let mut out = self.lines(Some(file_name));
        out.push('\n');
        out
    }

    /// The diagnostics one a line (`CODE: file:line:col: message`, or
    /// `CODE: line:col: message` without a file), with no final newline.
    fn lines(&self, file_name: Option<&str>) -> String {
        let lines: Vec<String> = self
            .0
            .iter()
            .map(|d| {
                let place = match (file_name, d.location) {
                    (Some(file), Some(at)) => format!("{file}:{at}: "),
                    (Some(file), None) => format!("{file}: "),
                    (None, Some(at)) => format!("{at}: "),
                    (None, None) => String::new(),
                };
                format!("{}: {place}{}", d.code, d.message)
            })
            .collect();
        lines.join("\n")
    }
}

/// An application description file that could not be read, or did not
/// validate ([`Application::from_file`]). Its `Display` and its `Debug`
/// name the file, one `CODE: FILE:line:col: message` line a diagnostic,
/// so a `main` returning it with `?` prints where to look.
///
/// [`Application::from_file`]: crate::config::Application::from_file
#[derive(thiserror::Error)]
pub enum FileError {
    /// The file could not be read.
    #[error("{}: {error}", file.display())]
    Unreadable {
        /// The file, as the caller named it.
        file: PathBuf,
        /// Why it could not be read.
        error: std::io::Error,
    },
    /// The description did not validate: every diagnostic, with the file.
    #[error("{}", diagnostics.lines(Some(&file.display().to_string())))]
    Invalid {
        /// The file, as the caller named it.
        file: PathBuf,
        /// Every diagnostic of its description.
        diagnostics: Diagnostics,
    },
}

impl fmt::Debug for FileError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}
