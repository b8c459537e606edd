//! `harness wrangler APP.toml --write FILE`: writes the application's
//! bindings, the Worker's plan as its `vars.PLAN`, and the dataset its data
//! points go to (`analytics_engine_datasets`), into a Wrangler file
//! (`wrangler.jsonc`, `wrangler.json` or `wrangler.toml`), as the spec says
//! `jadpo build` does.
//!
//! It replaces the application's `ratelimits` entries (those named for its
//! store connection, such as `LIMITS_120_PER_60S`) where the first of them
//! stood, and keeps every other key, every other entry, and every comment
//! and its layout: `toml_edit` edits TOML and `jsonc-parser`'s CST edits
//! JSON(C), both keeping what they do not touch byte for byte. A file whose
//! entries are already the plan's is left as it is, so a second run changes
//! nothing. A file or key that is absent is created. The file is replaced
//! at once (a temporary file renamed over it), never rewritten in place.

use std::path::{Path, PathBuf};

use jsonc_parser::ParseOptions;
use jsonc_parser::cst::{CstInputValue, CstNode, CstObject, CstRootNode};
use runtime::bindings::{DatasetEntry, WranglerEntry};
use runtime::unstable_for_tools::names::is_binding_name_of;

/// The key Wrangler reads Rate Limiting bindings from.
const KEY: &str = "ratelimits";

/// The key Wrangler reads Workers Analytics Engine datasets from.
const DATASETS: &str = "analytics_engine_datasets";

/// The key of a Worker's text bindings, and the plan's among them.
const VARS: &str = "vars";
const PLAN: &str = runtime::gate_plan::PLAN_BINDING;

/// A Wrangler file's format, told by its extension.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FileFormat {
    /// `.jsonc`: JSON with comments.
    Jsonc,
    /// `.json`: plain JSON (no comments are added, none are expected).
    Json,
    /// `.toml`.
    Toml,
}

impl FileFormat {
    /// The format of the file at `path`, by its extension.
    pub fn of_path(path: &Path) -> Option<FileFormat> {
        match path.extension()?.to_str()? {
            "jsonc" => Some(FileFormat::Jsonc),
            "json" => Some(FileFormat::Json),
            "toml" => Some(FileFormat::Toml),
            _ => None,
        }
    }
}

/// Why a Wrangler file could not be edited.
#[derive(Debug, thiserror::Error)]
pub enum EditError {
    /// The file is not valid JSON or JSONC.
    #[error("not valid JSON: {0}")]
    Json(String),
    /// The file is not valid TOML.
    #[error("not valid TOML: {0}")]
    Toml(String),
    /// The file's top level is not an object (JSON) — nothing to add a key to.
    #[error("its top level is not an object")]
    NotAnObject,
    /// `ratelimits` is there, but is not a list of entries.
    #[error("its `ratelimits` is not a list of entries")]
    NotAList,
    /// `vars` is there, but is not a table of text bindings.
    #[error("its `vars` is not a table")]
    VarsNotATable,
    /// `analytics_engine_datasets` is there, but is not a list of entries.
    #[error("its `analytics_engine_datasets` is not a list of entries")]
    DatasetsNotAList,
}

/// What `--write` puts in a Wrangler file: a connection's `ratelimits`
/// entries, and one Worker's plan as its `vars.PLAN` (the text binding its
/// gate is built from).
#[derive(Debug, Clone, Copy, Default)]
pub struct WranglerEdit<'a> {
    /// The store connection's name and its entries, when it is Cloudflare's binding.
    pub entries: Option<(&'a str, &'a [WranglerEntry])>,
    /// The deployable's plan text (`GatePlan::to_text`).
    pub plan: Option<&'a str>,
    /// The dataset its data points go to: the entry of the binding the plan
    /// names, its other entries kept.
    pub dataset: Option<&'a DatasetEntry>,
}

/// Why `--write` failed.
#[derive(Debug, thiserror::Error)]
pub enum WriteError {
    /// The file's extension names no Wrangler format.
    #[error("{}: a Wrangler file's name ends in .jsonc, .json or .toml", .0.display())]
    UnknownFormat(PathBuf),
    /// The file could not be read or written.
    #[error("{}: {source}", path.display())]
    Io {
        /// The file.
        path: PathBuf,
        /// The failure.
        #[source]
        source: std::io::Error,
    },
    /// The file is there but could not be edited; it is left as it was.
    #[error("{}: {source}; it is left as it was", path.display())]
    Edit {
        /// The file.
        path: PathBuf,
        /// Why it could not be edited.
        #[source]
        source: EditError,
    },
}

/// What `--write` did to the file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Written {
    /// There was no file: it now holds the entries alone.
    Created,
    /// The file's entries were replaced.
    Changed,
    /// The file already held exactly these entries; not a byte was written.
    Unchanged,
}

/// Writes `edit` into the Wrangler file at `path`.
pub fn write(path: &Path, edit: &WranglerEdit<'_>) -> Result<Written, WriteError> {
    let format =
        FileFormat::of_path(path).ok_or_else(|| WriteError::UnknownFormat(path.to_owned()))?;
    let existing = match std::fs::read_to_string(path) {
        Ok(text) => Some(text),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
        Err(source) => {
            return Err(WriteError::Io {
                path: path.to_owned(),
                source,
            });
        }
    };
    let edited =
        edit_text(existing.as_deref(), format, edit).map_err(|source| WriteError::Edit {
            path: path.to_owned(),
            source,
        })?;
    let Some(text) = edited else {
        return Ok(Written::Unchanged);
    };
    replace(path, &text).map_err(|source| WriteError::Io {
        path: path.to_owned(),
        source,
    })?;
    Ok(if existing.is_some() {
        Written::Changed
    } else {
        Written::Created
    })
}

/// Puts `text` in the file at `path` at once, so that nothing is lost if the
/// harness dies or the disk fills up midway: the text goes to a temporary
/// file beside it (same directory, so same filesystem), is flushed to disk,
/// takes the file's permissions (and its owner and group, where the harness
/// may set them: root may, a user keeps their own), and is renamed over the
/// file. Until that rename the file is untouched, and the temporary file is
/// removed on failure. A symlink is followed: the link stays and the file it
/// points to is replaced, as an editor saving through it would do. (Also how
/// `check --plan` writes a plan: a build never embeds half of one.)
pub(crate) fn replace(path: &Path, text: &str) -> std::io::Result<()> {
    use std::io::Write as _;
    use std::os::unix::fs::{MetadataExt as _, PermissionsExt as _};

    let is_link = std::fs::symlink_metadata(path).is_ok_and(|m| m.file_type().is_symlink());
    let target = if is_link {
        std::fs::canonicalize(path)?
    } else {
        path.to_owned()
    };
    let dir = match target.parent() {
        Some(dir) if !dir.as_os_str().is_empty() => dir,
        _ => Path::new("."),
    };
    let original = match std::fs::metadata(&target) {
        Ok(metadata) => Some(metadata),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
        Err(e) => return Err(e),
    };
    let name = target
        .file_name()
        .map_or_else(String::new, |n| n.to_string_lossy().into_owned());
    // A new file gets what `std::fs::write` would give it: 0o666 less the umask.
    let mut temporary = tempfile::Builder::new()
        .prefix(&format!(".{name}."))
        .suffix(".tmp")
        .permissions(std::fs::Permissions::from_mode(0o666))
        .tempfile_in(dir)?;
    temporary.write_all(text.as_bytes())?;
    if let Some(original) = &original {
        let written = temporary.as_file().metadata()?;
        if (written.uid(), written.gid()) != (original.uid(), original.gid()) {
            // Best effort: only root may give a file away.
            let _ = std::os::unix::fs::fchown(
                temporary.as_file(),
                Some(original.uid()),
                Some(original.gid()),
            );
        }
        // After the owner: changing it clears set-id bits.
        temporary
            .as_file()
            .set_permissions(original.permissions())?;
    }
    temporary.as_file().sync_all()?;
    temporary.persist(&target).map_err(|e| e.error)?;
    // The rename itself reaches the disk with the directory.
    std::fs::File::open(dir)?.sync_all()
}

/// The file's new text with `edit` made, or `None` when it already says
/// all of it. `existing` is `None` for no file.
pub fn edit_text(
    existing: Option<&str>,
    format: FileFormat,
    edit: &WranglerEdit<'_>,
) -> Result<Option<String>, EditError> {
    let entries = match edit.entries {
        Some((connection, entries)) => update(existing, format, connection, entries)?,
        None => None,
    };
    let plan = match edit.plan {
        Some(plan) => update_plan(entries.as_deref().or(existing), format, plan)?,
        None => None,
    };
    let before = plan.or(entries);
    let dataset = match edit.dataset {
        Some(dataset) => update_dataset(before.as_deref().or(existing), format, dataset)?,
        None => None,
    };
    Ok(dataset.or(before))
}

/// The file's new text with `dataset` as the `analytics_engine_datasets`
/// entry of its binding (its `dataset` set, any other key of it such as
/// `remote` kept; appended when there is none), every other entry and
/// comment kept, or `None` when it already is.
pub fn update_dataset(
    existing: Option<&str>,
    format: FileFormat,
    dataset: &DatasetEntry,
) -> Result<Option<String>, EditError> {
    let binding_of = |value: &serde_json::Value| {
        value.get("binding").and_then(|b| b.as_str()) == Some(dataset.binding.as_str())
    };
    let dataset_of = |value: &serde_json::Value| {
        value.get("dataset").and_then(|d| d.as_str()) == Some(dataset.dataset.as_str())
    };
    match format {
        FileFormat::Jsonc | FileFormat::Json => {
            let (root, object) = json_root(existing)?;
            let entry = || {
                CstInputValue::Object(vec![
                    ("binding".into(), dataset.binding.clone().into()),
                    ("dataset".into(), dataset.dataset.clone().into()),
                ])
            };
            let Some(property) = object.get(DATASETS) else {
                object.append(DATASETS, CstInputValue::Array(vec![entry()]));
                return Ok(Some(root.to_string()));
            };
            let array = property.array_value().ok_or(EditError::DatasetsNotAList)?;
            let ours = array
                .elements()
                .into_iter()
                .find(|element| element.to_serde_value().is_some_and(|v| binding_of(&v)));
            match ours {
                Some(element) if element.to_serde_value().is_some_and(|v| dataset_of(&v)) => {
                    return Ok(None);
                }
                Some(element) => {
                    let object = element.as_object().ok_or(EditError::DatasetsNotAList)?;
                    match object.get("dataset") {
                        Some(old) => old.set_value(dataset.dataset.clone().into()),
                        None => {
                            object.append("dataset", dataset.dataset.clone().into());
                        }
                    }
                }
                None => {
                    array.append(entry());
                }
            }
            Ok(Some(root.to_string()))
        }
        FileFormat::Toml => {
            let text = existing.unwrap_or_default();
            let mut document: toml_edit::DocumentMut = text
                .parse()
                .map_err(|e: toml_edit::TomlError| EditError::Toml(e.to_string()))?;
            // What the current entries mean, in order, whichever way they are written.
            let current: Vec<serde_json::Value> = toml::from_str::<toml::Table>(text)
                .ok()
                .and_then(|mut table| table.remove(DATASETS))
                .and_then(|list| serde_json::to_value(list).ok())
                .and_then(|list| list.as_array().cloned())
                .unwrap_or_default();
            let ours = current.iter().position(binding_of);
            if ours.is_some_and(|i| current.get(i).is_some_and(dataset_of)) {
                return Ok(None);
            }
            let mut table = toml_edit::Table::new();
            table.insert("binding", toml_edit::value(dataset.binding.as_str()));
            table.insert("dataset", toml_edit::value(dataset.dataset.as_str()));
            let new_value = || toml_edit::Value::from(dataset.dataset.as_str());
            let item = document
                .entry(DATASETS)
                .or_insert_with(|| toml_edit::Item::ArrayOfTables(toml_edit::ArrayOfTables::new()));
            match (item, ours) {
                (toml_edit::Item::ArrayOfTables(tables), Some(i)) => {
                    let entry = tables.get_mut(i).ok_or(EditError::DatasetsNotAList)?;
                    set_toml_value(entry, "dataset", new_value());
                }
                (toml_edit::Item::ArrayOfTables(tables), None) => tables.push(table),
                (toml_edit::Item::Value(toml_edit::Value::Array(array)), Some(i)) => {
                    let entry = array
                        .get_mut(i)
                        .and_then(toml_edit::Value::as_inline_table_mut)
                        .ok_or(EditError::DatasetsNotAList)?;
                    set_toml_value(entry, "dataset", new_value());
                }
                (toml_edit::Item::Value(toml_edit::Value::Array(array)), None) => {
                    array.push(toml_edit::Value::InlineTable(table.into_inline_table()));
                }
                _ => return Err(EditError::DatasetsNotAList),
            }
            Ok(Some(document.to_string()))
        }
    }
}

/// The file's new text with `plan` as its `vars.PLAN`, every other var and
/// comment kept, or `None` when it already is.
pub fn update_plan(
    existing: Option<&str>,
    format: FileFormat,
    plan: &str,
) -> Result<Option<String>, EditError> {
    match format {
        FileFormat::Jsonc | FileFormat::Json => {
            let (root, object) = json_root(existing)?;
            let vars = match object.get(VARS) {
                None => {
                    object.append(
                        VARS,
                        CstInputValue::Object(vec![(PLAN.into(), plan.into())]),
                    );
                    return Ok(Some(root.to_string()));
                }
                Some(vars) => vars.object_value().ok_or(EditError::VarsNotATable)?,
            };
            match vars.get(PLAN) {
                Some(old) => {
                    let same = old
                        .value()
                        .and_then(|v| v.to_serde_value())
                        .is_some_and(|v| v.as_str() == Some(plan));
                    if same {
                        return Ok(None);
                    }
                    old.set_value(plan.into());
                }
                None => {
                    vars.append(PLAN, plan.into());
                }
            }
            Ok(Some(root.to_string()))
        }
        FileFormat::Toml => {
            let mut document: toml_edit::DocumentMut = existing
                .unwrap_or_default()
                .parse()
                .map_err(|e: toml_edit::TomlError| EditError::Toml(e.to_string()))?;
            let vars = document
                .entry(VARS)
                .or_insert_with(toml_edit::table)
                .as_table_like_mut()
                .ok_or(EditError::VarsNotATable)?;
            let same = vars
                .get(PLAN)
                .and_then(toml_edit::Item::as_str)
                .is_some_and(|old| old == plan);
            if same {
                return Ok(None);
            }
            set_toml_value(vars, PLAN, plan.into());
            Ok(Some(document.to_string()))
        }
    }
}

/// The file's new text with `entries` in place of `connection`'s, or `None`
/// when it already holds exactly them. `existing` is `None` for no file.
pub fn update(
    existing: Option<&str>,
    format: FileFormat,
    connection: &str,
    entries: &[WranglerEntry],
) -> Result<Option<String>, EditError> {
    match format {
        FileFormat::Jsonc | FileFormat::Json => update_json(existing, connection, entries),
        FileFormat::Toml => update_toml(existing, connection, entries),
    }
}

/// Where the connection's entries are in the list of entries: their indices
/// and whether they already are `entries`, in order and side by side.
fn ours(
    current: &[Option<String>],
    current_values: &[serde_json::Value],
    connection: &str,
    entries: &[WranglerEntry],
) -> (Vec<usize>, bool) {
    let indices: Vec<usize> = current
        .iter()
        .enumerate()
        .filter(|(_, name)| {
            name.as_deref()
                .is_some_and(|n| is_binding_name_of(connection, n))
        })
        .map(|(i, _)| i)
        .collect();
    let wanted: Vec<serde_json::Value> = entries.iter().map(entry_json).collect();
    let side_by_side = indices.windows(2).all(|w| w[1] == w[0] + 1);
    let same = side_by_side
        && indices.len() == wanted.len()
        && indices
            .iter()
            .zip(&wanted)
            .all(|(&i, want)| current_values.get(i) == Some(want));
    (indices, same)
}

fn entry_json(entry: &WranglerEntry) -> serde_json::Value {
    serde_json::json!({
        "name": entry.name,
        "namespace_id": entry.namespace_id,
        "simple": { "limit": entry.simple.limit, "period": entry.simple.period },
    })
}

fn entry_cst(entry: &WranglerEntry) -> CstInputValue {
    CstInputValue::Object(vec![
        ("name".into(), entry.name.clone().into()),
        ("namespace_id".into(), entry.namespace_id.clone().into()),
        ("simple".into(), simple_cst(entry)),
    ])
}

fn simple_cst(entry: &WranglerEntry) -> CstInputValue {
    CstInputValue::Object(vec![
        ("limit".into(), entry.simple.limit.into()),
        ("period".into(), entry.simple.period.into()),
    ])
}

fn update_json(
    existing: Option<&str>,
    connection: &str,
    entries: &[WranglerEntry],
) -> Result<Option<String>, EditError> {
    let (root, object) = json_root(existing)?;
    let Some(property) = object.get(KEY) else {
        let list = entries.iter().map(entry_cst).collect();
        object.append(KEY, CstInputValue::Array(list));
        return Ok(Some(root.to_string()));
    };
    let array = property.array_value().ok_or(EditError::NotAList)?;
    let elements = array.elements();
    let values: Vec<serde_json::Value> = elements
        .iter()
        .map(|e| e.to_serde_value().unwrap_or_default())
        .collect();
    let names = names_of(&values);
    let (indices, same) = ours(&names, &values, connection, entries);
    if same {
        return Ok(None);
    }
    let edits = Edits::new(&indices, entries.len(), elements.len());
    for (&i, entry) in edits.replaced.iter().zip(entries) {
        if let Some(object) = elements.get(i).and_then(CstNode::as_object) {
            set_entry(&object, entry);
        }
    }
    for (offset, entry) in entries.iter().skip(edits.replaced.len()).enumerate() {
        array.insert(edits.insert_at + offset, entry_cst(entry));
    }
    for &i in edits.removed.iter().rev() {
        if let Some(element) = elements.get(i) {
            element.clone().remove();
        }
    }
    Ok(Some(root.to_string()))
}

/// A JSON(C) file's tree (an empty object for no file) and its top-level object.
fn json_root(existing: Option<&str>) -> Result<(CstRootNode, CstObject), EditError> {
    let text = existing.unwrap_or("{}\n");
    let root = CstRootNode::parse(text, &ParseOptions::default())
        .map_err(|e| EditError::Json(e.to_string()))?;
    let object = match root.value() {
        None => root.object_value_or_set(),
        Some(value) => value.as_object().ok_or(EditError::NotAnObject)?,
    };
    Ok((root, object))
}

/// How the connection's old entries become the new ones, keeping what is
/// written around each (comments, blank lines): the first old entries are
/// replaced one for one, further new ones go right after the last old one
/// (or at the end of the list), and old ones left over are removed.
struct Edits<'a> {
    /// The indices of old entries replaced by new ones, in order.
    replaced: &'a [usize],
    /// Where the new entries beyond the old ones' count go.
    insert_at: usize,
    /// The indices of old entries with no new one to take their place.
    removed: &'a [usize],
}

impl<'a> Edits<'a> {
    fn new(old: &'a [usize], new_count: usize, list_len: usize) -> Edits<'a> {
        let (replaced, removed) = old.split_at(new_count.min(old.len()));
        Edits {
            replaced,
            insert_at: old.last().map_or(list_len, |&last| last + 1),
            removed,
        }
    }
}

/// Makes an existing entry's object say `entry`, value by value, so its
/// layout and the comments in and around it stay.
fn set_entry(object: &CstObject, entry: &WranglerEntry) {
    let set = |object: &CstObject, key: &str, value: CstInputValue| match object.get(key) {
        Some(property) => property.set_value(value),
        None => {
            object.append(key, value);
        }
    };
    for property in object.properties() {
        let known = property
            .name()
            .and_then(|n| n.decoded_value().ok())
            .is_some_and(|n| matches!(n.as_str(), "name" | "namespace_id" | "simple"));
        if !known {
            property.remove();
        }
    }
    set(object, "name", entry.name.clone().into());
    set(object, "namespace_id", entry.namespace_id.clone().into());
    match object.get("simple").and_then(|p| p.object_value()) {
        Some(simple) => {
            for property in simple.properties() {
                let known = property
                    .name()
                    .and_then(|n| n.decoded_value().ok())
                    .is_some_and(|n| matches!(n.as_str(), "limit" | "period"));
                if !known {
                    property.remove();
                }
            }
            set(&simple, "limit", entry.simple.limit.into());
            set(&simple, "period", entry.simple.period.into());
        }
        None => set(object, "simple", simple_cst(entry)),
    }
}

fn update_toml(
    existing: Option<&str>,
    connection: &str,
    entries: &[WranglerEntry],
) -> Result<Option<String>, EditError> {
    let text = existing.unwrap_or_default();
    let mut document: toml_edit::DocumentMut = text
        .parse()
        .map_err(|e: toml_edit::TomlError| EditError::Toml(e.to_string()))?;
    // What the current entries mean, in order, whichever way they are written.
    let values: Vec<serde_json::Value> = toml::from_str::<toml::Table>(text)
        .ok()
        .and_then(|mut table| table.remove(KEY))
        .and_then(|list| serde_json::to_value(list).ok())
        .and_then(|list| list.as_array().cloned())
        .unwrap_or_default();
    let names = names_of(&values);
    let (indices, same) = ours(&names, &values, connection, entries);
    let Some(item) = document.get_mut(KEY) else {
        let mut tables = toml_edit::ArrayOfTables::new();
        for entry in entries {
            tables.push(toml_table(entry));
        }
        document.insert(KEY, toml_edit::Item::ArrayOfTables(tables));
        return Ok(Some(document.to_string()));
    };
    match item {
        toml_edit::Item::ArrayOfTables(tables) => {
            if same {
                return Ok(None);
            }
            let edits = Edits::new(&indices, entries.len(), tables.len());
            for (&i, entry) in edits.replaced.iter().zip(entries) {
                if let Some(table) = tables.get_mut(i) {
                    set_toml_entry(table, entry);
                }
            }
            // New tables take no position of their own, so each is written
            // right after the table (or sub-table) before it in the list.
            for (offset, entry) in entries.iter().skip(edits.replaced.len()).enumerate() {
                tables.insert(edits.insert_at + offset, toml_table(entry));
            }
            for &i in edits.removed.iter().rev() {
                tables.remove(i);
            }
        }
        toml_edit::Item::Value(toml_edit::Value::Array(array)) => {
            if same {
                return Ok(None);
            }
            let inline =
                |entry| toml_edit::Value::InlineTable(toml_table(entry).into_inline_table());
            let edits = Edits::new(&indices, entries.len(), array.len());
            for (&i, entry) in edits.replaced.iter().zip(entries) {
                if let Some(table) = array
                    .get_mut(i)
                    .and_then(toml_edit::Value::as_inline_table_mut)
                {
                    set_toml_entry(table, entry);
                }
            }
            // A new entry goes on a line of its own when the old one did.
            let indent = edits
                .replaced
                .last()
                .and_then(|&i| array.get(i))
                .and_then(|value| value.decor().prefix()?.as_str())
                .and_then(|prefix| Some(prefix[prefix.rfind('\n')?..].to_owned()));
            for (offset, entry) in entries.iter().skip(edits.replaced.len()).enumerate() {
                let mut value = inline(entry);
                if let Some(indent) = &indent {
                    value.decor_mut().set_prefix(indent.clone());
                }
                array.insert(edits.insert_at + offset, value);
            }
            for &i in edits.removed.iter().rev() {
                array.remove(i);
            }
        }
        _ => return Err(EditError::NotAList),
    }
    Ok(Some(document.to_string()))
}

/// Makes an existing entry's table say `entry`, value by value, keeping its
/// layout (a `[ratelimits.simple]` table stays one) and its comments.
fn set_toml_entry(table: &mut dyn toml_edit::TableLike, entry: &WranglerEntry) {
    keep_only(table, &["name", "namespace_id", "simple"]);
    set_toml_value(table, "name", entry.name.as_str().into());
    set_toml_value(table, "namespace_id", entry.namespace_id.as_str().into());
    match table
        .get_mut("simple")
        .and_then(toml_edit::Item::as_table_like_mut)
    {
        Some(simple) => {
            keep_only(simple, &["limit", "period"]);
            set_toml_value(simple, "limit", i64::from(entry.simple.limit).into());
            set_toml_value(simple, "period", i64::from(entry.simple.period).into());
        }
        None => {
            table.insert("simple", toml_edit::value(toml_simple(entry)));
        }
    }
}

fn keep_only(table: &mut dyn toml_edit::TableLike, keys: &[&str]) {
    let others: Vec<String> = table
        .iter()
        .map(|(key, _)| key.to_owned())
        .filter(|key| !keys.contains(&key.as_str()))
        .collect();
    for key in others {
        table.remove(&key);
    }
}

/// Sets one value, keeping the whitespace and comment around the old one.
fn set_toml_value(table: &mut dyn toml_edit::TableLike, key: &str, value: toml_edit::Value) {
    match table.get_mut(key).and_then(toml_edit::Item::as_value_mut) {
        Some(old) => {
            let decor = old.decor().clone();
            *old = value;
            *old.decor_mut() = decor;
        }
        None => {
            table.insert(key, toml_edit::Item::Value(value));
        }
    }
}

fn names_of(values: &[serde_json::Value]) -> Vec<Option<String>> {
    values
        .iter()
        .map(|v| v.get("name").and_then(|n| n.as_str()).map(str::to_owned))
        .collect()
}

/// `name`, `namespace_id` and `simple = { limit, period }`.
fn toml_table(entry: &WranglerEntry) -> toml_edit::Table {
    let mut table = toml_edit::Table::new();
    table.insert("name", toml_edit::value(entry.name.as_str()));
    table.insert(
        "namespace_id",
        toml_edit::value(entry.namespace_id.as_str()),
    );
    table.insert("simple", toml_edit::value(toml_simple(entry)));
    table
}

fn toml_simple(entry: &WranglerEntry) -> toml_edit::InlineTable {
    let mut simple = toml_edit::InlineTable::new();
    simple.insert("limit", i64::from(entry.simple.limit).into());
    simple.insert("period", i64::from(entry.simple.period).into());
    simple
}
