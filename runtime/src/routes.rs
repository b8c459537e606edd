//! Which route a request's path meets, decided once here so that the three
//! gates (wasm-bindgen, workers-rs, native) and both sides of the
//! JavaScript boundary agree: a client that can spell a limited path
//! another way (`/api/login/`, `//api/login`, `/api/./login`,
//! `/api/%6Cogin`) is still counted on it, as Envoy's CVE-2019-9901 and
//! rack-attack's trailing-slash fix show a limiter must.
//!
//! - [`canonical`] is the one spelling of a request's path: RFC 3986
//!   6.2.2's normalisation (unreserved characters' escapes decoded, other
//!   escapes' hex upper-cased, dot segments removed), repeated slashes
//!   merged, a trailing slash dropped, `\` taken as `/` (as WHATWG's
//!   `new URL()` takes it in a Worker), and what a path never holds raw
//!   percent-encoded as `new URL()` encodes it (and a `%` that starts no
//!   escape as `%25`, so the result is its own canonical form). Case is
//!   kept, and `%2F` and `%5C` stay escapes: decoding them would make one
//!   segment two.
//! - A route's path is a template: literal segments, `{name}` for one
//!   segment and a final `{*name}` for the rest (axum 0.8's syntax, and
//!   its router's, [`matchit`]), normalised as [`canonical`] normalises a
//!   request's path ([`canonical_template`]).
//! - [`RouteTable`] finds the routes a request's path meets, the most
//!   specific where several do (static over parameter over catch-all, as
//!   the router chooses). A template is counted as a whole: one count per
//!   subject for `/api/users/{id}`, not one per id.
//!
//! A path is matched three ways, and counted under the routes of each (once
//! where they are one route): as sent, as `new URL()` resolves it, and in
//! its canonical form. The canonical form alone is not what a router
//! matches: axum 0.8's router ([`matchit`], which this table uses too)
//! matches the path byte for byte, dot segments, `\` and escapes as sent,
//! then percent-decodes the parameters, so it hands `/api/search/..`,
//! `/api/search/%2e%2e` or `/api/search/fo\o` to `/api/search/{q}`'s
//! handler, `/api/files//` to `/api/files/{*rest}`'s and `/api/users/%6De`
//! to `/api/users/{id}`'s beside a static `/api/users/me`: paths whose
//! canonical form meets another route or none. Matched with the same
//! matcher, the route the router serves is met whenever the description
//! lists it (the router's routes are the description's and maybe more, and
//! a route more specific than it that the description lists would have
//! been served instead). The gate is handed:
//!
//! - natively, the path as the client sent it (`OriginalUri`), the path the
//!   router matches;
//! - on Workers, the path of `request.url` as workerd gives it, which keeps
//!   escaped dot segments (`%2e%2e`): a Worker's router may match it as it
//!   stands (a router reading `request.url`) or as `new URL()` resolves it
//!   (`pathname`, workers-rs's `Request::path`: escaped dot segments too
//!   removed, `\` read as `/`), so both are matched.
//!
//! A spelling that only the canonical form takes to a route (`//api/login`,
//! `/api/%6Cogin`, which axum answers 404) is counted there too: counting
//! more than the router serves is safe, counting less would be a bypass.

use std::borrow::Cow;

/// Why a route's path is no template [`RouteTable`] can match, with the
/// form to write instead.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TemplateError {
    /// `:id`, the syntax of Express and axum before 0.8.
    #[error(
        "has segment `{0}`, a parameter in a syntax this runtime does not read: write `{{{1}}}`"
    )]
    ColonParameter(String, String),
    /// `*` or `*rest`, a catch-all of other routers.
    #[error(
        "has segment `{0}`, a wildcard in a syntax this runtime does not read: write `{{*{1}}}` \
         as the last segment"
    )]
    Star(String, String),
    /// Braces that are not one whole-segment parameter.
    #[error(
        "has segment `{0}`: a parameter is a whole segment, `{{name}}` or (the last) \
         `{{*name}}`, its name letters, digits and `_`; a literal brace is written `%7B` or `%7D`"
    )]
    Braces(String),
    /// `{*rest}` with segments after it.
    #[error("has `{0}` before its last segment: a catch-all takes the rest of the path")]
    CatchAllNotLast(String),
}

/// What a segment of a route's template is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Segment<'a> {
    Literal(&'a str),
    Parameter,
    CatchAll,
}

/// Reads one segment of a template, or says why it is none.
fn template_segment(segment: &str) -> Result<Segment<'_>, TemplateError> {
    let name_ok = |name: &str| {
        !name.is_empty() && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_')
    };
    if let Some(inner) = segment.strip_prefix('{').and_then(|s| s.strip_suffix('}')) {
        return match inner.strip_prefix('*') {
            Some(name) if name_ok(name) => Ok(Segment::CatchAll),
            None if name_ok(inner) => Ok(Segment::Parameter),
            _ => Err(TemplateError::Braces(segment.to_owned())),
        };
    }
    if segment.contains(['{', '}']) {
        return Err(TemplateError::Braces(segment.to_owned()));
    }
    let suggested = |rest: &str| {
        if name_ok(rest) {
            rest.to_owned()
        } else {
            "name".to_owned()
        }
    };
    if let Some(rest) = segment.strip_prefix(':') {
        return Err(TemplateError::ColonParameter(
            segment.to_owned(),
            suggested(rest),
        ));
    }
    if let Some(rest) = segment.strip_prefix('*') {
        let name = if rest.is_empty() {
            "rest".to_owned()
        } else {
            suggested(rest)
        };
        return Err(TemplateError::Star(segment.to_owned(), name));
    }
    Ok(Segment::Literal(segment))
}

/// The one spelling of a request's path that routes are matched on (see
/// the module's documentation). A path already in it is borrowed, not
/// copied: the common case costs one scan.
pub fn canonical(path: &str) -> Cow<'_, str> {
    if is_canonical(path) {
        Cow::Borrowed(path)
    } else {
        let mut out = String::with_capacity(path.len() + 1);
        for segment in segments(path, |_| false) {
            push_segment(&mut out, &segment);
        }
        if out.is_empty() {
            out.push('/');
        }
        Cow::Owned(out)
    }
}

/// A route's template in its canonical form (literal segments as
/// [`canonical`] writes them, parameters as written), or why it is none.
pub fn canonical_template(template: &str) -> Result<String, TemplateError> {
    // A segment's braces are read as written, before any escape is
    // touched: `%7B` is a literal brace, never a parameter.
    for raw in template.split(['/', '\\']) {
        template_segment(raw)?;
    }
    let is_parameter = |segment: &str| {
        matches!(
            template_segment(segment),
            Ok(Segment::Parameter | Segment::CatchAll)
        )
    };
    let parts = segments(template, is_parameter);
    let mut out = String::with_capacity(template.len());
    for (index, part) in parts.iter().enumerate() {
        if template_segment(part) == Ok(Segment::CatchAll) && index + 1 < parts.len() {
            return Err(TemplateError::CatchAllNotLast(part.to_string()));
        }
        push_segment(&mut out, part);
    }
    if out.is_empty() {
        out.push('/');
    }
    Ok(out)
}

/// The shape of a canonical template: its parameters without their names.
/// Two templates of one shape match the same paths (`/users/{id}` and
/// `/users/{user}`), so a description listing both lists one route twice.
#[doc(hidden)]
pub fn template_shape(canonical: &str) -> String {
    canonical
        .split('/')
        .map(|segment| match template_segment(segment) {
            Ok(Segment::Parameter) => "{}",
            Ok(Segment::CatchAll) => "{*}",
            _ => segment,
        })
        .collect::<Vec<_>>()
        .join("/")
}

/// Whether `path` is already canonical: it starts with `/`, has no empty,
/// `.` or `..` segment, no trailing `/` (but for `/` itself), no `\`, no
/// escape, and nothing `new URL()` would percent-encode.
fn is_canonical(path: &str) -> bool {
    let bytes = path.as_bytes();
    if bytes.first() != Some(&b'/') {
        return false;
    }
    if bytes.len() == 1 {
        return true;
    }
    if bytes.last() == Some(&b'/') {
        return false;
    }
    let mut segment_start = 1;
    for (i, &b) in bytes.iter().enumerate().skip(1) {
        if b == b'/' {
            if !plain_segment(&bytes[segment_start..i]) {
                return false;
            }
            segment_start = i + 1;
        } else if b == b'%' || b == b'\\' || encoded_raw(b) {
            return false;
        }
    }
    plain_segment(&bytes[segment_start..])
}

/// A segment that needs no removing: not empty, `.` or `..`.
fn plain_segment(segment: &[u8]) -> bool {
    !matches!(segment, b"" | b"." | b"..")
}

/// Whether `new URL()` percent-encodes byte `b` in a path (WHATWG's path
/// percent-encode set, and every byte of a non-ASCII character).
fn encoded_raw(b: u8) -> bool {
    b <= 0x20 || b >= 0x7f || matches!(b, b'"' | b'#' | b'<' | b'>' | b'?' | b'`' | b'{' | b'}')
}

/// RFC 3986's unreserved characters: an escape of one means the character.
fn unreserved(b: u8) -> bool {
    b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~')
}

/// The segments of `path` that remain: each with its escapes normalised
/// (but those `as_written` says to keep, a template's parameters), empty
/// and `.` ones dropped, a `..` taking the one before it away. A segment
/// with nothing to normalise is borrowed, not copied: a path of many short
/// segments costs one scan, not an allocation each (BENCHMARKS.md,
/// "Hostile inputs").
fn segments(path: &str, as_written: impl Fn(&str) -> bool) -> Vec<Cow<'_, str>> {
    let mut kept: Vec<Cow<'_, str>> = Vec::new();
    for raw in path.split(['/', '\\']) {
        let plain = !raw.bytes().any(|b| b == b'%' || encoded_raw(b));
        let segment = if plain || as_written(raw) {
            Cow::Borrowed(raw)
        } else {
            Cow::Owned(normalise_escapes(raw))
        };
        match segment.as_ref() {
            "" | "." => {}
            ".." => {
                kept.pop();
            }
            _ => kept.push(segment),
        }
    }
    kept
}

/// `segment` with unreserved characters' escapes decoded, other escapes'
/// hex upper-cased, and raw bytes `new URL()` would escape escaped.
fn normalise_escapes(segment: &str) -> String {
    let bytes = segment.as_bytes();
    let mut out = String::with_capacity(segment.len());
    let mut i = 0;
    while i < bytes.len() {
        let b = bytes[i];
        let escape = (b == b'%')
            .then(|| bytes.get(i + 1..i + 3))
            .flatten()
            .and_then(|hex| std::str::from_utf8(hex).ok())
            .and_then(|hex| u8::from_str_radix(hex, 16).ok());
        match escape {
            Some(decoded) if unreserved(decoded) => {
                out.push(char::from(decoded));
                i += 3;
            }
            Some(decoded) => {
                push_escape(&mut out, decoded);
                i += 3;
            }
            // A `%` that starts no escape is escaped itself, so the result is
            // canonical again (`%%36%43` would otherwise come out as `%6C`).
            None if encoded_raw(b) || b == b'%' => {
                push_escape(&mut out, b);
                i += 1;
            }
            None => {
                // ASCII (every byte `encoded_raw` lets through is), so one char.
                out.push(char::from(b));
                i += 1;
            }
        }
    }
    out
}

fn push_escape(out: &mut String, byte: u8) {
    const HEX: &[u8; 16] = b"0123456789ABCDEF";
    out.push('%');
    out.push(char::from(HEX[usize::from(byte >> 4)]));
    out.push(char::from(HEX[usize::from(byte & 0xf)]));
}

fn push_segment(out: &mut String, segment: &str) {
    out.push('/');
    out.push_str(segment);
}

/// `path` with its dot segments resolved as WHATWG's URL parser resolves
/// them (`new URL()`'s `pathname`, workers-rs's `Request::path`): `.` and
/// `..` also escaped (`%2e`, `.%2E`, `%2e%2e`), one at the end leaving a
/// trailing slash, and `\` read as `/`; empty segments and escapes kept.
/// What workerd hands a Worker as `request.url` keeps escaped dot segments,
/// which its router may resolve. Borrowed when there is nothing to resolve.
fn url_resolved(path: &str) -> Cow<'_, str> {
    // How many dots a `.` or `..` segment, escaped or not, has; `None` for
    // any other segment.
    let dots = |segment: &str| -> Option<usize> {
        let mut bytes = segment.as_bytes();
        let mut dots = 0;
        while !bytes.is_empty() && dots < 3 {
            bytes = match bytes {
                [b'.', rest @ ..] => rest,
                [b'%', b'2', b'e' | b'E', rest @ ..] => rest,
                _ => return None,
            };
            dots += 1;
        }
        (bytes.is_empty() && (1..=2).contains(&dots)).then_some(dots)
    };
    let Some(rest) = path.strip_prefix('/') else {
        return Cow::Borrowed(path);
    };
    if !path.contains('\\') && !rest.split('/').any(|segment| dots(segment).is_some()) {
        return Cow::Borrowed(path);
    }
    let segments: Vec<&str> = rest.split(['/', '\\']).collect();
    let last = segments.len() - 1;
    let mut kept: Vec<&str> = Vec::with_capacity(segments.len());
    for (place, segment) in segments.into_iter().enumerate() {
        match dots(segment) {
            Some(dots) => {
                if dots == 2 {
                    kept.pop();
                }
                if place == last {
                    kept.push("");
                }
            }
            None => kept.push(segment),
        }
    }
    let mut out = String::with_capacity(path.len());
    for segment in kept {
        push_segment(&mut out, segment);
    }
    Cow::Owned(out)
}

/// The routes of a deployable, by their canonical templates: which of them
/// a request's canonical path meets.
#[derive(Debug, Clone, Default)]
pub(crate) struct RouteTable {
    /// Each shape's routes (indices into the gate's routes; one shape may
    /// carry several limits). Parameters are named by their place
    /// (`{p2}`), so two templates of different names at one place share
    /// a node, as the router requires.
    router: matchit::Router<Vec<usize>>,
    empty: bool,
}

impl RouteTable {
    /// The table of `templates` (canonical, as [`canonical_template`] gives
    /// them), each with the index it stands for. A template the router
    /// cannot take is returned with the router's reason, and left out (the
    /// reason is made a message only by validation, so a Worker, which
    /// builds its table from a validated plan, links no such text).
    pub(crate) fn new<'a>(
        templates: impl IntoIterator<Item = (usize, &'a str)>,
    ) -> (RouteTable, Vec<(usize, matchit::InsertError)>) {
        let mut by_shape: Vec<(String, Vec<usize>)> = Vec::new();
        for (index, template) in templates {
            let route = router_form(template);
            match by_shape.iter_mut().find(|(r, _)| *r == route) {
                Some((_, indices)) => indices.push(index),
                None => by_shape.push((route, vec![index])),
            }
        }
        let mut table = RouteTable {
            router: matchit::Router::new(),
            empty: by_shape.is_empty(),
        };
        let mut refused = Vec::new();
        for (route, indices) in by_shape {
            if let Err(error) = table.router.insert(route, indices.clone()) {
                refused.extend(indices.into_iter().map(|i| (i, error.clone())));
            }
        }
        (table, refused)
    }

    /// The routes a request's `path` meets, as the application's router
    /// may read it and as the limiter does (see the module's
    /// documentation): those of the most specific template its
    /// [`canonical`] form meets, then those `path` meets as it stands
    /// (axum's router, [`matchit`], matches it byte for byte) and as
    /// `new URL()` resolves it ([`url_resolved`]), each once. A canonical
    /// path (the common case) is looked up once, and nothing is copied
    /// unless two spellings meet different routes.
    pub(crate) fn routes_met(&self, path: &str) -> Cow<'_, [usize]> {
        let canonical = canonical(path);
        let mut met = Cow::Borrowed(self.routes_for(&canonical));
        if matches!(canonical, Cow::Borrowed(_)) {
            return met;
        }
        let resolved = url_resolved(path);
        for routes in [self.routes_for(path), self.routes_for(&resolved)] {
            if met.is_empty() {
                met = Cow::Borrowed(routes);
                continue;
            }
            for index in routes {
                if !met.contains(index) {
                    met.to_mut().push(*index);
                }
            }
        }
        met
    }

    /// The routes `path` meets as it is spelt: the most specific
    /// template's, or none.
    pub(crate) fn routes_for(&self, path: &str) -> &[usize] {
        if self.empty {
            return &[];
        }
        self.router
            .at(path)
            .map_or(&[], |matched| matched.value.as_slice())
    }
}

/// A canonical template as the router takes it: each parameter named by
/// its place, and a literal brace (none survive [`canonical_template`])
/// never read as one.
fn router_form(template: &str) -> String {
    let mut out = String::with_capacity(template.len());
    for (place, segment) in template.split('/').enumerate() {
        if place > 0 {
            out.push('/');
        }
        let prefix = match template_segment(segment) {
            Ok(Segment::Parameter) => "{p",
            Ok(Segment::CatchAll) => "{*p",
            _ => {
                out.push_str(segment);
                continue;
            }
        };
        out.push_str(prefix);
        // The place's digits, without the formatting machinery.
        let digits = place.to_string();
        out.push_str(&digits);
        out.push('}');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spellings_of_a_path_are_one_canonical_path() {
        for spelling in [
            "/api/login",
            "/api/login/",
            "//api/login",
            "/api//login",
            "/api/./login",
            "/api/x/../login",
            "/api/%6Cogin",
            "/api/%6cogin",
            "/%61pi/login//",
            "/api/%2e/login",
            "/api/x/%2E%2E/login",
            "\\api\\login",
            "/../api/login",
            "api/login",
        ] {
            assert_eq!(canonical(spelling), "/api/login", "{spelling}");
        }
        assert!(matches!(canonical("/api/login"), Cow::Borrowed(_)));
        assert!(matches!(canonical("/"), Cow::Borrowed(_)));
        for (path, canon) in [
            ("", "/"),
            ("//", "/"),
            ("/..", "/"),
            ("/API/Login", "/API/Login"),
            ("/a%2fb", "/a%2Fb"),
            ("/a%5cb", "/a%5Cb"),
            ("/a%7e", "/a~"),
            ("/a%zz", "/a%25zz"),
            ("/a%", "/a%25"),
            ("/%%36%43", "/%256C"),
            ("/a b", "/a%20b"),
            ("/a{b}", "/a%7Bb%7D"),
            ("/caf\u{e9}", "/caf%C3%A9"),
            ("/v1/things:batchGet", "/v1/things:batchGet"),
        ] {
            assert_eq!(canonical(path), canon, "{path:?}");
        }
    }

    #[test]
    fn dot_segments_are_resolved_as_new_url_resolves_them() {
        for (path, resolved) in [
            ("/api/search/..", "/api/"),
            ("/api/search/%2e%2E", "/api/"),
            ("/api/search/.%2e/x", "/api/x"),
            ("/api/search/%2E./x", "/api/x"),
            ("/api/search/.", "/api/search/"),
            ("/api/search/%2e/x", "/api/search/x"),
            ("/api/search/fo\\o", "/api/search/fo/o"),
            ("/..", "/"),
            ("/", "/"),
            ("/api//x/", "/api//x/"),
            ("/api/.../%2e%2e%2e/%2e%2f", "/api/.../%2e%2e%2e/%2e%2f"),
            ("/api/%c0%ae%c0%ae/x", "/api/%c0%ae%c0%ae/x"),
        ] {
            assert_eq!(url_resolved(path), resolved, "{path}");
        }
        assert!(matches!(url_resolved("/api//x/%41"), Cow::Borrowed(_)));
        assert!(matches!(url_resolved("*"), Cow::Borrowed(_)));
    }

    proptest::proptest! {
        /// Whatever a client sends, the canonical path is found without a
        /// panic, starts with `/`, and is its own canonical form: no
        /// spelling of it is left to normalise (one holding no escape is
        /// borrowed then, not copied).
        #[test]
        fn any_path_has_one_canonical_form(path in "\\PC{0,40}|[/\\\\.%a-fA-F0-9~_-]{0,40}") {
            let once = canonical(&path).into_owned();
            proptest::prop_assert!(once.starts_with('/'));
            let twice = canonical(&once);
            proptest::prop_assert!(
                once.contains('%') || matches!(twice, Cow::Borrowed(_)),
                "{} -> {}", path, once
            );
            proptest::prop_assert_eq!(twice, once.as_str());
        }
    }

    #[test]
    fn a_template_is_normalised_around_its_parameters() {
        assert_eq!(
            canonical_template("/api//users/{id}/").as_deref(),
            Ok("/api/users/{id}")
        );
        assert_eq!(
            canonical_template("/api/%66iles/{*rest}").as_deref(),
            Ok("/api/files/{*rest}")
        );
        assert_eq!(
            template_shape("/api/users/{id}/posts/{*rest}"),
            "/api/users/{}/posts/{*}"
        );
        for (template, error) in [
            (
                "/api/users/:id",
                TemplateError::ColonParameter(":id".into(), "id".into()),
            ),
            (
                "/api/files/*",
                TemplateError::Star("*".into(), "rest".into()),
            ),
            (
                "/api/files/*path",
                TemplateError::Star("*path".into(), "path".into()),
            ),
            ("/api/{id}.json", TemplateError::Braces("{id}.json".into())),
            ("/api/{}", TemplateError::Braces("{}".into())),
            ("/api/{a-b}", TemplateError::Braces("{a-b}".into())),
            (
                "/api/{*rest}/x",
                TemplateError::CatchAllNotLast("{*rest}".into()),
            ),
        ] {
            assert_eq!(canonical_template(template), Err(error), "{template}");
        }
    }

    #[test]
    fn the_most_specific_route_is_met() {
        let templates = [
            "/api/users/me",
            "/api/users/{id}",
            "/api/users/{user}/posts",
            "/api/files/{*rest}",
            "/api/{*rest}",
            "/api/users/{id}",
        ];
        let (table, refused) = RouteTable::new(templates.iter().copied().enumerate());
        assert!(refused.is_empty(), "{refused:?}");
        for (path, routes) in [
            ("/api/users/me", &[0][..]),
            ("/api/users/42", &[1, 5]),
            ("/api/users/42/posts", &[2]),
            ("/api/files/a/b/c", &[3]),
            ("/api/other", &[4]),
            ("/api/users/42/other", &[4]),
            ("/elsewhere", &[]),
            ("/api", &[]),
        ] {
            assert_eq!(table.routes_for(path), routes, "{path}");
        }
        assert!(RouteTable::default().routes_for("/api").is_empty());
    }

    #[test]
    fn a_path_meets_the_routes_of_its_spelling_as_sent_and_of_its_canonical_form() {
        let templates = [
            "/api/users/me",
            "/api/users/{id}",
            "/api/search/{q}",
            "/api/files/{*rest}",
        ];
        let (table, refused) = RouteTable::new(templates.iter().copied().enumerate());
        assert!(refused.is_empty(), "{refused:?}");
        for (path, routes) in [
            // Canonical: one look-up, borrowed.
            ("/api/users/me", &[0][..]),
            ("/api/search/x", &[2]),
            // Only the canonical form meets a route.
            ("//api/users/me", &[0]),
            ("/api/search/x/", &[2]),
            // Only the path as sent does (the router's parameter is `..`,
            // `.` or `fo\o`; a catch-all's rest only slashes).
            ("/api/search/..", &[2]),
            ("/api/search/fo\\o", &[2]),
            ("/api/files/report.csv/..", &[3]),
            ("/api/files//", &[3]),
            // Each meets its own: the canonical form's first.
            ("/api/users/%6De", &[0, 1]),
            // The same route both ways is counted once.
            ("/api/files/a//b", &[3]),
            ("/api/users/%33", &[1]),
        ] {
            assert_eq!(&*table.routes_met(path), routes, "{path}");
        }
        assert!(matches!(
            table.routes_met("/api/users/me"),
            Cow::Borrowed(_)
        ));
        assert!(matches!(
            table.routes_met("/api/users/%33"),
            Cow::Borrowed(_)
        ));
        assert!(
            RouteTable::default()
                .routes_met("/api/search/..")
                .is_empty()
        );
        // Escaped dot segments workerd keeps and `new URL()` resolves.
        assert_eq!(&*table.routes_met("/api/users/x/%2e%2E/%6De"), &[0, 1]);
        assert_eq!(&*table.routes_met("/api/users/x/.%2e/y"), &[1]);
        // A trailing slash: the static route by the canonical form, and the
        // catch-all the router serves it with.
        let (table, _) = RouteTable::new(["/api/users/me", "/api/{*rest}"].into_iter().enumerate());
        assert_eq!(&*table.routes_met("/api/users/me/"), &[0, 1]);
    }
}
