//! Gmsh MSH files: versions 2.2 and 4.1, ASCII and binary, read; 4.1 ASCII written.
//!
//! Volume elements become cells (types 4, 5, 6, 7 and their higher-order variants, read by
//! their corner nodes only); the writer keeps physical groups. Points, lines, triangles and quadrangles are not cells: they
//! only fill [`PhysicalGroup`](super::PhysicalGroup)s (dim 2 elements are mapped to the
//! mesh face with the same vertex set). Node tags may be non-contiguous and spread over
//! many entity blocks.

use super::text::{show, Cursor, TagMap};
use super::{
    fmt_f64, write_atomic, Build, Built, Collected, GroupElement, PhysicalGroup, ReadOptions,
};
use crate::{CellType, MeshError, PolyMesh};
use std::collections::HashMap;
use std::path::Path;
use tessera_sparse::tcsr::col;

/// (dimension, number of nodes, number of corner nodes, cell type for dim 3)
fn element_info(ty: i64) -> Option<(u8, usize, usize, Option<CellType>)> {
    use CellType::*;
    Some(match ty {
        15 => (0, 1, 1, None),
        1 => (1, 2, 2, None),
        8 => (1, 3, 2, None),
        26 => (1, 4, 2, None),
        27 => (1, 5, 2, None),
        28 => (1, 6, 2, None),
        2 => (2, 3, 3, None),
        9 => (2, 6, 3, None),
        20 => (2, 9, 3, None),
        21 => (2, 10, 3, None),
        22 => (2, 12, 3, None),
        23 => (2, 15, 3, None),
        24 => (2, 15, 3, None),
        25 => (2, 21, 3, None),
        3 => (2, 4, 4, None),
        10 => (2, 9, 4, None),
        16 => (2, 8, 4, None),
        4 => (3, 4, 4, Some(Tetrahedron)),
        11 => (3, 10, 4, Some(Tetrahedron)),
        29 => (3, 20, 4, Some(Tetrahedron)),
        30 => (3, 35, 4, Some(Tetrahedron)),
        31 => (3, 56, 4, Some(Tetrahedron)),
        5 => (3, 8, 8, Some(Hexahedron)),
        12 => (3, 27, 8, Some(Hexahedron)),
        17 => (3, 20, 8, Some(Hexahedron)),
        92 => (3, 64, 8, Some(Hexahedron)),
        93 => (3, 125, 8, Some(Hexahedron)),
        6 => (3, 6, 6, Some(Prism)),
        13 => (3, 18, 6, Some(Prism)),
        18 => (3, 15, 6, Some(Prism)),
        7 => (3, 5, 5, Some(Pyramid)),
        14 => (3, 14, 5, Some(Pyramid)),
        19 => (3, 13, 5, Some(Pyramid)),
        _ => return None,
    })
}

fn unknown_type(ty: i64) -> String {
    format!("unknown element type {ty} (known: Gmsh types 1-31, 92, 93)")
}

const MAX_COUNT: u64 = u32::MAX as u64 - 1;

struct State {
    binary: bool,
    size_t: usize,
    nodes: TagMap,
    have_nodes: bool,
    /// (dim, entity tag) -> physical tags (v4)
    entity_phys: HashMap<(u8, i32), Vec<i32>>,
    col: Collected,
}

/// Read an MSH 2.2 or 4.1 file into the representation `build` asks for.
pub(crate) fn read_as(
    path: &Path,
    data: &[u8],
    build: Build,
    opts: &ReadOptions,
) -> Result<Built, MeshError> {
    let mut c = Cursor::new(path, data);
    let first = c.expect_token("`$MeshFormat`")?;
    if first != b"$MeshFormat" {
        return Err(c.err(format!(
            "not a Gmsh MSH file: expected `$MeshFormat`, found `{}`",
            show(first)
        )));
    }
    let ver = c.expect_token("the MSH version")?;
    let v4 = match ver {
        b"4.1" => true,
        b"2.2" | b"2.1" | b"2" | b"2.0" => false,
        other => {
            return Err(c.err(format!(
                "unsupported MSH version `{}` (supported: 2.2 and 4.1)",
                show(other)
            )));
        }
    };
    let file_type = c.uint("the file type (0 ASCII, 1 binary)")?;
    let size_t = c.uint("the data size")? as usize;
    if file_type > 1 {
        return Err(c.err(format!(
            "file type must be 0 (ASCII) or 1 (binary), found {file_type}"
        )));
    }
    if size_t != 4 && size_t != 8 {
        return Err(c.err(format!("data size must be 4 or 8, found {size_t}")));
    }
    let binary = file_type == 1;
    if binary {
        c.end_of_line();
        c.binary = true;
        let one = c.bin_i32("the endianness check")?;
        if one != 1 {
            if one.swap_bytes() == 1 {
                c.swap = true;
            } else {
                return Err(c.err(format!("binary endianness check must be 1, found {one}")));
            }
        }
    }
    c.expect_keyword("$EndMeshFormat")?;
    let mut st = State {
        binary,
        size_t,
        nodes: TagMap::new(1, 0, 0),
        have_nodes: false,
        entity_phys: HashMap::new(),
        col: Collected::new(opts),
    };
    let mut saw_elements = false;
    // each of these sections may appear once: (name, location of its first appearance)
    let mut seen: Vec<(&[u8], u64)> = Vec::new();
    while let Some(tok) = c.token() {
        if matches!(
            tok,
            b"$MeshFormat" | b"$PhysicalNames" | b"$Entities" | b"$Nodes" | b"$Elements"
        ) {
            if let Some((_, first)) = seen.iter().find(|(n, _)| *n == tok) {
                return Err(c.err(format!(
                    "repeated `{}` section (the first one is at {})",
                    show(tok),
                    c.describe_loc(*first)
                )));
            }
            if tok == b"$MeshFormat" {
                return Err(c.err("repeated `$MeshFormat` section (the first one is at line 1)"));
            }
            seen.push((tok, c.location()));
        }
        match tok {
            b"$PhysicalNames" => physical_names(&mut c, &mut st)?,
            b"$Entities" if v4 => entities(&mut c, &mut st)?,
            b"$Nodes" => {
                if v4 {
                    nodes_v4(&mut c, &mut st)?
                } else {
                    nodes_v2(&mut c, &mut st)?
                }
                st.have_nodes = true;
            }
            b"$Elements" => {
                if !st.have_nodes {
                    return Err(c.err("`$Elements` before `$Nodes`"));
                }
                if v4 {
                    elements_v4(&mut c, &mut st)?
                } else {
                    elements_v2(&mut c, &mut st)?
                }
                saw_elements = true;
            }
            t if t.starts_with(b"$") && !t.starts_with(b"$End") => {
                // unknown or unused section ($PartitionedEntities, $Periodic, $NodeData, ...)
                let mut end = b"$End".to_vec();
                end.extend_from_slice(&t[1..]);
                c.skip_past(&end)?;
            }
            t => {
                return Err(c.err(format!(
                    "expected a section such as `$Nodes`, found `{}`",
                    show(t)
                )))
            }
        }
    }
    if !st.have_nodes || !saw_elements {
        return Err(c.err_here(format!(
            "missing `{}` section (the file is truncated)",
            if st.have_nodes { "$Elements" } else { "$Nodes" }
        )));
    }
    st.col.finish_as(&c, build)
}

fn section_end(c: &mut Cursor, name: &str) -> Result<(), MeshError> {
    let was_binary = c.binary;
    c.binary = false;
    let t = c.token();
    if t != Some(name.as_bytes()) {
        c.binary = was_binary;
        let found = t.map(show).unwrap_or_else(|| "the end of the file".into());
        return Err(c.err(format!("expected `{name}`, found `{found}` (a count in the section header does not match its data)")));
    }
    c.binary = was_binary;
    Ok(())
}

fn physical_names(c: &mut Cursor, st: &mut State) -> Result<(), MeshError> {
    let bin = c.binary;
    c.binary = false;
    let n = c.uint("the number of physical names")?;
    let n = c.check_count(n, Cursor::text_record(3), "the number of physical names")?;
    for _ in 0..n {
        let dim = c.uint("a physical group dimension")?;
        if dim > 3 {
            return Err(c.err(format!("physical group dimension must be 0-3, found {dim}")));
        }
        let tag = c.int32("a physical tag")?;
        let rest = c.rest_of_line();
        let name = if rest.first() == Some(&b'"') {
            let inner = &rest[1..];
            match inner.iter().position(|&ch| ch == b'"') {
                Some(e) => String::from_utf8_lossy(&inner[..e]).into_owned(),
                None => return Err(c.err("unterminated physical name (missing closing `\"`)")),
            }
        } else {
            String::from_utf8_lossy(rest).into_owned()
        };
        st.col.names.push(((dim as u8, tag), name));
    }
    section_end(c, "$EndPhysicalNames")?;
    c.binary = bin;
    Ok(())
}

fn entities(c: &mut Cursor, st: &mut State) -> Result<(), MeshError> {
    let s = st.size_t;
    if st.binary {
        c.end_of_line();
    }
    let mut counts = [0usize; 4];
    for (d, cnt) in counts.iter_mut().enumerate() {
        let what = [
            "the number of points",
            "the number of curves",
            "the number of surfaces",
            "the number of volumes",
        ][d];
        let n = if st.binary {
            c.bin_uint(s, what)?
        } else {
            c.uint(what)?
        };
        // a point: tag, 3 coordinates, a physical-tag count
        *cnt = c.check_count(
            n,
            if st.binary {
                28 + s as u64
            } else {
                Cursor::text_record(5)
            },
            what,
        )?;
    }
    for (d, &cnt) in counts.iter().enumerate() {
        for _ in 0..cnt {
            let tag = if st.binary {
                c.bin_i32("an entity tag")?
            } else {
                c.int32("an entity tag")?
            };
            let ncoord = if d == 0 { 3 } else { 6 };
            for _ in 0..ncoord {
                if st.binary {
                    c.bin_coord("an entity bounding box")?;
                } else {
                    c.coord("an entity coordinate")?;
                }
            }
            let nphys = if st.binary {
                c.bin_uint(s, "the number of physical tags")?
            } else {
                c.uint("the number of physical tags")?
            };
            let nphys = c.check_count(
                nphys,
                if st.binary { 4 } else { 2 },
                "the number of physical tags",
            )?;
            let mut phys = Vec::with_capacity(nphys);
            for _ in 0..nphys {
                phys.push(if st.binary {
                    c.bin_i32("a physical tag")?
                } else {
                    c.int32("a physical tag")?
                });
            }
            if !phys.is_empty() {
                st.entity_phys.insert((d as u8, tag), phys);
            }
            if d > 0 {
                let nb = if st.binary {
                    c.bin_uint(s, "the number of bounding entities")?
                } else {
                    c.uint("the number of bounding entities")?
                };
                let nb = c.check_count(
                    nb,
                    if st.binary { 4 } else { 2 },
                    "the number of bounding entities",
                )?;
                for _ in 0..nb {
                    if st.binary {
                        c.bin_i32("a bounding entity tag")?;
                    } else {
                        c.int32("a bounding entity tag")?;
                    }
                }
            }
        }
    }
    section_end(c, "$EndEntities")
}

fn push_node(c: &Cursor, st: &mut State, tag: u64, p: [f64; 3]) -> Result<(), MeshError> {
    if tag == 0 {
        return Err(c.err("node tag 0 is not allowed (Gmsh node tags start at 1)"));
    }
    let idx = st.col.nodes.len() as u32;
    if !st.nodes.insert(tag, idx) {
        return Err(c.err(format!("node tag {tag} appears twice")));
    }
    st.col.nodes.push(p);
    Ok(())
}

fn nodes_v2(c: &mut Cursor, st: &mut State) -> Result<(), MeshError> {
    c.binary = false;
    let n = c.count("the number of nodes", MAX_COUNT)?;
    if st.binary {
        c.end_of_line();
        c.binary = true; // binary files report byte offsets
    }
    // a node: tag and 3 coordinates (binary: a 4-byte tag and 3 doubles)
    let n = c.check_count(
        n as u64,
        if st.binary {
            28
        } else {
            Cursor::text_record(4)
        },
        "the number of nodes",
    )?;
    st.nodes = TagMap::new(1, n as u64, n);
    st.col.nodes.reserve(n);
    c.binary = st.binary;
    for _ in 0..n {
        let (tag, p) = if st.binary {
            let t = c.bin_i32("a node tag")?;
            if t <= 0 {
                return Err(c.err(format!(
                    "node tag {t} is not allowed (Gmsh node tags start at 1)"
                )));
            }
            let p = [c.bin_coord("x")?, c.bin_coord("y")?, c.bin_coord("z")?];
            (t as u64, p)
        } else {
            let t = c.uint("a node tag")?;
            (
                t,
                [
                    c.coord("x coordinate")?,
                    c.coord("y coordinate")?,
                    c.coord("z coordinate")?,
                ],
            )
        };
        push_node(c, st, tag, p)?;
    }
    section_end(c, "$EndNodes")
}

fn nodes_v4(c: &mut Cursor, st: &mut State) -> Result<(), MeshError> {
    let s = st.size_t;
    let bin = st.binary;
    if bin {
        c.end_of_line();
    }
    let rd = |c: &mut Cursor, what: &str| -> Result<u64, MeshError> {
        if bin {
            c.bin_uint(s, what)
        } else {
            c.uint(what)
        }
    };
    let nblocks = rd(c, "the number of node blocks")?;
    // a block header: 3 ints and a count
    c.check_count(
        nblocks,
        if bin {
            12 + s as u64
        } else {
            Cursor::text_record(4)
        },
        "the number of node blocks",
    )?;
    let n = rd(c, "the number of nodes")?;
    let header_loc = c.location();
    // a node: tag and 3 coordinates
    let n = c.check_count(
        n,
        if bin {
            s as u64 + 24
        } else {
            Cursor::text_record(4)
        },
        "the number of nodes",
    )? as u64;
    let min = rd(c, "the minimum node tag")?;
    let max = rd(c, "the maximum node tag")?;
    st.nodes = TagMap::new(min, max, n as usize);
    st.col.nodes.reserve(n as usize);
    let mut tags: Vec<u64> = Vec::new();
    let mut total = 0u64;
    for _ in 0..nblocks {
        let (dim, _tag, parametric, nn) = if bin {
            (
                c.bin_i32("an entity dimension")? as i64,
                c.bin_i32("an entity tag")?,
                c.bin_i32("the parametric flag")? as i64,
                c.bin_uint(s, "the number of nodes in the block")?,
            )
        } else {
            (
                c.int("an entity dimension")?,
                c.int32("an entity tag")?,
                c.int("the parametric flag")?,
                c.uint("the number of nodes in the block")?,
            )
        };
        let nn = c.check_count(
            nn,
            if bin {
                s as u64 + 24
            } else {
                Cursor::text_record(4)
            },
            "the number of nodes in the block",
        )? as u64;
        if !(0..=3).contains(&dim) {
            return Err(c.err(format!("entity dimension must be 0-3, found {dim}")));
        }
        total += nn;
        if total > n {
            return Err(c.err(format!(
                "node blocks hold more nodes than the {n} announced in the header"
            )));
        }
        let npar = if parametric != 0 { dim as usize } else { 0 };
        tags.clear();
        for _ in 0..nn {
            let t = rd(c, "a node tag")?;
            if t == 0 {
                return Err(c.err("node tag 0 is not allowed (Gmsh node tags start at 1)"));
            }
            tags.push(t);
        }
        for &t in &tags {
            let p = if bin {
                let p = [c.bin_coord("x")?, c.bin_coord("y")?, c.bin_coord("z")?];
                for _ in 0..npar {
                    c.bin_coord("a parametric coordinate")?;
                }
                p
            } else {
                let p = [
                    c.coord("x coordinate")?,
                    c.coord("y coordinate")?,
                    c.coord("z coordinate")?,
                ];
                for _ in 0..npar {
                    c.coord("a parametric coordinate")?;
                }
                p
            };
            push_node(c, st, t, p)?;
        }
    }
    if total != n {
        return Err(c.err_at(
            header_loc,
            format!("the header announces {n} nodes but the blocks hold {total}"),
        ));
    }
    section_end(c, "$EndNodes")
}

/// Record one element: a cell for dim 3, a group element otherwise.
fn element(
    c: &Cursor,
    st: &mut State,
    ty: i64,
    tag: u64,
    node_tags: &[u64],
    phys: &[i32],
    loc: u64,
) -> Result<(), MeshError> {
    let (dim, _n, corners, cell) =
        element_info(ty).ok_or_else(|| c.err_at(loc, unknown_type(ty)))?;
    let mut idx = [0u32; 8];
    for (i, &t) in node_tags[..corners].iter().enumerate() {
        idx[i] = st.nodes.get(t).ok_or_else(|| {
            c.err_at(
                loc,
                format!("element {tag} references node {t}, which is not in `$Nodes`"),
            )
        })?;
    }
    // higher-order nodes must exist too
    for &t in &node_tags[corners..] {
        if st.nodes.get(t).is_none() {
            return Err(c.err_at(
                loc,
                format!("element {tag} references node {t}, which is not in `$Nodes`"),
            ));
        }
    }
    if let Some(ty) = cell {
        let ci = st.col.add_cell(ty, &idx[..corners], loc);
        for &p in phys {
            st.col.cell_groups.push((p, ci));
        }
    } else {
        for &p in phys {
            let mut verts = [0u32; 4];
            verts[..corners].copy_from_slice(&idx[..corners]);
            st.col.group_elems.push(GroupElement {
                dim,
                tag: p,
                verts,
                n: corners as u8,
                loc,
            });
        }
    }
    Ok(())
}

fn elements_v2(c: &mut Cursor, st: &mut State) -> Result<(), MeshError> {
    c.binary = false;
    let n = c.count("the number of elements", MAX_COUNT)?;
    let mut nodes: Vec<u64> = Vec::with_capacity(128);
    if st.binary {
        c.end_of_line();
        c.binary = true; // binary files report byte offsets
    }
    // an element: tag, type, tag count and a node (binary: a tag and a node, 4 bytes each)
    let n = c.check_count(
        n as u64,
        if st.binary { 8 } else { Cursor::text_record(4) },
        "the number of elements",
    )?;
    if st.binary {
        c.binary = true;
        let mut done = 0usize;
        while done < n {
            let ty = c.bin_i32("an element type")? as i64;
            let hloc = c.location();
            let follow = c.bin_i32("the number of elements following")?;
            let ntags = c.bin_i32("the number of tags")?;
            if follow <= 0 || follow as usize > n - done || !(0..=1024).contains(&ntags) {
                return Err(c.err_at(
                    hloc,
                    format!("bad element block header (count {follow}, tags {ntags})"),
                ));
            }
            let (_, nn, _, _) = element_info(ty).ok_or_else(|| c.err_at(hloc, unknown_type(ty)))?;
            for _ in 0..follow {
                let tag = c.bin_i32("an element tag")?;
                let loc = c.location();
                let mut phys = None;
                for k in 0..ntags {
                    let t = c.bin_i32("an element tag")?;
                    if k == 0 && t != 0 {
                        phys = Some(t);
                    }
                }
                nodes.clear();
                for _ in 0..nn {
                    let v = c.bin_i32("a node tag")?;
                    if v <= 0 {
                        return Err(c.err(format!(
                            "element {tag} references node {v}: node tags start at 1"
                        )));
                    }
                    nodes.push(v as u64);
                }
                let ph: &[i32] = match &phys {
                    Some(p) => std::slice::from_ref(p),
                    None => &[],
                };
                element(c, st, ty, tag as u64, &nodes, ph, loc)?;
            }
            done += follow as usize;
        }
    } else {
        for _ in 0..n {
            let tag = c.uint("an element tag")?;
            let loc = c.location();
            let ty = c.int("an element type")?;
            let (_, nn, _, _) = element_info(ty).ok_or_else(|| c.err(unknown_type(ty)))?;
            let ntags = c.uint("the number of element tags")?;
            if ntags > 1024 {
                return Err(c.err(format!("element {tag} has {ntags} tags")));
            }
            let mut phys = None;
            for k in 0..ntags {
                let t = c.int32("an element tag")?;
                if k == 0 && t != 0 {
                    phys = Some(t);
                }
            }
            nodes.clear();
            for _ in 0..nn {
                nodes.push(c.uint("a node tag")?);
            }
            let ph: &[i32] = match &phys {
                Some(p) => std::slice::from_ref(p),
                None => &[],
            };
            element(c, st, ty, tag, &nodes, ph, loc)?;
        }
    }
    section_end(c, "$EndElements")
}

fn elements_v4(c: &mut Cursor, st: &mut State) -> Result<(), MeshError> {
    let s = st.size_t;
    let bin = st.binary;
    if bin {
        c.end_of_line();
    }
    let rd = |c: &mut Cursor, what: &str| -> Result<u64, MeshError> {
        if bin {
            c.bin_uint(s, what)
        } else {
            c.uint(what)
        }
    };
    let nblocks = rd(c, "the number of element blocks")?;
    let n = rd(c, "the number of elements")?;
    rd(c, "the minimum element tag")?;
    rd(c, "the maximum element tag")?;
    let header_loc = c.location();
    if n > MAX_COUNT || nblocks > MAX_COUNT {
        return Err(c.err(format!("element count {n} is too large")));
    }
    // an element: a tag and a node; a block header: 3 ints and a count
    c.check_count(
        n,
        if bin {
            2 * s as u64
        } else {
            Cursor::text_record(2)
        },
        "the number of elements",
    )?;
    c.check_count(
        nblocks,
        if bin {
            12 + s as u64
        } else {
            Cursor::text_record(4)
        },
        "the number of element blocks",
    )?;
    let mut nodes: Vec<u64> = Vec::with_capacity(128);
    let mut total = 0u64;
    let no_phys: Vec<i32> = Vec::new();
    for _ in 0..nblocks {
        let (dim, etag, ty, ne) = if bin {
            (
                c.bin_i32("an entity dimension")? as i64,
                c.bin_i32("an entity tag")?,
                c.bin_i32("an element type")? as i64,
                c.bin_uint(s, "the number of elements in the block")?,
            )
        } else {
            (
                c.int("an entity dimension")?,
                c.int32("an entity tag")?,
                c.int("an element type")?,
                c.uint("the number of elements in the block")?,
            )
        };
        let hloc = c.location();
        let (tdim, nn, _, _) = element_info(ty).ok_or_else(|| c.err_at(hloc, unknown_type(ty)))?;
        // each element of the block: a tag and `nn` node tags
        let ne = c.check_count(
            ne,
            if bin {
                (nn as u64 + 1) * s as u64
            } else {
                Cursor::text_record(nn as u64 + 1)
            },
            "the number of elements in the block",
        )? as u64;
        if dim != tdim as i64 {
            return Err(c.err_at(hloc, format!("element type {ty} has dimension {tdim}, but the block's entity has dimension {dim}")));
        }
        total += ne;
        if total > n {
            return Err(c.err_at(
                hloc,
                format!("element blocks hold more elements than the {n} announced in the header"),
            ));
        }
        let phys = st
            .entity_phys
            .get(&(dim as u8, etag))
            .cloned()
            .unwrap_or_else(|| no_phys.clone());
        if !bin
            && ne >= PARALLEL_MIN_LINES
            && elements_block_parallel(c, st, ty, nn, ne as usize, &phys)
        {
            continue;
        }
        for _ in 0..ne {
            let tag = rd(c, "an element tag")?;
            let loc = c.location();
            nodes.clear();
            for _ in 0..nn {
                nodes.push(rd(c, "a node tag")?);
            }
            element(c, st, ty, tag, &nodes, &phys, loc)?;
        }
    }
    if total != n {
        return Err(c.err_at(
            header_loc,
            format!("the header announces {n} elements but the blocks hold {total}"),
        ));
    }
    section_end(c, "$EndElements")
}

/// Element blocks of at least this many lines are parsed in parallel (ASCII MSH 4.1).
const PARALLEL_MIN_LINES: u64 = 1 << 15;

/// Line starts of the `n` lines after the cursor's current line (which must hold only
/// whitespace after the cursor), and the offset just past the last of them.
fn next_lines(c: &Cursor, n: usize) -> Option<(Vec<usize>, usize)> {
    let d = c.data;
    let mut p = c.pos;
    while p < d.len() && matches!(d[p], b' ' | b'\t' | b'\r') {
        p += 1;
    }
    if p >= d.len() || d[p] != b'\n' {
        return None;
    }
    p += 1;
    let mut starts = Vec::with_capacity(n + 1);
    for _ in 0..n {
        starts.push(p);
        p += memchr::memchr(b'\n', &d[p..])? + 1;
    }
    starts.push(p);
    Some((starts, p))
}

/// Parse a line of exactly `out.len()` non-negative integers.
fn line_uints(line: &[u8], out: &mut [u64]) -> bool {
    let mut k = 0;
    let mut i = 0;
    let n = line.len();
    while i < n {
        let b = line[i];
        if b == b' ' || b == b'\t' || b == b'\r' || b == b'\n' {
            i += 1;
            continue;
        }
        if k == out.len() {
            return false;
        }
        let mut v: u64 = 0;
        let st = i;
        while i < n && line[i].is_ascii_digit() {
            v = v * 10 + (line[i] - b'0') as u64;
            i += 1;
        }
        if i == st || i - st > 19 || (i < n && !matches!(line[i], b' ' | b'\t' | b'\r' | b'\n')) {
            return false;
        }
        out[k] = v;
        k += 1;
    }
    k == out.len()
}

/// The fast path of an ASCII element block: when every one of its `ne` lines holds exactly
/// an element tag and `nn` node tags that all exist, the lines are parsed in parallel and
/// the elements recorded in file order (with their line numbers); returns true. Anything
/// else returns false with nothing recorded, and the caller parses the block token by
/// token, which reports the exact error.
fn elements_block_parallel(
    c: &mut Cursor,
    st: &mut State,
    ty: i64,
    nn: usize,
    ne: usize,
    phys: &[i32],
) -> bool {
    use rayon::prelude::*;
    let Some((dim, _, corners, cell)) = element_info(ty) else {
        return false;
    };
    if nn > 64 || corners > 8 {
        return false;
    }
    let Some((starts, end)) = next_lines(c, ne) else {
        return false;
    };
    let d = c.data;
    let nodes = &st.nodes;
    // corner node indices, `corners` per element
    let mut idx = vec![0u32; ne * corners];
    let ok = idx
        .par_chunks_mut(corners)
        .enumerate()
        .with_min_len(4096)
        .all(|(e, out)| {
            let mut v = [0u64; 65];
            let line = &d[starts[e]..starts[e + 1]];
            if !line_uints(line, &mut v[..nn + 1]) {
                return false;
            }
            for (k, &t) in v[1..nn + 1].iter().enumerate() {
                match nodes.get(t) {
                    Some(i) if k < corners => out[k] = i,
                    Some(_) => {}
                    None => return false,
                }
            }
            true
        });
    if !ok {
        return false;
    }
    let first_line = c.line as u64 + 1;
    if let Some(ty) = cell {
        let col = &mut st.col;
        let c0 = col.cell_types.len() as u32;
        col.cell_types.extend(std::iter::repeat_n(ty, ne));
        col.cell_nodes.extend_from_slice(&idx);
        col.cell_loc.extend((0..ne as u64).map(|i| first_line + i));
        for &p in phys {
            col.cell_groups.extend((0..ne as u32).map(|i| (p, c0 + i)));
        }
    } else {
        for &p in phys {
            for e in 0..ne {
                let mut verts = [0u32; 4];
                let n = corners.min(4);
                verts[..n].copy_from_slice(&idx[e * corners..e * corners + n]);
                st.col.group_elems.push(GroupElement {
                    dim,
                    tag: p,
                    verts,
                    n: n as u8,
                    loc: first_line + e as u64,
                });
            }
        }
    }
    c.pos = end;
    c.line += ne + 1;
    c.tok_line = c.line;
    true
}

/// Gmsh type of a standard cell.
fn gmsh_type(ty: CellType) -> u32 {
    match ty {
        CellType::Tetrahedron => 4,
        CellType::Hexahedron => 5,
        CellType::Prism => 6,
        CellType::Pyramid => 7,
        CellType::Polyhedron => 0,
    }
}

/// Write MSH 4.1 ASCII: nodes `1..V`, elements `1..C` in cell order (one element block per
/// run of equal type). General polyhedra have no MSH element type.
pub fn write(mesh: &PolyMesh, path: &Path) -> Result<(), MeshError> {
    write_groups(mesh, &[], path)
}

/// Write MSH 4.1 ASCII with physical groups: `$PhysicalNames` for the named groups, one
/// model entity per distinct set of physical tags in each dimension (cells of no volume group
/// in an entity without tags), and the faces, edges and vertices of lower-dimensional groups
/// as triangles or quadrangles, lines and points of the entities of their dimension (after
/// the cells, so element `c + 1` is cell `c`).
pub fn write_groups(
    mesh: &PolyMesh,
    groups: &[PhysicalGroup],
    path: &Path,
) -> Result<(), MeshError> {
    use std::collections::BTreeMap;
    let nc = mesh.num_cells();
    let mut types = Vec::with_capacity(nc);
    let mut conn: Vec<u32> = Vec::with_capacity(nc * 4);
    let mut buf = [0u32; 8];
    for c in 0..nc {
        let ty = super::typed_cell_vertices(mesh, c, &mut buf).ok_or_else(|| {
            MeshError::Unsupported(format!(
                "{}: cell {c} is a general polyhedron, which MSH cannot store (write .vtu or .ovm instead)",
                path.display()
            ))
        })?;
        types.push(ty);
        conn.extend_from_slice(&buf[..ty.num_vertices().expect("standard")]);
    }
    let limit = |d: u8| match d {
        3 => nc,
        2 => mesh.num_faces(),
        1 => mesh.num_edges(),
        _ => mesh.num_vertices(),
    };
    // per dimension: element -> its physical tags (in group order, groups sorted by tag)
    let mut tags: [BTreeMap<u32, Vec<i32>>; 4] = Default::default();
    for g in groups {
        let d = g.dim.min(3);
        for &e in &g.entities {
            if e as usize >= limit(d) {
                return Err(MeshError::Unsupported(format!(
                    "{}: group ({}, {}) names entity {e}, but the mesh has {} of dimension {d}",
                    path.display(),
                    g.dim,
                    g.tag,
                    limit(d)
                )));
            }
            let t = tags[d as usize].entry(e).or_default();
            if !t.contains(&g.tag) {
                t.push(g.tag);
            }
        }
    }
    // model entities: per dimension, one per distinct tag set (first seen first)
    let mut entities: [Vec<Vec<i32>>; 4] = Default::default();
    let mut entity_of = |d: usize, set: &[i32]| -> usize {
        match entities[d].iter().position(|s| s == set) {
            Some(i) => i + 1,
            None => {
                entities[d].push(set.to_vec());
                entities[d].len()
            }
        }
    };
    let no_tags: Vec<i32> = Vec::new();
    // volume blocks: runs of equal (entity, type) in cell order
    let mut runs: Vec<(usize, CellType, usize, usize)> = Vec::new();
    for (c, &t) in types.iter().enumerate() {
        let e = entity_of(3, tags[3].get(&(c as u32)).unwrap_or(&no_tags));
        match runs.last_mut() {
            Some(r) if r.0 == e && r.1 == t => r.3 = c + 1,
            _ => runs.push((e, t, c, c + 1)),
        }
    }
    // lower-dimensional blocks: (dim, entity, gmsh type) -> elements as vertex lists
    let fv = mesh.face_vertices();
    let mut blocks: BTreeMap<(usize, usize, u32), Vec<Vec<u32>>> = BTreeMap::new();
    for d in (0..3).rev() {
        for (&e, set) in &tags[d] {
            let verts: Vec<u32> = match d {
                2 => fv.row(e as usize).iter().map(|&v| col(v)).collect(),
                1 => mesh.edge_vertices()[e as usize].to_vec(),
                _ => vec![e],
            };
            let ty = match (d, verts.len()) {
                (2, 3) => 2,
                (2, 4) => 3,
                (2, n) => {
                    return Err(MeshError::Unsupported(format!(
                        "{}: face {e} of a physical group has {n} vertices; MSH stores triangles and quadrangles (write .vtu instead)",
                        path.display()
                    )))
                }
                (1, _) => 1,
                _ => 15,
            };
            let ent = entity_of(d, set);
            blocks.entry((d, ent, ty)).or_default().push(verts);
        }
    }
    // the nodes belong to volume entity 1, which exists even without cells
    if entities[3].is_empty() {
        entities[3].push(Vec::new());
    }
    let n_lower: usize = blocks.values().map(|v| v.len()).sum();
    let n_elem = nc + n_lower;
    let pos = mesh.positions();
    let (mut lo, mut hi) = ([f64::INFINITY; 3], [f64::NEG_INFINITY; 3]);
    for p in pos {
        for d in 0..3 {
            lo[d] = lo[d].min(p[d]);
            hi[d] = hi[d].max(p[d]);
        }
    }
    if pos.is_empty() {
        lo = [0.0; 3];
        hi = [0.0; 3];
    }
    let named: Vec<&PhysicalGroup> = groups.iter().filter(|g| !g.name.is_empty()).collect();
    write_atomic(path, |w| {
        writeln!(w, "$MeshFormat\n4.1 0 8\n$EndMeshFormat")?;
        if !named.is_empty() {
            writeln!(w, "$PhysicalNames\n{}", named.len())?;
            for g in &named {
                // a quote would end the name early: Gmsh names have none
                writeln!(w, "{} {} \"{}\"", g.dim, g.tag, g.name.replace('"', "'"))?;
            }
            writeln!(w, "$EndPhysicalNames")?;
        }
        writeln!(
            w,
            "$Entities\n{} {} {} {}",
            entities[0].len(),
            entities[1].len(),
            entities[2].len(),
            entities[3].len()
        )?;
        let bbox = format!(
            "{} {} {} {} {} {}",
            fmt_f64(lo[0]),
            fmt_f64(lo[1]),
            fmt_f64(lo[2]),
            fmt_f64(hi[0]),
            fmt_f64(hi[1]),
            fmt_f64(hi[2])
        );
        for (d, list) in entities.iter().enumerate() {
            for (i, set) in list.iter().enumerate() {
                let mut line = if d == 0 {
                    format!(
                        "{} {} {} {}",
                        i + 1,
                        fmt_f64(lo[0]),
                        fmt_f64(lo[1]),
                        fmt_f64(lo[2])
                    )
                } else {
                    format!("{} {bbox}", i + 1)
                };
                line.push_str(&format!(" {}", set.len()));
                for t in set {
                    line.push_str(&format!(" {t}"));
                }
                if d > 0 {
                    line.push_str(" 0");
                }
                writeln!(w, "{line}")?;
            }
        }
        writeln!(w, "$EndEntities")?;
        let nv = pos.len();
        writeln!(w, "$Nodes\n1 {nv} {} {nv}", nv.min(1))?;
        writeln!(w, "3 1 0 {nv}")?;
        for i in 1..=nv {
            writeln!(w, "{i}")?;
        }
        for p in pos {
            writeln!(w, "{} {} {}", fmt_f64(p[0]), fmt_f64(p[1]), fmt_f64(p[2]))?;
        }
        writeln!(w, "$EndNodes")?;
        writeln!(
            w,
            "$Elements\n{} {n_elem} {} {n_elem}",
            runs.len() + blocks.len(),
            n_elem.min(1)
        )?;
        let mut k = 0;
        let mut line = String::with_capacity(128);
        for &(ent, t, a, b) in &runs {
            writeln!(w, "3 {ent} {} {}", gmsh_type(t), b - a)?;
            let n = t.num_vertices().expect("standard");
            for c in a..b {
                use std::fmt::Write as _;
                line.clear();
                let _ = write!(line, "{}", c + 1);
                for &v in &conn[k..k + n] {
                    let _ = write!(line, " {}", v + 1);
                }
                k += n;
                writeln!(w, "{line}")?;
            }
        }
        let mut id = nc;
        for (&(d, ent, ty), elems) in &blocks {
            writeln!(w, "{d} {ent} {ty} {}", elems.len())?;
            for verts in elems {
                use std::fmt::Write as _;
                id += 1;
                line.clear();
                let _ = write!(line, "{id}");
                for &v in verts {
                    let _ = write!(line, " {}", v + 1);
                }
                writeln!(w, "{line}")?;
            }
        }
        writeln!(w, "$EndElements")?;
        Ok(())
    })
}
