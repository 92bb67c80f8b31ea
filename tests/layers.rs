//! The dependency rule of `src/`, checked by reading every `crate::` path: each layer imports only those
//! below it (`api/` and `dispatch/` over `engine/`, over `auth/` and `metrics`, over `store/`, over
//! `queue/`), nothing imports `cli` or `startup`, and the graph of top-level modules has no circle.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

/// Top-level module -> the top-level modules it names through `crate::`.
fn imports() -> BTreeMap<String, BTreeSet<String>> {
    let mut graph: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = vec![src.clone()];
    while let Some(path) = files.pop() {
        if path.is_dir() {
            files.extend(std::fs::read_dir(&path).unwrap().map(|e| e.unwrap().path()));
            continue;
        }
        if path.extension().is_none_or(|e| e != "rs") {
            continue;
        }
        let relative = path.strip_prefix(&src).unwrap();
        let first = relative.components().next().unwrap().as_os_str().to_string_lossy().into_owned();
        let module = first.trim_end_matches(".rs").to_owned();
        let text = std::fs::read_to_string(&path).unwrap();
        let named = graph.entry(module.clone()).or_default();
        for (at, _) in text.match_indices("crate::") {
            let rest = &text[at + "crate::".len()..];
            let names: Vec<&str> = match rest.strip_prefix('{') {
                // `crate::{a, b::c}`: the first segment of each item.
                Some(group) => group[..group.find('}').unwrap_or(group.len())]
                    .split(',')
                    .map(|item| item.trim().split("::").next().unwrap_or("").trim())
                    .collect(),
                None => vec![rest.split(|c: char| !(c.is_alphanumeric() || c == '_')).next().unwrap_or("")],
            };
            named.extend(names.into_iter().filter(|n| !n.is_empty() && *n != module).map(str::to_owned));
        }
    }
    graph
}

#[test]
fn every_layer_imports_only_those_below_it() {
    let graph = imports();
    let uses = |module: &str| graph.get(module).cloned().unwrap_or_default();
    let allowed = |module: &str, below: &[&str]| {
        let extra: Vec<String> = uses(module).into_iter().filter(|m| !below.contains(&m.as_str())).collect();
        assert!(extra.is_empty(), "{module}/ imports {extra:?}, above it");
    };
    allowed("queue", &["ids"]);
    allowed("store", &["ids", "queue"]);
    allowed("metrics", &[]);
    allowed("error", &["ids", "queue", "store"]);
    allowed("auth", &["error", "ids", "queue", "store"]);
    // The engine sits between the HTTP layers and the SQL: it names neither `api` nor `dispatch`.
    allowed("engine", &["auth", "error", "ids", "metrics", "queue", "store"]);
    for (module, named) in &graph {
        if module != "main" && module != "cli" {
            assert!(!named.contains("cli"), "{module} imports cli");
        }
        if !["main", "cli", "startup"].contains(&module.as_str()) {
            assert!(!named.contains("startup"), "{module} imports startup, the composition root");
        }
    }
    assert!(!uses("api").contains("dispatch") && !uses("dispatch").contains("api"), "HTTP in and out are apart");
}

#[test]
fn no_import_runs_back_up_in_a_circle() {
    let graph = imports();
    // Depth-first search: a module met again while it is still on the path closes a circle.
    fn visit(
        module: &str,
        graph: &BTreeMap<String, BTreeSet<String>>,
        path: &mut Vec<String>,
        done: &mut BTreeSet<String>,
    ) {
        if done.contains(module) {
            return;
        }
        if let Some(at) = path.iter().position(|m| m == module) {
            panic!("import circle: {} -> {module}", path[at..].join(" -> "));
        }
        path.push(module.to_owned());
        for next in graph.get(module).into_iter().flatten() {
            visit(next, graph, path, done);
        }
        path.pop();
        done.insert(module.to_owned());
    }
    let mut done = BTreeSet::new();
    for module in graph.keys() {
        visit(module, &graph, &mut Vec::new(), &mut done);
    }
    assert!(graph.len() > 10, "the modules were read: {:?}", graph.keys());
}
