//! What each file of a crate takes from the crate's other files, read
//! with syn — for the layer and circle checks of `layers.rs`.
//!
//! A reference is a `use` leaf or a path of two or more segments in code
//! or in a macro's tokens (`json!`, `for_manifest!`) that starts at
//! `crate`, `super`, `self`, a child module or a name the module imports.
//! It is resolved the way rustc does, far enough to know the file: the
//! deepest module the path walks into, then through that module's own
//! imports (a re-export, a private `use` a child reaches with `super::`,
//! a glob) to the module that defines the name. `mod x;` lines and
//! `#[cfg(test)]` items are not imports. Names from other crates and local
//! types (`Kind::Task`, `Self::x`) resolve to nothing.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::{Path, PathBuf};

use proc_macro2::{TokenStream, TokenTree};
use syn::visit::Visit;

use super::rust_files::rust_files;

/// A module path inside one crate (`[]` is the crate root).
pub type ModPath = Vec<String>;

/// One file's reference into another file of its crate.
#[derive(Debug, Clone)]
pub struct Edge {
    pub from: PathBuf,
    pub to: PathBuf,
    /// 1-based line of the reference in `from`.
    pub line: usize,
    /// The name taken (the path's last segment).
    pub name: String,
}

/// A crate's library tree (`src/`, without `src/bin`): its modules, what
/// each defines and imports, and every file's references.
pub struct Crate {
    pub src: PathBuf,
    /// Each module, in a file of its own or inline, → the file holding it.
    modules: HashMap<ModPath, PathBuf>,
    /// Names each module defines (functions, types, consts, macros…).
    defines: HashMap<ModPath, HashSet<String>>,
    /// Each module's `use` leaves: the name bound (`*` for a glob) and the
    /// path as written.
    uses: HashMap<ModPath, Vec<(String, Vec<String>)>>,
    /// Per file: references as written (module at the reference, path,
    /// line) and the lines of each argument-less `.commit()` call.
    refs: BTreeMap<PathBuf, Vec<(ModPath, Vec<String>, usize)>>,
    pub commits: BTreeMap<PathBuf, Vec<usize>>,
}

/// The module path of a file under `src` (`api/mod.rs` → `[api]`,
/// `lib.rs` → `[]`); `None` for binaries' files.
fn module_path(src: &Path, file: &Path) -> Option<ModPath> {
    let rel = file.strip_prefix(src).ok()?;
    let mut parts: Vec<String> = rel
        .with_extension("")
        .components()
        .map(|c| c.as_os_str().to_string_lossy().into_owned())
        .collect();
    if parts.first().is_some_and(|p| p == "bin") {
        return None;
    }
    if parts.last().is_some_and(|p| p == "mod") || parts == ["lib"] || parts == ["main"] {
        parts.pop();
    }
    Some(parts)
}

/// `#[cfg(test)]` or `#[test]`: test code, which is not an import.
fn is_cfg_test(attrs: &[syn::Attribute]) -> bool {
    attrs.iter().any(|a| {
        a.path().is_ident("test")
            || (a.path().is_ident("cfg")
                && matches!(&a.meta, syn::Meta::List(l) if l.tokens.to_string() == "test"))
    })
}

fn item_attrs(item: &syn::Item) -> &[syn::Attribute] {
    use syn::Item::*;
    match item {
        Const(i) => &i.attrs,
        Enum(i) => &i.attrs,
        ExternCrate(i) => &i.attrs,
        Fn(i) => &i.attrs,
        ForeignMod(i) => &i.attrs,
        Impl(i) => &i.attrs,
        Macro(i) => &i.attrs,
        Mod(i) => &i.attrs,
        Static(i) => &i.attrs,
        Struct(i) => &i.attrs,
        Trait(i) => &i.attrs,
        TraitAlias(i) => &i.attrs,
        Type(i) => &i.attrs,
        Union(i) => &i.attrs,
        Use(i) => &i.attrs,
        _ => &[],
    }
}

fn item_name(item: &syn::Item) -> Option<String> {
    use syn::Item::*;
    let ident = match item {
        Const(i) => &i.ident,
        Enum(i) => &i.ident,
        Fn(i) => &i.sig.ident,
        Macro(i) => i.ident.as_ref()?,
        Static(i) => &i.ident,
        Struct(i) => &i.ident,
        Trait(i) => &i.ident,
        TraitAlias(i) => &i.ident,
        Type(i) => &i.ident,
        Union(i) => &i.ident,
        _ => return None,
    };
    Some(ident.to_string())
}

/// The leaves of a `use` tree: (bound name or `*`, path, line).
fn use_leaves(
    tree: &syn::UseTree,
    prefix: &mut Vec<String>,
    out: &mut Vec<(String, Vec<String>, usize)>,
) {
    match tree {
        syn::UseTree::Path(p) => {
            prefix.push(p.ident.to_string());
            use_leaves(&p.tree, prefix, out);
            prefix.pop();
        }
        syn::UseTree::Name(n) => {
            let mut path = prefix.clone();
            let name = n.ident.to_string();
            if name == "self" {
                let bound = prefix.last().cloned().unwrap_or_default();
                out.push((bound, path, n.ident.span().start().line));
            } else {
                path.push(name.clone());
                out.push((name, path, n.ident.span().start().line));
            }
        }
        syn::UseTree::Rename(r) => {
            let mut path = prefix.clone();
            if r.ident != "self" {
                path.push(r.ident.to_string());
            }
            out.push((r.rename.to_string(), path, r.ident.span().start().line));
        }
        syn::UseTree::Glob(g) => {
            out.push((
                "*".into(),
                prefix.clone(),
                g.star_token.spans[0].start().line,
            ));
        }
        syn::UseTree::Group(g) => {
            for t in &g.items {
                use_leaves(t, prefix, out);
            }
        }
    }
}

/// First pass: modules, definitions and `use` leaves.
struct Declarations<'a> {
    file: &'a Path,
    at: ModPath,
    krate: &'a mut Crate,
}

impl<'ast> Visit<'ast> for Declarations<'_> {
    fn visit_item(&mut self, item: &'ast syn::Item) {
        if is_cfg_test(item_attrs(item)) {
            return;
        }
        if let Some(name) = item_name(item) {
            self.krate
                .defines
                .entry(self.at.clone())
                .or_default()
                .insert(name);
        }
        match item {
            syn::Item::Mod(m) if m.content.is_some() => {
                self.at.push(m.ident.to_string());
                self.krate
                    .modules
                    .insert(self.at.clone(), self.file.to_path_buf());
                syn::visit::visit_item(self, item);
                self.at.pop();
            }
            syn::Item::Use(u) => {
                let mut leaves = Vec::new();
                use_leaves(&u.tree, &mut Vec::new(), &mut leaves);
                let uses = self.krate.uses.entry(self.at.clone()).or_default();
                uses.extend(leaves.into_iter().map(|(n, p, _)| (n, p)));
            }
            _ => syn::visit::visit_item(self, item),
        }
    }
}

/// Second pass: every reference as written, and `.commit()` calls.
struct References {
    at: ModPath,
    refs: Vec<(ModPath, Vec<String>, usize)>,
    commits: Vec<usize>,
}

impl References {
    /// Paths in a macro's tokens: `a::b::c` runs of identifiers.
    fn tokens(&mut self, tokens: TokenStream) {
        let trees: Vec<TokenTree> = tokens.into_iter().collect();
        let mut i = 0;
        while i < trees.len() {
            match &trees[i] {
                TokenTree::Group(g) => self.tokens(g.stream()),
                TokenTree::Ident(id) if !follows_colons(&trees, i) => {
                    let mut path = vec![id.to_string()];
                    let mut j = i + 1;
                    while let (
                        Some(TokenTree::Punct(a)),
                        Some(TokenTree::Punct(b)),
                        Some(TokenTree::Ident(n)),
                    ) = (trees.get(j), trees.get(j + 1), trees.get(j + 2))
                    {
                        if a.as_char() != ':' || b.as_char() != ':' {
                            break;
                        }
                        path.push(n.to_string());
                        j += 3;
                    }
                    if path.len() > 1 {
                        self.refs
                            .push((self.at.clone(), path, id.span().start().line));
                        i = j;
                        continue;
                    }
                }
                _ => {}
            }
            i += 1;
        }
    }
}

/// Whether the token before `i` is `::` (the ident continues a path, as
/// in `::std::x` or `<T>::f`).
fn follows_colons(trees: &[TokenTree], i: usize) -> bool {
    let colon = |k: usize| matches!(&trees[k], TokenTree::Punct(p) if p.as_char() == ':');
    i >= 2 && colon(i - 1) && colon(i - 2)
}

impl<'ast> Visit<'ast> for References {
    fn visit_item(&mut self, item: &'ast syn::Item) {
        if is_cfg_test(item_attrs(item)) {
            return;
        }
        match item {
            syn::Item::Mod(m) if m.content.is_some() => {
                self.at.push(m.ident.to_string());
                syn::visit::visit_item(self, item);
                self.at.pop();
            }
            syn::Item::Use(u) => {
                let mut leaves = Vec::new();
                use_leaves(&u.tree, &mut Vec::new(), &mut leaves);
                for (_, path, line) in leaves {
                    self.refs.push((self.at.clone(), path, line));
                }
            }
            _ => syn::visit::visit_item(self, item),
        }
    }

    fn visit_impl_item_fn(&mut self, f: &'ast syn::ImplItemFn) {
        if !is_cfg_test(&f.attrs) {
            syn::visit::visit_impl_item_fn(self, f);
        }
    }

    fn visit_path(&mut self, p: &'ast syn::Path) {
        if p.leading_colon.is_none() && p.segments.len() > 1 {
            let path = p.segments.iter().map(|s| s.ident.to_string()).collect();
            let line = p.segments[0].ident.span().start().line;
            self.refs.push((self.at.clone(), path, line));
        }
        syn::visit::visit_path(self, p);
    }

    fn visit_macro(&mut self, m: &'ast syn::Macro) {
        self.visit_path(&m.path);
        self.tokens(m.tokens.clone());
    }

    fn visit_expr_method_call(&mut self, c: &'ast syn::ExprMethodCall) {
        if c.method == "commit" && c.args.is_empty() {
            self.commits.push(c.method.span().start().line);
        }
        syn::visit::visit_expr_method_call(self, c);
    }
}

impl Crate {
    /// Reads the library tree under `src`.
    pub fn read(src: &Path) -> Crate {
        let mut files = Vec::new();
        rust_files(src, &mut files);
        files.sort();
        let mut krate = Crate {
            src: src.to_path_buf(),
            modules: HashMap::new(),
            defines: HashMap::new(),
            uses: HashMap::new(),
            refs: BTreeMap::new(),
            commits: BTreeMap::new(),
        };
        let mut parsed = Vec::new();
        for file in files {
            let Some(module) = module_path(src, &file) else {
                continue;
            };
            let text = std::fs::read_to_string(&file).unwrap();
            let ast = syn::parse_file(&text).unwrap_or_else(|e| panic!("{}: {e}", file.display()));
            krate.modules.insert(module.clone(), file.clone());
            parsed.push((file, module, ast));
        }
        for (file, module, ast) in &parsed {
            let mut d = Declarations {
                file,
                at: module.clone(),
                krate: &mut krate,
            };
            d.visit_file(ast);
        }
        for (file, module, ast) in &parsed {
            let mut r = References {
                at: module.clone(),
                refs: Vec::new(),
                commits: Vec::new(),
            };
            r.visit_file(ast);
            krate.refs.insert(file.clone(), r.refs);
            krate.commits.insert(file.clone(), r.commits);
        }
        krate
    }

    /// The module a path written in module `at` names: the deepest module
    /// it walks into, followed through `use` leaves to where the next name
    /// is defined. `None`: not this crate's (another crate, a local type).
    fn resolve(&self, at: &[String], path: &[String], depth: usize) -> Option<ModPath> {
        if depth > 8 || path.is_empty() {
            return None;
        }
        let (mut cur, rest): (ModPath, &[String]) = match path[0].as_str() {
            "crate" => (Vec::new(), &path[1..]),
            "self" => (at.to_vec(), &path[1..]),
            "super" => {
                let ups = path.iter().take_while(|s| *s == "super").count();
                (at[..at.len().checked_sub(ups)?].to_vec(), &path[ups..])
            }
            "Self" => return None,
            first => {
                let mut child = at.to_vec();
                child.push(first.to_string());
                if self.modules.contains_key(&child) {
                    (at.to_vec(), path)
                } else {
                    let (_, used) = self.named_use(at, first)?;
                    let mut whole = used.clone();
                    whole.extend_from_slice(&path[1..]);
                    return self.resolve(at, &whole, depth + 1);
                }
            }
        };
        for seg in rest {
            let mut child = cur.clone();
            child.push(seg.clone());
            if self.modules.contains_key(&child) {
                cur = child;
                continue;
            }
            if self.defines.get(&cur).is_some_and(|d| d.contains(seg)) {
                return Some(cur);
            }
            if let Some((_, used)) = self.named_use(&cur, seg) {
                return self.resolve(&cur, &used.clone(), depth + 1).or(Some(cur));
            }
            for (_, glob) in self
                .uses
                .get(&cur)
                .into_iter()
                .flatten()
                .filter(|(n, _)| n == "*")
            {
                let Some(g) = self.resolve(&cur, glob, depth + 1) else {
                    continue;
                };
                let mut named = glob.clone();
                named.push(seg.clone());
                let offers = self.defines.get(&g).is_some_and(|d| d.contains(seg))
                    || self.named_use(&g, seg).is_some()
                    || self
                        .modules
                        .contains_key(&[g.clone(), vec![seg.clone()]].concat());
                if offers {
                    return self.resolve(&cur, &named, depth + 1);
                }
            }
            return Some(cur);
        }
        Some(cur)
    }

    fn named_use(&self, at: &[String], name: &str) -> Option<&(String, Vec<String>)> {
        self.uses.get(at)?.iter().find(|(n, _)| n == name)
    }

    /// The module path of a file of this crate.
    pub fn module_of(&self, file: &Path) -> Option<ModPath> {
        module_path(&self.src, file)
    }

    /// Every reference from one file of the crate into another, in file
    /// and line order.
    pub fn edges(&self) -> Vec<Edge> {
        let mut out = Vec::new();
        for (file, refs) in &self.refs {
            for (at, path, line) in refs {
                let Some(target) = self.resolve(at, path, 0) else {
                    continue;
                };
                let Some(to) = self.modules.get(&target).cloned() else {
                    continue;
                };
                // What a folder's mod.rs (or the crate root) defines is
                // the folder's own, and a file inside uses it as its
                // own: the folder holds the file, so that is no arrow
                // between two rooms.
                let holds = target.len() < at.len()
                    && at.starts_with(&target)
                    && to != *file
                    && self
                        .module_of(file)
                        .is_some_and(|m| m.starts_with(&target) && m.len() > target.len());
                if &to != file && !holds {
                    out.push(Edge {
                        from: file.clone(),
                        to,
                        line: *line,
                        name: path.last().cloned().unwrap_or_default(),
                    });
                }
            }
        }
        out
    }
}

/// The files of the crate that import each other in a loop: each strongly
/// connected set of two or more files (Tarjan), with the edges inside it.
pub fn circles(edges: &[Edge]) -> Vec<(Vec<PathBuf>, Vec<Edge>)> {
    let mut nodes: Vec<&PathBuf> = edges.iter().flat_map(|e| [&e.from, &e.to]).collect();
    nodes.sort();
    nodes.dedup();
    let index: HashMap<&PathBuf, usize> = nodes.iter().enumerate().map(|(i, n)| (*n, i)).collect();
    let mut next: Vec<Vec<usize>> = vec![Vec::new(); nodes.len()];
    for e in edges {
        next[index[&e.from]].push(index[&e.to]);
    }
    let sets = tarjan(&next);
    let mut out = Vec::new();
    for set in sets.into_iter().filter(|s| s.len() > 1) {
        let members: HashSet<usize> = set.iter().copied().collect();
        let mut files: Vec<PathBuf> = set.iter().map(|&i| nodes[i].clone()).collect();
        files.sort();
        let inside = edges
            .iter()
            .filter(|e| members.contains(&index[&e.from]) && members.contains(&index[&e.to]))
            .cloned()
            .collect();
        out.push((files, inside));
    }
    out.sort_by(|a, b| a.0.cmp(&b.0));
    out
}

fn tarjan(next: &[Vec<usize>]) -> Vec<Vec<usize>> {
    struct State<'a> {
        next: &'a [Vec<usize>],
        index: Vec<Option<usize>>,
        low: Vec<usize>,
        on_stack: Vec<bool>,
        stack: Vec<usize>,
        count: usize,
        out: Vec<Vec<usize>>,
    }
    fn visit(s: &mut State, v: usize) {
        s.index[v] = Some(s.count);
        s.low[v] = s.count;
        s.count += 1;
        s.stack.push(v);
        s.on_stack[v] = true;
        for &w in &s.next[v] {
            match s.index[w] {
                None => {
                    visit(s, w);
                    s.low[v] = s.low[v].min(s.low[w]);
                }
                Some(iw) if s.on_stack[w] => s.low[v] = s.low[v].min(iw),
                Some(_) => {}
            }
        }
        if Some(s.low[v]) == s.index[v] {
            let mut set = Vec::new();
            loop {
                let w = s.stack.pop().unwrap();
                s.on_stack[w] = false;
                set.push(w);
                if w == v {
                    break;
                }
            }
            s.out.push(set);
        }
    }
    let n = next.len();
    let mut s = State {
        next,
        index: vec![None; n],
        low: vec![0; n],
        on_stack: vec![false; n],
        stack: Vec::new(),
        count: 0,
        out: Vec::new(),
    };
    for v in 0..n {
        if s.index[v].is_none() {
            visit(&mut s, v);
        }
    }
    s.out
}
