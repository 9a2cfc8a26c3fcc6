//! Resource limits of the query language. The dissertation (§6.3.4) notes that "the only
//! necessary limit is the length of the expression"; we also bound nesting depth (so the
//! recursive parser and tree walks cannot overflow the stack) and the node count (so the
//! work per element and the size of generated code stay bounded).

/// Maximum expression length in bytes.
pub const MAX_EXPR_LEN: usize = 8192;
/// Maximum nesting: parentheses, function calls, unary minus, and depth of the syntax tree.
pub const MAX_DEPTH: usize = 128;
/// Maximum number of syntax-tree nodes.
pub const MAX_NODES: usize = 2048;
/// Exponents `n` with `|n| <= MAX_POWI` in `x^n` are strength-reduced to multiplications.
pub const MAX_POWI: i32 = 16;
