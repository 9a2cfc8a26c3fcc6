//! Lexer and recursive-descent parser of the query language (dissertation §6.3.4).
//!
//! Grammar (lowest precedence first):
//! ```text
//! expr    := sum (('<' | '<=' | '>' | '>=' | '==' | '!=') sum)*
//! sum     := product (('+' | '-') product)*
//! product := unary (('*' | '/') unary)*
//! unary   := '-' unary | '+' unary | power
//! power   := primary ('^' unary)?            (right-associative; binds tighter than unary minus)
//! primary := NUMBER | IDENT | IDENT '(' expr (',' expr)* ')' | '(' expr ')'
//! ```
//! Errors carry the byte span and say what was expected. Limits: [`crate::limits`].

use crate::ast::{BinOp, Expr, ExprKind, Func, CONSTANT_NAMES, FUNCTION_NAMES};
use crate::error::{QueryError, Span};
use crate::limits::{MAX_DEPTH, MAX_EXPR_LEN, MAX_NODES};

#[derive(Clone, Copy, Debug, PartialEq)]
enum Tok {
    Num,
    Ident,
    Plus,
    Minus,
    Star,
    Slash,
    Caret,
    LParen,
    RParen,
    Comma,
    Lt,
    Le,
    Gt,
    Ge,
    EqEq,
    Ne,
    Eof,
}

#[derive(Clone, Copy, Debug)]
struct Token {
    tok: Tok,
    span: Span,
}

fn describe(src: &str, t: Token) -> String {
    match t.tok {
        Tok::Eof => "end of input".to_string(),
        _ => {
            let s = &src[t.span.start..t.span.end];
            let s: String = s.chars().take(40).collect();
            format!("`{s}`")
        }
    }
}

fn lex(src: &str) -> Result<Vec<Token>, QueryError> {
    let b = src.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < b.len() {
        let c = b[i];
        let start = i;
        if c.is_ascii_whitespace() {
            i += 1;
            continue;
        }
        let tok =
            if c.is_ascii_digit() || (c == b'.' && i + 1 < b.len() && b[i + 1].is_ascii_digit()) {
                while i < b.len() && b[i].is_ascii_digit() {
                    i += 1;
                }
                if i < b.len() && b[i] == b'.' {
                    i += 1;
                    while i < b.len() && b[i].is_ascii_digit() {
                        i += 1;
                    }
                }
                if i < b.len() && (b[i] == b'e' || b[i] == b'E') {
                    let mut j = i + 1;
                    if j < b.len() && (b[j] == b'+' || b[j] == b'-') {
                        j += 1;
                    }
                    if j < b.len() && b[j].is_ascii_digit() {
                        while j < b.len() && b[j].is_ascii_digit() {
                            j += 1;
                        }
                        i = j;
                    } else {
                        let found = match src[j..].chars().next() {
                            Some(ch) => format!("`{ch}`"),
                            None => "end of input".to_string(),
                        };
                        let end = j + src[j..].chars().next().map_or(0, |c| c.len_utf8());
                        return Err(QueryError::Syntax {
                            span: Span::new(start, end),
                            expected: "digits in the exponent of the number".into(),
                            found,
                        });
                    }
                }
                Tok::Num
            } else if c.is_ascii_alphabetic() || c == b'_' {
                while i < b.len() && (b[i].is_ascii_alphanumeric() || b[i] == b'_') {
                    i += 1;
                }
                Tok::Ident
            } else {
                let two = |n: u8| i + 1 < b.len() && b[i + 1] == n;
                let (t, len) = match c {
                    b'+' => (Tok::Plus, 1),
                    b'-' => (Tok::Minus, 1),
                    b'*' => (Tok::Star, 1),
                    b'/' => (Tok::Slash, 1),
                    b'^' => (Tok::Caret, 1),
                    b'(' => (Tok::LParen, 1),
                    b')' => (Tok::RParen, 1),
                    b',' => (Tok::Comma, 1),
                    b'<' if two(b'=') => (Tok::Le, 2),
                    b'<' => (Tok::Lt, 1),
                    b'>' if two(b'=') => (Tok::Ge, 2),
                    b'>' => (Tok::Gt, 1),
                    b'=' if two(b'=') => (Tok::EqEq, 2),
                    b'!' if two(b'=') => (Tok::Ne, 2),
                    _ => {
                        let ch = src[i..].chars().next().unwrap_or('?');
                        return Err(QueryError::Syntax {
                            span: Span::new(i, i + ch.len_utf8()),
                            expected: "a number, field, function, operator or parenthesis".into(),
                            found: format!("`{ch}`"),
                        });
                    }
                };
                i += len;
                t
            };
        out.push(Token {
            tok,
            span: Span::new(start, i),
        });
    }
    out.push(Token {
        tok: Tok::Eof,
        span: Span::new(b.len(), b.len()),
    });
    Ok(out)
}

/// Parses `src` against the caller's field names.
pub fn parse(src: &str, fields: &[&str]) -> Result<Expr, QueryError> {
    if src.len() > MAX_EXPR_LEN {
        return Err(QueryError::TooLong {
            span: Span::new(MAX_EXPR_LEN, src.len()),
            len: src.len(),
            max: MAX_EXPR_LEN,
        });
    }
    let toks = lex(src)?;
    let mut p = Parser {
        src,
        fields,
        toks,
        pos: 0,
        depth: 0,
        nodes: 0,
    };
    let e = p.expr()?;
    let t = p.peek();
    if t.tok != Tok::Eof {
        let expected = if t.tok == Tok::RParen {
            "end of input (unbalanced `)`)"
        } else {
            "an operator or end of input"
        };
        return Err(QueryError::Syntax {
            span: t.span,
            expected: expected.into(),
            found: describe(src, t),
        });
    }
    Ok(e)
}

struct Parser<'a> {
    src: &'a str,
    fields: &'a [&'a str],
    toks: Vec<Token>,
    pos: usize,
    depth: usize,
    nodes: usize,
}

impl<'a> Parser<'a> {
    fn peek(&self) -> Token {
        self.toks[self.pos]
    }
    fn bump(&mut self) -> Token {
        let t = self.toks[self.pos];
        if t.tok != Tok::Eof {
            self.pos += 1;
        }
        t
    }
    fn node(&mut self, kind: ExprKind, span: Span) -> Result<Expr, QueryError> {
        self.nodes += 1;
        if self.nodes > MAX_NODES {
            return Err(QueryError::TooManyNodes {
                span,
                max: MAX_NODES,
            });
        }
        let depth = 1 + match &kind {
            ExprKind::Num(_) | ExprKind::Field(_) => 0,
            ExprKind::Neg(a) => a.depth,
            ExprKind::Binary(_, a, b) => a.depth.max(b.depth),
            ExprKind::Call(_, args) => args.iter().map(|a| a.depth).max().unwrap_or(0),
        };
        Ok(Expr { kind, span, depth })
    }
    fn enter(&mut self, span: Span) -> Result<(), QueryError> {
        self.depth += 1;
        if self.depth > MAX_DEPTH {
            return Err(QueryError::TooDeep {
                span,
                max: MAX_DEPTH,
            });
        }
        Ok(())
    }
    fn binary(&mut self, op: BinOp, a: Expr, b: Expr) -> Result<Expr, QueryError> {
        let span = a.span.to(b.span);
        let e = self.node(ExprKind::Binary(op, Box::new(a), Box::new(b)), span)?;
        check_tree_depth(&e)?;
        Ok(e)
    }

    fn expr(&mut self) -> Result<Expr, QueryError> {
        let mut a = self.sum()?;
        loop {
            let op = match self.peek().tok {
                Tok::Lt => BinOp::Lt,
                Tok::Le => BinOp::Le,
                Tok::Gt => BinOp::Gt,
                Tok::Ge => BinOp::Ge,
                Tok::EqEq => BinOp::Eq,
                Tok::Ne => BinOp::Ne,
                _ => return Ok(a),
            };
            self.bump();
            let b = self.sum()?;
            a = self.binary(op, a, b)?;
        }
    }
    fn sum(&mut self) -> Result<Expr, QueryError> {
        let mut a = self.product()?;
        loop {
            let op = match self.peek().tok {
                Tok::Plus => BinOp::Add,
                Tok::Minus => BinOp::Sub,
                _ => return Ok(a),
            };
            self.bump();
            let b = self.product()?;
            a = self.binary(op, a, b)?;
        }
    }
    fn product(&mut self) -> Result<Expr, QueryError> {
        let mut a = self.unary()?;
        loop {
            let op = match self.peek().tok {
                Tok::Star => BinOp::Mul,
                Tok::Slash => BinOp::Div,
                _ => return Ok(a),
            };
            self.bump();
            let b = self.unary()?;
            a = self.binary(op, a, b)?;
        }
    }
    fn unary(&mut self) -> Result<Expr, QueryError> {
        let t = self.peek();
        match t.tok {
            Tok::Minus => {
                self.bump();
                self.enter(t.span)?;
                let a = self.unary()?;
                self.depth -= 1;
                let span = t.span.to(a.span);
                let e = self.node(ExprKind::Neg(Box::new(a)), span)?;
                check_tree_depth(&e)?;
                Ok(e)
            }
            Tok::Plus => {
                self.bump();
                self.enter(t.span)?;
                let a = self.unary();
                self.depth -= 1;
                a
            }
            _ => self.power(),
        }
    }
    fn power(&mut self) -> Result<Expr, QueryError> {
        let base = self.primary()?;
        let t = self.peek();
        if t.tok == Tok::Caret {
            self.bump();
            self.enter(t.span)?;
            let exp = self.unary()?;
            self.depth -= 1;
            return self.binary(BinOp::Pow, base, exp);
        }
        Ok(base)
    }
    fn primary(&mut self) -> Result<Expr, QueryError> {
        let t = self.bump();
        let text = &self.src[t.span.start..t.span.end];
        match t.tok {
            Tok::Num => {
                let v: f64 = text.parse().map_err(|_| QueryError::LiteralOutOfRange {
                    span: t.span,
                    text: text.into(),
                })?;
                if !v.is_finite() {
                    let shown: String = text.chars().take(40).collect();
                    return Err(QueryError::LiteralOutOfRange {
                        span: t.span,
                        text: shown,
                    });
                }
                self.node(ExprKind::Num(v), t.span)
            }
            Tok::LParen => {
                self.enter(t.span)?;
                let e = self.expr()?;
                self.depth -= 1;
                let c = self.bump();
                if c.tok != Tok::RParen {
                    return Err(QueryError::Syntax {
                        span: c.span,
                        expected: format!("`)` to close the `(` at byte {}", t.span.start),
                        found: describe(self.src, c),
                    });
                }
                Ok(e)
            }
            Tok::Ident => {
                if self.peek().tok == Tok::LParen {
                    let Some(f) = Func::from_name(text) else {
                        if self.fields.contains(&text) {
                            let l = self.peek();
                            return Err(QueryError::Syntax {
                                span: l.span,
                                expected: format!(
                                    "an operator after field `{text}` (fields are not functions)"
                                ),
                                found: "`(`".into(),
                            });
                        }
                        return Err(QueryError::UnknownFunction {
                            span: t.span,
                            name: text.into(),
                        });
                    };
                    self.bump();
                    self.enter(t.span)?;
                    let mut args = Vec::new();
                    loop {
                        args.push(self.expr()?);
                        let c = self.bump();
                        match c.tok {
                            Tok::Comma => continue,
                            Tok::RParen => break,
                            _ => {
                                return Err(QueryError::Syntax {
                                    span: c.span,
                                    expected: format!(
                                        "`,` or `)` in the arguments of `{}`",
                                        f.name()
                                    ),
                                    found: describe(self.src, c),
                                })
                            }
                        }
                    }
                    self.depth -= 1;
                    let span = t.span.to(self.toks[self.pos - 1].span);
                    if args.len() != f.arity() {
                        return Err(QueryError::Arity {
                            span,
                            name: f.name().into(),
                            expected: f.arity(),
                            got: args.len(),
                        });
                    }
                    let e = self.node(ExprKind::Call(f, args), span)?;
                    check_tree_depth(&e)?;
                    return Ok(e);
                }
                if let Some(i) = self.fields.iter().position(|f| *f == text) {
                    return self.node(ExprKind::Field(i), t.span);
                }
                match text {
                    "pi" => return self.node(ExprKind::Num(std::f64::consts::PI), t.span),
                    "e" => return self.node(ExprKind::Num(std::f64::consts::E), t.span),
                    _ => {}
                }
                if FUNCTION_NAMES.contains(&text) {
                    let n = self.peek();
                    return Err(QueryError::Syntax {
                        span: n.span,
                        expected: format!("`(` after function `{text}`"),
                        found: describe(self.src, n),
                    });
                }
                Err(QueryError::UnknownField {
                    span: t.span,
                    name: text.into(),
                    available: self.fields.iter().map(|s| s.to_string()).collect(),
                })
            }
            _ => Err(QueryError::Syntax {
                span: t.span,
                expected: "a number, field, function call or `(`".into(),
                found: describe(self.src, t),
            }),
        }
    }
}

/// Rejects a freshly built node whose syntax tree is deeper than [`MAX_DEPTH`] (its
/// children were checked when they were built, so this looks at one level only).
fn check_tree_depth(e: &Expr) -> Result<(), QueryError> {
    if e.depth as usize > MAX_DEPTH {
        return Err(QueryError::TooDeep {
            span: e.span,
            max: MAX_DEPTH,
        });
    }
    Ok(())
}

/// Checks that the caller's field names are usable identifiers, unique, and not reserved.
pub fn validate_fields(fields: &[&str]) -> Result<(), QueryError> {
    for (i, f) in fields.iter().enumerate() {
        let bad = |why| {
            Err(QueryError::InvalidFieldName {
                name: f.to_string(),
                why,
            })
        };
        let b = f.as_bytes();
        if b.is_empty() {
            return bad("empty name");
        }
        if !(b[0].is_ascii_alphabetic() || b[0] == b'_')
            || !b.iter().all(|c| c.is_ascii_alphanumeric() || *c == b'_')
        {
            return bad("must match [A-Za-z_][A-Za-z0-9_]*");
        }
        if FUNCTION_NAMES.contains(f) || CONSTANT_NAMES.contains(f) {
            return bad("reserved: a built-in function or constant has this name");
        }
        if fields[..i].contains(f) {
            return bad("given twice");
        }
    }
    Ok(())
}
