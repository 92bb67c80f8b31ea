//! The statement audit: every SQL statement in `src/store/` is run by some test (docs/testing.md).
//!
//! The statements are read from the source itself, so that a statement added anywhere in `src/store/`
//! is audited without being listed here: every string literal of `src/store/*.rs`, with the `concat!`
//! calls and the file's own `macro_rules!` macros that assemble statements from constants expanded
//! (the claims of `messages.rs`, the publishes of `publish.rs`), and `format!` templates whose `{...}`
//! stand for one word (the table a vacuum names). Those that start as a statement does (`select`,
//! `with`, `insert`, ...) are the statements.
//!
//! `make test` loads `pg_stat_statements` in the test cluster (scripts/pg.sh), resets it before
//! `cargo test` and runs `every_store_statement_ran` (ignored by a plain `cargo test`) after it
//! (scripts/statement-audit.sh). The audit compares each statement with what PostgreSQL recorded, on
//! a form both share: lowercase, comments and spacing gone, and every constant (a string, a number,
//! `true`, `false`, `null`, a `$n` parameter) one `?`, since `pg_stat_statements` shows constants as
//! `$n`. It fails with the list of statements that no test ran.
//!
//! The other tests here check the reading of the source and the normal form, and need no database.

use std::collections::{BTreeSet, HashMap};
use std::path::{Path, PathBuf};

// ---------------------------------------------------------------------------------------------------
// Rust source: tokens, the file's own `macro_rules!`, and the statements.

#[derive(Clone, Debug, PartialEq)]
enum Tok {
    /// A string literal's value (raw or not; byte strings are `Other`).
    Str(String),
    Ident(String),
    Punct(char),
    /// A delimited group: its opening character and its tokens.
    Group(char, Vec<Tok>),
    /// Numbers, characters, lifetimes, byte strings.
    Other,
}

struct Lexer<'a> {
    chars: Vec<char>,
    at: usize,
    file: &'a str,
}

impl Lexer<'_> {
    fn peek(&self, ahead: usize) -> Option<char> {
        self.chars.get(self.at + ahead).copied()
    }

    fn fail(&self, what: &str) -> ! {
        let line = self.chars[..self.at.min(self.chars.len())].iter().filter(|c| **c == '\n').count() + 1;
        panic!("{}:{line}: cannot read the Rust source: {what}", self.file)
    }

    /// The tokens up to `close` (the end of the file when None).
    fn tokens(&mut self, close: Option<char>) -> Vec<Tok> {
        let mut out = Vec::new();
        while let Some(c) = self.peek(0) {
            match c {
                _ if c.is_whitespace() => self.at += 1,
                '/' if self.peek(1) == Some('/') => {
                    while self.peek(0).is_some_and(|c| c != '\n') {
                        self.at += 1;
                    }
                }
                '/' if self.peek(1) == Some('*') => self.block_comment(),
                '(' | '[' | '{' => {
                    self.at += 1;
                    let closing = match c {
                        '(' => ')',
                        '[' => ']',
                        _ => '}',
                    };
                    out.push(Tok::Group(c, self.tokens(Some(closing))));
                }
                ')' | ']' | '}' => {
                    if Some(c) != close {
                        self.fail(&format!("unexpected {c}"));
                    }
                    self.at += 1;
                    return out;
                }
                '"' => {
                    self.at += 1;
                    out.push(Tok::Str(self.string()));
                }
                'r' if self.raw_string_ahead(1) => {
                    self.at += 1;
                    out.push(Tok::Str(self.raw_string()));
                }
                'b' | 'c' if self.peek(1) == Some('"') => {
                    self.at += 2;
                    self.string();
                    out.push(Tok::Other);
                }
                'b' | 'c' if self.peek(1) == Some('r') && self.raw_string_ahead(2) => {
                    self.at += 2;
                    self.raw_string();
                    out.push(Tok::Other);
                }
                'b' if self.peek(1) == Some('\'') => {
                    self.at += 1;
                    self.char_or_lifetime();
                    out.push(Tok::Other);
                }
                '\'' => {
                    self.char_or_lifetime();
                    out.push(Tok::Other);
                }
                _ if c.is_ascii_digit() => {
                    while self.peek(0).is_some_and(|c| c.is_alphanumeric() || c == '_')
                        || (self.peek(0) == Some('.') && self.peek(1).is_some_and(|c| c.is_ascii_digit()))
                    {
                        self.at += 1;
                    }
                    out.push(Tok::Other);
                }
                _ if c.is_alphabetic() || c == '_' => {
                    let start = self.at;
                    // A raw identifier, r#name.
                    if c == 'r' && self.peek(1) == Some('#') {
                        self.at += 2;
                    }
                    let word_start = self.at;
                    while self.peek(0).is_some_and(|c| c.is_alphanumeric() || c == '_') {
                        self.at += 1;
                    }
                    if self.at == word_start {
                        self.at = start;
                        self.fail("a lone r#");
                    }
                    out.push(Tok::Ident(self.chars[word_start..self.at].iter().collect()));
                }
                _ => {
                    self.at += 1;
                    out.push(Tok::Punct(c));
                }
            }
        }
        if close.is_some() {
            self.fail("unclosed group");
        }
        out
    }

    fn block_comment(&mut self) {
        let mut depth = 0;
        loop {
            match (self.peek(0), self.peek(1)) {
                (Some('/'), Some('*')) => {
                    depth += 1;
                    self.at += 2;
                }
                (Some('*'), Some('/')) => {
                    depth -= 1;
                    self.at += 2;
                    if depth == 0 {
                        return;
                    }
                }
                (Some(_), _) => self.at += 1,
                (None, _) => self.fail("unclosed comment"),
            }
        }
    }

    /// Whether a raw string (`#`s, then `"`) starts `ahead` characters on.
    fn raw_string_ahead(&self, ahead: usize) -> bool {
        let mut i = ahead;
        while self.peek(i) == Some('#') {
            i += 1;
        }
        self.peek(i) == Some('"')
    }

    /// A raw string's value, from its `#`s on.
    fn raw_string(&mut self) -> String {
        let mut hashes = 0;
        while self.peek(0) == Some('#') {
            hashes += 1;
            self.at += 1;
        }
        self.at += 1; // the opening quote
        let start = self.at;
        loop {
            match self.peek(0) {
                None => self.fail("unclosed raw string"),
                Some('"') if (1..=hashes).all(|i| self.peek(i) == Some('#')) => {
                    let value = self.chars[start..self.at].iter().collect();
                    self.at += 1 + hashes;
                    return value;
                }
                Some(_) => self.at += 1,
            }
        }
    }

    /// A string's value, after its opening quote.
    fn string(&mut self) -> String {
        let mut value = String::new();
        loop {
            let Some(c) = self.peek(0) else { self.fail("unclosed string") };
            self.at += 1;
            match c {
                '"' => return value,
                '\\' => {
                    let Some(e) = self.peek(0) else { self.fail("unclosed string") };
                    self.at += 1;
                    match e {
                        'n' => value.push('\n'),
                        't' => value.push('\t'),
                        'r' => value.push('\r'),
                        '0' => value.push('\0'),
                        '\\' | '"' | '\'' => value.push(e),
                        // A line continuation: the newline and the spaces after it go.
                        '\n' => {
                            while self.peek(0).is_some_and(char::is_whitespace) {
                                self.at += 1;
                            }
                        }
                        'x' => {
                            let hex: String = self.chars[self.at..self.at + 2].iter().collect();
                            self.at += 2;
                            value.push(u8::from_str_radix(&hex, 16).unwrap_or_else(|_| self.fail("bad \\x")) as char);
                        }
                        'u' => {
                            let end = self.chars[self.at..].iter().position(|c| *c == '}').unwrap() + self.at;
                            let hex: String = self.chars[self.at + 1..end].iter().filter(|c| **c != '_').collect();
                            self.at = end + 1;
                            let code = u32::from_str_radix(&hex, 16).unwrap_or_else(|_| self.fail("bad \\u"));
                            value.push(char::from_u32(code).unwrap_or_else(|| self.fail("bad \\u")));
                        }
                        _ => self.fail(&format!("unknown escape \\{e}")),
                    }
                }
                _ => value.push(c),
            }
        }
    }

    /// A character literal ('x', '\n') or a lifetime ('a, '_), from its quote.
    fn char_or_lifetime(&mut self) {
        self.at += 1;
        if self.peek(0) == Some('\\') {
            while self.peek(0).is_some_and(|c| c != '\'') {
                self.at += if self.peek(0) == Some('\\') { 2 } else { 1 };
            }
            self.at += 1;
        } else if self.peek(1) == Some('\'') {
            self.at += 2;
        } else {
            while self.peek(0).is_some_and(|c| c.is_alphanumeric() || c == '_') {
                self.at += 1;
            }
        }
    }
}

fn lex(source: &str, file: &str) -> Vec<Tok> {
    Lexer { chars: source.chars().collect(), at: 0, file }.tokens(None)
}

/// One arm of a `macro_rules!`: what it matches, and what it expands to.
struct Arm {
    matcher: Vec<Tok>,
    body: Vec<Tok>,
}

/// A file's own `macro_rules!` macros that make strings, by name.
fn macros_of(tokens: &[Tok], file: &str) -> HashMap<String, Vec<Arm>> {
    let mut macros = HashMap::new();
    for window in tokens.windows(4) {
        if let [Tok::Ident(m), Tok::Punct('!'), Tok::Ident(name), Tok::Group(_, rules)] = window {
            if m != "macro_rules" {
                continue;
            }
            let mut arms = Vec::new();
            let mut rest = rules.as_slice();
            while !rest.is_empty() {
                match rest {
                    [Tok::Group(_, matcher), Tok::Punct('='), Tok::Punct('>'), Tok::Group(_, body), tail @ ..] => {
                        arms.push(Arm { matcher: matcher.clone(), body: body.clone() });
                        rest = tail.strip_prefix(&[Tok::Punct(';')]).unwrap_or(tail);
                    }
                    _ => panic!("{file}: cannot read the arms of macro_rules! {name}"),
                }
            }
            // Only macros that make a string (each arm one literal or one macro call) assemble statements;
            // the others (text_column! in types.rs) are read where they are used, as any code.
            let strings = arms.iter().all(|arm| {
                matches!(arm.body.as_slice(), [Tok::Str(_)] | [Tok::Ident(_), Tok::Punct('!'), Tok::Group(..)])
            });
            if strings {
                macros.insert(name.clone(), arms);
            }
        }
    }
    macros
}

/// Splits a macro's arguments at the commas between them (a trailing comma ends nothing).
fn split_commas(tokens: &[Tok]) -> Vec<&[Tok]> {
    let mut parts: Vec<&[Tok]> = tokens.split(|t| *t == Tok::Punct(',')).collect();
    if parts.last().is_some_and(|p| p.is_empty()) {
        parts.pop();
    }
    parts
}

/// Matches a macro invocation's tokens against an arm's matcher (fragments `literal`, `ident`, `expr`
/// and `tt`, no repetitions: what the store's macros use).
fn match_arm(matcher: &[Tok], input: &[Tok], bound: &mut HashMap<String, Vec<Tok>>) -> Result<bool, String> {
    let (mut m, mut i) = (0, 0);
    while m < matcher.len() {
        match &matcher[m..] {
            [Tok::Punct('$'), Tok::Ident(name), Tok::Punct(':'), Tok::Ident(fragment), ..] => {
                let taken = match fragment.as_str() {
                    "literal" => matches!(input.get(i), Some(Tok::Str(_) | Tok::Other)) as usize,
                    "ident" => matches!(input.get(i), Some(Tok::Ident(_))) as usize,
                    "tt" => (i < input.len()) as usize,
                    "expr" => input[i..].iter().position(|t| *t == Tok::Punct(',')).unwrap_or(input.len() - i),
                    other => return Err(format!("the fragment ${name}:{other} is not supported")),
                };
                if taken == 0 {
                    return Ok(false);
                }
                bound.insert(name.clone(), input[i..i + taken].to_vec());
                i += taken;
                m += 4;
            }
            [Tok::Punct('$'), Tok::Group(..), ..] => return Err("repetitions are not supported".into()),
            [Tok::Group(open, inner), ..] => {
                let Some(Tok::Group(given, args)) = input.get(i) else { return Ok(false) };
                if given != open || !match_arm(inner, args, bound)? {
                    return Ok(false);
                }
                i += 1;
                m += 1;
            }
            [token, ..] => {
                if input.get(i) != Some(token) {
                    return Ok(false);
                }
                i += 1;
                m += 1;
            }
            [] => unreachable!(),
        }
    }
    Ok(i == input.len())
}

fn transcribe(body: &[Tok], bound: &HashMap<String, Vec<Tok>>) -> Vec<Tok> {
    let mut out = Vec::new();
    let mut t = 0;
    while t < body.len() {
        match (&body[t], body.get(t + 1)) {
            (Tok::Punct('$'), Some(Tok::Ident(name))) if bound.contains_key(name) => {
                out.extend(bound[name].iter().cloned());
                t += 2;
            }
            (Tok::Group(open, inner), _) => {
                out.push(Tok::Group(*open, transcribe(inner, bound)));
                t += 1;
            }
            (token, _) => {
                out.push(token.clone());
                t += 1;
            }
        }
    }
    out
}

/// The text of a string expression: a literal, `concat!` of string expressions, or one of the file's
/// macros expanding to one. None: not a string expression.
fn evaluate(tokens: &[Tok], macros: &HashMap<String, Vec<Arm>>, file: &str) -> Option<String> {
    match tokens {
        [Tok::Str(text)] => Some(text.clone()),
        [Tok::Ident(name), Tok::Punct('!'), Tok::Group(_, args)] if name == "concat" => {
            let parts = split_commas(args).into_iter().map(|part| {
                evaluate(part, macros, file)
                    .unwrap_or_else(|| panic!("{file}: concat! of something other than strings: {part:?}"))
            });
            Some(parts.collect())
        }
        [Tok::Ident(name), Tok::Punct('!'), Tok::Group(_, args)] if macros.contains_key(name) => {
            for arm in &macros[name] {
                let mut bound = HashMap::new();
                match match_arm(&arm.matcher, args, &mut bound) {
                    Ok(true) => {
                        let expanded = transcribe(&arm.body, &bound);
                        return Some(
                            evaluate(&expanded, macros, file)
                                .unwrap_or_else(|| panic!("{file}: {name}! does not expand to a string: {expanded:?}")),
                        );
                    }
                    Ok(false) => {}
                    Err(why) => panic!("{file}: cannot expand {name}!: {why}"),
                }
            }
            panic!("{file}: no arm of {name}! matches {args:?}")
        }
        _ => None,
    }
}

/// A text found in the source, and whether it is a `format!` template.
#[derive(Clone, Debug)]
struct Found {
    text: String,
    template: bool,
}

fn scan(tokens: &[Tok], macros: &HashMap<String, Vec<Arm>>, file: &str, out: &mut Vec<Found>) {
    let mut i = 0;
    while i < tokens.len() {
        match &tokens[i..] {
            // Attributes (#[error("...")], #[doc]) hold no statement.
            [Tok::Punct('#'), Tok::Punct('!'), Tok::Group('[', _), ..] => i += 3,
            [Tok::Punct('#'), Tok::Group('[', _), ..] => i += 2,
            // Macros are read where they are used.
            [Tok::Ident(m), Tok::Punct('!'), Tok::Ident(_), Tok::Group(..), ..] if m == "macro_rules" => i += 4,
            [Tok::Ident(name), Tok::Punct('!'), Tok::Group(_, args), ..] => {
                if name == "format" {
                    // The template: a literal, or a `concat!` of them and of the file's macros.
                    let first = split_commas(args).first().copied().unwrap_or_default();
                    if let Some(template) = evaluate(first, macros, file) {
                        out.push(Found { text: template, template: true });
                        scan(&args[first.len()..], macros, file, out);
                    } else {
                        scan(args, macros, file, out);
                    }
                } else if let Some(text) = evaluate(&tokens[i..i + 3], macros, file) {
                    out.push(Found { text, template: false });
                } else {
                    scan(args, macros, file, out);
                }
                i += 3;
            }
            [Tok::Str(text), ..] => {
                out.push(Found { text: text.clone(), template: false });
                i += 1;
            }
            [Tok::Group(_, inner), ..] => {
                scan(inner, macros, file, out);
                i += 1;
            }
            _ => i += 1,
        }
    }
}

/// How a statement starts; strings that start otherwise are not statements.
const STATEMENT_STARTS: &[&str] = &["select", "with", "insert", "update", "delete", "vacuum", "analyze", "set"];

/// A statement of `src/store/`: where it is, its text, and its normal form.
#[derive(Debug)]
struct Statement {
    file: String,
    text: String,
    template: bool,
    normal: Vec<String>,
}

/// Every statement in `src/store/*.rs`, once per normal form.
fn store_statements() -> Vec<Statement> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("src/store");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|entry| entry.unwrap().path())
        .filter(|path| path.extension().is_some_and(|e| e == "rs"))
        .collect();
    files.sort();
    let mut seen = BTreeSet::new();
    let mut statements = Vec::new();
    for path in files {
        let file = format!("src/store/{}", path.file_name().unwrap().to_string_lossy());
        let tokens = lex(&std::fs::read_to_string(&path).unwrap(), &file);
        let macros = macros_of(&tokens, &file);
        let mut found = Vec::new();
        scan(&tokens, &macros, &file, &mut found);
        for Found { text, template } in found {
            let source = if template { fill_template(&text) } else { text.clone() };
            let normal = normalize(&source);
            if !normal.first().is_some_and(|word| STATEMENT_STARTS.contains(&word.as_str())) {
                continue;
            }
            if seen.insert(normal.clone()) {
                statements.push(Statement { file: file.clone(), text, template, normal });
            }
        }
    }
    statements
}

// ---------------------------------------------------------------------------------------------------
// SQL: the normal form.

/// Stands for a `{...}` of a `format!` template: any one word.
const ANY_WORD: &str = "\u{1}any";

/// A `format!` template with each `{...}` made `ANY_WORD` (and `{{`, `}}` made braces).
fn fill_template(template: &str) -> String {
    let mut out = String::new();
    let mut chars = template.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '{' if chars.peek() == Some(&'{') => {
                chars.next();
                out.push('{');
            }
            '}' if chars.peek() == Some(&'}') => {
                chars.next();
                out.push('}');
            }
            '{' => {
                for c in chars.by_ref() {
                    if c == '}' {
                        break;
                    }
                }
                out.push_str(ANY_WORD);
            }
            _ => out.push(c),
        }
    }
    out
}

/// A statement's words as `pg_stat_statements` and the source both have them: lowercase, without
/// comments, each constant (string, number, `true`, `false`, `null` but for `is [not] null`, a `$n`,
/// the field of `extract`) a `?`, a minus sign before a constant dropped (PostgreSQL folds it into the
/// constant), and no final semicolon.
fn normalize(sql: &str) -> Vec<String> {
    let chars: Vec<char> = sql.chars().collect();
    let mut words: Vec<String> = Vec::new();
    let constant = |words: &mut Vec<String>| {
        if words.last().is_some_and(|w| w == "-") {
            words.pop();
        }
        words.push("?".into());
    };
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        let next = chars.get(i + 1).copied();
        if c.is_whitespace() {
            i += 1;
        } else if c == '-' && next == Some('-') {
            while i < chars.len() && chars[i] != '\n' {
                i += 1;
            }
        } else if c == '/' && next == Some('*') {
            let mut depth = 0;
            while i < chars.len() {
                if chars[i] == '/' && chars.get(i + 1) == Some(&'*') {
                    depth += 1;
                    i += 2;
                } else if chars[i] == '*' && chars.get(i + 1) == Some(&'/') {
                    depth -= 1;
                    i += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    i += 1;
                }
            }
        } else if c == '\'' {
            i = skip_quoted(&chars, i, false);
            constant(&mut words);
        } else if c == '"' {
            let start = i;
            i += 1;
            while i < chars.len() && !(chars[i] == '"' && chars.get(i + 1) != Some(&'"')) {
                i += if chars[i] == '"' { 2 } else { 1 };
            }
            i += 1;
            words.push(chars[start..i.min(chars.len())].iter().collect::<String>().to_lowercase());
        } else if c == '$' && next.is_some_and(|n| n.is_ascii_digit()) {
            i += 1;
            while i < chars.len() && chars[i].is_ascii_digit() {
                i += 1;
            }
            constant(&mut words);
        } else if c == '$' {
            // A dollar-quoted string: $$...$$ or $tag$...$tag$.
            let tag_end = (i + 1..chars.len()).find(|&j| chars[j] == '$').unwrap_or(chars.len() - 1);
            let tag: String = chars[i..=tag_end].iter().collect();
            let body: String = chars[tag_end + 1..].iter().collect();
            i = tag_end + 1 + body.find(&tag).map_or(body.chars().count(), |at| body[..at].chars().count() + tag.len());
            constant(&mut words);
        } else if c.is_ascii_digit() || (c == '.' && next.is_some_and(|n| n.is_ascii_digit())) {
            while i < chars.len() && (chars[i].is_ascii_alphanumeric() || chars[i] == '.' || chars[i] == '_') {
                i += 1;
            }
            constant(&mut words);
        } else if c.is_alphabetic() || c == '_' || c == '\u{1}' {
            let start = i;
            while i < chars.len()
                && (chars[i].is_alphanumeric() || chars[i] == '_' || chars[i] == '$' || chars[i] == '\u{1}')
            {
                i += 1;
            }
            let word: String = chars[start..i].iter().collect::<String>().to_lowercase();
            if (word == "e" || word == "E") && chars.get(i) == Some(&'\'') {
                i = skip_quoted(&chars, i, true);
                constant(&mut words);
                continue;
            }
            let after_is = match words.as_slice() {
                [.., is] if is == "is" => true,
                [.., is, not] => is == "is" && not == "not",
                _ => false,
            };
            let extract_field = matches!(words.as_slice(), [.., extract, open] if extract == "extract" && open == "(");
            if (matches!(word.as_str(), "null" | "true" | "false") && !after_is) || extract_field {
                constant(&mut words);
            } else {
                words.push(word);
            }
        } else if c == ';' && chars[i + 1..].iter().all(|c| c.is_whitespace() || *c == ';') {
            break;
        } else {
            words.push(c.to_string());
            i += 1;
        }
    }
    words
}

/// The position after a quoted string that starts at `i` ('' doubles a quote; with `backslashes`, an
/// E'' string, \ escapes a character).
fn skip_quoted(chars: &[char], mut i: usize, backslashes: bool) -> usize {
    i += 1;
    while i < chars.len() {
        match chars[i] {
            '\\' if backslashes => i += 2,
            '\'' if chars.get(i + 1) == Some(&'\'') => i += 2,
            '\'' => return i + 1,
            _ => i += 1,
        }
    }
    i
}

/// Whether a template's normal form (with `ANY_WORD`s) matches a recorded statement's.
fn template_matches(template: &[String], recorded: &[String]) -> bool {
    template.len() == recorded.len() && template.iter().zip(recorded).all(|(t, r)| t == ANY_WORD || t == r)
}

// ---------------------------------------------------------------------------------------------------
// The audit.

/// Every statement of `src/store/` is in `pg_stat_statements` with at least one call: run by `make test`
/// after the suite, on the statistics reset before it.
#[tokio::test]
#[ignore = "run by `make test` after the suite (scripts/statement-audit.sh)"]
async fn every_store_statement_ran() {
    let url = std::env::var("DATABASE_URL").expect("DATABASE_URL: the test cluster the suite ran on");
    let pool = sqlx::postgres::PgPoolOptions::new().max_connections(1).connect(&url).await.unwrap();
    let loaded: String =
        sqlx::query_scalar("select current_setting('shared_preload_libraries')").fetch_one(&pool).await.unwrap();
    assert!(
        loaded.split(',').any(|l| l.trim() == "pg_stat_statements"),
        "the server at DATABASE_URL does not load pg_stat_statements (shared_preload_libraries = '{loaded}'); \
         scripts/pg.sh starts the test cluster with it"
    );
    sqlx::query("create extension if not exists pg_stat_statements").execute(&pool).await.unwrap();
    let recorded: Vec<Option<String>> =
        sqlx::query_scalar("select query from pg_stat_statements where calls > 0").fetch_all(&pool).await.unwrap();
    let (deallocated, since): (i64, chrono::DateTime<chrono::Utc>) =
        sqlx::query_as("select dealloc, stats_reset from pg_stat_statements_info").fetch_one(&pool).await.unwrap();
    let recorded: BTreeSet<Vec<String>> = recorded.iter().flatten().map(|q| normalize(q)).collect();

    let statements = store_statements();
    let missing: Vec<&Statement> = statements
        .iter()
        .filter(|s| {
            if s.template {
                !recorded.iter().any(|r| template_matches(&s.normal, r))
            } else {
                !recorded.contains(&s.normal)
            }
        })
        .collect();
    println!(
        "statement audit: {} of the {} statements of src/store/ ran since {since} ({} statements recorded)",
        statements.len() - missing.len(),
        statements.len(),
        recorded.len()
    );
    if !missing.is_empty() {
        let list: Vec<String> = missing
            .iter()
            .map(|s| format!("  {}: {}", s.file, s.text.split_whitespace().collect::<Vec<_>>().join(" ")))
            .collect();
        let evicted = if deallocated > 0 {
            format!(
                "\npg_stat_statements dropped entries {deallocated} times since its reset: raise \
                 pg_stat_statements.max in scripts/pg.sh, since a statement may have run and been forgotten."
            )
        } else {
            String::new()
        };
        panic!(
            "{} statements of src/store/ were not run by any test since the statistics were reset at {since}; \
             add a test that runs each (tests/api/statements.rs holds those the HTTP tests do not reach):\n{}{evicted}",
            missing.len(),
            list.join("\n")
        );
    }
}

// ---------------------------------------------------------------------------------------------------
// The reading of the source, and the normal form.

fn normal(sql: &str) -> String {
    normalize(sql).join(" ")
}

/// The statements `query!` checks are all found: each text in `.sqlx/` is one of the statements read.
#[test]
fn every_checked_statement_is_read_from_the_source() {
    let statements = store_statements();
    let read: BTreeSet<&Vec<String>> = statements.iter().map(|s| &s.normal).collect();
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join(".sqlx");
    let mut checked = 0;
    for entry in std::fs::read_dir(&dir).expect(".sqlx: the offline data of the checked statements") {
        let path = entry.unwrap().path();
        if path.extension().is_none_or(|e| e != "json") {
            continue;
        }
        let data: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
        let query = data["query"].as_str().unwrap();
        assert!(read.contains(&normalize(query)), "{} is not read from src/store/: {query}", path.display());
        checked += 1;
    }
    assert!(checked > 0, "no checked statements in .sqlx");
    assert!(statements.len() > checked, "the statements assembled at run time are read too");
}

/// The statements assembled by macros are expanded whole: none keeps a macro's `$name` (SQL's
/// parameters are `$1`, `$2`, ...).
#[test]
fn assembled_statements_are_expanded() {
    for s in store_statements() {
        let metavariable =
            s.text.as_bytes().windows(2).any(|w| w[0] == b'$' && (w[1].is_ascii_alphabetic() || w[1] == b'_'));
        assert!(!metavariable, "{}: a macro's variable left in {}", s.file, s.text);
    }
}

#[test]
fn source_is_read_as_rust_reads_it() {
    let source = r####"
        // "not a string" /* nor this */
        /* a block /* nested */ "nor this" */
        const A: &str = "with a as (\
                         select 1)";
        const B: &str = r#"select "x: Y" from t"#;
        fn f<'a>(c: char) -> &'a str { if c == '"' { "select '\"'" } else { b"x"; "update t" } }
        #[error("select nothing")]
        struct E;
        macro_rules! part {
            () => { "from t" };
            (plain, $x:literal, $y:expr) => { concat!("select ", $x, " ", part!(), " where ", $y) };
        }
        const C: &str = part!(plain, "a", "b");
        fn g(t: &str) -> String { format!("vacuum {t}") }
        fn h(t: &str) -> String { format!(concat!("analyze ", part!(), " {t}"), t = t) }
    "####;
    let tokens = lex(source, "test");
    let macros = macros_of(&tokens, "test");
    let mut found = Vec::new();
    scan(&tokens, &macros, "test", &mut found);
    let texts: Vec<(String, bool)> = found.into_iter().map(|f| (f.text, f.template)).collect();
    let expected = [
        ("with a as (select 1)", false),
        (r#"select "x: Y" from t"#, false),
        ("select '\"'", false),
        ("update t", false),
        ("select a from t where b", false),
        ("vacuum {t}", true),
        ("analyze from t {t}", true),
    ];
    assert_eq!(texts, expected.map(|(t, template)| (t.to_string(), template)));
}

/// The forms `pg_stat_statements` (PostgreSQL 15) recorded for these statements, as sent.
#[test]
fn normal_form_matches_what_pg_stat_statements_records() {
    let pairs = [
        (
            "select * from t where a < now() - interval '1 hour' and s = 'x' and b = true and id = -1",
            "select * from t where a < now() - interval $1 and s = $2 and b = $3 and id = $4",
        ),
        (
            "select * from t where a = '-infinity' and id in (1, -2) and s is null and b is not true order by 1 limit 5",
            "select * from t where a = $1 and id in ($2, $3) and s is null and b is not true order by 1 limit $4",
        ),
        ("select null::int4 as z, 0::int8, coalesce(id, 0) from t", "select $1::int4 as z, $2::int8, coalesce(id, $3) from t"),
        ("update t set s = null, a = 'infinity' where b", "update t set s = $1, a = $2 where b"),
        (
            "select ceil(extract(epoch from now()) * 1000)::int8, make_interval(secs => 5)",
            "select ceil(extract($1 from now()) * $2)::int8, make_interval(secs => $3)",
        ),
        (
            "select pg_notify('ch', 'x'), set_config('synchronous_commit', 'off', true)",
            "select pg_notify($1, $2), set_config($3, $4, $5)",
        ),
        ("select * from (values (1::int, -1), (2, 1)) q(a, b)", "select * from (values ($1::int, $2), ($3, $4)) q(a, b)"),
        ("select * from t where id = any('{1,2}') and s = E'a\\'b'", "select * from t where id = any($1) and s = $2"),
        ("select * from t where id = 3 -- comment\n and id = 4;", "select * from t where id = $1 -- comment\n and id = $2"),
        ("SELECT  x AS \"x: Y\"\n FROM t", "select x as \"x: Y\" from t"),
    ];
    for (sent, recorded) in pairs {
        assert_eq!(normal(sent), normal(recorded), "{sent}");
    }
    assert_ne!(normal("select a from t"), normal("select b from t"));
    assert_ne!(normal("select * from t where s is null"), normal("select * from t where s is $1"));
    let template = normalize(&fill_template("vacuum (skip_locked) {table}"));
    assert!(template_matches(&template, &normalize("vacuum (skip_locked) messages")));
    assert!(!template_matches(&template, &normalize("vacuum (skip_locked) messages, bodies")));
}
