//! Loading ordinary Kubernetes manifests (multi-document YAML, JSON, `List` objects) into
//! the in-memory cluster. A broken object is reported with its file, document (and line),
//! object and field and left out; everything else loads.
//!
//! Dumps of real clusters load whole: documents and List items are parsed one by one
//! (see `split`), with parser budgets sized to each piece, so no size a dump reaches is
//! refused while alias bombs and absurd nesting still are; a JSON List is streamed item by
//! item. Objects defined twice, pods bound to nodes the input lacks, and a second
//! KubeSchedulerConfiguration are problems, never silent.

use std::fmt;
use std::io::BufRead;
use std::path::PathBuf;
use std::sync::Arc;

use k8s_openapi::api::core::v1 as api;
use k8s_openapi::api::scheduling::v1::PriorityClass;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde::de::DeserializeOwned;

use kubesched_framework::events::{EventObject, EventResource};
use kubesched_framework::model::{PodInfo, PodObject};
use kubesched_framework::registry;

use crate::cluster::SimCluster;

mod dedup;
#[cfg(test)]
mod dump_tests;
mod fast_yaml;
mod json_stream;
mod split;
mod stream;
mod walk;
mod yaml_stream;

/// A problem with the input: which file, which document, which object, which field, what.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct InputProblem {
    /// The file (`-` for standard input).
    pub file: String,
    /// Where in the file: `document 3 (line 120)`, `document 1, item 37 (line 5012)`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub document: Option<String>,
    /// `Kind namespace/name`, when known.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub object: Option<String>,
    /// The field path, when known.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub field: Option<String>,
    /// What is wrong.
    pub message: String,
}

impl InputProblem {
    /// A problem with a file as a whole.
    pub fn file(file: &str, message: impl Into<String>) -> Self {
        Self {
            file: file.into(),
            document: None,
            object: None,
            field: None,
            message: message.into(),
        }
    }

    /// A problem with one field of one object.
    pub fn object(
        file: &str,
        object: impl Into<String>,
        field: Option<String>,
        message: impl Into<String>,
    ) -> Self {
        Self {
            file: file.into(),
            document: None,
            object: Some(object.into()),
            field,
            message: message.into(),
        }
    }

    fn at(mut self, position: &Position) -> Self {
        self.document = Some(position.to_string());
        self
    }
}

impl fmt::Display for InputProblem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.file)?;
        if let Some(d) = &self.document {
            write!(f, ": {d}")?;
        }
        if let Some(o) = &self.object {
            write!(f, ": {o}")?;
        }
        if let Some(field) = &self.field {
            write!(f, ": {field}")?;
        }
        write!(f, ": {}", self.message)
    }
}

/// Objects read from manifests, before they are applied to a cluster.
#[derive(Debug, Default, Clone)]
pub struct Manifests {
    /// Nodes.
    pub nodes: Vec<api::Node>,
    /// Pods (bound ones carry `spec.nodeName`), slimmed and packed (see [`PodObject`]),
    /// each in the allocation the in-memory cluster and the scheduler's cache go on
    /// sharing.
    pub pods: Vec<PodObject>,
    /// Pods of [`Manifests::pods`] compiled on the parsing threads while their objects
    /// were decoded there (those with a namespace and a resolved priority, which the
    /// simulator would not change): [`crate::Simulation::load`] takes these instead of
    /// decoding the packed pods again. An entry whose object is no longer among `pods` (a
    /// duplicate that lost) is ignored.
    pub compiled: Vec<Arc<PodInfo>>,
    /// Pods an API server would refuse: not simulated, reported with status `Invalid`.
    pub invalid_pods: Vec<InvalidPod>,
    /// Priority classes, used to resolve `priorityClassName`.
    pub priority_classes: Vec<PriorityClass>,
    /// Every other supported object, as raw JSON with its kind.
    pub others: Vec<(String, serde_json::Value)>,
    /// Deployments: not simulated (pods are), kept for `--scale-workload`.
    pub deployments: Vec<k8s_openapi::api::apps::v1::Deployment>,
    /// A KubeSchedulerConfiguration found among the manifests: where it was (file and
    /// document) and its text (that document alone).
    pub config: Option<(String, String)>,
}

/// A pod an API server would refuse, with the first reason (field and message).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InvalidPod {
    /// Namespace (`default` when the manifest gave none).
    pub namespace: String,
    /// Name.
    pub name: String,
    /// `field: message`, in the API server's words.
    pub message: String,
}

/// The largest file (or standard input) read: a bigger one is refused with its size.
/// Files are read as they are parsed, so this bounds time, not memory.
pub const MAX_FILE_BYTES: u64 = 64 << 30;

/// Where an object is in its file: the document (1-based), the item of a List (1-based,
/// nested Lists give several), and the line the document or item starts on when known.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
struct Position {
    document: usize,
    items: Vec<usize>,
    line: Option<usize>,
}

impl Position {
    fn item(&self, index: usize, line: Option<usize>) -> Self {
        let mut items = self.items.clone();
        items.push(index);
        Self {
            document: self.document,
            items,
            line: line.or(if self.items.is_empty() {
                None
            } else {
                self.line
            }),
        }
    }
}

impl fmt::Display for Position {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "document {}", self.document)?;
        if !self.items.is_empty() {
            let items: Vec<String> = self.items.iter().map(ToString::to_string).collect();
            write!(f, ", item {}", items.join("."))?;
        }
        if let Some(line) = self.line {
            write!(f, " (line {line})")?;
        }
        Ok(())
    }
}

/// Built-in kinds the simulator stores for plugins besides nodes, pods and priority
/// classes (whether or not a compiled-in plugin declares them, so a dump loads the same
/// in every build); the kinds compiled-in plugins declare load too (see
/// [`is_declared_kind`]).
pub const OTHER_KINDS: &[&str] = &[
    "Namespace",
    "Service",
    "ReplicaSet",
    "StatefulSet",
    "ReplicationController",
    "PersistentVolume",
    "PersistentVolumeClaim",
    "StorageClass",
    "CSINode",
    "CSIDriver",
    "CSIStorageCapacity",
    "VolumeAttachment",
    "PodDisruptionBudget",
    "ResourceSlice",
    "DeviceClass",
    "ResourceClaim",
    "ResourceClaimTemplate",
];

/// Kinds that are valid Kubernetes objects but mean nothing to a scheduler simulation;
/// they are skipped silently.
const IGNORED_KINDS: &[&str] = &[
    "DaemonSet",
    "Job",
    "CronJob",
    "ConfigMap",
    "Secret",
    "ServiceAccount",
    "Role",
    "RoleBinding",
    "ClusterRole",
    "ClusterRoleBinding",
    "Endpoints",
    "EndpointSlice",
    "Event",
    "Lease",
    "ResourceQuota",
    "LimitRange",
    "Ingress",
    "NetworkPolicy",
    "HorizontalPodAutoscaler",
    "ControllerRevision",
    "CustomResourceDefinition",
];

/// The kind of a KubeSchedulerConfiguration.
const CONFIG_KIND: &str = "KubeSchedulerConfiguration";

/// A path named as input that cannot be read at all: missing, a folder that cannot be
/// listed, or not a regular file. A command line refuses these rather than report them,
/// since no simulation of the rest would answer what was asked.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{path}: cannot read: {reason}")]
pub struct UnreadablePath {
    /// The path as given.
    pub path: String,
    /// Why.
    pub reason: String,
}

/// Checks the paths named as input (`-` is standard input and always readable) before any
/// is parsed; [`load_paths`] reports the same failures as input problems instead. What is
/// found inside a folder is not checked here: a file there that cannot be read is a
/// problem of the input, as a bad document is.
pub fn unreadable_paths(paths: &[PathBuf]) -> Vec<UnreadablePath> {
    paths
        .iter()
        .filter(|p| p.as_path() != std::path::Path::new(walk::STDIN))
        .filter_map(|p| {
            walk::readable(p).err().map(|reason| UnreadablePath {
                path: p.display().to_string(),
                reason,
            })
        })
        .collect()
}

/// Reads every manifest under the paths (files, or folders walked in name order; `-` is
/// standard input). Files that cannot be read (folders that lead back to themselves,
/// devices, pipes, files over [`MAX_FILE_BYTES`]) are reported and skipped.
pub fn load_paths(paths: &[PathBuf]) -> (Manifests, Vec<InputProblem>) {
    load_after(None, paths)
}

/// [`load_paths`] after the objects of `first` (a name and its text, e.g. a cluster read
/// once as a `List`): the files' objects come later, so one defined in both is the files'
/// copy, reported as a duplicate as any other.
pub fn load_after(
    first: Option<(&str, &str)>,
    paths: &[PathBuf],
) -> (Manifests, Vec<InputProblem>) {
    let mut manifests = Manifests::default();
    let mut problems = Vec::new();
    let mut files = Vec::new();
    let mut walk = walk::Walk::default();
    for p in paths {
        walk.collect(p, &mut files, &mut problems);
    }
    let mut loader = Loader::new(&mut manifests, &mut problems);
    if let Some((name, text)) = first {
        loader.load_reader(text.as_bytes(), name);
    }
    for f in files {
        let name = f.display().to_string();
        match walk::open(&f) {
            Ok(reader) => loader.load_reader(reader, &name),
            Err(message) => loader.problems.push(InputProblem::file(&name, message)),
        }
    }
    loader.finish();
    (manifests, problems)
}

/// Parses one file's text (YAML documents or JSON) into `manifests`. Objects already in
/// `manifests` count for duplicates.
pub fn load_text(
    text: &str,
    file: &str,
    manifests: &mut Manifests,
    problems: &mut Vec<InputProblem>,
) {
    let mut loader = Loader::new(manifests, problems);
    loader.load_reader(text.as_bytes(), file);
    loader.finish();
}

/// [`load_text`] with YAML windows of `window` bytes, so that tests stream small files.
#[cfg(test)]
fn load_text_windowed(
    text: &str,
    file: &str,
    window: usize,
    manifests: &mut Manifests,
    problems: &mut Vec<InputProblem>,
) {
    let mut loader = Loader::new(manifests, problems);
    loader.window = window;
    loader.load_reader(text.as_bytes(), file);
    loader.finish();
}

/// Parser options for a piece of YAML of `len` bytes: no limit a real dump can reach
/// (a piece holds at most `len` nodes and `len` bytes of scalars), the alias limits kept
/// (an alias bomb is small text that expands without bound), nesting limited far above
/// what any Kubernetes object needs.
fn yaml_options(len: usize) -> serde_saphyr::Options {
    let mut budget = serde_saphyr::Budget::default();
    budget.max_documents = usize::MAX;
    budget.max_nodes = budget.max_nodes.max(len.saturating_add(16));
    budget.max_events = budget
        .max_events
        .max(len.saturating_mul(3).saturating_add(64));
    budget.max_total_scalar_bytes = budget.max_total_scalar_bytes.max(len.saturating_add(16));
    budget.max_reader_input_bytes = None;
    budget.max_depth = 128;
    let mut options = serde_saphyr::Options::default();
    options.budget = Some(budget);
    options.with_snippet = false;
    // Comments are never read; not collecting them makes parsing much faster.
    options.emit_comments = false;
    options
}

/// A YAML parse error's message and the line (of the piece) it points at.
fn yaml_error(e: &serde_saphyr::Error) -> (String, Option<usize>) {
    let line = e.location().map(|l| l.line() as usize).filter(|&l| l > 0);
    let mut message = e.to_string();
    // The location is given as a line of the file instead.
    if let Some(at) = message.rfind(" at line ") {
        message.truncate(at);
    }
    (message, line)
}

/// Loads the files of one command: keeps track of what was loaded (for duplicates) and
/// where the configuration came from.
struct Loader<'m> {
    manifests: &'m mut Manifests,
    problems: &'m mut Vec<InputProblem>,
    seen: dedup::Seen,
    /// YAML is read in windows of this many bytes (see `yaml_stream`).
    window: usize,
}

impl<'m> Loader<'m> {
    fn new(manifests: &'m mut Manifests, problems: &'m mut Vec<InputProblem>) -> Self {
        let seen = dedup::Seen::of(manifests);
        Self {
            manifests,
            problems,
            seen,
            window: yaml_stream::WINDOW,
        }
    }

    /// Checks what only the whole input can tell (pods bound to nodes it lacks).
    fn finish(self) {
        self.seen.check_bindings(self.manifests, self.problems);
    }

    /// Reads one file as it is parsed: JSON or YAML, told apart by its first bytes.
    fn load_reader(&mut self, mut reader: impl BufRead, file: &str) {
        let head = match reader.fill_buf() {
            Ok(head) => head,
            Err(e) => {
                self.problems
                    .push(InputProblem::file(file, format!("cannot read: {e}")));
                return;
            }
        };
        let bom = head.starts_with("\u{feff}".as_bytes());
        let head = &head[if bom { 3 } else { 0 }..];
        let valid = match std::str::from_utf8(head) {
            Ok(t) => t,
            Err(e) => std::str::from_utf8(&head[..e.valid_up_to()]).unwrap_or_default(),
        };
        let json = looks_like_json(valid);
        if bom {
            reader.consume(3);
        }
        if json {
            self.load_json_stream(reader, file);
        } else {
            self.load_yaml_stream(reader, file);
        }
    }

    /// JSON, read piece by piece: a top-level object's items parsed in batches across
    /// threads, the rest of it once it ends.
    fn load_json_stream(&mut self, reader: impl BufRead, file: &str) {
        let mut stream = json_stream::JsonStream::new(reader);
        let mut document = 0;
        let mut object_line = 1;
        let mut items = 0;
        let mut batch: Vec<(Position, Vec<u8>, usize)> = Vec::new();
        let at = |document| Position {
            document,
            ..Position::default()
        };
        loop {
            match stream.next_piece() {
                Ok(Some(json_stream::Piece::Start { line })) => {
                    document += 1;
                    object_line = line;
                    items = 0;
                }
                Ok(Some(json_stream::Piece::Item { text, line })) => {
                    items += 1;
                    batch.push((at(document).item(items, None), text, line));
                    if batch.len() >= BATCH {
                        self.add_json_items(std::mem::take(&mut batch), file);
                    }
                }
                Ok(Some(json_stream::Piece::End { text })) => {
                    self.add_json_items(std::mem::take(&mut batch), file);
                    let position = at(document);
                    match serde_json::from_slice::<serde_json::Value>(&text) {
                        Ok(mut header) => {
                            if let Some(m) = header.as_object_mut()
                                && m.get("items").is_some_and(|i| {
                                    i.as_array().is_some_and(Vec::is_empty)
                                })
                            {
                                m.remove("items");
                            }
                            self.add_header(header, items, file, &position, None);
                        }
                        Err(e) => self.problems.push(
                            InputProblem::file(
                                file,
                                format!(
                                    "invalid JSON in the object that starts on line {object_line}: {}",
                                    without_location(&e)
                                ),
                            )
                            .at(&position),
                        ),
                    }
                }
                Ok(Some(json_stream::Piece::Rest { text, line })) => {
                    self.add_json_items(std::mem::take(&mut batch), file);
                    match String::from_utf8(text) {
                        Ok(text) => self.load_json(&text, file, document, line),
                        Err(e) => self.problems.push(InputProblem::file(
                            file,
                            format!("cannot read from line {line} on: not UTF-8 text: {e}"),
                        )),
                    }
                }
                Ok(None) => break,
                Err(e) => {
                    self.add_json_items(std::mem::take(&mut batch), file);
                    let message = match e {
                        json_stream::CutError::Io(e) => format!("cannot read: {e}"),
                        json_stream::CutError::Truncated { line } => format!(
                            "invalid JSON: the file ends inside the value that starts on line {line}"
                        ),
                    };
                    self.problems
                        .push(InputProblem::file(file, message).at(&at(document)));
                }
            }
        }
        self.add_json_items(batch, file);
    }

    /// Items of a JSON object: parsed in parallel, added in order.
    fn add_json_items(&mut self, batch: Vec<(Position, Vec<u8>, usize)>, file: &str) {
        if batch.is_empty() {
            return;
        }
        let texts: Vec<&[u8]> = batch.iter().map(|(_, t, _)| t.as_slice()).collect();
        let parsed = parse_in_parallel(&texts, |t| parse_json_piece(t));
        for ((position, _, line), parsed) in batch.iter().zip(parsed) {
            if let Some((message, at)) = self.add_parsed(parsed, None, file, position) {
                let message = match at {
                    Some((l, column)) => format!(
                        "invalid JSON: {message} at line {} column {column}",
                        line + l - 1
                    ),
                    None => format!("invalid JSON: {message}"),
                };
                self.problems
                    .push(InputProblem::file(file, message).at(position));
            }
        }
    }

    /// JSON text read whole: one or more values one after the other, the first being
    /// document `before + 1` and starting on line `first_line`; a List's items are
    /// decoded one at a time as they are read.
    fn load_json(&mut self, text: &str, file: &str, before: usize, first_line: usize) {
        use serde::de::DeserializeSeed;
        let mut de = serde_json::Deserializer::from_str(text);
        let mut document = before;
        loop {
            if de.end().is_ok() {
                break;
            }
            document += 1;
            let position = Position {
                document,
                ..Position::default()
            };
            let mut items = 0;
            let seed = stream::TopLevel {
                on_item: &mut |item: serde_json::Value| {
                    items += 1;
                    let at = position.item(items, None);
                    self.add_object(item, file, &at, None);
                },
            };
            match seed.deserialize(&mut de) {
                Ok(header) => self.add_header(header, items, file, &position, None),
                Err(e) => {
                    let message = format!(
                        "invalid JSON: {} at line {} column {}",
                        without_location(&e),
                        first_line + e.line().max(1) - 1,
                        e.column()
                    );
                    self.problems
                        .push(InputProblem::file(file, message).at(&position));
                    // Where the next value starts is unknown after a syntax error.
                    break;
                }
            }
        }
    }

    /// YAML, read in windows (see `yaml_stream`): whole documents as they come, a large
    /// List's items a window at a time.
    fn load_yaml_stream(&mut self, reader: impl BufRead, file: &str) {
        let mut stream = yaml_stream::YamlStream::with_window(reader, self.window);
        let mut streamed_items = 0;
        let at = |document, line| Position {
            document,
            items: Vec::new(),
            line: Some(line),
        };
        loop {
            match stream.next_chunk() {
                Ok(Some(yaml_stream::Chunk::Documents {
                    text,
                    first_line,
                    first_document,
                })) => self.load_yaml(&text, file, first_document - 1, first_line),
                Ok(Some(yaml_stream::Chunk::Items {
                    text,
                    first_line,
                    document,
                    document_line,
                })) => {
                    let position = at(document, document_line);
                    streamed_items +=
                        self.add_items_window(&text, first_line, streamed_items, file, &position);
                }
                Ok(Some(yaml_stream::Chunk::ListEnd {
                    header,
                    document,
                    document_line,
                })) => {
                    let position = at(document, document_line);
                    let header = self
                        .list_header(&header, file, &position, true)
                        .unwrap_or_else(|| serde_json::json!({"kind": "List"}));
                    self.add_header(header, streamed_items, file, &position, None);
                    streamed_items = 0;
                }
                Ok(None) => break,
                Err(yaml_stream::ReadError::Io(e)) => self
                    .problems
                    .push(InputProblem::file(file, format!("cannot read: {e}"))),
                Err(yaml_stream::ReadError::NotUtf8 { line }) => {
                    self.problems.push(InputProblem::file(
                        file,
                        format!(
                            "line {line} is not UTF-8 text: the documents before the one it is in are read, the rest of the file is not"
                        ),
                    ));
                }
            }
        }
    }

    /// YAML documents read whole: the text's first document is the file's document
    /// `before + 1` and starts on the file's line `first_line`. Documents that are not
    /// Lists are parsed in batches across threads and added in order.
    fn load_yaml(&mut self, text: &str, file: &str, before: usize, first_line: usize) {
        let mut batch: Vec<(Position, split::Piece<'_>)> = Vec::new();
        for (i, mut piece) in split::documents(text).into_iter().enumerate() {
            if split::is_empty_document(&piece.text) {
                continue;
            }
            piece.first_line += first_line - 1;
            let position = Position {
                document: before + i + 1,
                items: Vec::new(),
                line: Some(piece.first_line),
            };
            if let Some(list) = split::list_items(&piece.text, piece.first_line) {
                self.add_documents(std::mem::take(&mut batch), file);
                if !self.load_split_list(&piece.text, &list, file, &position) {
                    self.add_documents(vec![(position, piece)], file);
                }
                continue;
            }
            batch.push((position, piece));
            if batch.len() >= BATCH {
                self.add_documents(std::mem::take(&mut batch), file);
            }
        }
        self.add_documents(batch, file);
    }

    /// A window of a streamed List's items (`items:` and their lines, starting on the
    /// file's line `first_line`), `before` items having come before it; returns how many
    /// items it held.
    fn add_items_window(
        &mut self,
        text: &str,
        first_line: usize,
        before: usize,
        file: &str,
        position: &Position,
    ) -> usize {
        if let Some(list) = split::list_items(text, first_line)
            && list.header.trim().is_empty()
        {
            self.add_list_items(text, &list, before, file, position);
            return list.len();
        }
        // A layout the cut cannot follow: the window is parsed whole.
        let count = split::count_items(text);
        match serde_saphyr::from_str_with_options::<serde_json::Value>(
            text,
            yaml_options(text.len()),
        ) {
            Ok(mut doc) => {
                let items = match doc.get_mut("items").map(serde_json::Value::take) {
                    Some(serde_json::Value::Array(items)) => items,
                    _ => Vec::new(),
                };
                let n = items.len();
                for (j, item) in items.into_iter().enumerate() {
                    self.add_object(item, file, &position.item(before + j + 1, None), None);
                }
                n
            }
            Err(e) => {
                let (message, line) = yaml_error(&e);
                let mut problem =
                    InputProblem::file(file, invalid_yaml(&message, line, first_line));
                problem.document = Some(format!(
                    "{position}, items {} to {}",
                    before + 1,
                    before + count.max(1)
                ));
                self.problems.push(problem);
                count
            }
        }
    }

    /// Parses documents (in parallel) and adds what they hold, in order.
    fn add_documents(&mut self, batch: Vec<(Position, split::Piece<'_>)>, file: &str) {
        let pieces: Vec<&split::Piece<'_>> = batch.iter().map(|(_, p)| p).collect();
        for ((position, piece), parsed) in batch
            .iter()
            .zip(parse_in_parallel(&pieces, |p| parse_piece(p)))
        {
            if let Some((message, at)) = self.add_parsed(parsed, Some(&piece.text), file, position)
            {
                self.problems.push(unparsed(
                    file,
                    &piece.text,
                    &message,
                    at.map(|(line, _)| line),
                    piece.first_line,
                    position,
                ));
            }
        }
    }

    /// Adds a parsed piece (`text` is its source, kept for a configuration); returns
    /// why it did not parse and where (line and column of the piece).
    fn add_parsed(
        &mut self,
        parsed: Parsed,
        text: Option<&str>,
        file: &str,
        position: &Position,
    ) -> Option<(String, Option<(usize, usize)>)> {
        match parsed {
            Parsed::Pod(p) => self.add_checked_pod(*p, file, position),
            Parsed::Node(n) => self.add_node(*n, file, position),
            Parsed::Value(serde_json::Value::Null) => {}
            Parsed::Value(doc) => self.add_object(doc, file, position, text),
            Parsed::Failed(message, at) => return Some((message, at)),
        }
        None
    }

    /// A List cut into items: its header and each item parsed on their own. Returns
    /// false, having added nothing, when the header is not a List's: the caller then
    /// parses the document whole.
    fn load_split_list(
        &mut self,
        text: &str,
        list: &split::SplitList<'_>,
        file: &str,
        position: &Position,
    ) -> bool {
        let Some(header) = self.list_header(&list.header, file, position, false) else {
            return false;
        };
        let is_list = header
            .get("kind")
            .and_then(|k| k.as_str())
            .is_some_and(|k| k.ends_with("List"))
            && header.get("items").is_none();
        if !is_list {
            return false;
        }
        self.add_list_items(text, list, 0, file, position);
        self.add_header(header, list.len(), file, position, None);
        true
    }

    /// A List's lines other than its items, parsed. When they do not parse, the problem
    /// is reported and a bare List given instead if their kind line still says List (a
    /// broken header costs only itself), or `always` is set (the items were added
    /// already); otherwise `None`, nothing reported.
    fn list_header(
        &mut self,
        header: &str,
        file: &str,
        position: &Position,
        always: bool,
    ) -> Option<serde_json::Value> {
        match serde_saphyr::from_str_with_options::<serde_json::Value>(
            header,
            yaml_options(header.len()),
        ) {
            Ok(h) => Some(h),
            Err(e) if always || peek_kind(header).is_some_and(|k| k.ends_with("List")) => {
                let (message, line) = yaml_error(&e);
                // The header's lines are the document's before and after the items; the
                // line is right when the error is before them (the usual place).
                let mut problem = InputProblem::file(
                    file,
                    invalid_yaml(&message, line, position.line.unwrap_or(1)),
                );
                problem.document = Some(position.to_string());
                self.problems.push(problem);
                Some(serde_json::json!({"kind": "List"}))
            }
            Err(_) => None,
        }
    }

    /// The items of a List cut into items, each parsed on its own (an item that does not
    /// parse alone because it refers to another item, through an alias, is taken from
    /// `text` parsed whole); `before` items of the same List came earlier.
    fn add_list_items(
        &mut self,
        text: &str,
        list: &split::SplitList<'_>,
        before: usize,
        file: &str,
        position: &Position,
    ) {
        let count = list.len();
        // Items that do not parse alone: (index, message, line of the piece, whether the
        // whole document might still give it).
        let mut failed: Vec<(usize, String, Option<usize>, bool)> = Vec::new();
        for from in (0..count).step_by(BATCH) {
            let pieces: Vec<split::Piece<'_>> = (from..count.min(from + BATCH))
                .map(|j| list.item(j))
                .collect();
            let parsed = parse_in_parallel(&pieces, parse_piece);
            for (k, (item, parsed)) in pieces.iter().zip(parsed).enumerate() {
                let j = from + k;
                let at = position.item(before + j + 1, Some(item.first_line));
                if let Some((message, line)) = self.add_parsed(parsed, Some(&item.text), file, &at)
                {
                    // An item needs the rest of the document only through an alias (to an
                    // anchor of another item) or a layout the cut cannot follow.
                    let retry = item.misindented.is_some() || item.text.contains('*');
                    failed.push((j, message, line.map(|(l, _)| l), retry));
                }
            }
        }
        let whole = if failed.iter().any(|f| f.3) {
            serde_saphyr::from_str_with_options::<serde_json::Value>(text, yaml_options(text.len()))
                .ok()
                .and_then(
                    |mut doc| match doc.get_mut("items").map(serde_json::Value::take) {
                        Some(serde_json::Value::Array(items)) if items.len() == count => {
                            Some(items)
                        }
                        _ => None,
                    },
                )
        } else {
            None
        };
        match whole {
            Some(mut items) => {
                for (j, ..) in failed {
                    let doc = items[j].take();
                    let at = position.item(before + j + 1, Some(list.item(j).first_line));
                    if !doc.is_null() {
                        self.add_object(doc, file, &at, None);
                    }
                }
            }
            None => {
                for (j, message, line, _) in failed {
                    let item = list.item(j);
                    let at = position.item(before + j + 1, Some(item.first_line));
                    self.problems.push(unparsed(
                        file,
                        &item.text,
                        &message,
                        line,
                        item.first_line,
                        &at,
                    ));
                }
            }
        }
    }

    /// The rest of a document whose items were added one by one: a List header, or an
    /// object that had `items` (they were read as objects) and is added as itself.
    fn add_header(
        &mut self,
        header: serde_json::Value,
        items: usize,
        file: &str,
        position: &Position,
        text: Option<&str>,
    ) {
        let kind = header.get("kind").and_then(|k| k.as_str());
        if kind.is_some_and(|k| k.ends_with("List")) {
            return;
        }
        if items > 0 {
            self.problems.push(
                InputProblem::object(
                    file,
                    describe(&header, &position.to_string()),
                    Some("items".into()),
                    "items outside a List: they were read as objects",
                )
                .at(position),
            );
        }
        if header.as_object().is_some_and(|m| m.is_empty()) && items > 0 {
            return;
        }
        self.add_object(header, file, position, text);
    }

    /// Adds one object; `text` is its source when it stands alone (a document, or an
    /// item cut out of a List), kept for a configuration.
    fn add_object(
        &mut self,
        doc: serde_json::Value,
        file: &str,
        position: &Position,
        text: Option<&str>,
    ) {
        let object = describe(&doc, &position.to_string());
        let problem = |field: &str, message: String| {
            InputProblem::object(file, object.clone(), Some(field.into()), message).at(position)
        };
        let Some(kind) = doc.get("kind").and_then(|k| k.as_str()).map(str::to_string) else {
            let message = if doc.is_object() {
                "missing kind".to_string()
            } else {
                format!("expected a Kubernetes object, got {}", value_type(&doc))
            };
            self.problems.push(problem("kind", message));
            return;
        };
        if kind.ends_with("List") {
            let items = match doc {
                serde_json::Value::Object(mut m) => m.remove("items"),
                _ => None,
            };
            if let Some(serde_json::Value::Array(items)) = items {
                for (j, item) in items.into_iter().enumerate() {
                    self.add_object(item, file, &position.item(j + 1, None), None);
                }
            }
            return;
        }
        if kind == CONFIG_KIND {
            self.add_config(&doc, file, position, text);
            return;
        }
        if doc
            .get("metadata")
            .and_then(|m| m.get("name"))
            .and_then(|n| n.as_str())
            .is_none_or(str::is_empty)
        {
            self.problems
                .push(problem("metadata.name", "an object needs a name".into()));
            return;
        }
        let origin = || origin(file, position);
        match kind.as_str() {
            "Node" => {
                if let Some(n) = self.decode::<api::Node>(doc, file, &object, position) {
                    self.add_node(n, file, position);
                }
            }
            "Pod" => {
                if let Some(p) = self.decode::<api::Pod>(doc, file, &object, position) {
                    self.add_pod(p, file, position);
                }
            }
            "PriorityClass" => {
                if let Some(p) = self.decode::<PriorityClass>(doc, file, &object, position) {
                    let duplicate = self.seen.add_priority_class(self.manifests, p, origin());
                    self.duplicate(duplicate, problem);
                }
            }
            "Deployment" => {
                if let Some(d) = self.decode(doc, file, &object, position) {
                    let duplicate = self.seen.add_deployment(self.manifests, d, origin());
                    self.duplicate(duplicate, problem);
                }
            }
            k if OTHER_KINDS.contains(&k) || is_declared_kind(&doc, k) => {
                let errors = crate::validate::other(k, &doc);
                if !errors.is_empty() {
                    for e in &errors {
                        self.problems.push(problem(&e.field, e.message.clone()));
                    }
                    return;
                }
                let duplicate = self.seen.add_other(self.manifests, kind, doc, origin());
                self.duplicate(duplicate, problem);
            }
            k if IGNORED_KINDS.contains(&k) => {}
            _ => self.problems.push(problem(
                "kind",
                format!("unknown kind {kind:?}; it is not simulated"),
            )),
        }
    }

    /// Adds a decoded node: refused when an API server would refuse it, reported when it
    /// is a second copy.
    fn add_node(&mut self, n: api::Node, file: &str, position: &Position) {
        let object = describe_meta("Node", &n.metadata);
        let problem = |field: &str, message: String| {
            InputProblem::object(file, object.clone(), Some(field.into()), message).at(position)
        };
        let errors = crate::validate::node(&n);
        if !errors.is_empty() {
            for e in errors {
                self.problems.push(problem(&e.field, e.message));
            }
            return;
        }
        let duplicate = self
            .seen
            .add_node(self.manifests, n, origin(file, position));
        self.duplicate(duplicate, problem);
    }

    /// Adds a decoded pod: kept aside as invalid when an API server would refuse it,
    /// reported when it is a second copy.
    fn add_pod(&mut self, p: api::Pod, file: &str, position: &Position) {
        self.add_checked_pod(check_pod(p), file, position);
    }

    /// Adds a pod checked (and packed) by [`check_pod`], on a parsing thread or here.
    fn add_checked_pod(&mut self, pod: CheckedPod, file: &str, position: &Position) {
        let CheckedPod { object, outcome } = pod;
        let problem = |field: &str, message: String| {
            InputProblem::object(file, object.clone(), Some(field.into()), message).at(position)
        };
        match outcome {
            Err((invalid, errors)) => {
                self.manifests.invalid_pods.push(invalid);
                for e in errors {
                    self.problems.push(problem(&e.field, e.message));
                }
            }
            Ok((packed, compiled)) => {
                if let Some(info) = compiled {
                    self.manifests.compiled.push(Arc::new(info));
                }
                let duplicate = self
                    .seen
                    .add_pod(self.manifests, packed, origin(file, position));
                self.duplicate(duplicate, problem);
            }
        }
    }

    fn duplicate(
        &mut self,
        message: Option<String>,
        problem: impl Fn(&str, String) -> InputProblem,
    ) {
        if let Some(m) = message {
            self.problems.push(problem("metadata.name", m));
        }
    }

    /// A configuration among the manifests: the first is used, a second one reported.
    fn add_config(
        &mut self,
        doc: &serde_json::Value,
        file: &str,
        position: &Position,
        text: Option<&str>,
    ) {
        let source = format!("{file}, {position}");
        if let Some((first, _)) = &self.manifests.config {
            self.problems.push(
                InputProblem::object(
                    file,
                    CONFIG_KIND,
                    Some("kind".into()),
                    format!(
                        "a second KubeSchedulerConfiguration: the first one ({first}) is used, this one is ignored"
                    ),
                )
                .at(position),
            );
            return;
        }
        let text = match text {
            Some(t) => t.to_string(),
            None => serde_json::to_string(doc).unwrap_or_default(),
        };
        self.manifests.config = Some((source, text));
    }

    fn decode<T: DeserializeOwned + k8s_openapi::Resource>(
        &mut self,
        doc: serde_json::Value,
        file: &str,
        object: &str,
        position: &Position,
    ) -> Option<T> {
        match decode::<T>(doc, file, object) {
            Ok(v) => Some(v),
            Err(p) => {
                self.problems.push(p.at(position));
                None
            }
        }
    }
}

/// Whether text is JSON rather than YAML written in flow style: JSON's objects start
/// with a quoted key (`{"kind": ...`), YAML's flow mappings need not (`{kind: Pod}`).
fn looks_like_json(text: &str) -> bool {
    let mut rest = text.trim_start();
    loop {
        match rest.chars().next() {
            Some('{') => {
                let after = rest[1..].trim_start();
                return after.starts_with('"') || after.starts_with('}');
            }
            Some('[') => rest = rest[1..].trim_start(),
            Some(c) => {
                return text.trim_start().starts_with('[')
                    && (c == ']' || c == '"' || c == '-' || c.is_ascii_digit());
            }
            None => return false,
        }
    }
}

/// Pieces parsed at a time: enough to keep every thread busy, few enough that the
/// parsed objects waiting to be added stay a small part of the whole.
const BATCH: usize = 4096;

/// A piece parsed (on any thread): the typed object for the kinds a dump is mostly made
/// of, else the general tree, or why it did not parse.
/// A pod checked as an API server would check it and, when valid, slimmed and packed:
/// what a parsing thread hands over, so the reading thread only files it.
struct CheckedPod {
    /// `Pod namespace/name`, for its problems.
    object: String,
    outcome: Result<(PodObject, Option<PodInfo>), (InvalidPod, Vec<crate::validate::FieldError>)>,
}

/// Checks a decoded pod; a valid one is slimmed (kept is what scheduling and the reports
/// read, not the whole object) and packed.
fn check_pod(mut p: api::Pod) -> CheckedPod {
    let object = describe_meta("Pod", &p.metadata);
    let errors = crate::validate::pod(&p);
    if let Some(first) = errors.first() {
        let invalid = InvalidPod {
            namespace: p
                .metadata
                .namespace
                .clone()
                .filter(|n| !n.is_empty())
                .unwrap_or_else(|| "default".into()),
            name: p.metadata.name.clone().unwrap_or_default(),
            message: first.to_string(),
        };
        return CheckedPod {
            object,
            outcome: Err((invalid, errors)),
        };
    }
    kubesched_model::slim_pod(&mut p);
    let packed = PodObject::packed(&p);
    // Compiled while the object is at hand, unless the simulator will change it (default
    // namespace, priority from its class) or it does not compile (the simulator reports
    // why when it compiles it again).
    let compiled = (p.metadata.namespace.is_some() && !needs_priority(&p))
        .then(|| PodInfo::from_decoded(packed.clone(), &p).ok())
        .flatten();
    CheckedPod {
        object,
        outcome: Ok((packed, compiled)),
    }
}

enum Parsed {
    Pod(Box<CheckedPod>),
    Node(Box<api::Node>),
    Value(serde_json::Value),
    /// Why, and where in the piece (line and column, 1-based) when known.
    Failed(String, Option<(usize, usize)>),
}

/// Parses one piece. A piece whose root mapping says `kind: Pod` or `kind: Node` is
/// decoded straight into the typed object (no tree in between); when that fails, or for
/// any other kind, it is parsed into the general tree, whose decoding then says exactly
/// which field is wrong.
fn parse_piece(piece: &split::Piece<'_>) -> Parsed {
    if let Some(line) = piece.misindented {
        let message = "a line indented less than its List item's content, or with a tab";
        return Parsed::Failed(message.to_string(), Some((line, 1)));
    }
    let text: &str = &piece.text;
    let has_name = |m: &ObjectMeta| m.name.as_deref().is_some_and(|n| !n.is_empty());
    // kubectl's own YAML first: read fast, decoded from the tree; anything the fast reader
    // leaves, or whose decoding fails, goes the general way below (its errors and all).
    if let Some(tree) = fast_yaml::parse(text) {
        match tree.get("kind").and_then(serde_json::Value::as_str) {
            Some("Pod") => {
                if let Ok(p) = serde_json::from_value::<api::Pod>(tree)
                    && has_name(&p.metadata)
                {
                    // Checked and packed here, on the parsing thread: a batch waiting to
                    // be added holds packed pods, and the reading thread only files them.
                    return Parsed::Pod(Box::new(check_pod(p)));
                }
            }
            Some("Node") => {
                if let Ok(n) = serde_json::from_value::<api::Node>(tree)
                    && has_name(&n.metadata)
                {
                    return Parsed::Node(Box::new(n));
                }
            }
            _ => return Parsed::Value(tree),
        }
    }
    match peek_kind(text) {
        Some("Pod") => {
            if let Ok(p) =
                serde_saphyr::from_str_with_options::<api::Pod>(text, yaml_options(text.len()))
                && has_name(&p.metadata)
            {
                return Parsed::Pod(Box::new(check_pod(p)));
            }
        }
        Some("Node") => {
            if let Ok(n) =
                serde_saphyr::from_str_with_options::<api::Node>(text, yaml_options(text.len()))
                && has_name(&n.metadata)
            {
                return Parsed::Node(Box::new(n));
            }
        }
        _ => {}
    }
    match serde_saphyr::from_str_with_options::<serde_json::Value>(text, yaml_options(text.len())) {
        Ok(v) => Parsed::Value(v),
        Err(e) => {
            let (message, line) = yaml_error(&e);
            Parsed::Failed(message, line.map(|l| (l, 1)))
        }
    }
}

/// Parses a JSON item. A Pod or a Node (as its `kind` says) is decoded straight into the
/// typed object; when that fails, or for any other kind, it is parsed into the general
/// tree, whose decoding then says exactly which field is wrong.
fn parse_json_piece(text: &[u8]) -> Parsed {
    #[derive(serde::Deserialize)]
    struct KindOnly<'a> {
        #[serde(borrow)]
        kind: Option<std::borrow::Cow<'a, str>>,
    }
    let has_name = |m: &ObjectMeta| m.name.as_deref().is_some_and(|n| !n.is_empty());
    let kind = serde_json::from_slice::<KindOnly<'_>>(text)
        .ok()
        .and_then(|k| k.kind);
    match kind.as_deref() {
        Some("Pod") => {
            if let Ok(p) = serde_json::from_slice::<api::Pod>(text)
                && has_name(&p.metadata)
            {
                return Parsed::Pod(Box::new(check_pod(p)));
            }
        }
        Some("Node") => {
            if let Ok(n) = serde_json::from_slice::<api::Node>(text)
                && has_name(&n.metadata)
            {
                return Parsed::Node(Box::new(n));
            }
        }
        _ => {}
    }
    match serde_json::from_slice::<serde_json::Value>(text) {
        Ok(v) => Parsed::Value(v),
        Err(e) => Parsed::Failed(without_location(&e), Some((e.line(), e.column()))),
    }
}

/// A JSON error's message without the position serde_json appends (given as a line of
/// the file instead).
fn without_location(e: &serde_json::Error) -> String {
    let mut message = e.to_string();
    if let Some(at) = message.rfind(" at line ") {
        message.truncate(at);
    }
    message
}

/// Parses pieces on up to 8 threads; the results are in the pieces' order.
fn parse_in_parallel<T: Sync>(pieces: &[T], parse: impl Fn(&T) -> Parsed + Sync) -> Vec<Parsed> {
    let threads = std::thread::available_parallelism()
        .map_or(1, std::num::NonZero::get)
        .min(8);
    if threads == 1 || pieces.len() < 64 {
        return pieces.iter().map(&parse).collect();
    }
    let chunk = pieces.len().div_ceil(threads);
    let parse = &parse;
    std::thread::scope(|scope| {
        let workers: Vec<_> = pieces
            .chunks(chunk)
            .map(|c| scope.spawn(move || c.iter().map(parse).collect::<Vec<_>>()))
            .collect();
        workers
            .into_iter()
            .flat_map(|w| w.join().unwrap_or_else(|e| std::panic::resume_unwind(e)))
            .collect()
    })
}

/// The problem of a piece that does not parse: named by the kind and name its lines
/// give, when they do (`Pod web-1`), as the object cannot be read.
fn unparsed(
    file: &str,
    text: &str,
    message: &str,
    line: Option<usize>,
    first_line: usize,
    position: &Position,
) -> InputProblem {
    let mut problem = InputProblem::file(file, invalid_yaml(message, line, first_line));
    problem.document = Some(position.to_string());
    problem.object = peek_kind(text)
        .filter(|k| !k.is_empty())
        .map(|kind| match peek_name(text) {
            Some(name) => format!("{kind} {name}"),
            None => kind.to_string(),
        });
    problem
}

/// `metadata.name` as the lines of a block mapping give it (`metadata:` then `  name: x`).
fn peek_name(text: &str) -> Option<&str> {
    let mut lines = text.lines().skip_while(|l| !l.starts_with("metadata:"));
    lines.next()?;
    let name = lines
        .take_while(|l| l.is_empty() || l.starts_with(' ') || l.starts_with('#'))
        .find_map(|l| l.strip_prefix("  name:"))?
        .trim()
        .trim_matches(['"', '\'']);
    (!name.is_empty()).then_some(name)
}

fn invalid_yaml(message: &str, line: Option<usize>, first_line: usize) -> String {
    match line {
        Some(l) => format!("invalid YAML at line {}: {message}", first_line + l - 1),
        None => format!("invalid YAML: {message}"),
    }
}

fn value_type(v: &serde_json::Value) -> &'static str {
    match v {
        serde_json::Value::Null => "null",
        serde_json::Value::Bool(_) => "a boolean",
        serde_json::Value::Number(_) => "a number",
        serde_json::Value::String(_) => "a string",
        serde_json::Value::Array(_) => "a sequence",
        serde_json::Value::Object(_) => "a mapping",
    }
}

fn origin(file: &str, position: &Position) -> dedup::Origin {
    dedup::Origin {
        file: file.to_string(),
        position: position.to_string(),
    }
}

/// The kind a piece of YAML gives on a line of its own at the root (`kind: Pod`), if any.
fn peek_kind(text: &str) -> Option<&str> {
    let line = text.lines().find_map(|l| l.strip_prefix("kind:"))?;
    let value = match line.find(" #") {
        Some(at) => &line[..at],
        None => line,
    }
    .trim();
    let value = value
        .strip_prefix('"')
        .and_then(|v| v.strip_suffix('"'))
        .or_else(|| value.strip_prefix('\'').and_then(|v| v.strip_suffix('\'')))
        .unwrap_or(value);
    Some(value)
}

fn describe_meta(kind: &str, meta: &ObjectMeta) -> String {
    match (meta.namespace.as_deref(), meta.name.as_deref()) {
        (Some(ns), Some(n)) => format!("{kind} {ns}/{n}"),
        (_, n) => format!("{kind} {}", n.unwrap_or_default()),
    }
}

fn describe(doc: &serde_json::Value, fallback: &str) -> String {
    let kind = doc.get("kind").and_then(|k| k.as_str()).unwrap_or("object");
    let meta = doc.get("metadata");
    let name = meta.and_then(|m| m.get("name")).and_then(|n| n.as_str());
    let ns = meta
        .and_then(|m| m.get("namespace"))
        .and_then(|n| n.as_str());
    match (ns, name) {
        (Some(ns), Some(n)) => format!("{kind} {ns}/{n}"),
        (None, Some(n)) => format!("{kind} {n}"),
        _ => format!("{kind} ({fallback})"),
    }
}

fn decode<T: DeserializeOwned + k8s_openapi::Resource>(
    doc: serde_json::Value,
    file: &str,
    object: &str,
) -> Result<T, InputProblem> {
    // The typed decoders check a given apiVersion and kind themselves but report them
    // for the object as a whole; checked here first, the problem names the field.
    for (field, expected) in [("apiVersion", T::API_VERSION), ("kind", T::KIND)] {
        if let Some(given) = doc.get(field)
            && given.as_str() != Some(expected)
        {
            return Err(InputProblem::object(
                file,
                object,
                Some(field.into()),
                format!("expected {expected:?} for a {}, got {given}", T::KIND),
            ));
        }
    }
    serde_path_to_error::deserialize::<_, T>(doc).map_err(|e| {
        let path = e.path().to_string();
        InputProblem::object(
            file,
            object,
            (path != ".").then_some(path),
            e.into_inner().to_string(),
        )
    })
}

fn api_version_of(doc: &serde_json::Value) -> &str {
    doc.get("apiVersion").and_then(|v| v.as_str()).unwrap_or("")
}

/// Whether a compiled-in plugin declares the object's kind (by `apiVersion` group and kind).
pub fn is_declared_kind(doc: &serde_json::Value, kind: &str) -> bool {
    let api_version = api_version_of(doc);
    registry::declared_kinds(registry::plugins())
        .reads
        .iter()
        .any(|k| k.matches(api_version, kind))
}

/// A change an applied object makes: the resource its events carry, the object it
/// replaced and the object as stored.
pub type AppliedObject = (EventResource, Option<EventObject>, EventObject);

/// Applies a stored object of another kind to the object store (every store of its kind:
/// the built-in ones and those of the kinds plugins declare), reporting decode errors with
/// the file, the object and the field. Returns the changes, for the change events'
/// queueing hints; empty when the kind has no store or the object could not be decoded.
pub fn apply_other(
    cluster: &SimCluster,
    kind: &str,
    doc: serde_json::Value,
    file: &str,
    problems: &mut Vec<InputProblem>,
) -> Vec<AppliedObject> {
    use k8s_openapi::api::resource::v1 as resource;
    let objects = cluster.objects();
    let api_version = api_version_of(&doc).to_string();
    for declared in registry::declared_kinds(registry::plugins()).reads {
        if declared.matches(&api_version, kind) {
            objects.register(declared);
        }
    }
    let stores: Vec<_> = if api_version.is_empty() {
        // Without an apiVersion only the kind can tell: a built-in kind of that name.
        objects
            .kinds()
            .into_iter()
            .filter(|k| k.kind == kind && OTHER_KINDS.contains(&kind))
            .map(|k| objects.register(k))
            .collect()
    } else {
        objects.stores_for(&api_version, kind)
    };
    let Some(first) = stores.first() else {
        return Vec::new();
    };
    let mut doc = doc;
    // A namespaced object written without a namespace lands in `default`, as `kubectl
    // apply` puts it there (pods are defaulted the same way).
    if first.kind().namespaced
        && let Some(meta) = doc.get_mut("metadata").and_then(|m| m.as_object_mut())
        && meta
            .get("namespace")
            .and_then(|n| n.as_str())
            .is_none_or(str::is_empty)
    {
        meta.insert("namespace".into(), "default".into());
    }
    let object = describe(&doc, "");
    match (first.kind().group, kind) {
        ("storage.k8s.io", "StorageClass") => {
            // The API server's defaults, which hand-written manifests leave out.
            if let Some(m) = doc.as_object_mut() {
                m.entry("volumeBindingMode").or_insert("Immediate".into());
                m.entry("reclaimPolicy").or_insert("Delete".into());
            }
        }
        ("resource.k8s.io", "ResourceClaim") => {
            // A claim needs the identity an API server gives it (uid, resourceVersion).
            let mut claim = match decode::<resource::ResourceClaim>(doc, file, &object) {
                Ok(c) => c,
                Err(p) => {
                    problems.push(p);
                    return Vec::new();
                }
            };
            crate::claims::fill_identity(&mut claim);
            match serde_json::to_value(&claim) {
                Ok(v) => doc = v,
                Err(e) => {
                    problems.push(InputProblem::object(file, object, None, e.to_string()));
                    return Vec::new();
                }
            }
            doc["apiVersion"] = api_version.clone().into();
            doc["kind"] = kind.into();
        }
        _ => {}
    }
    let mut applied = Vec::new();
    for store in &stores {
        match store.upsert_raw(doc.clone()) {
            Ok((old, new)) => applied.push((store.kind().event_resource(), old, new)),
            Err(e) => problems.push(InputProblem::object(
                file,
                object.clone(),
                e.field,
                e.message,
            )),
        }
    }
    if kind == "ResourceClaimTemplate" && !applied.is_empty() {
        // Pods that waited for this template get their claims now.
        cluster.run_claim_controller();
    }
    applied
}

/// Priority of the built-in `system-cluster-critical` class.
pub const SYSTEM_CLUSTER_CRITICAL: i32 = 2_000_000_000;
/// Priority of the built-in `system-node-critical` class.
pub const SYSTEM_NODE_CRITICAL: i32 = 2_000_001_000;
/// A PriorityClass's `preemptionPolicy` when it sets none (the API server's default).
pub const PREEMPT_LOWER_PRIORITY: &str = "PreemptLowerPriority";

/// The class a pod's priority comes from: its value, preemption policy and name.
struct ResolvedClass<'a> {
    name: Option<String>,
    value: i32,
    preemption_policy: &'a str,
}

impl<'a> ResolvedClass<'a> {
    fn of(class: &'a PriorityClass) -> Self {
        Self {
            name: class.metadata.name.clone(),
            value: class.value.unwrap_or(0),
            preemption_policy: class
                .preemption_policy
                .as_deref()
                .unwrap_or(PREEMPT_LOWER_PRIORITY),
        }
    }
}

/// The global default class: among classes with `globalDefault: true`, the lowest value
/// (as the admission plugin does when a race left several); equal values go to the
/// first name in alphabetical order, so the choice does not depend on input order.
fn global_default(classes: &[PriorityClass]) -> Option<&PriorityClass> {
    classes
        .iter()
        .filter(|c| c.global_default == Some(true))
        .min_by(|a, b| {
            a.value
                .cmp(&b.value)
                .then_with(|| a.metadata.name.cmp(&b.metadata.name))
        })
}

/// Whether [`resolve_priority`] may change the pod: it names no priority or no
/// preemption policy yet (an API server's admission fills both in, so a dump's pods have
/// them).
pub fn needs_priority(pod: &api::Pod) -> bool {
    pod.spec
        .as_ref()
        .is_some_and(|s| s.priority.is_none() || s.preemption_policy.is_none())
}

/// Fills `spec.priority` and `spec.preemptionPolicy` as the API server's Priority
/// admission plugin does when a pod is created: from the class `priorityClassName`
/// names (the built-in `system-*-critical` classes included), or from the global
/// default class when it names none (also setting `priorityClassName` to it), or
/// priority 0 and `PreemptLowerPriority` when there is no default class.
///
/// A pod that already carries a field keeps it (it went through admission once, or its
/// author means it); only missing fields are filled. A class that does not exist is an
/// error only when the priority had to come from it.
pub fn resolve_priority(pod: &mut api::Pod, classes: &[PriorityClass]) -> Result<(), String> {
    let Some(spec) = pod.spec.as_mut() else {
        return Ok(());
    };
    if spec.priority.is_some() && spec.preemption_policy.is_some() {
        return Ok(());
    }
    let named = spec.priority_class_name.clone().filter(|n| !n.is_empty());
    let resolved = match named.as_deref() {
        Some(name) => {
            let builtin = |value| ResolvedClass {
                name: Some(name.to_string()),
                value,
                preemption_policy: PREEMPT_LOWER_PRIORITY,
            };
            match classes
                .iter()
                .find(|c| c.metadata.name.as_deref() == Some(name))
            {
                Some(c) => Some(ResolvedClass::of(c)),
                None if name == "system-cluster-critical" => Some(builtin(SYSTEM_CLUSTER_CRITICAL)),
                None if name == "system-node-critical" => Some(builtin(SYSTEM_NODE_CRITICAL)),
                None if spec.priority.is_none() => {
                    return Err(format!("no PriorityClass with name {name} was found"));
                }
                None => None,
            }
        }
        None => Some(global_default(classes).map_or(
            ResolvedClass {
                name: None,
                value: 0,
                preemption_policy: PREEMPT_LOWER_PRIORITY,
            },
            ResolvedClass::of,
        )),
    };
    let Some(class) = resolved else {
        return Ok(());
    };
    if spec.priority.is_none() {
        spec.priority = Some(class.value);
        if named.is_none() {
            spec.priority_class_name = class.name;
        }
    }
    if spec.preemption_policy.is_none() {
        spec.preemption_policy = Some(class.preemption_policy.to_string());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

    /// Pods the simulator will not change are compiled on the parsing threads, from the
    /// very object kept (so the simulator does not decode it again); a pod without a
    /// namespace or a resolved priority is left for the simulator, which fills them in.
    #[test]
    fn pods_are_compiled_where_they_are_parsed_unless_the_simulator_changes_them() {
        let pod = |name: &str, namespace: Option<&str>, priority: Option<i32>| {
            serde_json::json!({
                "apiVersion": "v1", "kind": "Pod",
                "metadata": {"name": name, "namespace": namespace, "uid": format!("uid-{name}")},
                "spec": {"containers": [{"name": "c", "image": "app:v1"}],
                         "priority": priority, "preemptionPolicy": "PreemptLowerPriority"},
            })
        };
        let docs = [
            pod("ready", Some("team"), Some(5)),
            pod("no-namespace", None, Some(5)),
            pod("no-priority", Some("team"), None),
        ];
        let text: String = docs
            .iter()
            .map(|d| format!("---\n{}\n", serde_json::to_string(d).expect("json")))
            .collect();
        let mut manifests = Manifests::default();
        let mut problems = Vec::new();
        load_text(&text, "pods.yaml", &mut manifests, &mut problems);
        assert!(problems.is_empty(), "{problems:?}");
        assert_eq!(manifests.pods.len(), 3);
        let compiled: Vec<&str> = manifests.compiled.iter().map(|i| i.name.as_str()).collect();
        assert_eq!(compiled, ["ready"]);
        let info = &manifests.compiled[0];
        assert!(PodObject::ptr_eq(&info.pod, &manifests.pods[0]));
        assert_eq!((info.namespace.as_str(), info.priority), ("team", 5));
        assert_eq!(info.images, ["app:v1"]);
        assert!(manifests.pods[0].is_packed());
    }

    /// A duplicate that wins replaces the kept object, so the loser's compiled form matches
    /// no kept object and is not used.
    #[test]
    fn a_losing_duplicates_compiled_form_matches_no_kept_pod() {
        let pod = |rv: &str, image: &str| {
            format!(
                "---\n{{\"apiVersion\": \"v1\", \"kind\": \"Pod\", \"metadata\": {{\"name\": \"web\", \"namespace\": \"a\", \"uid\": \"u\", \"resourceVersion\": \"{rv}\"}}, \"spec\": {{\"priority\": 0, \"preemptionPolicy\": \"Never\", \"containers\": [{{\"name\": \"c\", \"image\": \"{image}\"}}]}}}}\n"
            )
        };
        let text = format!("{}{}", pod("9", "new:v2"), pod("3", "old:v1"));
        let mut manifests = Manifests::default();
        let mut problems = Vec::new();
        load_text(&text, "dup.yaml", &mut manifests, &mut problems);
        assert_eq!(problems.len(), 1, "{problems:?}");
        assert_eq!(manifests.pods.len(), 1);
        let kept: Vec<_> = manifests
            .compiled
            .iter()
            .filter(|i| PodObject::ptr_eq(&i.pod, &manifests.pods[0]))
            .collect();
        assert_eq!(kept.len(), 1);
        assert_eq!(kept[0].images, ["new:v2"]);
    }

    #[test]
    fn namespaced_objects_without_a_namespace_land_in_default() {
        let cluster = SimCluster::new();
        let mut problems = Vec::new();
        let claim = serde_json::json!({"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {"name": "data"}});
        let class = serde_json::json!({"apiVersion": "storage.k8s.io/v1", "kind": "StorageClass", "metadata": {"name": "fast"}, "provisioner": "p"});
        let attachment = serde_json::json!({"apiVersion": "storage.k8s.io/v1", "kind": "VolumeAttachment", "metadata": {"name": "va"}, "spec": {"attacher": "d", "nodeName": "n", "source": {}}});
        assert!(
            !apply_other(&cluster, "PersistentVolumeClaim", claim, "f", &mut problems).is_empty()
        );
        assert!(!apply_other(&cluster, "StorageClass", class, "f", &mut problems).is_empty());
        assert!(
            !apply_other(&cluster, "VolumeAttachment", attachment, "f", &mut problems).is_empty()
        );
        assert!(problems.is_empty(), "{problems:?}");
        let o = cluster.objects();
        assert!(
            o.persistent_volume_claims
                .get(Some("default"), "data")
                .is_some()
        );
        assert!(o.storage_classes.get(None, "fast").is_some());
        assert!(o.volume_attachments.get(None, "va").is_some());
    }

    #[test]
    fn decode_problems_name_the_field() {
        let cases = [
            (
                r#"{"apiVersion": "", "kind": "Pod", "metadata": {"name": "p"}}"#,
                "apiVersion",
            ),
            (
                r#"{"apiVersion": "v2", "kind": "Node", "metadata": {"name": "n"}}"#,
                "apiVersion",
            ),
            (
                r#"{"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}, "spec": {"containers": [{"name": 5}]}}"#,
                "spec.containers[0].name",
            ),
            (
                r#"{"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}, "spec": {"priority": "high"}}"#,
                "spec.priority",
            ),
        ];
        for (text, field) in cases {
            let mut m = Manifests::default();
            let mut problems = Vec::new();
            load_text(text, "f.json", &mut m, &mut problems);
            assert_eq!(problems.len(), 1, "{text}: {problems:?}");
            assert_eq!(problems[0].field.as_deref(), Some(field), "{text}");
            assert!(problems[0].object.is_some(), "{text}");
        }
        // Hand-written manifests may leave apiVersion out.
        let mut m = Manifests::default();
        let mut problems = Vec::new();
        load_text(
            r#"{"kind": "Pod", "metadata": {"name": "p"}}"#,
            "f.json",
            &mut m,
            &mut problems,
        );
        assert!(problems.is_empty(), "{problems:?}");
        assert_eq!(m.pods.len(), 1);
    }

    fn class(name: &str, value: i32, global_default: bool, policy: Option<&str>) -> PriorityClass {
        PriorityClass {
            metadata: ObjectMeta {
                name: Some(name.into()),
                ..Default::default()
            },
            value: Some(value),
            global_default: global_default.then_some(true),
            preemption_policy: policy.map(str::to_string),
            ..Default::default()
        }
    }

    fn pod(class: Option<&str>, priority: Option<i32>, policy: Option<&str>) -> api::Pod {
        api::Pod {
            metadata: ObjectMeta {
                name: Some("p".into()),
                ..Default::default()
            },
            spec: Some(api::PodSpec {
                priority_class_name: class.map(str::to_string),
                priority,
                preemption_policy: policy.map(str::to_string),
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    /// (priorityClassName, priority, preemptionPolicy) after resolution, or the error.
    type Resolved = Result<(Option<String>, Option<i32>, Option<String>), String>;

    fn check(classes: &[PriorityClass], mut input: api::Pod, expect: Resolved) {
        let got = resolve_priority(&mut input, classes).map(|()| {
            let spec = input.spec.unwrap_or_default();
            (
                spec.priority_class_name,
                spec.priority,
                spec.preemption_policy,
            )
        });
        assert_eq!(got, expect);
    }

    fn ok(class: Option<&str>, priority: i32, policy: &str) -> Resolved {
        Ok((
            class.map(str::to_string),
            Some(priority),
            Some(policy.to_string()),
        ))
    }

    fn classes() -> Vec<PriorityClass> {
        vec![
            class("high", 1000, false, None),
            class("batch-never", 500, false, Some("Never")),
            class("default-never", 10, true, Some("Never")),
        ]
    }

    #[test]
    fn named_class_gives_value_and_policy() {
        check(
            &classes(),
            pod(Some("high"), None, None),
            ok(Some("high"), 1000, PREEMPT_LOWER_PRIORITY),
        );
        check(
            &classes(),
            pod(Some("batch-never"), None, None),
            ok(Some("batch-never"), 500, "Never"),
        );
    }

    #[test]
    fn global_default_gives_value_policy_and_name() {
        // The upstream difference issue 21 fixed: the default class's Never is copied too.
        check(
            &classes(),
            pod(None, None, None),
            ok(Some("default-never"), 10, "Never"),
        );
        check(
            &classes(),
            pod(Some(""), None, None),
            ok(Some("default-never"), 10, "Never"),
        );
    }

    #[test]
    fn several_global_defaults_pick_the_lowest_value_then_name() {
        let several = vec![
            class("zeta", 5, true, None),
            class("beta", 7, true, Some("Never")),
            class("alpha", 5, true, Some("Never")),
        ];
        check(
            &several,
            pod(None, None, None),
            ok(Some("alpha"), 5, "Never"),
        );
    }

    #[test]
    fn without_a_default_class_priority_is_zero_and_may_preempt() {
        let none = vec![class("high", 1000, false, None)];
        check(
            &none,
            pod(None, None, None),
            ok(None, 0, PREEMPT_LOWER_PRIORITY),
        );
    }

    #[test]
    fn builtin_system_classes() {
        check(
            &[],
            pod(Some("system-node-critical"), None, None),
            ok(
                Some("system-node-critical"),
                SYSTEM_NODE_CRITICAL,
                PREEMPT_LOWER_PRIORITY,
            ),
        );
        check(
            &[],
            pod(Some("system-cluster-critical"), None, None),
            ok(
                Some("system-cluster-critical"),
                SYSTEM_CLUSTER_CRITICAL,
                PREEMPT_LOWER_PRIORITY,
            ),
        );
    }

    #[test]
    fn explicit_values_are_kept() {
        // Both carried (a dump of a real cluster): untouched, even with a default class.
        check(
            &classes(),
            pod(None, Some(42), Some(PREEMPT_LOWER_PRIORITY)),
            Ok((None, Some(42), Some(PREEMPT_LOWER_PRIORITY.into()))),
        );
        check(
            &classes(),
            pod(Some("high"), Some(7), Some("Never")),
            ok(Some("high"), 7, "Never"),
        );
        // Only the missing one is filled from the class.
        check(
            &classes(),
            pod(Some("batch-never"), Some(3), None),
            ok(Some("batch-never"), 3, "Never"),
        );
        check(
            &classes(),
            pod(Some("high"), None, Some("Never")),
            ok(Some("high"), 1000, "Never"),
        );
        check(
            &classes(),
            pod(None, None, Some(PREEMPT_LOWER_PRIORITY)),
            ok(Some("default-never"), 10, PREEMPT_LOWER_PRIORITY),
        );
    }

    #[test]
    fn missing_class_is_an_error_only_when_the_priority_must_come_from_it() {
        check(
            &classes(),
            pod(Some("gone"), None, None),
            Err("no PriorityClass with name gone was found".into()),
        );
        // An admitted pod whose class was deleted since keeps what it has.
        check(
            &classes(),
            pod(Some("gone"), Some(9), None),
            Ok((Some("gone".into()), Some(9), None)),
        );
    }

    #[test]
    fn a_pod_without_spec_is_left_alone() {
        let mut p = api::Pod::default();
        assert_eq!(resolve_priority(&mut p, &classes()), Ok(()));
        assert!(p.spec.is_none());
    }
}
