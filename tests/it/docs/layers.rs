//! The layer diagram in the `# Layout` of `src/lib.rs` is the crate's
//! import rule and its one drawing: every import in `src/` goes down it,
//! every top-level module is on it once, and `docs/development.md` draws
//! it as it is and describes each of its modules. The diagram is read
//! from `src/lib.rs`, so a change of layers is an edit there (copied into
//! `docs/development.md`), never here.
//!
//! Imports are read as text: `crate::x` paths and `crate::{x, y}` groups
//! outside comments, leaving out test code (`tests.rs` files and a
//! trailing `#[cfg(test)] mod tests`), each counted for the top-level
//! module of the file it is in.

use std::{
    collections::{BTreeMap, BTreeSet},
    path::Path,
};

/// A file of the repository, as text.
fn read(relative: &str) -> String {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join(relative);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("read {relative}: {e}"))
}

/// The lines of the first fenced block after the line `heading`.
fn fenced_block_after(lines: &[&str], heading: &str) -> Vec<String> {
    let block: Vec<String> = lines
        .iter()
        .skip_while(|line| line.trim_end() != heading)
        .skip_while(|line| !line.starts_with("```"))
        .skip(1)
        .take_while(|line| !line.starts_with("```"))
        .map(|line| line.trim_end().to_owned())
        .collect();
    assert!(!block.is_empty(), "no fenced block after {heading:?}");
    block
}

/// The diagram of `src/lib.rs`'s `# Layout`, its doc comment markers
/// taken off.
fn lib_rs_diagram() -> Vec<String> {
    let lib = read("src/lib.rs");
    let docs: Vec<&str> = lib
        .lines()
        .filter_map(|line| line.strip_prefix("//!"))
        .map(|line| line.strip_prefix(' ').unwrap_or(line))
        .collect();
    fenced_block_after(&docs, "# Layout")
}

/// The levels of a diagram, top first: `a -> b, c -> leaves` is three
/// levels, and a line `leaves: d -> e` says what `leaves` stands for.
#[derive(Debug)]
struct Layout {
    levels: Vec<Vec<String>>,
}

impl Layout {
    fn parse(diagram: &[String]) -> Self {
        let mut chain = String::new();
        let mut names: BTreeMap<&str, &str> = BTreeMap::new();
        for line in diagram {
            match line.split_once(':') {
                Some((name, levels)) if is_module_name(name) => {
                    names.insert(name, levels);
                }
                _ => {
                    chain.push(' ');
                    chain.push_str(line);
                }
            }
        }
        let mut levels = Vec::new();
        for level in split_levels(&chain) {
            match level.as_slice() {
                [name] if names.contains_key(name.as_str()) => {
                    levels.extend(split_levels(names[name.as_str()]));
                }
                _ => levels.push(level),
            }
        }
        Self { levels }
    }

    /// The level of `module`, counted from the top.
    fn level_of(&self, module: &str) -> Option<usize> {
        self.levels
            .iter()
            .position(|level| level.iter().any(|m| m == module))
    }

    /// Every module on the diagram, as often as it is drawn.
    fn modules(&self) -> Vec<&str> {
        self.levels.iter().flatten().map(String::as_str).collect()
    }

    /// The imports of `edges` that do not go down: each as
    /// `from -> to`.
    fn against(&self, edges: &BTreeSet<(String, String)>) -> Vec<String> {
        edges
            .iter()
            .filter(
                |(from, to)| match (self.level_of(from), self.level_of(to)) {
                    (Some(from), Some(to)) => to <= from,
                    _ => true,
                },
            )
            .map(|(from, to)| format!("{from} -> {to}"))
            .collect()
    }
}

/// `a -> b, c` as `[[a], [b, c]]`.
fn split_levels(chain: &str) -> Vec<Vec<String>> {
    chain
        .split("->")
        .map(|level| {
            level
                .split(',')
                .map(str::trim)
                .filter(|m| !m.is_empty())
                .map(str::to_owned)
                .collect::<Vec<_>>()
        })
        .filter(|level| !level.is_empty())
        .collect()
}

fn is_module_name(word: &str) -> bool {
    word.starts_with(|c: char| c.is_ascii_lowercase() || c == '_')
        && word
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_')
}

/// The top-level modules of `src/`: its files (but `lib.rs`, `main.rs`)
/// and its folders.
fn top_level_modules() -> BTreeSet<String> {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    std::fs::read_dir(&src)
        .expect("read src/")
        .map(|entry| entry.expect("an entry of src/").path())
        .filter_map(|path| {
            let name = path.file_name()?.to_str()?.to_owned();
            if path.is_dir() {
                Some(name)
            } else {
                let stem = name.strip_suffix(".rs")?;
                (stem != "lib" && stem != "main").then(|| stem.to_owned())
            }
        })
        .collect()
}

/// The code of a source file that counts: before a trailing
/// `#[cfg(test)] mod tests`, without comments.
fn code_of(text: &str) -> String {
    let text = text.split("#[cfg(test)]\nmod tests").next().unwrap_or("");
    text.lines()
        .map(|line| line.split_once("//").map_or(line, |(code, _)| code))
        .collect::<Vec<_>>()
        .join("\n")
}

/// The top-level modules `code` names through `crate::`.
fn imported_modules(code: &str) -> Vec<String> {
    let mut out = Vec::new();
    for (at, _) in code.match_indices("crate::") {
        let before = code[..at].chars().next_back();
        if before.is_some_and(|c| c.is_ascii_alphanumeric() || c == '_') {
            continue;
        }
        let rest = &code[at + "crate::".len()..];
        match rest.strip_prefix('{') {
            Some(group) => out.extend(group_heads(group).into_iter().map(leading_name)),
            None => out.push(leading_name(rest)),
        }
    }
    out.retain(|name| !name.is_empty());
    out
}

/// The items of a `{...}` group (the text after its `{`), as written.
fn group_heads(group: &str) -> Vec<&str> {
    let mut items = Vec::new();
    let (mut depth, mut start) = (1, 0);
    for (i, c) in group.char_indices() {
        match c {
            '{' => depth += 1,
            '}' if depth == 1 => {
                items.push(&group[start..i]);
                return items;
            }
            '}' => depth -= 1,
            ',' if depth == 1 => {
                items.push(&group[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    items
}

/// The module name a path starts with (empty when it starts with a type).
fn leading_name(path: &str) -> String {
    let path = path.trim_start();
    if !path.starts_with(|c: char| c.is_ascii_lowercase() || c == '_') {
        return String::new();
    }
    path.chars()
        .take_while(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || *c == '_')
        .collect()
}

/// Every import between two top-level modules of `src/`.
fn imports_in_src(modules: &BTreeSet<String>) -> BTreeSet<(String, String)> {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut edges = BTreeSet::new();
    let mut folders = vec![src.clone()];
    while let Some(folder) = folders.pop() {
        for entry in std::fs::read_dir(&folder).expect("read a folder of src/") {
            let path = entry.expect("an entry of src/").path();
            if path.is_dir() {
                folders.push(path);
                continue;
            }
            let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
            if !name.ends_with(".rs") || name == "tests.rs" {
                continue;
            }
            let relative = path.strip_prefix(&src).expect("a path under src/");
            let first = relative.components().next().expect("a component");
            let first = first.as_os_str().to_str().expect("a UTF-8 name");
            let top = first.strip_suffix(".rs").unwrap_or(first);
            if !modules.contains(top) {
                continue;
            }
            let text = std::fs::read_to_string(&path).expect("read a source file");
            for to in imported_modules(&code_of(&text)) {
                if to != top && modules.contains(&to) {
                    edges.insert((top.to_owned(), to));
                }
            }
        }
    }
    edges
}

#[test]
fn every_import_in_src_goes_down_the_layout_drawn_in_lib_rs() {
    let layout = Layout::parse(&lib_rs_diagram());
    let edges = imports_in_src(&top_level_modules());
    assert!(
        edges.contains(&("upstream".to_owned(), "telemetry".to_owned())),
        "the imports are read: {edges:?}"
    );
    let against = layout.against(&edges);
    assert!(
        against.is_empty(),
        "imports that do not go down the diagram in src/lib.rs's # Layout (a module \
         imports only from the levels below its own): {against:?}. Move what is shared \
         lower, pass it in, or redraw the diagram (and its copy in docs/development.md)"
    );
}

#[test]
fn the_layout_names_every_top_level_module_once() {
    let layout = Layout::parse(&lib_rs_diagram());
    let drawn = layout.modules();
    let unique: BTreeSet<String> = drawn.iter().map(|m| (*m).to_owned()).collect();
    assert_eq!(drawn.len(), unique.len(), "a module drawn twice: {drawn:?}");
    assert_eq!(
        unique,
        top_level_modules(),
        "the diagram in src/lib.rs's # Layout and the modules of src/ differ"
    );
}

#[test]
fn development_md_draws_the_layout_of_lib_rs_as_it_is_and_describes_each_module() {
    let doc = read("docs/development.md");
    let lines: Vec<&str> = doc.lines().collect();
    assert_eq!(
        fenced_block_after(&lines, "## Layout"),
        lib_rs_diagram(),
        "docs/development.md's Layout draws another diagram than src/lib.rs's # Layout: \
         copy it from there"
    );
    let described: BTreeSet<&str> = lines
        .iter()
        .filter_map(|line| line.strip_prefix("| `"))
        .filter_map(|row| row.split_once("` (`src/"))
        .map(|(module, _)| module)
        .collect();
    let layout = Layout::parse(&lib_rs_diagram());
    let undescribed: Vec<&str> = layout
        .modules()
        .into_iter()
        .filter(|m| !described.contains(m))
        .collect();
    assert!(
        undescribed.is_empty(),
        "modules of the diagram without a row in docs/development.md's module table: \
         {undescribed:?}"
    );
}

#[test]
fn an_import_from_above_or_beside_is_against_the_layout_and_one_from_below_is_not() {
    let diagram = ["a -> b, c -> leaves", "leaves: d -> e"].map(str::to_owned);
    let layout = Layout::parse(&diagram);
    assert_eq!(layout.modules(), ["a", "b", "c", "d", "e"]);
    let edges: BTreeSet<(String, String)> = [("a", "e"), ("b", "d"), ("b", "c"), ("e", "d")]
        .map(|(from, to)| (from.to_owned(), to.to_owned()))
        .into();
    assert_eq!(layout.against(&edges), ["b -> c", "e -> d"]);

    let code = code_of(
        "use crate::{a::X, b::{self, Y}, Error};\n\
         // crate::c in a comment\n\
         fn f() -> crate::d::T { thecrate::e(); crate::Error }\n\
         #[cfg(test)]\nmod tests {\n    use crate::f;\n}\n",
    );
    assert_eq!(imported_modules(&code), ["a", "b", "d"]);
}
