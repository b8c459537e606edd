//! The JSON Schema of scenario files, generated from the model's types and
//! their doc comments (checked in as `scenarios/scenario.schema.json`), so
//! an editor validates a file as the harness reads it.

use schemars::Schema;

use super::model::ScenarioFile;

/// TOML has no null: an optional field is one left out, never a `null`
/// branch. Without those branches (`anyOf [T, null]`) an editor's validator
/// (taplo) names the unknown field in a table instead of saying that nothing
/// in an `anyOf` matched.
#[derive(Debug, Clone, Copy)]
struct NoNullBranches;

impl schemars::transform::Transform for NoNullBranches {
    fn transform(&mut self, schema: &mut Schema) {
        schemars::transform::transform_subschemas(self, schema);
        let Some(object) = schema.as_object_mut() else {
            return;
        };
        let null = serde_json::json!({ "type": "null" });
        if object.get("default") == Some(&serde_json::Value::Null) {
            object.remove("default");
        }
        if let Some(serde_json::Value::Array(types)) = object.get_mut("type") {
            types.retain(|t| t != "null");
            if let [only] = types.as_slice() {
                let only = only.clone();
                object.insert("type".to_owned(), only);
            }
        }
        if let Some(serde_json::Value::Array(branches)) = object.get_mut("anyOf") {
            branches.retain(|b| *b != null);
            if let [serde_json::Value::Object(only)] = branches.as_slice() {
                let only = only.clone();
                object.remove("anyOf");
                for (key, value) in only {
                    object.entry(key).or_insert(value);
                }
            }
        }
    }
}

/// The JSON Schema (draft-07) of scenario files, as checked in.
pub fn json_schema() -> String {
    let generator = schemars::generate::SchemaSettings::draft07()
        .with(|settings| settings.transforms.insert(0, Box::new(NoNullBranches)))
        .into_generator();
    let schema = generator.into_root_schema_for::<ScenarioFile>();
    serde_json::to_string_pretty(&schema).unwrap_or_default() + "\n"
}
