//! `redis_calls`: the script calls a native scenario's Redis ran during a step.

use toml::Spanned;

use super::failure::Failures;
use super::send_step::SendStep;
use crate::language::scenario::RedisCalls;

/// `redis_calls`: the EVALSHA and EVAL calls Redis ran during the step.
pub(super) fn redis_round_trips(
    view: &SendStep<'_>,
    calls: &Spanned<RedisCalls>,
    out: &mut Failures<'_>,
) {
    let RedisCalls { evalsha, eval } = *calls.get_ref();
    let actual = view.redis_calls.unwrap_or_default();
    for (command, wanted, actual) in [
        ("EVALSHA", evalsha, actual.evalsha),
        ("EVAL", eval, actual.eval),
    ] {
        let Some(wanted) = wanted else { continue };
        if actual != Some(wanted) {
            out.fail(
                calls.span(),
                view.step_context(),
                &format!("{command} calls Redis ran (INFO commandstats)"),
                wanted.to_string(),
                actual.map_or_else(|| "not read".to_owned(), |n| n.to_string()),
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use crate::engine::Observation;
    use crate::judge::scenario::judge;
    use crate::judge::scenario::test_support::{HEAD, instance, prepared, request};
    use crate::language::scenario::RedisCalls;

    #[test]
    fn redis_calls_are_judged_against_the_step_s_observed_calls() {
        let p = prepared(&format!(
            "{HEAD}[[scenario.steps]]\nsend = {{ requests = 1 }}\nexpect = {{ redis_calls = {{ evalsha = 3, eval = 0 }} }}\n"
        ));
        let observed = |evalsha, eval| Observation {
            requests: vec![request(0, 1, 200)],
            instances: vec![instance(&[])],
            redis_calls: BTreeMap::from([(
                0,
                RedisCalls {
                    evalsha: Some(evalsha),
                    eval: Some(eval),
                },
            )]),
            ..Observation::default()
        };
        assert_eq!(judge(&p, &observed(3, 0)), []);
        let failures = judge(&p, &observed(4, 1));
        let whats: Vec<&str> = failures.iter().map(|f| f.what.as_str()).collect();
        assert_eq!(
            whats,
            [
                "EVALSHA calls Redis ran (INFO commandstats)",
                "EVAL calls Redis ran (INFO commandstats)"
            ]
        );
        assert_eq!(failures[0].place.to_string(), "s.toml:6:26");
        assert_eq!(
            (failures[0].expected.as_str(), failures[0].actual.as_str()),
            ("3", "4")
        );
        let unread = Observation {
            redis_calls: BTreeMap::new(),
            ..observed(0, 0)
        };
        assert_eq!(judge(&p, &unread)[0].actual, "not read");
    }
}
