//! The crate's module structure, checked by reading the files under `src/`.
//!
//! Each rule is a "done when" criterion of the architecture issue; a test
//! keeps it done. A failure names the files (and lines) and says what to do.
//!
//! 1. **No module cycle except among `client`, `lock` and `guard`.** Those
//!    three are one unit (a client makes locks, a lock makes guards, a guard
//!    releases through both); the rest must layer, so it can be read, tested
//!    and changed from the bottom up.
//! 2. **No file over 400 lines**, its `#[cfg(test)] mod` blocks not counted:
//!    a file should be one idea that fits in a reader's head.
//! 3. **No file in `src/kind/` names `Client`**, comments included: a lock
//!    kind says which scripts run on which keys and needs no whole client.
//! 4. **No socket is opened outside `src/server/`**, unit tests included:
//!    connections, their TLS and their timeouts are made in one place.
//!
//! # What rule 1 counts as a dependency
//!
//! Nodes are files, named by module path (`src/lib.rs` is `crate`,
//! `src/kind/mod.rs` is `kind`, `src/kind/fair.rs` is `kind::fair`). File A
//! depends on file B when A writes a path to an item of B:
//!
//! - each leaf of a `use` tree (`use crate::{a::B, c::{d, e}}` has three);
//! - each path in code that starts with `crate`, `self`, `super`, a child
//!   module or an imported name (`Error::Redis` after `use crate::error::Error`);
//!   single names without `::` count only through their `use`;
//! - `self` and `super` are relative to the inline module they are written
//!   in (`mod sealed { use super::*; }` in `kind/mod.rs` means `kind`);
//! - a path follows modules as far as they exist, then imports and
//!   re-exports to where the item is defined (`crate::Error` is `error`'s
//!   through `pub use error::Error` in `lib.rs`; `crate::kind::Fair` is
//!   `kind::fair`'s), and lands in the deepest module *file* on the way.
//!
//! Not counted: comments, doc comments and literals; `#[cfg(test)] mod`
//! blocks (unit tests may reach anywhere); `mod x;`; a `pub`/`pub(..)` `use`
//! of the module's own descendants (that is the module tree; a private
//! `use child::Item` is a real use and counts); visibility paths such as
//! `pub(in crate::pubsub)`; anything in `lib.rs` (it declares and re-exports).
//!
//! # Limitations
//!
//! A small lexer and a scan, not a compiler: every `cfg` is read as on (all
//! features); only a plain `#[cfg(test)]` marks a test module (not
//! `cfg(all(test, ..))`); glob imports are followed for names but never
//! enumerated; a `use` inside a function counts for its whole module; a path
//! after generics (`Lock::<K>::new`) is resolved up to the generics; and
//! `#[path]` or macro-generated paths are not understood. Rule 3 reads the
//! raw text (strings too); rule 4 reads code, unit tests included.

use std::collections::{BTreeMap, BTreeSet, HashMap, VecDeque};
use std::fs;
use std::path::{Path, PathBuf};

/// The modules allowed to depend on each other in a cycle (rule 1).
const CYCLE_ALLOWED: &[&str] = &["client", "lock", "guard"];
/// The longest a file may be, without its unit tests (rule 2).
const MAX_LINES: usize = 400;
/// The lock kinds, which must not name `Client` (rule 3).
const KIND_DIR: &str = "src/kind/";
/// The only place that may open sockets (rule 4).
const SOCKET_DIR: &str = "src/server/";
/// What opening a socket looks like (rule 4). An entry matches a path that
/// has these segments in a row once its import is spelled out: `Client::open`
/// after `use redis::Client` is `redis::Client::open`, while redhold's own
/// `Client::open` is not. A trailing `::` means "any item of that crate".
/// Add to it when a new way to connect appears.
const SOCKET_APIS: &[&str] = &[
    "TcpStream",
    "UnixStream",
    "TcpListener",
    "redis::Client",
    "ClusterClient",
    "get_connection",
    "get_connection_with_timeout",
    "into_connection_info",
    "rustls::",
    "ClientConnection",
];

// ------------------------------------------------------------------ lexing

/// An identifier (or number), `::`, or one punctuation character.
#[derive(Debug)]
struct Tok {
    text: String,
    line: usize,
}

fn is_ident_char(c: char) -> bool {
    c.is_alphanumeric() || c == '_'
}

/// Splits Rust source into tokens, dropping comments and string and char
/// literals so that nothing written in them can pass for code.
fn tokenize(src: &str) -> Vec<Tok> {
    let c: Vec<char> = src.chars().collect();
    let at = |i: usize| c.get(i).copied().unwrap_or('\0');
    let line_of: Vec<usize> = (c.iter())
        .scan(1, |line, &ch| {
            let this = *line;
            *line += usize::from(ch == '\n');
            Some(this)
        })
        .collect();
    // The end of a string whose body starts at `i`; a raw one has no escapes
    // and ends at a quote followed by its `#`s.
    let end_of_string = |mut i: usize, raw: Option<usize>| {
        while i < c.len() {
            match c[i] {
                '\\' if raw.is_none() => i += 2,
                '"' if (1..=raw.unwrap_or(0)).all(|k| at(i + k) == '#') => {
                    return i + 1 + raw.unwrap_or(0);
                }
                _ => i += 1,
            }
        }
        i
    };
    let find = |from: usize, ch: char| (from..c.len()).find(|&j| c[j] == ch).unwrap_or(c.len());
    // The end of the block comment at `i`; they nest.
    let end_of_comment = |mut i: usize| {
        let mut depth = 0;
        while i < c.len() {
            match (c[i], at(i + 1)) {
                ('/', '*') => (depth, i) = (depth + 1, i + 2),
                ('*', '/') => (depth, i) = (depth - 1, i + 2),
                _ => i += 1,
            }
            if depth == 0 {
                break;
            }
        }
        i
    };
    // An identifier or number, unless it prefixes a string (`b"..."`, `r#"..."#`).
    let word = |start: usize| {
        let i = (start..c.len())
            .find(|&j| !is_ident_char(c[j]))
            .unwrap_or(c.len());
        let hashes = (i..c.len()).take_while(|&j| c[j] == '#').count();
        match c[start..i].iter().collect::<String>().as_str() {
            "b" | "c" if at(i) == '"' => (end_of_string(i + 1, None), false),
            "r" | "br" | "cr" if at(i + hashes) == '"' => {
                (end_of_string(i + hashes + 1, Some(hashes)), false)
            }
            _ => (i, true),
        }
    };
    let (mut toks, mut i) = (Vec::new(), 0);
    while i < c.len() {
        // Where the token ends, and whether it is kept.
        let (end, keep) = match c[i] {
            '/' if at(i + 1) == '/' => (find(i, '\n'), false),
            '/' if at(i + 1) == '*' => (end_of_comment(i), false),
            '"' => (end_of_string(i + 1, None), false),
            // `'\''` and `'x'` are chars; the `'a` of `&'a str` is a lifetime,
            // whose quote is dropped and whose name is a harmless identifier.
            '\'' if at(i + 1) == '\\' => (find(i + 3, '\'') + 1, false),
            '\'' if at(i + 2) == '\'' => (i + 3, false),
            ':' if at(i + 1) == ':' => (i + 2, true),
            ch if is_ident_char(ch) => word(i),
            ch => (i + 1, !ch.is_whitespace() && ch != '\''),
        };
        if keep {
            let text = c[i..end].iter().collect();
            toks.push(Tok {
                text,
                line: line_of[i],
            });
        }
        i = end;
    }
    toks
}

// ----------------------------------------------------------------- parsing

/// A module path from the crate root: `["kind", "fair"]`; `[]` is the root.
type ModPath = Vec<String>;

/// How a path is written, which decides how it is looked up and counted.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Form {
    /// In code, starting with a name the module knows.
    Code,
    /// In code after `.` or `::` (a method, a segment after generics).
    Tail,
    /// A leaf of a `use` tree.
    Use,
    /// A leaf of a `pub use` or `pub(..) use` tree.
    Reexport,
}

/// A path written in a file.
#[derive(Debug)]
struct PathRef {
    /// The module it is written in, inline modules included.
    ctx: ModPath,
    segs: Vec<String>,
    line: usize,
    form: Form,
    /// Inside a `#[cfg(test)] mod`.
    in_test: bool,
}

/// What a file says, as far as the rules need.
#[derive(Debug, Default)]
struct Parsed {
    paths: Vec<PathRef>,
    /// `use` bindings: (module, name bound, path as written).
    aliases: Vec<(ModPath, String, Vec<String>)>,
    /// `use path::*`: (module, path as written).
    globs: Vec<(ModPath, Vec<String>)>,
    /// Inline `mod name { .. }` modules.
    inline_mods: Vec<ModPath>,
    /// The lines of the `#[cfg(test)] mod .. { .. }` blocks.
    test_lines: usize,
}

/// Reads the paths, imports and inline modules of the file of module `file`.
fn parse(file: &[String], toks: &[Tok]) -> Parsed {
    let text = |i: usize| toks.get(i).map_or("", |t| t.text.as_str());
    let is_ident = |i: usize| text(i).starts_with(is_ident_char);
    let mut out = Parsed::default();
    // Open inline modules: name, brace depth outside, first line if cfg(test).
    let mut open: Vec<(String, usize, Option<usize>)> = Vec::new();
    let (mut depth, mut i, mut pub_end, mut cfg_test) = (0_usize, 0, usize::MAX, None);
    while i < toks.len() {
        let ctx: ModPath = file
            .iter()
            .chain(open.iter().map(|m| &m.0))
            .cloned()
            .collect();
        let in_test = open.iter().any(|m| m.2.is_some());
        let line = toks[i].line;
        match text(i) {
            "{" => (depth, cfg_test) = (depth + 1, None),
            ";" => cfg_test = None,
            "}" => {
                (depth, cfg_test) = (depth.saturating_sub(1), None);
                if open.last().is_some_and(|m| m.1 == depth) {
                    if let Some(first) = open.pop().and_then(|m| m.2) {
                        out.test_lines += line - first + 1;
                    }
                }
            }
            "#" if (i..i + 7)
                .map(text)
                .eq(["#", "[", "cfg", "(", "test", ")", "]"]) =>
            {
                (cfg_test, i) = (Some(line), i + 7);
                continue;
            }
            // A visibility, `pub(in crate::x)` included, is no dependency.
            "pub" => {
                i += 1;
                if text(i) == "(" {
                    i = (i..toks.len())
                        .find(|&j| text(j) == ")")
                        .map_or(i, |j| j + 1);
                }
                pub_end = i;
                continue;
            }
            "mod" if is_ident(i + 1) && text(i + 2) == "{" => {
                let name = text(i + 1).to_owned();
                out.inline_mods
                    .push([&ctx[..], std::slice::from_ref(&name)].concat());
                open.push((name, depth, cfg_test.take().filter(|_| !in_test)));
                (depth, i) = (depth + 1, i + 3);
                continue;
            }
            "mod" => (cfg_test, i) = (None, i + 2), // `mod x;` is the module tree
            "use" => {
                let form = if pub_end == i {
                    Form::Reexport
                } else {
                    Form::Use
                };
                let mut leaves = Vec::new();
                i += 1;
                use_tree(toks, &mut i, Vec::new(), &mut leaves);
                cfg_test = None;
                for (name, segs, line) in leaves {
                    match name.as_str() {
                        "*" => out.globs.push((ctx.clone(), segs.clone())),
                        "_" => {}
                        _ => out.aliases.push((ctx.clone(), name, segs.clone())),
                    }
                    out.paths.push(PathRef {
                        ctx: ctx.clone(),
                        segs,
                        line,
                        form,
                        in_test,
                    });
                }
            }
            _ if is_ident(i) => {
                let tail = matches!(i.checked_sub(1).map_or("", text), "." | "::");
                let form = if tail { Form::Tail } else { Form::Code };
                let mut segs = vec![text(i).to_owned()];
                while text(i + 1) == "::" && is_ident(i + 2) {
                    segs.push(text(i + 2).to_owned());
                    i += 2;
                }
                out.paths.push(PathRef {
                    ctx,
                    segs,
                    line,
                    form,
                    in_test,
                });
            }
            _ => {}
        }
        i += 1;
    }
    out
}

/// A `use` leaf: the name it binds (`*` for a glob), its path, its line.
type Leaf = (String, Vec<String>, usize);

/// Reads the use tree at `toks[*i]`: `a::{self, b::C as D, e::*}` has the
/// leaves `(a, [a])`, `(D, [a, b, C])` and `(*, [a, e])`.
fn use_tree(toks: &[Tok], i: &mut usize, mut segs: Vec<String>, out: &mut Vec<Leaf>) {
    let text = |i: usize| toks.get(i).map_or("", |t| t.text.as_str());
    *i += usize::from(text(*i) == "::");
    loop {
        match text(*i) {
            "{" => {
                *i += 1;
                while *i < toks.len() && text(*i) != "}" {
                    let before = *i;
                    use_tree(toks, i, segs.clone(), out);
                    *i += usize::from(text(*i) == "," || *i == before);
                }
                *i += 1;
                return;
            }
            "*" => {
                out.push(("*".to_owned(), segs, toks[*i].line));
                *i += 1;
                return;
            }
            s if s.starts_with(is_ident_char) => {
                segs.push(s.to_owned());
                *i += 1;
                if text(*i) != "::" {
                    break;
                }
                *i += 1;
            }
            _ => return,
        }
    }
    let line = toks[*i - 1].line;
    if segs.last().is_some_and(|s| s == "self") {
        segs.pop();
    }
    let mut name = segs.last().cloned().unwrap_or_default();
    if text(*i) == "as" {
        text(*i + 1).clone_into(&mut name);
        *i += 2;
    }
    out.push((name, segs, line));
}

// --------------------------------------------------------------- the crate

#[derive(Debug)]
struct SourceFile {
    /// `src/kind/fair.rs`.
    rel: String,
    module: ModPath,
    text: String,
    parsed: Parsed,
}

impl SourceFile {
    /// The file's length without its unit tests (rule 2).
    fn code_lines(&self) -> usize {
        self.text.lines().count() - self.parsed.test_lines
    }
}

/// `src/kind/fair.rs` → `kind::fair`; `src/kind/mod.rs` → `kind`; `src/lib.rs` → root.
fn module_of(rel: &str) -> ModPath {
    let inner = rel.trim_start_matches("src/").trim_end_matches(".rs");
    let mut segs: ModPath = inner.split('/').map(str::to_owned).collect();
    if inner == "lib" || segs.last().is_some_and(|s| s == "mod") {
        segs.pop();
    }
    segs
}

/// A module's name in reports.
fn show(module: &[String]) -> String {
    if module.is_empty() {
        "crate".to_owned()
    } else {
        module.join("::")
    }
}

/// Every source file, and the names each module binds.
#[derive(Debug)]
struct Crate {
    files: Vec<SourceFile>,
    /// File modules and inline modules.
    modules: BTreeSet<ModPath>,
    aliases: HashMap<ModPath, HashMap<String, Vec<String>>>,
    globs: HashMap<ModPath, Vec<Vec<String>>>,
}

impl Crate {
    /// Reads every `.rs` file under the package's `src/`.
    fn load() -> Crate {
        fn walk(dir: &Path, found: &mut Vec<PathBuf>) {
            for path in fs::read_dir(dir)
                .expect("read src/")
                .flatten()
                .map(|e| e.path())
            {
                if path.is_dir() {
                    walk(&path, found);
                } else if path.extension().is_some_and(|e| e == "rs") {
                    found.push(path);
                }
            }
        }
        let root = Path::new(env!("CARGO_MANIFEST_DIR"));
        let mut found = Vec::new();
        walk(&root.join("src"), &mut found);
        let read = |p: &PathBuf| fs::read_to_string(p).expect("read a source file");
        let rel = |p: &PathBuf| {
            p.strip_prefix(root)
                .unwrap_or(p)
                .to_string_lossy()
                .replace('\\', "/")
        };
        Crate::new(found.iter().map(|p| (rel(p), read(p))).collect())
    }

    /// Parses `(path from the package root, text)` pairs.
    fn new(mut sources: Vec<(String, String)>) -> Crate {
        sources.sort();
        let files: Vec<SourceFile> = (sources.into_iter())
            .map(|(rel, text)| {
                let module = module_of(&rel);
                let parsed = parse(&module, &tokenize(&text));
                SourceFile {
                    rel,
                    module,
                    text,
                    parsed,
                }
            })
            .collect();
        let mut modules: BTreeSet<ModPath> = files.iter().map(|f| f.module.clone()).collect();
        let (mut aliases, mut globs) = (HashMap::new(), HashMap::new());
        for p in files.iter().map(|f| &f.parsed) {
            modules.extend(p.inline_mods.iter().cloned());
            for (ctx, name, segs) in &p.aliases {
                let names: &mut HashMap<_, _> = aliases.entry(ctx.clone()).or_default();
                names.insert(name.clone(), segs.clone());
            }
            for (ctx, segs) in &p.globs {
                globs
                    .entry(ctx.clone())
                    .or_insert_with(Vec::new)
                    .push(segs.clone());
            }
        }
        Crate {
            files,
            modules,
            aliases,
            globs,
        }
    }

    fn file_of(&self, module: &[String]) -> Option<usize> {
        self.files.iter().position(|f| f.module == module)
    }

    /// What `name` means in `module`, as a path from the root: a child
    /// module, an import, or a name a glob import brings; `None` for an
    /// external crate, a local item, a generic.
    fn lookup(&self, module: &[String], name: &str, depth: usize) -> Option<ModPath> {
        let child = [module, &[name.to_owned()]].concat();
        if self.modules.contains(&child) {
            return Some(child);
        }
        if depth > 8 {
            return None; // an import cycle in odd input
        }
        if let Some(segs) = self.aliases.get(module).and_then(|a| a.get(name)) {
            return self.absolute(module, segs, depth + 1);
        }
        let globs = self.globs.get(module).into_iter().flatten();
        let mut glob_mods = globs.filter_map(|g| self.absolute(module, g, depth + 1));
        glob_mods.find_map(|g| self.lookup(&g, name, depth + 1))
    }

    /// `segs`, written in module `ctx`, as a path from the root; `None` when
    /// it does not start inside the crate.
    fn absolute(&self, ctx: &[String], segs: &[String], depth: usize) -> Option<ModPath> {
        let mut base = match segs.first()?.as_str() {
            "crate" => Vec::new(),
            "self" | "super" => ctx.to_vec(),
            name => self.lookup(ctx, name, depth)?,
        };
        // The segments that led to `base`: the first, or all of `self::super::..`.
        let lead = segs
            .iter()
            .take_while(|s| *s == "self" || *s == "super")
            .count()
            .max(1);
        for _ in segs[..lead].iter().filter(|s| *s == "super") {
            base.pop()?;
        }
        base.extend(segs[lead..].iter().cloned());
        Some(base)
    }

    /// The file that defines what `segs`, written in module `ctx`, names.
    fn resolve(&self, ctx: &[String], segs: &[String]) -> Option<usize> {
        let mut path = self.absolute(ctx, segs, 0)?;
        let (mut cur, mut i, mut hops) = (Vec::new(), 0, 0);
        while i < path.len() {
            let next = [&cur[..], &path[i..=i]].concat();
            if self.modules.contains(&next) {
                (cur, i) = (next, i + 1);
                continue;
            }
            // Not a module: follow the import or re-export to its definition.
            let target = self.aliases.get(&cur).and_then(|a| a.get(&path[i]));
            match target.and_then(|t| self.absolute(&cur, t, 0)) {
                Some(to) if hops < 8 => {
                    path = [&to[..], &path[i + 1..]].concat();
                    (cur, i, hops) = (Vec::new(), 0, hops + 1);
                }
                _ => break,
            }
        }
        (0..=cur.len()).rev().find_map(|n| self.file_of(&cur[..n]))
    }

    /// Rule 1's graph: `(from, to)` file indices → line of the first reference.
    fn edges(&self) -> BTreeMap<(usize, usize), usize> {
        let mut edges = BTreeMap::new();
        for (from, file) in self
            .files
            .iter()
            .enumerate()
            .filter(|(_, f)| !f.module.is_empty())
        {
            let counted = (file.parsed.paths.iter())
                .filter(|p| !p.in_test && p.form != Form::Tail)
                .filter(|p| p.form != Form::Code || p.segs.len() > 1);
            for p in counted {
                let Some(to) = self.resolve(&p.ctx, &p.segs) else {
                    continue;
                };
                let tree =
                    p.form == Form::Reexport && self.files[to].module.starts_with(&file.module);
                if to != from && !tree {
                    let line: &mut usize = edges.entry((from, to)).or_insert(p.line);
                    *line = (*line).min(p.line);
                }
            }
        }
        edges
    }

    /// Rule 4's findings, `(file, API, line)`, outside `SOCKET_DIR`.
    fn socket_uses(&self) -> BTreeSet<(String, &'static str, usize)> {
        let mut hits = BTreeSet::new();
        for file in self.files.iter().filter(|f| !f.rel.starts_with(SOCKET_DIR)) {
            for p in &file.parsed.paths {
                // The import spelled out: `Client::open` → `redis::Client::open`.
                let mut segs = p.segs.clone();
                for _ in 0..4 {
                    match self.aliases.get(&p.ctx).and_then(|a| a.get(&segs[0])) {
                        Some(t) if p.form != Form::Tail && t[..] != segs[..1] => {
                            segs = [&t[..], &segs[1..]].concat();
                        }
                        _ => break,
                    }
                }
                for &api in SOCKET_APIS.iter().filter(|api| names_api(&segs, api)) {
                    hits.insert((file.rel.clone(), api, p.line));
                }
            }
        }
        hits
    }
}

/// Whether `segs` has the segments of `api` in a row (`rustls::`: followed by more).
fn names_api(segs: &[String], api: &str) -> bool {
    let want: Vec<&str> = api.trim_end_matches("::").split("::").collect();
    let starts = (segs.len() + 1).saturating_sub(want.len() + usize::from(api.ends_with("::")));
    (0..starts).any(|k| segs[k..k + want.len()] == want[..])
}

/// The lines (from 1) where `word` appears as a whole identifier.
fn word_lines(text: &str, word: &str) -> Vec<usize> {
    let whole = |line: &str| {
        line.match_indices(word).any(|(at, _)| {
            let before = line[..at].chars().next_back();
            let after = line[at + word.len()..].chars().next();
            !before.is_some_and(is_ident_char) && !after.is_some_and(is_ident_char)
        })
    };
    text.lines()
        .enumerate()
        .filter(|(_, l)| whole(l))
        .map(|(n, _)| n + 1)
        .collect()
}

// ------------------------------------------------------------------ cycles

/// Depth-first search from `v`, pushing each node once finished.
fn dfs(adj: &[Vec<usize>], v: usize, seen: &mut [bool], finished: &mut Vec<usize>) {
    seen[v] = true;
    for &w in &adj[v] {
        if !seen[w] {
            dfs(adj, w, seen, finished);
        }
    }
    finished.push(v);
}

/// Kosaraju's strongly connected components: nodes by finishing order, then
/// what each reaches backwards that no earlier component took.
fn sccs(adj: &[Vec<usize>]) -> Vec<Vec<usize>> {
    let n = adj.len();
    let mut reverse = vec![Vec::new(); n];
    for (v, ws) in adj.iter().enumerate() {
        for &w in ws {
            reverse[w].push(v);
        }
    }
    let (mut seen, mut order) = (vec![false; n], Vec::new());
    for v in 0..n {
        if !seen[v] {
            dfs(adj, v, &mut seen, &mut order);
        }
    }
    let (mut seen, mut out) = (vec![false; n], Vec::new());
    for &v in order.iter().rev() {
        if !seen[v] {
            let mut scc = Vec::new();
            dfs(&reverse, v, &mut seen, &mut scc);
            scc.sort_unstable();
            out.push(scc);
        }
    }
    out
}

/// The shortest cycle through `v` inside `members`, as `[v, .., v]`.
fn shortest_cycle(adj: &[Vec<usize>], members: &BTreeSet<usize>, v: usize) -> Vec<usize> {
    let (mut prev, mut queue) = (HashMap::new(), VecDeque::from([v]));
    while let Some(u) = queue.pop_front() {
        for &w in &adj[u] {
            if w == v {
                let mut cycle = vec![v, u];
                while let Some(&p) = cycle.last().and_then(|x| prev.get(x)) {
                    cycle.push(p);
                }
                cycle.reverse();
                return cycle;
            }
            if members.contains(&w) && !prev.contains_key(&w) {
                prev.insert(w, u);
                queue.push_back(w);
            }
        }
    }
    Vec::new()
}

/// Rule 1's findings: each cycle outside `CYCLE_ALLOWED`, with each edge's
/// first reference, until every module that may not be in one is shown.
fn cycle_report(krate: &Crate) -> Vec<String> {
    let edges = krate.edges();
    let mut adj = vec![Vec::new(); krate.files.len()];
    for &(from, to) in edges.keys() {
        adj[from].push(to);
    }
    let name = |i: usize| show(&krate.files[i].module);
    let allowed = |i: &usize| CYCLE_ALLOWED.contains(&name(*i).as_str());
    let mut report = Vec::new();
    for scc in sccs(&adj)
        .into_iter()
        .filter(|c| c.len() > 1 && !c.iter().all(allowed))
    {
        let names: Vec<String> = scc.iter().map(|&i| name(i)).collect();
        report.push(format!(
            "{} modules in one cycle: {}",
            scc.len(),
            names.join(", ")
        ));
        let (members, mut shown) = (scc.iter().copied().collect(), BTreeSet::new());
        for &v in scc.iter().filter(|v| !allowed(v)) {
            if shown.insert(v) {
                let cycle = shortest_cycle(&adj, &members, v);
                shown.extend(cycle.iter().copied());
                let path: Vec<String> = cycle.iter().map(|&i| name(i)).collect();
                report.push(format!("  {}", path.join(" → ")));
                for pair in cycle.windows(2) {
                    let (file, line) = (&krate.files[pair[0]].rel, edges[&(pair[0], pair[1])]);
                    report.push(format!(
                        "      {} → {}  ({file}:{line})",
                        name(pair[0]),
                        name(pair[1])
                    ));
                }
            }
        }
    }
    report
}

// ------------------------------------------------------------------- rules

#[test]
fn no_module_cycle_except_among_client_lock_and_guard() {
    let report = cycle_report(&Crate::load());
    assert!(
        report.is_empty(),
        "module cycles (only {CYCLE_ALLOWED:?} may depend on each other):\n{}\n\n\
         Break each cycle: move what both sides need into a lower module, or pass \
         it in (an argument, a trait) instead of importing upwards.",
        report.join("\n")
    );
}

#[test]
fn no_source_file_over_400_lines() {
    let krate = Crate::load();
    let long: Vec<String> = (krate.files.iter())
        .filter(|f| f.code_lines() > MAX_LINES)
        .map(|f| format!("  {}: {} lines", f.rel, f.code_lines()))
        .collect();
    assert!(
        long.is_empty(),
        "files over {MAX_LINES} lines, #[cfg(test)] modules not counted:\n{}\n\n\
         Split each into modules that are one idea apiece.",
        long.join("\n")
    );
}

#[test]
fn no_file_in_src_kind_names_client() {
    let krate = Crate::load();
    let kinds: Vec<&SourceFile> = krate
        .files
        .iter()
        .filter(|f| f.rel.starts_with(KIND_DIR))
        .collect();
    assert!(
        !kinds.is_empty(),
        "nothing in {KIND_DIR}: point this rule at the lock kinds"
    );
    let named: Vec<String> = (kinds.iter())
        .map(|f| (f, word_lines(&f.text, "Client")))
        .filter(|(_, lines)| !lines.is_empty())
        .map(|(f, lines)| format!("  {} (lines {lines:?})", f.rel))
        .collect();
    assert!(
        named.is_empty(),
        "files in {KIND_DIR} that name `Client` (code or comments):\n{}\n\n\
         A kind says which scripts run on which keys: give it the narrow thing it \
         needs (something that runs a script), not the client.",
        named.join("\n")
    );
}

#[test]
fn no_socket_is_opened_outside_src_server() {
    let mut found: BTreeMap<(String, &str), Vec<usize>> = BTreeMap::new();
    for (file, api, line) in Crate::load().socket_uses() {
        found.entry((file, api)).or_default().push(line);
    }
    let found: Vec<String> = found
        .iter()
        .map(|((file, api), lines)| format!("  {file}: `{api}` at lines {lines:?}"))
        .collect();
    assert!(
        found.is_empty(),
        "sockets opened outside {SOCKET_DIR} (unit tests included):\n{}\n\n\
         Move the code that connects into {SOCKET_DIR} and call it from here.",
        found.join("\n")
    );
}

/// A parser that saw nothing would pass every rule: check that it sees the crate.
#[test]
fn the_rules_see_the_real_crate() {
    let krate = Crate::load();
    let edges = krate.edges();
    let module = |rel: &str| {
        krate
            .file_of(&module_of(rel))
            .unwrap_or_else(|| panic!("{rel} is gone: update this test"))
    };
    let (lock, error) = (module("src/lock.rs"), module("src/error.rs"));
    let from_lock = edges.keys().filter(|e| e.0 == lock).count();
    let to_error = edges.keys().filter(|e| e.1 == error).count();
    assert!(
        krate.files.len() > 20,
        "only {} files in src/",
        krate.files.len()
    );
    assert!(
        edges.len() > 40,
        "only {} dependencies between files: the parser is broken",
        edges.len()
    );
    assert!(
        from_lock >= 3,
        "lock depends on {from_lock} modules: the parser is broken"
    );
    assert!(
        to_error >= 10,
        "{to_error} modules use `error`: re-exports are not followed"
    );
}

// ---------------------------------------------------------- parser, checked

/// A crate made of `(path, text)` files.
fn fixture(files: &[(&str, &str)]) -> Crate {
    Crate::new(
        files
            .iter()
            .map(|(p, t)| (p.to_string(), t.to_string()))
            .collect(),
    )
}

/// What `module` depends on in rule 1's graph.
fn deps(krate: &Crate, module: &str) -> Vec<String> {
    let from = krate
        .files
        .iter()
        .position(|f| show(&f.module) == module)
        .expect("module");
    krate
        .edges()
        .keys()
        .filter(|e| e.0 == from)
        .map(|e| show(&krate.files[e.1].module))
        .collect()
}

/// Modules for the tests below to refer to; `a.rs` is each test's own.
const LIB: [(&str, &str); 6] = [
    (
        "src/lib.rs",
        "mod a; mod b; mod c; mod x;\npub use b::Thing;\npub use c::Deep;",
    ),
    ("src/b.rs", "pub struct Thing; pub struct B;"),
    (
        "src/c/mod.rs",
        "mod d; mod e;\npub use e::Deep;\npub(crate) use d::D;\nuse d::helper;",
    ),
    (
        "src/c/d.rs",
        "pub struct D; fn helper() { super::e::E::new() }\nmod inner { use super::super::e::E; }",
    ),
    ("src/c/e.rs", "pub struct E; pub struct Deep;"),
    ("src/x.rs", "pub fn anything() {}"),
];

fn with_a(a: &str) -> Crate {
    fixture(&[&LIB[..], &[("src/a.rs", a)]].concat())
}

#[test]
fn parser_ignores_comments_literals_and_test_modules() {
    let krate = with_a(
        r##"
        // crate::x::anything  /* crate::x /* nested */ crate::x */
        /* crate::x /* nested */ crate::x */ /// [`crate::x::anything`]
        const S: &str = "crate::x \" crate::x"; const R: &str = r#"crate::x " crate::x"#;
        fn f<'a>(s: &'a str) -> char { let _ = (b"crate::x", '"', '\''); crate::b::B; 'x' }
        #[cfg(test)]
        mod tests { use crate::x::anything; }
        #[cfg(test)] mod more_tests;
        mod not_a_test { fn f() { crate::c::e::E::new(); } }
    "##,
    );
    assert_eq!(deps(&krate, "a"), ["b", "c::e"]);
    let a = krate
        .files
        .iter()
        .find(|f| f.rel == "src/a.rs")
        .expect("a.rs");
    assert_eq!((a.parsed.test_lines, a.code_lines()), (2, 8));
}

#[test]
fn parser_splits_grouped_uses_over_several_lines() {
    let krate = with_a("use crate::{\n    b::B,\n    c::{d::D, e::{self, E}},\n};");
    assert_eq!(deps(&krate, "a"), ["b", "c::d", "c::e"]);
    let (a, d) = (
        krate.file_of(&module_of("src/a.rs")),
        krate.file_of(&module_of("src/c/d.rs")),
    );
    assert_eq!(
        krate.edges().get(&(a.unwrap(), d.unwrap())),
        Some(&3),
        "the line of `d::D`"
    );
}

#[test]
fn parser_resolves_super_in_files_and_inline_modules() {
    // `super::e::E` in `c::d`, and `super::super::e::E` in `c::d::inner`: both `c::e`.
    assert_eq!(deps(&fixture(&LIB), "c::d"), ["c::e"]);
}

#[test]
fn parser_follows_reexports_and_skips_the_module_tree() {
    let krate = with_a("fn f() { crate::Thing::new(); crate::c::Deep::go(); crate::c::D::new(); }");
    // `crate::Thing` is `b`'s; `crate::c::Deep` is `c::e`'s, through two re-exports.
    assert_eq!(deps(&krate, "a"), ["b", "c::d", "c::e"]);
    // `c` re-exports `e::Deep` and `d::D` (not counted) and imports `d::helper` (counted).
    assert_eq!(deps(&krate, "c"), ["c::d"]);
    assert!(deps(&krate, "crate").is_empty());
}

#[test]
fn cycles_are_reported_unless_among_client_lock_and_guard() {
    let krate = fixture(&[
        (
            "src/lib.rs",
            "mod client; mod lock; mod guard; mod p; mod q;",
        ),
        ("src/client.rs", "use crate::lock::Lock;"),
        (
            "src/lock.rs",
            "use crate::guard::Guard; use crate::client::Client;",
        ),
        ("src/guard.rs", "fn f() { crate::lock::Lock::new() }"),
        ("src/p.rs", "use crate::q::Q;"),
        ("src/q.rs", "\nfn f() { crate::p::P; }"),
    ]);
    let expected = [
        "2 modules in one cycle: p, q",
        "  p → q → p",
        "      p → q  (src/p.rs:1)",
        "      q → p  (src/q.rs:2)",
    ];
    assert_eq!(cycle_report(&krate), expected);
}

#[test]
fn detectors_tell_sockets_and_client_apart() {
    let a = "use redis::{Client, Value};\nfn f() { Client::open(u); }\n\
             fn g(c: &crate::Client) { c.get_connection(); }\n// TcpStream::connect\n\
             fn h() { crate::Client::open(u); std::net::TcpStream::connect(a); }";
    let krate = fixture(&[
        ("src/lib.rs", ""),
        ("src/a.rs", a),
        ("src/server/b.rs", "use std::net::TcpStream;"),
    ]);
    let found: Vec<(&str, usize)> = krate
        .socket_uses()
        .iter()
        .map(|(_, api, line)| (*api, *line))
        .collect();
    assert_eq!(
        found,
        [
            ("TcpStream", 5),
            ("get_connection", 3),
            ("redis::Client", 1),
            ("redis::Client", 2)
        ]
    );
    assert_eq!(
        word_lines(
            "ClientBuilder RedisClient\n/// [`Client`]\nuse crate::Client;",
            "Client"
        ),
        [2, 3]
    );
}
