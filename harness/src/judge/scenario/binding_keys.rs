//! `binding_keys`: the keys that reached each binding.

use std::collections::BTreeSet;

use super::failure::Failures;
use crate::engine::Observation;
use crate::language::scenario::{ALL_BINDINGS, Scenario};

/// `binding_keys`: exactly these keys reached each named binding, and with
/// `"*" = []` none reached any other.
pub(super) fn binding_keys(scenario: &Scenario, observation: &Observation, out: &mut Failures<'_>) {
    let Some(keys) = scenario
        .expect
        .as_ref()
        .and_then(|e| e.get_ref().binding_keys.as_ref())
    else {
        return;
    };
    let named = keys.get_ref();
    let others = named.contains_key(ALL_BINDINGS);
    // Every binding that can have seen a key is in the record (the engine
    // reads each configured binding's stats, or the run fails).
    let bindings: BTreeSet<&String> = named
        .keys()
        .filter(|b| *b != ALL_BINDINGS)
        .chain(observation.binding_keys.keys().filter(|_| others))
        .collect();
    for binding in bindings {
        let wanted: BTreeSet<String> = named
            .get(binding)
            .map(|keys| keys.iter().cloned().collect())
            .unwrap_or_default();
        let actual = observation
            .binding_keys
            .get(binding)
            .cloned()
            .unwrap_or_default();
        if wanted != actual {
            let what = if named.contains_key(binding) {
                format!("keys that reached {binding}")
            } else {
                format!("keys that reached {binding} (`\"*\" = []`: no binding not named)")
            };
            out.fail(
                keys.span(),
                String::new(),
                &what,
                format!("{wanted:?}"),
                format!("{actual:?}"),
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use std::collections::{BTreeMap, BTreeSet};

    use crate::engine::Observation;
    use crate::judge::scenario::judge;
    use crate::judge::scenario::test_support::{instance, prepared, request};

    #[test]
    fn binding_keys_with_a_star_say_that_no_other_binding_saw_a_key() {
        let app = "application_inline = '''\n[connections.limits]\ndriver = \"cloudflare_rate_limits\"\nnamespace = 1001\n[rate_limits]\nstore = \"limits\"\n[[deployables]]\nname = \"edge\"\ntarget = \"workers\"\nserves_api = true\n'''\n";
        let scenario = |keys: &str| {
            prepared(&format!(
                "[[scenario]]\nname = \"s\"\n{app}[[scenario.steps]]\nsend = {{ requests = 1 }}\n[scenario.expect]\nbinding_keys = {{ {keys} }}\n"
            ))
        };
        let observed = |caller_keys: &[&str]| Observation {
            requests: vec![request(0, 1, 200)],
            instances: vec![instance(&[])],
            binding_keys: BTreeMap::from([
                (
                    "LIMITS_120_PER_60S".to_owned(),
                    BTreeSet::from(["address:192.0.2.1".to_owned()]),
                ),
                (
                    "LIMITS_600_PER_60S".to_owned(),
                    caller_keys.iter().map(|k| (*k).to_owned()).collect(),
                ),
            ]),
            ..Observation::default()
        };
        let named_only = scenario("LIMITS_120_PER_60S = [\"address:192.0.2.1\"]");
        let exhaustive = scenario("LIMITS_120_PER_60S = [\"address:192.0.2.1\"], \"*\" = []");
        // A key on a binding the scenario does not name: only `*` sees it.
        let stray = observed(&["caller:c"]);
        assert_eq!(judge(&named_only, &stray), []);
        let failures = judge(&exhaustive, &stray);
        assert_eq!(failures.len(), 1, "{failures:#?}");
        assert_eq!(
            failures[0].what,
            "keys that reached LIMITS_600_PER_60S (`\"*\" = []`: no binding not named)"
        );
        assert_eq!(failures[0].actual, r#"{"caller:c"}"#);
        assert_eq!(judge(&exhaustive, &observed(&[])), []);
        // The named binding is still judged exactly.
        let wrong = scenario("LIMITS_120_PER_60S = [\"address:192.0.2.2\"], \"*\" = []");
        let whats: Vec<String> = judge(&wrong, &observed(&[]))
            .into_iter()
            .map(|f| f.what)
            .collect();
        assert_eq!(whats, ["keys that reached LIMITS_120_PER_60S"]);
    }
}
