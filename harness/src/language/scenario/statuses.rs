//! Status sequences, such as `"120 x 200 then 429"` or `"200 then * x
//! 429"`: parsed into runs, and expanded to one status per request.

/// A status sequence item: `count x status`, where `None` is "the rest".
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Run {
    /// How many requests; `None` for every request left.
    pub count: Option<usize>,
    /// Their status.
    pub status: u16,
}

/// Parses `"120 x 200 then 429"` into runs.
pub fn parse_statuses(text: &str) -> Result<Vec<Run>, String> {
    let mut runs = Vec::new();
    let parts: Vec<&str> = text.split("then").map(str::trim).collect();
    for (i, part) in parts.iter().enumerate() {
        let (count, status) = match part.split_once('x') {
            Some((count, status)) => {
                let count = count.trim();
                let count = if count == "*" {
                    if i + 1 != parts.len() {
                        return Err(format!(
                            "`* x` (the rest) may only end the sequence, not `{part}`"
                        ));
                    }
                    None
                } else {
                    Some(
                        count
                            .parse::<usize>()
                            .map_err(|_| format!("`{count}` is not a count in `{part}`"))?,
                    )
                };
                (count, status.trim())
            }
            None => (Some(1), *part),
        };
        let status = status
            .parse::<u16>()
            .ok()
            .filter(|s| (100..=599).contains(s))
            .ok_or_else(|| {
                format!(
                    "`{status}` is not an HTTP status in `{part}`; write e.g. `120 x 200 then 429`"
                )
            })?;
        runs.push(Run { count, status });
    }
    Ok(runs)
}

/// Expands runs to one status per request, checking they add up to `requests`.
pub fn expand_statuses(runs: &[Run], requests: usize) -> Result<Vec<u16>, String> {
    let fixed = sum_of(runs.iter().filter_map(|r| r.count));
    let rest = runs.iter().any(|r| r.count.is_none());
    let adds_up = if rest {
        fixed <= requests as u128
    } else {
        fixed == requests as u128
    };
    if !adds_up {
        return Err(format!(
            "the sequence counts {fixed} responses but the step sends {requests} requests"
        ));
    }
    // At most `requests` now, so neither the cast nor the subtraction can wrap.
    let left = requests - fixed as usize;
    Ok(runs
        .iter()
        .flat_map(|r| std::iter::repeat_n(r.status, r.count.unwrap_or(left)))
        .collect())
}

/// The sum of counts a file states, which no number of them overflows
/// (each is at most `u64::MAX`).
pub(super) fn sum_of(counts: impl Iterator<Item = usize>) -> u128 {
    counts.map(|n| n as u128).sum()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn statuses_parse_and_expand() {
        let runs = parse_statuses("120 x 200 then 429").expect("parses");
        assert_eq!(expand_statuses(&runs, 121).expect("adds up").len(), 121);
        assert!(expand_statuses(&runs, 122).is_err());
        let rest = parse_statuses("2 x 200 then * x 429").expect("parses");
        assert_eq!(
            expand_statuses(&rest, 5).expect("adds up"),
            [200, 200, 429, 429, 429]
        );
        assert!(parse_statuses("* x 200 then 429").is_err());
        assert!(parse_statuses("120 x ok").is_err());
    }
}
