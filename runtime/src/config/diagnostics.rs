//! What a description's problems are reported as: a stable [`Code`], a
//! message and a place ([`Location`]), every one of them at once
//! ([`Diagnostics`]). The codes' strings are the framework's interface.

use std::fmt;
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
    /// Two routes share a path.
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
    /// The application's `name` is missing where a deployable counts in
    /// Redis (which other applications may share), or is no name its keys
    /// can hold.
    ApplicationNameInvalid,
}

impl Code {
    /// Every code, for listing and for parsing scenario expectations.
    pub const ALL: [Code; 16] = [
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
        Code::ApplicationNameInvalid,
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
            Code::ApplicationNameInvalid => "application.name_invalid",
        }
    }

    /// Judgement calls a deployable may decline with a decline line.
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
    pub fn of_offset(source: &str, offset: usize) -> Location {
        let offset = offset.min(source.len());
        let before = source.get(..offset).unwrap_or(source);
        let line = before.matches('\n').count() + 1;
        let line_start = before.rfind('\n').map_or(0, |i| i + 1);
        let column = before[line_start..].chars().count() + 1;
        Location { line, column }
    }
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

/// Every diagnostic of a description that did not validate.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("the application description has {} problem(s): {}", .0.len(), codes(.0))]
pub struct Diagnostics(pub Vec<Diagnostic>);

fn codes(diagnostics: &[Diagnostic]) -> String {
    let list: Vec<&str> = diagnostics.iter().map(|d| d.code.as_str()).collect();
    list.join(", ")
}

impl Diagnostics {
    /// The codes, in the order reported.
    pub fn codes(&self) -> Vec<Code> {
        self.0.iter().map(|d| d.code).collect()
    }

    /// One `CODE: file:line:col: message` line for each diagnostic, as `check` prints them.
    pub fn render(&self, file_name: &str) -> String {
        let mut out = String::new();
        for d in &self.0 {
            match d.location {
                Some(at) => out.push_str(&format!("{}: {file_name}:{at}: {}\n", d.code, d.message)),
                None => out.push_str(&format!("{}: {file_name}: {}\n", d.code, d.message)),
            }
        }
        out
    }
}
