//! The account and the token a run on Cloudflare uses, from the variables
//! wrangler reads. The token goes into one request header, marked
//! sensitive, and nowhere else: it has no `Display`, and its `Debug` says
//! only that it is there.

use std::fmt;

/// The variable holding the API token.
pub const TOKEN_VARIABLE: &str = "CLOUDFLARE_API_TOKEN";
/// The variable holding the account's id.
pub const ACCOUNT_VARIABLE: &str = "CLOUDFLARE_ACCOUNT_ID";
/// The variable that points the API elsewhere (a proxy, a staging API, a
/// fake in tests): the one wrangler reads for the same purpose.
pub const BASE_URL_VARIABLE: &str = "CLOUDFLARE_API_BASE_URL";
/// Cloudflare's API, when [`BASE_URL_VARIABLE`] is not set.
pub const DEFAULT_BASE_URL: &str = "https://api.cloudflare.com/client/v4";
/// The permission the token needs: uploading, routing, tailing and deleting
/// the account's Workers scripts.
pub const PERMISSION: &str = "Workers Scripts: Edit";

/// An API token. Never printed: see the module's documentation.
#[derive(Clone)]
pub struct ApiToken(String);

impl ApiToken {
    /// A token from its text.
    pub fn new(token: String) -> ApiToken {
        ApiToken(token)
    }

    /// The `Authorization` header's value, marked sensitive so no HTTP
    /// layer logs it.
    pub fn header_value(&self) -> Result<reqwest::header::HeaderValue, CredentialsError> {
        let mut value = reqwest::header::HeaderValue::from_str(&format!("Bearer {}", self.0))
            .map_err(|_| CredentialsError::UnusableToken)?;
        value.set_sensitive(true);
        Ok(value)
    }
}

impl fmt::Debug for ApiToken {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("ApiToken(<redacted>)")
    }
}

/// Who the run acts as: the account and the token.
#[derive(Debug, Clone)]
pub struct Credentials {
    /// The account's id.
    pub account_id: String,
    /// The token.
    pub token: ApiToken,
}

/// Why the credentials cannot be used: one line, naming the variable and
/// the permission, never the token.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CredentialsError {
    /// A variable is not set (or empty).
    #[error("{variable} is not set: give {what} (the token needs the permission \"{PERMISSION}\")")]
    Missing {
        /// Its name.
        variable: &'static str,
        /// What to put in it.
        what: &'static str,
    },
    #[error(
        "{TOKEN_VARIABLE} cannot go into an HTTP header (it has a character a token never has): copy the token again"
    )]
    /// The token has a character no HTTP header may hold.
    UnusableToken,
}

impl Credentials {
    /// From [`TOKEN_VARIABLE`] and [`ACCOUNT_VARIABLE`] (an empty one is missing).
    pub fn from_env() -> Result<Credentials, CredentialsError> {
        Credentials::from_lookup(|name| std::env::var(name).ok())
    }

    /// From any lookup of the two variables (the environment, or a test's map).
    pub fn from_lookup(
        lookup: impl Fn(&str) -> Option<String>,
    ) -> Result<Credentials, CredentialsError> {
        let read = |variable: &'static str, what: &'static str| {
            lookup(variable)
                .map(|v| v.trim().to_owned())
                .filter(|v| !v.is_empty())
                .ok_or(CredentialsError::Missing { variable, what })
        };
        let token = read(
            TOKEN_VARIABLE,
            "a Cloudflare API token (dash.cloudflare.com > My Profile > API Tokens)",
        )?;
        let account_id = read(
            ACCOUNT_VARIABLE,
            "the account's id (the dashboard's Workers & Pages overview shows it)",
        )?;
        let token = ApiToken::new(token);
        token.header_value()?;
        Ok(Credentials { account_id, token })
    }
}

/// The API's base URL: [`BASE_URL_VARIABLE`] when set, else Cloudflare's.
pub fn base_url_from_env() -> String {
    std::env::var(BASE_URL_VARIABLE)
        .ok()
        .map(|v| v.trim().trim_end_matches('/').to_owned())
        .filter(|v| !v.is_empty())
        .unwrap_or_else(|| DEFAULT_BASE_URL.to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_variables_read_here_are_the_ones_no_child_inherits() {
        assert_eq!(
            crate::world::process::CLOUDFLARE_SECRETS,
            [TOKEN_VARIABLE, ACCOUNT_VARIABLE]
        );
    }

    #[test]
    fn a_missing_variable_is_one_line_naming_it_and_the_permission() {
        let none = Credentials::from_lookup(|_| None).unwrap_err().to_string();
        assert!(
            none.starts_with("CLOUDFLARE_API_TOKEN is not set"),
            "{none}"
        );
        assert!(none.contains("\"Workers Scripts: Edit\""), "{none}");
        assert_eq!(none.lines().count(), 1);
        let no_account = Credentials::from_lookup(|name| {
            (name == TOKEN_VARIABLE).then(|| "tok-SECRET".to_owned())
        })
        .unwrap_err()
        .to_string();
        assert!(
            no_account.starts_with("CLOUDFLARE_ACCOUNT_ID is not set"),
            "{no_account}"
        );
        assert!(!no_account.contains("tok-SECRET"));
        let blank = Credentials::from_lookup(|_| Some("  ".to_owned())).unwrap_err();
        assert!(matches!(
            blank,
            CredentialsError::Missing {
                variable: TOKEN_VARIABLE,
                ..
            }
        ));
    }

    #[test]
    fn the_token_is_redacted_in_debug_and_sensitive_in_its_header() {
        let credentials = Credentials::from_lookup(|name| {
            Some(match name {
                TOKEN_VARIABLE => "tok-SECRET-123".to_owned(),
                _ => "acct".to_owned(),
            })
        })
        .expect("both set");
        let shown = format!("{credentials:?}");
        assert!(!shown.contains("tok-SECRET-123"), "{shown}");
        assert!(shown.contains("<redacted>"), "{shown}");
        let header = credentials.token.header_value().expect("a header");
        assert!(header.is_sensitive());
        assert!(!format!("{header:?}").contains("tok-SECRET"));
    }

    #[test]
    fn a_token_that_cannot_be_a_header_is_refused_without_showing_it() {
        let error = Credentials::from_lookup(|name| {
            Some(match name {
                TOKEN_VARIABLE => "tok\nSECRET".to_owned(),
                _ => "acct".to_owned(),
            })
        })
        .unwrap_err()
        .to_string();
        assert!(!error.contains("SECRET"), "{error}");
    }
}
