//! The one table printer of the benchmarks and reports: a header and rows of cells that must
//! have as many cells as the header (checked when a row is added), printed as a Markdown
//! table whose columns line up (so a report can be pasted into `BENCHMARKS.md` and parsed by
//! splitting on `|`).
//!
//! ```
//! use tessera_core::table::Table;
//! let mut t = Table::new(&["case", "ms"]);
//! t.row(vec!["bracket".into(), format!("{:.1}", 12.25)]).unwrap();
//! assert_eq!(t.markdown(), "| case    |   ms |\n|---------|-----:|\n| bracket | 12.2 |\n");
//! ```

/// A table with a fixed header.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Table {
    header: Vec<String>,
    rows: Vec<Vec<String>>,
    /// per column: right-aligned (numbers) or left-aligned (text, the first column)
    right: Vec<bool>,
}

/// A row whose cell count differs from the header's.
#[derive(Debug, PartialEq, Eq, thiserror::Error)]
#[error("a table row has {got} cells, the header has {expected}")]
pub struct RowLengthError {
    pub expected: usize,
    pub got: usize,
}

impl Table {
    /// A table with these column names; the first column is left-aligned, the others
    /// right-aligned.
    pub fn new(header: &[&str]) -> Self {
        Table {
            header: header.iter().map(|s| s.to_string()).collect(),
            rows: Vec::new(),
            right: (0..header.len()).map(|i| i > 0).collect(),
        }
    }

    /// Add a row; it must have one cell per column.
    pub fn row(&mut self, cells: Vec<String>) -> Result<(), RowLengthError> {
        if cells.len() != self.header.len() {
            return Err(RowLengthError {
                expected: self.header.len(),
                got: cells.len(),
            });
        }
        self.rows.push(cells);
        Ok(())
    }

    /// The column names.
    pub fn header(&self) -> &[String] {
        &self.header
    }

    /// The rows added so far.
    pub fn rows(&self) -> &[Vec<String>] {
        &self.rows
    }

    /// The table as Markdown with aligned columns (`|` inside cells is escaped).
    pub fn markdown(&self) -> String {
        let esc = |s: &str| s.replace('|', "\\|");
        let n = self.header.len();
        let mut width = vec![3usize; n];
        for r in std::iter::once(&self.header).chain(&self.rows) {
            for (i, c) in r.iter().enumerate() {
                width[i] = width[i].max(esc(c).chars().count());
            }
        }
        let line = |r: &Vec<String>| {
            let mut s = String::from("|");
            for (i, c) in r.iter().enumerate() {
                let c = esc(c);
                let pad = " ".repeat(width[i] - c.chars().count());
                if self.right[i] {
                    s.push_str(&format!(" {pad}{c} |"));
                } else {
                    s.push_str(&format!(" {c}{pad} |"));
                }
            }
            s.push('\n');
            s
        };
        let mut out = line(&self.header);
        out.push('|');
        for i in 0..n {
            if self.right[i] {
                out.push_str(&format!("{}:|", "-".repeat(width[i] + 1)));
            } else {
                out.push_str(&format!("{}|", "-".repeat(width[i] + 2)));
            }
        }
        out.push('\n');
        for r in &self.rows {
            out.push_str(&line(r));
        }
        out
    }
}

/// Cells of a Markdown table line (`| a | b |` -> `["a", "b"]`), for tests and tools that
/// read printed tables back (cells with an escaped `|` are not supported).
pub fn parse_markdown_row(line: &str) -> Option<Vec<String>> {
    let t = line.trim();
    let inner = t.strip_prefix('|')?.strip_suffix('|')?;
    Some(inner.split('|').map(|c| c.trim().to_string()).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rows_must_match_the_header_and_columns_line_up() {
        let mut t = Table::new(&["case", "load", "solve"]);
        t.row(vec!["a b".into(), "1.0".into(), "22.5".into()])
            .unwrap();
        assert_eq!(
            t.row(vec!["x".into()]),
            Err(RowLengthError {
                expected: 3,
                got: 1
            })
        );
        let md = t.markdown();
        let lines: Vec<&str> = md.lines().collect();
        assert_eq!(lines.len(), 3);
        let widths: Vec<usize> = lines.iter().map(|l| l.chars().count()).collect();
        assert!(widths.iter().all(|&w| w == widths[0]), "{md}");
        assert_eq!(
            parse_markdown_row(lines[2]).unwrap(),
            vec!["a b", "1.0", "22.5"]
        );
        assert_eq!(
            parse_markdown_row(lines[0]).unwrap(),
            vec!["case", "load", "solve"]
        );
    }
}
