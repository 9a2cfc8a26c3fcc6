//! Corpus of malformed inputs (issue 8): each gives a clear error with a span that lies in
//! the input, and nothing panics.

use tessera_query::limits::{MAX_DEPTH, MAX_EXPR_LEN, MAX_NODES};
use tessera_query::{Query, QueryError, Span};

const F: [&str; 3] = ["VelocityX", "VelocityY", "Pressure"];

fn err(src: &str) -> QueryError {
    match Query::compile(src, &F) {
        Ok(_) => panic!("`{}` should not compile", &src[..src.len().min(80)]),
        Err(e) => {
            let s = e.span().expect("expression errors carry a span");
            assert!(
                s.start <= s.end && s.end <= src.len(),
                "span {s:?} outside `{src}`"
            );
            let msg = e.to_string();
            assert!(!msg.contains('\n'), "one line: {msg}");
            e
        }
    }
}

#[test]
fn unbalanced_parentheses() {
    let e = err("(VelocityX + 1");
    assert!(
        matches!(
            e,
            QueryError::Syntax {
                span: Span { start: 14, end: 14 },
                ..
            }
        ),
        "{e}"
    );
    assert!(
        e.to_string()
            .contains("expected `)` to close the `(` at byte 0"),
        "{e}"
    );
    let e = err("VelocityX + 1)");
    assert!(e.to_string().contains("unbalanced `)`"), "{e}");
    assert_eq!(e.span(), Some(Span::new(13, 14)));
    err("((Pressure)");
    err(")(");
    err("sqrt(Pressure");
    err("min(Pressure, 1");
}

#[test]
fn unknown_names() {
    let e = err("sqrt(Vx^2 + VelocityY^2)");
    assert_eq!(e.span(), Some(Span::new(5, 7)));
    let m = e.to_string();
    assert!(
        m.contains("unknown field `Vx`") && m.contains("VelocityX, VelocityY, Pressure"),
        "{m}"
    );
    let e = err("foo(Pressure)");
    assert!(matches!(e, QueryError::UnknownFunction { .. }));
    assert!(
        e.to_string().contains("available functions: abs, sqrt"),
        "{e}"
    );
    assert_eq!(e.span(), Some(Span::new(0, 3)));
    let e = err("Pressure(1)");
    assert!(e.to_string().contains("fields are not functions"), "{e}");
    let e = err("sqrt + 1");
    assert!(
        e.to_string().contains("expected `(` after function `sqrt`"),
        "{e}"
    );
}

#[test]
fn wrong_argument_counts() {
    let e = err("atan2(Pressure)");
    assert!(
        matches!(
            e,
            QueryError::Arity {
                expected: 2,
                got: 1,
                ..
            }
        ),
        "{e}"
    );
    let e = err("select(1, 2)");
    assert!(e.to_string().contains("takes 3 argument(s), got 2"), "{e}");
    err("abs()");
    err("abs(1,)");
    err("clamp(1, 2, 3, 4)");
}

#[test]
fn huge_and_malformed_literals() {
    let e = err("1e999 + Pressure");
    assert!(
        matches!(
            e,
            QueryError::LiteralOutOfRange {
                span: Span { start: 0, end: 5 },
                ..
            }
        ),
        "{e}"
    );
    let big = "9".repeat(400);
    let e = err(&big);
    assert!(matches!(e, QueryError::LiteralOutOfRange { .. }), "{e}");
    let e = err("1e+ 2");
    assert!(e.to_string().contains("digits in the exponent"), "{e}");
    err("1.2.3");
    err("2x");
    // tiny literals underflow to zero, which is a valid value
    assert!(Query::compile(&format!("0.{}1", "0".repeat(400)), &F).is_ok());
}

#[test]
fn deep_nesting_is_refused_not_a_stack_overflow() {
    let deep = format!("{}Pressure{}", "(".repeat(4000), ")".repeat(4000));
    let e = err(&deep);
    assert!(
        matches!(e, QueryError::TooDeep { max: MAX_DEPTH, .. }),
        "{e}"
    );
    let minus = format!("{}Pressure", "-".repeat(5000));
    assert!(matches!(err(&minus), QueryError::TooDeep { .. }));
    let pow = vec!["1"; 3000].join("^");
    assert!(matches!(err(&pow), QueryError::TooDeep { .. }));
    let calls = format!("{}Pressure{}", "abs(".repeat(1000), ")".repeat(1000));
    assert!(matches!(err(&calls), QueryError::TooDeep { .. }));
    // a long flat sum builds a deep left-leaning tree: also bounded
    let sum = vec!["Pressure"; 500].join("+");
    assert!(matches!(err(&sum), QueryError::TooDeep { .. }));
    // but moderate nesting is fine
    let ok = format!(
        "{}Pressure{}",
        "(".repeat(MAX_DEPTH - 1),
        ")".repeat(MAX_DEPTH - 1)
    );
    assert!(Query::compile(&ok, &F).is_ok());
}

#[test]
fn limits_on_length_and_node_count() {
    let long = format!("Pressure{}", " ".repeat(MAX_EXPR_LEN));
    let e = err(&long);
    assert!(matches!(e, QueryError::TooLong { .. }), "{e}");
    assert!(e.to_string().contains(&format!("limit {MAX_EXPR_LEN}")));
    // many nodes in a balanced tree (depth stays small)
    fn balanced(d: u32) -> String {
        if d == 0 {
            "Pressure".into()
        } else {
            format!("({}+{})", balanced(d - 1), balanced(d - 1))
        }
    }
    let e = err(&balanced(11)); // 4095 nodes, about 8 KB
    assert!(
        matches!(
            e,
            QueryError::TooManyNodes { max: MAX_NODES, .. } | QueryError::TooLong { .. }
        ),
        "{e}"
    );
    // 40 products of 40 factors: about 3200 nodes in 3200 bytes, depth about 80
    let sum = vec![vec!["1"; 40].join("*"); 40].join("+");
    assert!(sum.len() < MAX_EXPR_LEN);
    let e = err(&sum);
    assert!(
        matches!(e, QueryError::TooManyNodes { max: MAX_NODES, .. }),
        "{e}"
    );
}

#[test]
fn junk_characters_and_empty_input() {
    let e = err("");
    assert!(e.to_string().contains("found end of input"), "{e}");
    let e = err("Pressure # 2");
    assert_eq!(e.span(), Some(Span::new(9, 10)));
    let e = err("Pressure + ü");
    assert_eq!(e.span(), Some(Span::new(11, 13)), "spans are byte offsets");
    err("Pressure = 1");
    err("Pressure ! 1");
    err("+");
    err("1 +");
    err("*2");
    err(",");
    err("min(,)");
    err("()");
}

#[test]
fn invalid_field_lists() {
    for f in [&["sin"][..], &["pi"], &["a b"], &["1x"], &[""], &["a", "a"]] {
        assert!(
            matches!(
                Query::compile("1", f),
                Err(QueryError::InvalidFieldName { .. })
            ),
            "{f:?}"
        );
    }
}

#[test]
fn evaluation_argument_errors() {
    let q = Query::compile("VelocityX + Pressure", &F).unwrap();
    let a = [1.0f32; 4];
    let mut o = [0.0f32; 4];
    assert!(matches!(
        q.eval_cpu(&[&a, &a], &mut o),
        Err(QueryError::FieldCount {
            expected: 3,
            got: 2
        })
    ));
    let short = [1.0f32; 3];
    assert!(matches!(
        q.eval_cpu(&[&a, &short, &a], &mut o),
        Err(QueryError::LengthMismatch { .. })
    ));
}
