//! The guard's reading of the test sources: as Rust (`syn`), not as text,
//! so that what it counts is code that runs and asserts.
//!
//! A row (reason, test name) holds when the sources define a function of
//! that name that
//! - carries a test attribute (`#[test]`, `#[tokio::test(...)]`: a path
//!   ending in `test`) and no `#[ignore]`, and
//! - asserts the reason: its body, or the body of a function it calls
//!   (followed one level, in its own file or else under `support/`),
//!   holds an assert-family call whose tokens include the reason's wire
//!   string as a string literal.
//!
//! Assert-family: the macros `assert!`, `assert_eq!`, `assert_matches!`
//! (and their `debug_`/`prop_` forms), and functions whose name starts
//! with `assert_` (the project's helpers, `assert_error`). Never
//! `assert_ne!`, nor an `assert!` whose condition starts with `!`: they
//! pass when the reason is absent. Comments are not tokens, so a
//! commented-out assert counts for nothing.

use std::{
    collections::BTreeMap,
    path::{Path, PathBuf},
};

use proc_macro2::{TokenStream, TokenTree};
use syn::{
    Expr, ExprCall, ExprMethodCall, ImplItem, Item, ItemFn, Macro, Token, punctuated::Punctuated,
    visit::Visit,
};

/// One function of the sources: where, its attributes' last path
/// segments, and what its body holds.
#[derive(Debug)]
struct Function {
    file: PathBuf,
    attributes: Vec<String>,
    body: Body,
}

/// What a body holds, as the guard needs it.
#[derive(Debug, Default)]
struct Body {
    /// The tokens of every assert-family call (a macro's tokens, a
    /// function's arguments).
    asserts: Vec<TokenStream>,
    /// The names of the functions and methods it calls.
    calls: Vec<String>,
}

/// Every function (free, in an inline `mod`, or in an `impl`) of every
/// `.rs` file under a directory, by name.
pub struct Sources {
    root: PathBuf,
    functions: BTreeMap<String, Vec<Function>>,
}

impl Sources {
    /// Parses every `.rs` file under `root`; a file that does not parse
    /// fails the guard naming it.
    pub fn read(root: &Path) -> Self {
        let mut files = Vec::new();
        rust_files(root, &mut files);
        let mut sources = Sources {
            root: root.to_owned(),
            functions: BTreeMap::new(),
        };
        for file in files {
            let text = std::fs::read_to_string(&file).expect("read a test source");
            sources.add(&file, &text);
        }
        sources
    }

    /// Adds the functions of `text` as the file `file`.
    pub fn add(&mut self, file: &Path, text: &str) {
        let parsed = syn::parse_file(text)
            .unwrap_or_else(|e| panic!("{} does not parse: {e}", file.display()));
        self.items(file, &parsed.items);
    }

    fn items(&mut self, file: &Path, items: &[Item]) {
        for item in items {
            match item {
                Item::Fn(f) => self.function(file, f),
                Item::Mod(m) => {
                    if let Some((_, inner)) = &m.content {
                        self.items(file, inner);
                    }
                }
                Item::Impl(i) => {
                    for item in &i.items {
                        if let ImplItem::Fn(f) = item {
                            let f = ItemFn {
                                attrs: f.attrs.clone(),
                                vis: f.vis.clone(),
                                sig: f.sig.clone(),
                                block: Box::new(f.block.clone()),
                            };
                            self.function(file, &f);
                        }
                    }
                }
                _ => {}
            }
        }
    }

    fn function(&mut self, file: &Path, f: &ItemFn) {
        let attributes = f
            .attrs
            .iter()
            .filter_map(|a| a.path().segments.last())
            .map(|s| s.ident.to_string())
            .collect();
        let mut body = Body::default();
        body.visit_block(&f.block);
        self.functions
            .entry(f.sig.ident.to_string())
            .or_default()
            .push(Function {
                file: file.to_owned(),
                attributes,
                body,
            });
    }

    /// Why the row (`reason`, `test`) does not hold, if it does not.
    pub fn check(&self, reason: &str, test: &str) -> Option<String> {
        let Some(candidates) = self.functions.get(test) else {
            return Some(format!("{reason}: no fn {test} in tests/it"));
        };
        let Some(f) = candidates.iter().find(|f| is_test(&f.attributes)) else {
            return Some(format!("{reason}: fn {test} is not a test (no #[test])"));
        };
        if f.attributes.iter().any(|a| a == "ignore") {
            return Some(format!("{reason}: fn {test} is #[ignore]d"));
        }
        if f.body.asserts_literal(reason) {
            return None;
        }
        let helpers_assert = f.body.calls.iter().any(|name| {
            self.helpers(name, &f.file)
                .any(|helper| helper.body.asserts_literal(reason))
        });
        if helpers_assert {
            return None;
        }
        Some(format!(
            "{reason}: fn {test} ({}) asserts no \"{reason}\" (nor does a function it calls)",
            f.file.display()
        ))
    }

    /// The non-test functions named `name` that a function of `file`
    /// calls: those of `file` itself, else those under `support/`.
    fn helpers<'a>(&'a self, name: &str, file: &'a Path) -> impl Iterator<Item = &'a Function> {
        let all = self.functions.get(name).map(Vec::as_slice).unwrap_or(&[]);
        let local = all.iter().any(|f| f.file == file);
        let support = self.root.join("support");
        all.iter().filter(move |f| {
            !is_test(&f.attributes)
                && if local {
                    f.file == file
                } else {
                    f.file.starts_with(&support)
                }
        })
    }
}

fn is_test(attributes: &[String]) -> bool {
    attributes.iter().any(|a| a == "test")
}

impl Body {
    fn asserts_literal(&self, reason: &str) -> bool {
        let literal = format!("\"{reason}\"");
        self.asserts
            .iter()
            .any(|t| holds_literal(t.clone(), &literal))
    }
}

/// True when `tokens`, at any depth, hold the literal `literal` (quoted).
fn holds_literal(tokens: TokenStream, literal: &str) -> bool {
    tokens.into_iter().any(|tree| match tree {
        TokenTree::Literal(l) => l.to_string() == literal,
        TokenTree::Group(g) => holds_literal(g.stream(), literal),
        _ => false,
    })
}

/// An assert-family macro: one that fails when its tokens do not hold.
fn assert_macro(name: &str) -> bool {
    let name = name
        .strip_prefix("debug_")
        .or_else(|| name.strip_prefix("prop_"))
        .unwrap_or(name);
    matches!(name, "assert" | "assert_eq" | "assert_matches")
}

/// An assert-family function: the project's `assert_*` helpers.
fn assert_function(name: &str) -> bool {
    name.starts_with("assert_") && name != "assert_ne"
}

impl<'ast> Visit<'ast> for Body {
    fn visit_macro(&mut self, mac: &'ast Macro) {
        let name = mac
            .path
            .segments
            .last()
            .map(|s| s.ident.to_string())
            .unwrap_or_default();
        let negated = matches!(
            mac.tokens.clone().into_iter().next(),
            Some(TokenTree::Punct(p)) if p.as_char() == '!'
        ) && matches!(name.as_str(), "assert" | "debug_assert" | "prop_assert");
        if assert_macro(&name) && !negated {
            self.asserts.push(mac.tokens.clone());
        }
        // The calls inside any macro whose tokens are expressions
        // (`assert_eq!(helper(..), ..)`, `tokio::join!(..)`, `vec![..]`).
        if let Ok(exprs) = mac.parse_body_with(Punctuated::<Expr, Token![,]>::parse_terminated) {
            for expr in &exprs {
                self.visit_expr(expr);
            }
        }
    }

    fn visit_expr_call(&mut self, call: &'ast ExprCall) {
        if let Expr::Path(path) = &*call.func {
            if let Some(last) = path.path.segments.last() {
                let name = last.ident.to_string();
                if assert_function(&name) {
                    let mut tokens = TokenStream::new();
                    for arg in &call.args {
                        quote_into(arg, &mut tokens);
                    }
                    self.asserts.push(tokens);
                }
                self.calls.push(name);
            }
        }
        syn::visit::visit_expr_call(self, call);
    }

    fn visit_expr_method_call(&mut self, call: &'ast ExprMethodCall) {
        let name = call.method.to_string();
        if assert_function(&name) {
            let mut tokens = TokenStream::new();
            for arg in &call.args {
                quote_into(arg, &mut tokens);
            }
            self.asserts.push(tokens);
        }
        self.calls.push(name);
        syn::visit::visit_expr_method_call(self, call);
    }
}

/// Appends the tokens of `expr` to `tokens`.
fn quote_into(expr: &Expr, tokens: &mut TokenStream) {
    quote::ToTokens::to_tokens(expr, tokens);
}

/// Every `.rs` file under `dir`.
fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).expect("read tests/it") {
        let path = entry.expect("dir entry").path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}
