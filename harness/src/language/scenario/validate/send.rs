//! A `send`'s own sense: who sends, how many, and whether what it expects
//! could hold.

use std::ops::Range;

use toml::Spanned;

use super::deadline::validate_deadline;
use crate::language::scenario::bounds::{MAX_CONCURRENCY, MAX_REQUESTS};
use crate::language::scenario::expect::SendExpectations;
use crate::language::scenario::statuses::{expand_statuses, parse_statuses, sum_of};
use crate::language::scenario::step::SendRequests;

/// A `send`'s own sense: who sends, how many, and whether its sequence adds up.
pub(super) fn validate_send(
    send: &SendRequests,
    expect: Option<&Spanned<SendExpectations>>,
) -> Result<(), (Option<Range<usize>>, String)> {
    if send.address.is_some() && send.distinct_addresses {
        return Err((
            None,
            "send from `address` or from `distinct_addresses`, not both".to_owned(),
        ));
    }
    for (field, value, most) in [
        ("requests", send.requests, MAX_REQUESTS),
        ("concurrency", send.concurrency, MAX_CONCURRENCY),
    ] {
        if !(1..=most).contains(&value) {
            return Err((
                None,
                format!("`{field}` is {value}: a step has 1 to {most}"),
            ));
        }
    }
    send.peer_address()
        .map_err(|m| (send.peer.as_ref().map(Spanned::span), m))?;
    send.http_method()
        .map_err(|m| (send.method.as_ref().map(Spanned::span), m))?;
    if let Some(entry) = send.chain().iter().find(|e| e.contains(',')) {
        return Err((
            send.forwarded_for.as_ref().map(Spanned::span),
            format!(
                "`forwarded_for` entry `{entry}` holds a comma: write each address as an entry of its own"
            ),
        ));
    }
    let forwarded_header = send.headers.keys().any(|name| {
        name.eq_ignore_ascii_case(runtime::unstable_for_tools::address::FORWARDED_FOR_HEADER)
    });
    if forwarded_header && !send.chain().is_empty() {
        return Err((
            None,
            "send an `X-Forwarded-For` chain with `forwarded_for` or in `headers`, not both"
                .to_owned(),
        ));
    }
    let Some(expect) = expect.map(Spanned::get_ref) else {
        return Ok(());
    };
    if let Some(deadline) = &expect.deadline {
        validate_deadline(send, *deadline.get_ref()).map_err(|m| (Some(deadline.span()), m))?;
    }
    if let Some(statuses) = &expect.statuses {
        parse_statuses(statuses.get_ref())
            .and_then(|runs| expand_statuses(&runs, send.requests))
            .map_err(|m| (Some(statuses.span()), m))?;
    }
    if let Some(counts) = &expect.counts {
        for status in counts.get_ref().keys() {
            if status.parse::<u16>().is_err() {
                return Err((
                    Some(counts.span()),
                    format!("`{status}` is not an HTTP status"),
                ));
            }
        }
        // Every request gives one status, so counts that add up to anything
        // else could never hold.
        let total = sum_of(counts.get_ref().values().copied());
        if total != send.requests as u128 {
            return Err((
                Some(counts.span()),
                format!(
                    "the counts add up to {total} responses but the step sends {} requests",
                    send.requests
                ),
            ));
        }
    }
    Ok(())
}
