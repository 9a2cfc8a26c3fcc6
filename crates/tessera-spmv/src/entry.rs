//! Compound entry specifications (dissertation §5.3.2): the fields of a matrix entry, the
//! (optionally separate) fields of a vector entry, the multiplicative operator
//! `matrix entry x vector entry -> vector entry`, the additive operator (componentwise) and
//! the zero entries.
//!
//! The multiplicative operator is stored as a bilinear form: output vector field `o` receives
//! `sum_t coef_t * a[field_a_t] * x[field_x_t]`. Every built-in entry (real, complex,
//! quaternion with the Hamilton product, dual quaternion, e x e blocks with e-vectors) is of
//! this form, and so is every user type given in TOML. The CPU reference and the CUDA code
//! generator both walk the same term list, so they perform the same operations in the same
//! order.

use std::path::Path;

use crate::error::{Result, SpmvError};
use crate::scalar::{Precision, Scalar};

/// One product term `coef * a.<a> * x.<x>` of the multiplicative operator.
#[derive(Clone, Debug, PartialEq)]
pub struct Term {
    /// Constant factor (usually +1 or -1).
    pub coef: f64,
    /// Index of the matrix entry field.
    pub a: usize,
    /// Index of the vector entry field.
    pub x: usize,
}

/// A compound entry definition (dissertation §5.3.2, "a list of identifiers with associated
/// types ... multiplicative and additive operator definitions along with the additive neutral
/// element (vector zero entry) and the matrix entry that results in it (matrix zero entry)").
///
/// All fields have the scalar type of the chosen [`Precision`] (`type = "real"` in TOML).
#[derive(Clone, Debug, PartialEq)]
pub struct EntrySpec {
    /// Name used in generated code comments, tuning keys and the CLI.
    pub name: String,
    /// Field names of a matrix entry, in storage order.
    pub matrix_fields: Vec<String>,
    /// Field names of a vector entry, in storage order.
    pub vector_fields: Vec<String>,
    /// Whether the vector entry is a separate type (false: same fields as the matrix entry).
    pub separate_vector: bool,
    /// Per vector field, the terms of `a * x` that contribute to it.
    pub multiply: Vec<Vec<Term>>,
    /// The vector zero entry (additive neutral element), one value per vector field.
    pub zero: Vec<f64>,
}

/// The built-in entry names accepted by [`EntrySpec::builtin`].
pub const BUILTIN_ENTRIES: &[&str] = &[
    "real",
    "complex",
    "quaternion",
    "dualquat",
    "block2",
    "block3",
    "block4",
    "block6",
];

const RESERVED: &[&str] = &[
    "a",
    "x",
    "y",
    "acc",
    "int",
    "float",
    "double",
    "char",
    "void",
    "unsigned",
    "signed",
    "long",
    "short",
    "const",
    "struct",
    "if",
    "else",
    "for",
    "while",
    "do",
    "return",
    "break",
    "continue",
    "switch",
    "case",
    "default",
    "static",
    "extern",
    "inline",
    "auto",
    "register",
    "volatile",
    "sizeof",
    "typedef",
    "union",
    "enum",
    "goto",
    "real",
    "class",
    "template",
    "typename",
    "namespace",
    "new",
    "delete",
    "this",
    "true",
    "false",
    "bool",
];

fn valid_ident(s: &str) -> bool {
    let mut ch = s.chars();
    match ch.next() {
        Some(c) if c.is_ascii_alphabetic() || c == '_' => {}
        _ => return false,
    }
    ch.all(|c| c.is_ascii_alphanumeric() || c == '_')
        && !RESERVED.contains(&s)
        && !s.starts_with("__")
}

impl EntrySpec {
    /// Builds and validates a spec from parts.
    pub fn new(
        name: &str,
        matrix_fields: Vec<String>,
        vector_fields: Option<Vec<String>>,
        multiply: Vec<Vec<Term>>,
        zero: Option<Vec<f64>>,
    ) -> Result<Self> {
        let err = |msg: String| SpmvError::EntrySpec {
            name: name.to_string(),
            msg,
        };
        if name.is_empty()
            || !name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
        {
            return Err(err(
                "name must consist of letters, digits, `_` and `-`".into()
            ));
        }
        let separate_vector = vector_fields.is_some();
        let vector_fields = vector_fields.unwrap_or_else(|| matrix_fields.clone());
        if matrix_fields.is_empty() || vector_fields.is_empty() {
            return Err(err("an entry needs at least one field".into()));
        }
        for (kind, fields) in [("matrix", &matrix_fields), ("vector", &vector_fields)] {
            for (i, f) in fields.iter().enumerate() {
                if !valid_ident(f) {
                    return Err(err(format!(
                        "{kind} field `{f}` is not a valid C identifier or is reserved"
                    )));
                }
                if fields[..i].contains(f) {
                    return Err(err(format!("{kind} field `{f}` appears twice")));
                }
            }
        }
        if multiply.len() != vector_fields.len() {
            return Err(err(format!(
                "multiply gives {} output fields, the vector entry has {}",
                multiply.len(),
                vector_fields.len()
            )));
        }
        for terms in &multiply {
            for t in terms {
                if t.a >= matrix_fields.len() || t.x >= vector_fields.len() || !t.coef.is_finite() {
                    return Err(err(format!("bad term {t:?}")));
                }
            }
        }
        let zero = zero.unwrap_or_else(|| vec![0.0; vector_fields.len()]);
        if zero.len() != vector_fields.len() || zero.iter().any(|z| !z.is_finite()) {
            return Err(err(
                "zero entry must give one finite value per vector field".into(),
            ));
        }
        Ok(EntrySpec {
            name: name.to_string(),
            matrix_fields,
            vector_fields,
            separate_vector,
            multiply,
            zero,
        })
    }

    /// A built-in entry type: `real`, `complex`, `quaternion` (Hamilton product, Eq. 5.2),
    /// `dualquat` (dual quaternion), `blockE` (E x E blocks acting on E-vectors, E in 1..=8).
    pub fn builtin(name: &str) -> Result<Self> {
        let s = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        let t = |coef: f64, a: usize, x: usize| Term { coef, a, x };
        match name {
            "real" => EntrySpec::new("real", s(&["v"]), None, vec![vec![t(1.0, 0, 0)]], None),
            "complex" => EntrySpec::new(
                "complex",
                s(&["re", "im"]),
                None,
                vec![
                    vec![t(1.0, 0, 0), t(-1.0, 1, 1)],
                    vec![t(1.0, 0, 1), t(1.0, 1, 0)],
                ],
                None,
            ),
            "quaternion" => EntrySpec::new(
                "quaternion",
                s(&["qw", "qx", "qy", "qz"]),
                None,
                hamilton(0, 0),
                None,
            ),
            "dualquat" => {
                // (a_r + eps a_d)(x_r + eps x_d) = a_r x_r + eps (a_r x_d + a_d x_r), eps^2 = 0
                let mut mul = hamilton(0, 0);
                let mut dual = hamilton(0, 4);
                for (o, terms) in hamilton(4, 0).into_iter().enumerate() {
                    dual[o].extend(terms);
                }
                mul.extend(dual);
                EntrySpec::new(
                    "dualquat",
                    s(&["rw", "rx", "ry", "rz", "dw", "dx", "dy", "dz"]),
                    None,
                    mul,
                    None,
                )
            }
            _ => {
                if let Some(e) = name
                    .strip_prefix("block")
                    .and_then(|e| e.parse::<usize>().ok())
                {
                    if (1..=8).contains(&e) {
                        return Ok(EntrySpec::block(e));
                    }
                }
                Err(SpmvError::BadOption {
                    what: "entry",
                    value: name.to_string(),
                    expected: "real, complex, quaternion, dualquat, blockE with E = 1..8 (block3 = 3x3 blocks), or a TOML file".into(),
                })
            }
        }
    }

    /// Dense `e x e` block entries (row-major fields `mIJ`) acting on `e`-vectors (`vI`).
    pub fn block(e: usize) -> Self {
        let mf = (0..e)
            .flat_map(|i| (0..e).map(move |j| format!("m{i}{j}")))
            .collect();
        let vf = (0..e).map(|i| format!("v{i}")).collect();
        let mul = (0..e)
            .map(|i| {
                (0..e)
                    .map(|j| Term {
                        coef: 1.0,
                        a: i * e + j,
                        x: j,
                    })
                    .collect()
            })
            .collect();
        EntrySpec::new(&format!("block{e}"), mf, Some(vf), mul, None).expect("block spec is valid")
    }

    /// Number of scalars in a matrix entry.
    pub fn matrix_len(&self) -> usize {
        self.matrix_fields.len()
    }
    /// Number of scalars in a vector entry.
    pub fn vector_len(&self) -> usize {
        self.vector_fields.len()
    }
    /// Bytes of one matrix entry.
    pub fn matrix_bytes(&self, p: Precision) -> usize {
        self.matrix_len() * p.bytes()
    }
    /// Bytes of one vector entry.
    pub fn vector_bytes(&self, p: Precision) -> usize {
        self.vector_len() * p.bytes()
    }
    /// Number of multiply-add operations per entry product (each term is one).
    pub fn flops_per_entry(&self) -> usize {
        2 * self.multiply.iter().map(|t| t.len()).sum::<usize>()
    }

    /// `acc += a * x` with the spec's multiplicative operator and componentwise addition.
    #[inline]
    pub fn mul_add<T: Scalar>(&self, a: &[T], x: &[T], acc: &mut [T]) {
        for (o, terms) in self.multiply.iter().enumerate() {
            let mut s = acc[o];
            for t in terms {
                let p = a[t.a] * x[t.x];
                s = if t.coef == 1.0 {
                    s + p
                } else if t.coef == -1.0 {
                    s - p
                } else {
                    s + T::from_f64(t.coef) * p
                };
            }
            acc[o] = s;
        }
    }

    /// `acc += |a| * |x|` term by term, in f64: the scale of the rounding error of `a * x`.
    #[inline]
    pub fn abs_mul_add<T: Scalar>(&self, a: &[T], x: &[T], acc: &mut [f64]) {
        for (o, terms) in self.multiply.iter().enumerate() {
            for t in terms {
                acc[o] += (t.coef * a[t.a].to_f64() * x[t.x].to_f64()).abs();
            }
        }
    }

    /// Reads a user entry type from a TOML spec file (see [`EntrySpec::from_toml_str`]).
    pub fn from_toml_file(path: &Path) -> Result<Self> {
        let bytes = crate::matrices::read_input(path)?;
        let text = String::from_utf8(bytes)
            .map_err(|_| SpmvError::io(path, std::io::Error::other("not UTF-8 text")))?;
        Self::from_toml_str(&text, &path.display().to_string())
    }

    /// Parses a user entry type:
    ///
    /// ```toml
    /// name = "mycomplex"
    /// [matrix]
    /// fields = [{ name = "re", type = "real" }, { name = "im", type = "real" }]
    /// # [vector] fields = [...]   optional separate vector entry
    /// [multiply]                 # one expression per vector field: sums of coef*a.F*x.G
    /// re = "a.re*x.re - a.im*x.im"
    /// im = "a.re*x.im + a.im*x.re"
    /// # [add] op = "componentwise"   (the only additive operator)
    /// # [zero] re = 0.0              optional vector zero entry
    /// ```
    /// `type` may be `real` or the precision name (`f32`, `f64`): all fields share the
    /// precision chosen at code generation.
    pub fn from_toml_str(text: &str, file: &str) -> Result<Self> {
        let terr = |msg: String| SpmvError::EntryToml {
            file: file.to_string(),
            msg,
        };
        let doc: TomlSpec =
            toml::from_str(text).map_err(|e| terr(e.to_string().replace('\n', " ")))?;
        let check_fields = |fs: &[TomlField]| -> Result<Vec<String>> {
            fs.iter()
                .map(|f| match f.ty.as_deref().unwrap_or("real") {
                    "real" | "f32" | "f64" | "float" | "double" => Ok(f.name.clone()),
                    other => Err(terr(format!(
                        "field `{}` has type `{other}`; expected real",
                        f.name
                    ))),
                })
                .collect()
        };
        let mf = check_fields(&doc.matrix.fields)?;
        let vf = doc
            .vector
            .as_ref()
            .map(|v| check_fields(&v.fields))
            .transpose()?;
        if let Some(add) = &doc.add {
            if add.op != "componentwise" {
                return Err(terr(format!(
                    "add.op `{}`: only `componentwise` is supported",
                    add.op
                )));
            }
        }
        let vfields = vf.clone().unwrap_or_else(|| mf.clone());
        for k in doc.multiply.keys() {
            if !vfields.contains(k) {
                return Err(terr(format!(
                    "[multiply] names `{k}`, which is not a vector field"
                )));
            }
        }
        let mut mul = Vec::new();
        for f in &vfields {
            let expr = doc.multiply.get(f).ok_or_else(|| {
                terr(format!(
                    "[multiply] has no expression for vector field `{f}`"
                ))
            })?;
            mul.push(
                parse_bilinear(expr, &mf, &vfields)
                    .map_err(|m| terr(format!("multiply.{f}: {m}")))?,
            );
        }
        let zero = match &doc.zero {
            None => None,
            Some(z) => {
                for k in z.keys() {
                    if !vfields.contains(k) {
                        return Err(terr(format!(
                            "[zero] names `{k}`, which is not a vector field"
                        )));
                    }
                }
                Some(
                    vfields
                        .iter()
                        .map(|f| z.get(f).copied().unwrap_or(0.0))
                        .collect(),
                )
            }
        };
        EntrySpec::new(&doc.name, mf, vf, mul, zero)
    }
}

/// Hamilton product terms (Eq. 5.2) of quaternion `a` at field offset `ao` times quaternion
/// `x` at field offset `xo`; fields are (w, x, y, z).
fn hamilton(ao: usize, xo: usize) -> Vec<Vec<Term>> {
    let t = |coef: f64, a: usize, x: usize| Term {
        coef,
        a: ao + a,
        x: xo + x,
    };
    vec![
        vec![t(1.0, 0, 0), t(-1.0, 1, 1), t(-1.0, 2, 2), t(-1.0, 3, 3)],
        vec![t(1.0, 0, 1), t(1.0, 1, 0), t(1.0, 2, 3), t(-1.0, 3, 2)],
        vec![t(1.0, 0, 2), t(-1.0, 1, 3), t(1.0, 2, 0), t(1.0, 3, 1)],
        vec![t(1.0, 0, 3), t(1.0, 1, 2), t(-1.0, 2, 1), t(1.0, 3, 0)],
    ]
}

#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct TomlField {
    name: String,
    #[serde(rename = "type")]
    ty: Option<String>,
}
#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct TomlFields {
    fields: Vec<TomlField>,
}
#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct TomlAdd {
    op: String,
}
#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct TomlSpec {
    name: String,
    matrix: TomlFields,
    vector: Option<TomlFields>,
    multiply: std::collections::BTreeMap<String, String>,
    add: Option<TomlAdd>,
    zero: Option<std::collections::BTreeMap<String, f64>>,
}

/// Parses `[+-] term ([+-] term)*` where a term is a `*`-product of numbers, exactly one
/// `a.FIELD` and exactly one `x.FIELD`.
fn parse_bilinear(
    expr: &str,
    mf: &[String],
    vf: &[String],
) -> std::result::Result<Vec<Term>, String> {
    let b = expr.as_bytes();
    let mut i = 0;
    let mut terms = Vec::new();
    let skip = |i: &mut usize| {
        while *i < b.len() && b[*i].is_ascii_whitespace() {
            *i += 1;
        }
    };
    loop {
        skip(&mut i);
        if i >= b.len() {
            if terms.is_empty() {
                return Err("empty expression".into());
            }
            return Ok(terms);
        }
        let mut coef = 1.0;
        if b[i] == b'+' || b[i] == b'-' {
            if b[i] == b'-' {
                coef = -1.0;
            }
            i += 1;
        } else if !terms.is_empty() {
            return Err(format!("expected + or - at column {}", i + 1));
        }
        let (mut a, mut x) = (None, None);
        loop {
            skip(&mut i);
            let start = i;
            if i < b.len() && (b[i].is_ascii_digit() || b[i] == b'.') {
                while i < b.len() && (b[i].is_ascii_digit() || matches!(b[i], b'.' | b'e' | b'E'))
                    || (i > start
                        && matches!(b[i - 1], b'e' | b'E')
                        && i < b.len()
                        && matches!(b[i], b'+' | b'-'))
                {
                    i += 1;
                }
                let v: f64 = expr[start..i]
                    .parse()
                    .map_err(|_| format!("bad number `{}`", &expr[start..i]))?;
                coef *= v;
            } else if i < b.len() && (b[i].is_ascii_alphabetic() || b[i] == b'_') {
                while i < b.len() && (b[i].is_ascii_alphanumeric() || b[i] == b'_' || b[i] == b'.')
                {
                    i += 1;
                }
                let word = &expr[start..i];
                let (obj, field) = word
                    .split_once('.')
                    .ok_or_else(|| format!("`{word}`: expected a.FIELD or x.FIELD"))?;
                match obj {
                    "a" => {
                        let k = mf
                            .iter()
                            .position(|f| f == field)
                            .ok_or_else(|| format!("unknown matrix field `{field}`"))?;
                        if a.replace(k).is_some() {
                            return Err(
                                "a term may use only one matrix field (the operator is bilinear)"
                                    .into(),
                            );
                        }
                    }
                    "x" => {
                        let k = vf
                            .iter()
                            .position(|f| f == field)
                            .ok_or_else(|| format!("unknown vector field `{field}`"))?;
                        if x.replace(k).is_some() {
                            return Err(
                                "a term may use only one vector field (the operator is bilinear)"
                                    .into(),
                            );
                        }
                    }
                    _ => return Err(format!("`{word}`: expected a.FIELD or x.FIELD")),
                }
            } else {
                return Err(format!("unexpected input at column {}", i + 1));
            }
            skip(&mut i);
            if i < b.len() && b[i] == b'*' {
                i += 1;
                continue;
            }
            break;
        }
        match (a, x) {
            (Some(a), Some(x)) => terms.push(Term { coef, a, x }),
            _ => return Err("every term needs one a.FIELD and one x.FIELD factor".into()),
        }
    }
}

/// Alignment of an AoS entry of `bytes` bytes: the largest power of two between 1 and 16 of
/// which the size is a multiple (dissertation §5.3.2).
pub fn aos_alignment(bytes: usize) -> usize {
    let mut a = 16;
    while a > 1 && bytes % a != 0 {
        a /= 2;
    }
    a
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn alignment_rule() {
        assert_eq!(aos_alignment(8), 8); // complex f32
        assert_eq!(aos_alignment(16), 16); // quaternion f32 / complex f64
        assert_eq!(aos_alignment(32), 16); // quaternion f64
        assert_eq!(aos_alignment(36), 4); // 3x3 f32
        assert_eq!(aos_alignment(72), 8); // 3x3 f64
        assert_eq!(aos_alignment(12), 4); // 3-vector f32
        assert_eq!(aos_alignment(24), 8); // 3-vector f64
        assert_eq!(aos_alignment(4), 4);
    }

    #[test]
    fn hamilton_units() {
        // i*j = k, j*k = i, k*i = j, i*i = -1
        let q = EntrySpec::builtin("quaternion").unwrap();
        let unit = |k: usize| {
            let mut v = [0.0f64; 4];
            v[k] = 1.0;
            v
        };
        let prod = |a: usize, b: usize| {
            let mut acc = [0.0; 4];
            q.mul_add(&unit(a), &unit(b), &mut acc);
            acc
        };
        assert_eq!(prod(1, 2), [0.0, 0.0, 0.0, 1.0]);
        assert_eq!(prod(2, 3), [0.0, 1.0, 0.0, 0.0]);
        assert_eq!(prod(3, 1), [0.0, 0.0, 1.0, 0.0]);
        assert_eq!(prod(1, 1), [-1.0, 0.0, 0.0, 0.0]);
        assert_eq!(prod(2, 1), [0.0, 0.0, 0.0, -1.0]);
    }

    #[test]
    fn toml_complex_equals_builtin() {
        let t = r#"
name = "complex"
[matrix]
fields = [{ name = "re", type = "real" }, { name = "im", type = "real" }]
[multiply]
re = "a.re*x.re - a.im*x.im"
im = "a.re * x.im + x.re*a.im"
"#;
        let e = EntrySpec::from_toml_str(t, "t.toml").unwrap();
        assert_eq!(e, EntrySpec::builtin("complex").unwrap());
    }

    #[test]
    fn toml_errors_are_reported() {
        let bad = [
            ("name = \"q\"\n[matrix]\nfields=[{name=\"re\"}]\n[multiply]\nre = \"a.re*a.re\"\n", "one matrix field"),
            ("name = \"q\"\n[matrix]\nfields=[{name=\"re\"}]\n[multiply]\nre = \"a.im*x.re\"\n", "unknown matrix field"),
            ("name = \"q\"\n[matrix]\nfields=[{name=\"re\"}]\n[multiply]\n", "no expression"),
            ("name = \"q\"\n[matrix]\nfields=[{name=\"re\", type=\"int\"}]\n[multiply]\nre=\"a.re*x.re\"\n", "type"),
            ("name = \"q\"\n[matrix]\nfields=[{name=\"re\"}]\n[multiply]\nre=\"2 * a.re*x.re\"\n[add]\nop=\"max\"\n", "componentwise"),
            ("name = \"q\"\n[matrix\n", "TOML"),
        ];
        for (text, want) in bad {
            let e = EntrySpec::from_toml_str(text, "bad.toml")
                .unwrap_err()
                .to_string();
            assert!(e.contains(want) && e.contains("bad.toml"), "{e}");
        }
        let ok = "name = \"scaled\"\n[matrix]\nfields=[{name=\"s\"}]\n[vector]\nfields=[{name=\"p\"},{name=\"q\"}]\n[multiply]\np=\"2.5*a.s*x.p\"\nq=\"-a.s*x.q*0.5\"\n";
        let e = EntrySpec::from_toml_str(ok, "ok.toml").unwrap();
        assert!(e.separate_vector);
        assert_eq!(
            e.multiply[0],
            vec![Term {
                coef: 2.5,
                a: 0,
                x: 0
            }]
        );
        assert_eq!(
            e.multiply[1],
            vec![Term {
                coef: -0.5,
                a: 0,
                x: 1
            }]
        );
    }
}
