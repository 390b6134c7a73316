//! Cutting a file into chunks along its syntax.
//!
//! Code (Rust, Python, TypeScript/JavaScript, Go) is parsed with tree-sitter and cut at its items: functions,
//! methods, types, impl blocks, modules, constants. An item keeps the comments and attributes right above it. A
//! container (an impl block, a trait, a class, a module with a body) longer than [`MAX_WHOLE_LINES`] is cut into its
//! members, with a chunk for its head; an item longer than [`MAX_CHUNK_LINES`] is cut into windows of
//! [`WINDOW_LINES`], each keeping the item's symbols. Markdown is cut at its headings, TOML at its tables, YAML at
//! its top-level keys. Lines no item covers (imports, top-level statements) and files of any other kind are cut
//! into windows of lines. Blank runs are never a chunk.
//!
//! A file is untrusted input, and a grammar's external scanner is C that aborts the process when its state outgrows
//! tree-sitter's 1 KiB serialization buffer (YAML keeps an entry per open block, Python one per indentation level):
//! [`beyond_scanner`] checks, in one pass over the text, that the file stays well inside what its scanner holds, and
//! a file that does not is cut into windows of lines without being parsed. The tree is walked with a stack of its
//! own, so nesting of any depth takes no native stack.
//!
//! Nothing here reads the disk: [`chunk_file`] takes a path and its text, so the rules are tested on strings.

use tree_sitter::{Language, Node, Parser};

/// An item up to this many lines is one chunk.
pub const MAX_CHUNK_LINES: u32 = 120;
/// A container (impl, trait, class, module) up to this many lines is one chunk; a longer one is cut into members.
pub const MAX_WHOLE_LINES: u32 = 80;
/// Lines per window, for text without syntax and for the parts of a long item.
pub const WINDOW_LINES: u32 = 50;
/// Characters of a preview.
pub const MAX_PREVIEW_CHARS: usize = 120;

/// What a chunk is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ChunkKind {
    /// A free function.
    Function,
    /// A function inside an impl, trait, class or interface.
    Method,
    /// A struct, enum, class, trait, interface or type alias.
    Type,
    /// An impl block (or the head of a long container).
    Impl,
    /// A module or namespace.
    Module,
    /// A constant, static or top-level variable.
    Const,
    /// A Markdown section.
    Section,
    /// A TOML table or a top-level YAML key.
    Table,
    /// Lines of anything else.
    Window,
}

impl ChunkKind {
    /// The name stored and printed.
    pub fn as_str(self) -> &'static str {
        match self {
            ChunkKind::Function => "function",
            ChunkKind::Method => "method",
            ChunkKind::Type => "type",
            ChunkKind::Impl => "impl",
            ChunkKind::Module => "module",
            ChunkKind::Const => "const",
            ChunkKind::Section => "section",
            ChunkKind::Table => "table",
            ChunkKind::Window => "window",
        }
    }

    /// The kind named `text` (what [`ChunkKind::as_str`] gives).
    pub fn parse(text: &str) -> Option<ChunkKind> {
        Some(match text {
            "function" => ChunkKind::Function,
            "method" => ChunkKind::Method,
            "type" => ChunkKind::Type,
            "impl" => ChunkKind::Impl,
            "module" => ChunkKind::Module,
            "const" => ChunkKind::Const,
            "section" => ChunkKind::Section,
            "table" => ChunkKind::Table,
            "window" => ChunkKind::Window,
            _ => return None,
        })
    }
}

/// One piece of a file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Chunk {
    /// Lines, 1-based, inclusive.
    pub start: u32,
    /// Last line.
    pub end: u32,
    /// What it is.
    pub kind: ChunkKind,
    /// The names it defines (`hold`, `Reservations::hold`), for ranking and outlines.
    pub symbols: Vec<String>,
    /// One line: the signature, the heading, or the first line.
    pub preview: String,
    /// A Markdown section whose heading is unique in its file and which has no subsection: its pointer names the
    /// heading (`artifact:doc.md#sec=…`), which resolves to exactly these lines.
    pub section: Option<String>,
    /// Not inside another item: what an outline lists.
    pub top_level: bool,
}

impl Chunk {
    /// The pointer in text form: `repo:path#Lx-Ly`, or for Markdown `artifact:path#sec=…` (a unique leaf heading)
    /// or `artifact:path#Lx-Ly`.
    pub fn pointer(&self, path: &str) -> String {
        match (&self.section, self.kind) {
            (Some(heading), _) => format!("artifact:{path}#sec={heading}"),
            (None, ChunkKind::Section) => format!("artifact:{path}#L{}-L{}", self.start, self.end),
            _ => format!("repo:{path}#L{}-L{}", self.start, self.end),
        }
    }
}

/// The languages cut along their syntax.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Lang {
    /// `.rs`
    Rust,
    /// `.py`, `.pyi`
    Python,
    /// `.ts`, `.mts`, `.cts`
    TypeScript,
    /// `.tsx`
    Tsx,
    /// `.js`, `.jsx`, `.mjs`, `.cjs`
    JavaScript,
    /// `.go`
    Go,
    /// `.md`, `.markdown`
    Markdown,
    /// `.toml`
    Toml,
    /// `.yaml`, `.yml`
    Yaml,
    /// Anything else: windows of lines.
    Text,
}

impl Lang {
    /// The language of `path`, by its extension.
    pub fn of(path: &str) -> Lang {
        let ext = path.rsplit_once('.').map(|(_, e)| e.to_ascii_lowercase()).unwrap_or_default();
        match ext.as_str() {
            "rs" => Lang::Rust,
            "py" | "pyi" => Lang::Python,
            "ts" | "mts" | "cts" => Lang::TypeScript,
            "tsx" => Lang::Tsx,
            "js" | "jsx" | "mjs" | "cjs" => Lang::JavaScript,
            "go" => Lang::Go,
            "md" | "markdown" => Lang::Markdown,
            "toml" => Lang::Toml,
            "yaml" | "yml" => Lang::Yaml,
            _ => Lang::Text,
        }
    }

    /// Its name (what `lessrt index` counts files by).
    pub fn as_str(self) -> &'static str {
        match self {
            Lang::Rust => "rust",
            Lang::Python => "python",
            Lang::TypeScript => "typescript",
            Lang::Tsx => "tsx",
            Lang::JavaScript => "javascript",
            Lang::Go => "go",
            Lang::Markdown => "markdown",
            Lang::Toml => "toml",
            Lang::Yaml => "yaml",
            Lang::Text => "text",
        }
    }

    fn grammar(self) -> Option<Language> {
        Some(match self {
            Lang::Rust => tree_sitter_rust::LANGUAGE.into(),
            Lang::Python => tree_sitter_python::LANGUAGE.into(),
            Lang::TypeScript => tree_sitter_typescript::LANGUAGE_TYPESCRIPT.into(),
            Lang::Tsx => tree_sitter_typescript::LANGUAGE_TSX.into(),
            Lang::JavaScript => tree_sitter_javascript::LANGUAGE.into(),
            Lang::Go => tree_sitter_go::LANGUAGE.into(),
            Lang::Markdown => tree_sitter_md::LANGUAGE.into(),
            Lang::Toml => tree_sitter_toml_ng::LANGUAGE.into(),
            Lang::Yaml => tree_sitter_yaml::LANGUAGE.into(),
            Lang::Text => return None,
        })
    }
}

/// How a syntax node takes part in chunking.
enum Role {
    /// One chunk of this kind.
    Item(ChunkKind),
    /// One chunk if short, else its head and its members (the body is the field named).
    Container(ChunkKind, &'static str),
    /// Look at the node in this field instead (a decorated definition, an export).
    Wrapper(&'static str),
    /// Leading comments and attributes, which join the item below them.
    Leading,
    /// Nothing of its own (statements, imports): its lines are windows.
    Other,
}

fn role(lang: Lang, kind: &str, in_container: bool) -> Role {
    let function = if in_container { ChunkKind::Method } else { ChunkKind::Function };
    match (lang, kind) {
        (Lang::Rust, "function_item" | "function_signature_item" | "macro_definition") => Role::Item(function),
        (Lang::Rust, "struct_item" | "enum_item" | "union_item" | "type_item") => Role::Item(ChunkKind::Type),
        (Lang::Rust, "const_item" | "static_item") => Role::Item(ChunkKind::Const),
        (Lang::Rust, "impl_item") => Role::Container(ChunkKind::Impl, "body"),
        (Lang::Rust, "trait_item") => Role::Container(ChunkKind::Type, "body"),
        (Lang::Rust, "mod_item") => Role::Container(ChunkKind::Module, "body"),
        (Lang::Rust, "line_comment" | "block_comment" | "attribute_item") => Role::Leading,
        (Lang::Python, "function_definition") => Role::Item(function),
        (Lang::Python, "class_definition") => Role::Container(ChunkKind::Type, "body"),
        (Lang::Python, "decorated_definition") => Role::Wrapper("definition"),
        (Lang::Python, "comment" | "decorator") => Role::Leading,
        (Lang::TypeScript | Lang::Tsx | Lang::JavaScript, kind) => match kind {
            "function_declaration" | "generator_function_declaration" | "function_signature" => Role::Item(function),
            "method_definition" | "method_signature" | "abstract_method_signature" => Role::Item(ChunkKind::Method),
            "class_declaration" | "abstract_class_declaration" | "class" => Role::Container(ChunkKind::Type, "body"),
            "interface_declaration" => Role::Container(ChunkKind::Type, "body"),
            "type_alias_declaration" | "enum_declaration" => Role::Item(ChunkKind::Type),
            "lexical_declaration" | "variable_declaration" if !in_container => Role::Item(ChunkKind::Const),
            "internal_module" | "module" => Role::Container(ChunkKind::Module, "body"),
            "export_statement" => Role::Wrapper("declaration"),
            "comment" | "decorator" => Role::Leading,
            _ => Role::Other,
        },
        (Lang::Go, "function_declaration") => Role::Item(ChunkKind::Function),
        (Lang::Go, "method_declaration") => Role::Item(ChunkKind::Method),
        (Lang::Go, "type_declaration") => Role::Item(ChunkKind::Type),
        (Lang::Go, "const_declaration" | "var_declaration") => Role::Item(ChunkKind::Const),
        (Lang::Go, "comment") => Role::Leading,
        (Lang::Toml, "table" | "table_array_element") => Role::Item(ChunkKind::Table),
        (Lang::Toml, "comment") => Role::Leading,
        _ => Role::Other,
    }
}

/// The longest YAML line parsed, in characters. tree-sitter-yaml's scanner keeps an entry per open block (a
/// sequence, a mapping, a block scalar) and aborts the process past 253 of them; an entry sits at a column no
/// smaller than the one below it (a sequence may share its mapping's column), at most where a token starts, so lines
/// of at most 100 characters hold it to about 220. A longer line is rare in YAML, and costs only structure: the
/// file is cut into windows.
pub const YAML_MAX_LINE_CHARS: usize = 100;
/// The deepest Python indentation parsed, in the columns tree-sitter-python's scanner counts (a space 1, a tab 8,
/// a backslash at the end of leading whitespace carrying it to the next line). The scanner keeps an entry per
/// indentation level, each deeper than the last, and aborts the process past about 380 of them inside a string.
pub const PYTHON_MAX_INDENT: usize = 300;

/// Whether `text` may outgrow what its grammar's external scanner holds, which would abort the process (a SIGABRT
/// no Rust code can catch): such a file is cut into windows of lines without being parsed. One pass over the text;
/// conservative, so a file it lets through stays far from the scanner's limit. Rust, Go, TypeScript, JavaScript and
/// TOML keep no stack in their scanners, and Markdown's caps its own.
pub fn beyond_scanner(lang: Lang, text: &str) -> bool {
    match lang {
        Lang::Yaml => text.split('\n').any(|line| line.chars().nth(YAML_MAX_LINE_CHARS).is_some()),
        Lang::Python => {
            let mut carried = 0usize;
            for line in text.split('\n') {
                let mut width = carried;
                let mut rest = line;
                while let Some(c) = rest.chars().next().filter(|c| c.is_whitespace()) {
                    width = width.saturating_add(if c == ' ' { 1 } else { 8 });
                    rest = &rest[c.len_utf8()..];
                }
                if width > PYTHON_MAX_INDENT {
                    return true;
                }
                // `\` right after the indentation joins the next line's indentation to this one's.
                carried = if rest.trim_end_matches('\r') == "\\" { width } else { 0 };
            }
            false
        }
        _ => false,
    }
}

/// Cuts `text`, the content of the workspace file `path`, into chunks in line order. Every non-blank line is in
/// some chunk (a chunk may cover another's lines only where a container's head is kept beside its members).
pub fn chunk_file(path: &str, text: &str) -> Vec<Chunk> {
    let lines: Vec<&str> = text.lines().collect();
    let n_lines = u32::try_from(lines.len()).unwrap_or(u32::MAX);
    if n_lines == 0 {
        return Vec::new();
    }
    let lang = Lang::of(path);
    let grammar = if beyond_scanner(lang, text) { None } else { lang.grammar() };
    let mut chunks = match grammar {
        Some(grammar) => {
            let mut parser = Parser::new();
            let tree = parser.set_language(&grammar).ok().and_then(|()| parser.parse(text, None));
            match (tree, lang) {
                (Some(tree), Lang::Markdown) => markdown(tree.root_node(), text, &lines),
                (Some(tree), Lang::Yaml) => yaml(tree.root_node(), text, &lines),
                (Some(tree), _) => {
                    let mut cutter = Cutter { lang, text, lines: &lines, out: Vec::new() };
                    cutter.walk(tree.root_node());
                    cutter.out
                }
                (None, _) => Vec::new(),
            }
        }
        None => Vec::new(),
    };
    fill_gaps(&mut chunks, &lines);
    for chunk in &mut chunks {
        for symbol in &mut chunk.symbols {
            *symbol = redact(symbol);
        }
    }
    chunks.sort_by_key(|c| (c.start, std::cmp::Reverse(c.end)));
    chunks
}

struct Cutter<'a> {
    lang: Lang,
    text: &'a str,
    lines: &'a [&'a str],
    out: Vec<Chunk>,
}

/// A node whose named children are being cut: what [`Cutter::walk`] keeps on its own stack instead of recursing.
struct Frame<'t> {
    children: Vec<Node<'t>>,
    next: usize,
    /// The enclosing container's symbol, if any.
    container: Option<String>,
    top_level: bool,
}

impl<'t> Frame<'t> {
    fn new(parent: Node<'t>, container: Option<String>, top_level: bool) -> Frame<'t> {
        let mut cursor = parent.walk();
        let children = parent.named_children(&mut cursor).collect();
        Frame { children, next: 0, container, top_level }
    }
}

impl Cutter<'_> {
    /// The chunks of the items under `root`, in the order a depth-first walk meets them: a long container's head,
    /// then its members (named under it), then what follows it. The walk keeps its own stack of frames, so a file
    /// nesting containers thousands deep takes no native stack.
    fn walk(&mut self, root: Node<'_>) {
        let mut stack = vec![Frame::new(root, None, true)];
        while let Some(frame) = stack.last_mut() {
            let Some(&child) = frame.children.get(frame.next) else {
                stack.pop();
                continue;
            };
            let idx = frame.next;
            frame.next += 1;
            let (container, top_level) = (frame.container.clone(), frame.top_level);
            let Some((node, role)) = self.resolve(child, container.is_some()) else { continue };
            // Comments and attributes right above the item (no blank line between) join it.
            let mut start = row(child.start_position().row);
            for prev in frame.children[..idx].iter().rev() {
                let adjacent = row(prev.end_position().row) + 1 >= start;
                if !adjacent || !matches!(role_of(self.lang, prev.kind()), Role::Leading) {
                    break;
                }
                start = row(prev.start_position().row);
            }
            let end = last_line(child, self.lines);
            match role {
                Role::Item(kind) => {
                    let symbols = self.symbols(node, container.as_deref());
                    let preview = self.preview(node);
                    self.push(start, end, kind, symbols, preview, top_level);
                }
                Role::Container(kind, body_field) => {
                    let symbols = self.symbols(node, container.as_deref());
                    let preview = self.preview(node);
                    let body = node.child_by_field_name(body_field);
                    match body {
                        Some(body) if end - start + 1 > MAX_WHOLE_LINES => {
                            // The head up to the first member, then the members, each named under the container.
                            let name = symbols.first().cloned().or(container);
                            let mut members = body.walk();
                            let first = body
                                .named_children(&mut members)
                                .next()
                                .map_or(end, |m| row(m.start_position().row).saturating_sub(1).max(start));
                            self.push(start, first, kind, symbols, preview, top_level);
                            stack.push(Frame::new(body, name, false));
                        }
                        _ => self.push(start, end, kind, symbols, preview, top_level),
                    }
                }
                Role::Wrapper(_) | Role::Leading | Role::Other => {}
            }
        }
    }

    /// The node that decides what `node` is (through wrappers), and its role; `None` for what is no item.
    fn resolve<'t>(&self, node: Node<'t>, in_container: bool) -> Option<(Node<'t>, Role)> {
        let mut node = node;
        for _ in 0..4 {
            match role(self.lang, node.kind(), in_container) {
                Role::Wrapper(field) => node = node.child_by_field_name(field)?,
                Role::Leading | Role::Other => return None,
                role => return Some((node, role)),
            }
        }
        None
    }

    fn push(&mut self, start: u32, end: u32, kind: ChunkKind, symbols: Vec<String>, preview: String, top: bool) {
        // A node may take the blank lines after it (a TOML table runs to the next one): a chunk ends at its last
        // line that says something.
        let mut end = end;
        while end > start && self.lines.get(end as usize - 1).is_some_and(|l| l.trim().is_empty()) {
            end -= 1;
        }
        push_split(&mut self.out, start, end, kind, symbols, preview, top);
    }

    /// The names `node` defines: its name field, a Rust impl's type (and trait), Go's type specs, the declarators
    /// of a variable declaration; qualified by the container as well (`Reservations::hold`).
    fn symbols(&self, node: Node<'_>, container: Option<&str>) -> Vec<String> {
        let text = |n: Node<'_>| self.text[n.byte_range()].trim().to_owned();
        let mut names = Vec::new();
        if let Some(name) = node.child_by_field_name("name") {
            names.push(text(name));
        } else if node.kind() == "impl_item" {
            if let Some(ty) = node.child_by_field_name("type") {
                names.push(text(ty));
            }
            if let Some(tr) = node.child_by_field_name("trait") {
                names.push(text(tr));
            }
        } else {
            // Go's `type X …` / `const (…)`, JavaScript's `const x = …`: the names of the specs or declarators.
            let mut cursor = node.walk();
            for child in node.named_children(&mut cursor) {
                if let Some(name) = child.child_by_field_name("name") {
                    names.push(text(name));
                }
            }
        }
        if self.lang == Lang::Toml {
            let mut cursor = node.walk();
            if let Some(key) = node.named_children(&mut cursor).find(|c| c.kind().ends_with("key")) {
                names.push(text(key));
            }
        }
        names.retain(|n| !n.is_empty() && n.len() <= 120 && !n.contains('\n'));
        if let Some(container) = container {
            let qualified: Vec<String> = names.iter().map(|n| format!("{container}::{n}")).collect();
            names.extend(qualified);
        }
        names
    }

    /// The item's first line that is not an attribute or a comment: its signature.
    fn preview(&self, node: Node<'_>) -> String {
        preview_line(self.lines, row(node.start_position().row), last_line(node, self.lines))
    }
}

fn role_of(lang: Lang, kind: &str) -> Role {
    role(lang, kind, false)
}

/// A tree-sitter row as a 1-based line.
fn row(row: usize) -> u32 {
    u32::try_from(row).unwrap_or(u32::MAX - 1) + 1
}

/// The last line of `node` that holds any of it: a node ending at column 0 ends on the line before.
fn last_line(node: Node<'_>, lines: &[&str]) -> u32 {
    let end = node.end_position();
    let last = if end.column == 0 && end.row > node.start_position().row { end.row - 1 } else { end.row };
    row(last).min(u32::try_from(lines.len()).unwrap_or(u32::MAX)).max(row(node.start_position().row))
}

/// The first line in `start..=end` that says something (not blank, not only a comment or an attribute), trimmed
/// to [`MAX_PREVIEW_CHARS`].
fn preview_line(lines: &[&str], start: u32, end: u32) -> String {
    let range = (start as usize).saturating_sub(1)..(end as usize).min(lines.len());
    let pick = lines[range.clone()]
        .iter()
        .map(|l| l.trim())
        .find(|l| {
            !l.is_empty()
                && !l.starts_with("//")
                && !l.starts_with("#[")
                && !l.starts_with("#!")
                && !l.starts_with('@')
                && !l.starts_with("/*")
                && !l.starts_with('*')
        })
        .or_else(|| lines[range].iter().map(|l| l.trim()).find(|l| !l.is_empty()))
        .unwrap_or_default();
    clip(&redact(pick))
}

/// `text` with its secrets (a password after its key word, a token, a key) replaced by stable references, as
/// summaries are: what a preview, a symbol or a pointer shows of a file never holds a secret the file holds. Whole,
/// before a preview is clipped, so that no part of a secret survives the cut.
fn redact(text: &str) -> String {
    crate::context::redact(text).text
}

/// `text` on one line, at most [`MAX_PREVIEW_CHARS`] characters (an ellipsis marks a cut).
pub fn clip(text: &str) -> String {
    let flat: String = text.split_whitespace().collect::<Vec<_>>().join(" ");
    if flat.chars().count() <= MAX_PREVIEW_CHARS {
        flat
    } else {
        flat.chars().take(MAX_PREVIEW_CHARS - 1).collect::<String>() + "…"
    }
}

/// Pushes one chunk, or windows of it when it is longer than [`MAX_CHUNK_LINES`] (each keeps the symbols; the
/// preview says which part).
fn push_split(
    out: &mut Vec<Chunk>,
    start: u32,
    end: u32,
    kind: ChunkKind,
    symbols: Vec<String>,
    preview: String,
    top_level: bool,
) {
    if end - start < MAX_CHUNK_LINES {
        out.push(Chunk { start, end, kind, symbols, preview, section: None, top_level });
        return;
    }
    let mut from = start;
    while from <= end {
        let to = (from + WINDOW_LINES - 1).min(end);
        let preview = if from == start { preview.clone() } else { clip(&format!("{preview} (lines {from}-{to})")) };
        out.push(Chunk {
            start: from,
            end: to,
            kind,
            symbols: symbols.clone(),
            preview,
            section: None,
            top_level: top_level && from == start,
        });
        from = to + 1;
    }
}

/// Windows over the non-blank lines no chunk covers: runs split at blank lines once they reach half a window, and
/// at [`WINDOW_LINES`]; a run of punctuation only (closing braces) is dropped.
fn fill_gaps(chunks: &mut Vec<Chunk>, lines: &[&str]) {
    let n = lines.len();
    let mut covered = vec![false; n + 2];
    for chunk in chunks.iter() {
        for line in chunk.start..=chunk.end.min(u32::try_from(n).unwrap_or(u32::MAX)) {
            covered[line as usize] = true;
        }
    }
    let mut windows = Vec::new();
    let mut run: Option<(u32, u32)> = None;
    let close = |run: &mut Option<(u32, u32)>, windows: &mut Vec<(u32, u32)>| {
        if let Some(r) = run.take() {
            windows.push(r);
        }
    };
    for line in 1..=u32::try_from(n).unwrap_or(u32::MAX) {
        let text = lines[line as usize - 1];
        let blank = text.trim().is_empty();
        if covered[line as usize] {
            close(&mut run, &mut windows);
            continue;
        }
        match &mut run {
            None if blank => {}
            None => run = Some((line, line)),
            Some((start, end)) => {
                if blank && line - *start >= WINDOW_LINES / 2 || line - *start >= WINDOW_LINES {
                    close(&mut run, &mut windows);
                    if !blank {
                        run = Some((line, line));
                    }
                } else if !blank {
                    *end = line;
                }
            }
        }
    }
    close(&mut run, &mut windows);
    for (start, end) in windows {
        let says_something =
            lines[start as usize - 1..end as usize].iter().any(|l| l.chars().any(char::is_alphanumeric));
        if says_something {
            let preview = preview_line(lines, start, end);
            chunks.push(Chunk {
                start,
                end,
                kind: ChunkKind::Window,
                symbols: Vec::new(),
                preview,
                section: None,
                top_level: true,
            });
        }
    }
}

/// Markdown: one chunk per heading, from the heading to the next heading of any level.
fn markdown(root: Node<'_>, text: &str, lines: &[&str]) -> Vec<Chunk> {
    // Headings in order: (line, level, title).
    let mut headings: Vec<(u32, usize, String)> = Vec::new();
    let mut stack = vec![root];
    while let Some(node) = stack.pop() {
        if node.kind() == "atx_heading" || node.kind() == "setext_heading" {
            let raw = &text[node.byte_range()];
            let level = if node.kind() == "atx_heading" {
                raw.chars().take_while(|c| *c == '#').count()
            } else if raw.trim_end().ends_with('=') {
                1
            } else {
                2
            };
            let title = raw.lines().next().unwrap_or_default().trim_start_matches('#').trim().to_owned();
            headings.push((row(node.start_position().row), level, title));
            continue;
        }
        let mut cursor = node.walk();
        let children: Vec<Node<'_>> = node.named_children(&mut cursor).collect();
        stack.extend(children.into_iter().rev());
    }
    headings.sort_by_key(|h| h.0);
    let n = u32::try_from(lines.len()).unwrap_or(u32::MAX);
    let mut chunks = Vec::new();
    // Counted once, not per heading: a file of a hundred thousand headings is cut in linear time.
    let mut titles: std::collections::HashMap<&str, usize> = std::collections::HashMap::new();
    for heading in &headings {
        *titles.entry(heading.2.as_str()).or_default() += 1;
    }
    let mut shallowest = usize::MAX;
    for (idx, (line, level, title)) in headings.iter().enumerate() {
        let next = headings.get(idx + 1).map_or(n + 1, |h| h.0);
        let end = (next - 1).max(*line);
        // A leaf section (the next heading is of the same or a higher level) with a unique heading is named by it:
        // the resolver reads exactly these lines for `#sec=<heading>`.
        let leaf = headings.get(idx + 1).is_none_or(|h| h.1 <= *level);
        let unique = titles.get(title.as_str()) == Some(&1);
        // A heading holding a secret (`Deploy password: …`) is shown redacted, and its section named by lines.
        let shown = redact(title);
        let nameable = leaf && unique && !title.is_empty() && !title.contains(['#', '\n']) && shown == *title;
        // No heading above it of a higher level.
        let top_level = shallowest >= *level;
        shallowest = shallowest.min(*level);
        chunks.push(Chunk {
            start: *line,
            end,
            kind: ChunkKind::Section,
            symbols: if title.is_empty() { Vec::new() } else { vec![shown.clone()] },
            preview: clip(&format!("{} {shown}", "#".repeat(*level))),
            section: nameable.then(|| title.clone()),
            top_level,
        });
    }
    // A section longer than a chunk is read in windows (named by lines then).
    let mut out = Vec::new();
    for chunk in chunks {
        if chunk.end - chunk.start < MAX_CHUNK_LINES {
            out.push(chunk);
        } else {
            let before = out.len();
            push_split(
                &mut out,
                chunk.start,
                chunk.end,
                ChunkKind::Section,
                chunk.symbols,
                chunk.preview,
                chunk.top_level,
            );
            for part in &mut out[before..] {
                part.section = None;
            }
        }
    }
    out
}

/// YAML: one chunk per key of the top-level mapping of each document.
fn yaml(root: Node<'_>, text: &str, lines: &[&str]) -> Vec<Chunk> {
    let mut out = Vec::new();
    let mut stack = vec![(root, 0usize)];
    while let Some((node, depth)) = stack.pop() {
        if node.kind() == "block_mapping_pair" {
            let start = row(node.start_position().row);
            let end = last_line(node, lines);
            let key = node.child_by_field_name("key").map(|k| text[k.byte_range()].trim().to_owned());
            let symbols: Vec<String> = key.into_iter().filter(|k| !k.is_empty() && k.len() <= 120).collect();
            let preview = preview_line(lines, start, end);
            push_split(&mut out, start, end, ChunkKind::Table, symbols, preview, true);
            continue;
        }
        // Down to the first mapping: stream → document → block_node → block_mapping.
        if depth < 6 {
            let mut cursor = node.walk();
            let children: Vec<Node<'_>> = node.named_children(&mut cursor).collect();
            stack.extend(children.into_iter().rev().map(|c| (c, depth + 1)));
        }
    }
    out
}
