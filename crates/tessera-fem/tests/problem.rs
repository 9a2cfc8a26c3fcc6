//! Problem-file validation (issue 6): bad files, mesh tags that do not exist and
//! unconstrained problems give one clear error each, naming the key.

use std::path::Path;
use tessera_fem::problem::{Load, MeshSource, PreconditionerKind, Problem, Selector};
use tessera_fem::static_solve::{solve_problem, StaticError, StaticOptions};

const GOOD: &str = r#"
title = "ok"
order = 2
[mesh]
generate = { box = { cells = [4, 1, 1], size = [4.0, 1.0, 1.0] } }
[material]
preset = "steel"
[[fixed]]
selector = { type = "plane", point = [0, 0, 0], normal = [1, 0, 0] }
[[loads]]
type = "pressure"
selector = { type = "box", min = [3.9, -1, -1], max = [5, 2, 2] }
pressure = 2.0
[[loads]]
type = "gravity"
"#;

fn err(text: &str) -> String {
    Problem::parse(text, "p.toml", Path::new("."))
        .unwrap_err()
        .to_string()
}

#[test]
fn good_file_parses_with_preset_and_defaults() {
    let p = Problem::parse(GOOD, "p.toml", Path::new(".")).unwrap();
    assert_eq!(p.order, 2);
    assert_eq!(
        p.mesh,
        MeshSource::Box {
            cells: [4, 1, 1],
            size: [4.0, 1.0, 1.0]
        }
    );
    assert_eq!(p.material.youngs, 200_000.0);
    assert_eq!(
        p.loads[1],
        Load::Gravity {
            acceleration: [0.0, 0.0, -9810.0]
        }
    );
    assert!(matches!(p.fixed[0].selector, Selector::Plane { .. }));
    // the preconditioner defaults to the fastest for the order: pmg for p >= 2, amg for p = 1
    assert_eq!(p.solver.preconditioner, None);
    assert_eq!(p.solver.preconditioner_for(2), PreconditionerKind::Pmg);
    assert_eq!(p.solver.preconditioner_for(1), PreconditionerKind::Amg);
    let sol = solve_problem(&p, &StaticOptions::default(), &mut |_| {}).unwrap();
    assert!(sol.report.final_residual <= 1e-8);
    assert_eq!(sol.solver.preconditioner, "pmg");
    // [solver.amg] knobs
    let q = Problem::parse(
        &format!(
            "{GOOD}[solver]\npreconditioner = \"amg\"\n[solver.amg]\nstrength = 0.1\nsmoother = \"jacobi\"\nsweeps = 3\nomega = 0.5\ncoarse_size = 100\ncycle = \"w\"\nnear_null_space = \"translations\"\n"
        ),
        "p.toml",
        Path::new("."),
    )
    .unwrap();
    let a = &q.solver.multigrid.amg;
    assert_eq!(q.solver.preconditioner, Some(PreconditionerKind::Amg));
    assert_eq!(a.strength, 0.1);
    assert_eq!(
        a.smoother,
        tessera_solve::Smoother::Jacobi {
            sweeps: 3,
            omega: 0.5
        }
    );
    assert_eq!(a.coarse_size, 100);
    assert_eq!(a.cycle, tessera_solve::Cycle::W);
    assert_eq!(
        a.near_null_space,
        tessera_solve::NearNullSpace::Translations
    );
}

#[test]
fn bad_files_name_the_key() {
    let cases: &[(&str, &str, &str)] = &[
        ("order = 2", "order = 7", "`order`"),
        (
            "preset = \"steel\"",
            "preset = \"unobtainium\"",
            "`material.preset`",
        ),
        (
            "preset = \"steel\"",
            "youngs = -1.0\npoisson = 0.3",
            "`material.youngs`",
        ),
        (
            "preset = \"steel\"",
            "youngs = 1.0\npoisson = 0.5",
            "`material.poisson`",
        ),
        (
            "pressure = 2.0",
            "pressure = 2.0\ncolour = 1",
            "`loads[0].colour`",
        ),
        (
            "type = \"box\", min = [3.9, -1, -1], max = [5, 2, 2]",
            "type = \"sphere\", center = [4, 0, 0], radius = -1",
            "`loads[0].selector.radius`",
        ),
        (
            "type = \"box\", min = [3.9, -1, -1], max = [5, 2, 2]",
            "type = \"cone\"",
            "`loads[0].selector.type`",
        ),
        (
            "normal = [1, 0, 0] }",
            "normal = [0, 0, 0] }",
            "`fixed[0].selector.normal`",
        ),
        (
            "normal = [1, 0, 0] }",
            "normal = [1, 0] }",
            "`fixed[0].selector.normal`",
        ),
        (
            "type = \"gravity\"",
            "type = \"magnetism\"",
            "`loads[1].type`",
        ),
        ("[mesh]", "[mesh]\nfile = \"x.msh\"", "`mesh`"),
    ];
    for (from, to, key) in cases {
        assert!(GOOD.contains(from), "{from}");
        let e = err(&GOOD.replacen(from, to, 1));
        assert!(e.contains(key), "{to}: expected {key} in: {e}");
    }
    // the solver's keys
    for (add, key) in [
        (
            "[solver]\npreconditioner = \"ilu\"",
            "`solver.preconditioner`",
        ),
        (
            "[solver]\n[solver.amg]\nstrength = 1.5",
            "`solver.amg.strength`",
        ),
        (
            "[solver]\n[solver.amg]\nsmoother = \"gauss-seidel\"",
            "`solver.amg.smoother`",
        ),
        ("[solver]\n[solver.amg]\ndegree = 0", "`solver.amg.degree`"),
        (
            "[solver]\n[solver.amg]\ncoarse_size = 1",
            "`solver.amg.coarse_size`",
        ),
        (
            "[solver]\n[solver.amg]\ncycle = \"f\"",
            "`solver.amg.cycle`",
        ),
        (
            "[solver]\n[solver.amg]\nnear_null_space = \"none\"",
            "`solver.amg.near_null_space`",
        ),
        (
            "[solver]\n[solver.amg]\nomega = 2.5\nsmoother = \"jacobi\"",
            "`solver.amg.omega`",
        ),
        ("[solver]\n[solver.amg]\nlevels = 3", "`solver.amg.levels`"),
    ] {
        let e = err(&format!("{GOOD}{add}\n"));
        assert!(e.contains(key), "{add}: expected {key} in: {e}");
    }
    // syntax errors carry the line
    let e = err("order = 2\n[mesh\n");
    assert!(e.contains("line 2"), "{e}");
}

#[test]
fn unconstrained_problems_are_one_clear_error() {
    // no [[fixed]] at all: rejected while parsing
    let text = GOOD.replace(
        "[[fixed]]\nselector = { type = \"plane\", point = [0, 0, 0], normal = [1, 0, 0] }\n",
        "",
    );
    let e = err(&text);
    assert!(e.contains("`fixed`") && e.contains("singular"), "{e}");
    // only one component fixed: the free DOFs still have rigid-body modes
    for method in ["pcg", "cholesky"] {
        let text = GOOD.replace(
            "normal = [1, 0, 0] }\n",
            "normal = [1, 0, 0] }\ncomponents = [\"x\"]\n",
        ) + &format!("[solver]\nmethod = \"{method}\"\n");
        let p = Problem::parse(&text, "p.toml", Path::new(".")).unwrap();
        let e = solve_problem(&p, &StaticOptions::default(), &mut |_| {})
            .err()
            .expect("singular");
        let msg = e.to_string();
        assert!(matches!(e, StaticError::Solve(_)), "{msg}");
        assert!(msg.contains("rigid-body modes"), "{method}: {msg}");
    }
}

#[test]
fn selectors_that_select_nothing_and_missing_groups_are_errors() {
    let text = GOOD.replace(
        "point = [0, 0, 0], normal = [1, 0, 0]",
        "point = [-5, 0, 0], normal = [1, 0, 0]",
    );
    let p = Problem::parse(&text, "p.toml", Path::new(".")).unwrap();
    let e = solve_problem(&p, &StaticOptions::default(), &mut |_| {})
        .err()
        .unwrap()
        .to_string();
    assert!(
        e.contains("`fixed[0].selector`") && e.contains("selects no boundary face"),
        "{e}"
    );

    let text = GOOD.replace(
        "type = \"plane\", point = [0, 0, 0], normal = [1, 0, 0]",
        "type = \"group\", name = \"bolts\"",
    );
    let p = Problem::parse(&text, "p.toml", Path::new(".")).unwrap();
    let e = solve_problem(&p, &StaticOptions::default(), &mut |_| {})
        .err()
        .unwrap()
        .to_string();
    assert!(
        e.contains("no physical group named `bolts`") && e.contains("no physical groups"),
        "{e}"
    );
}

/// A Gmsh 2.2 file: one tetrahedron (physical volume 1 "solid") with a tagged face
/// (physical surface 7 "base").
const MSH: &str = "$MeshFormat\n2.2 0 8\n$EndMeshFormat\n$PhysicalNames\n2\n2 7 \"base\"\n3 1 \"solid\"\n$EndPhysicalNames\n$Nodes\n4\n1 0 0 0\n2 1 0 0\n3 0 1 0\n4 0 0 1\n$EndNodes\n$Elements\n2\n1 2 2 7 1 1 2 3\n2 4 2 1 1 1 2 3 4\n$EndElements\n";

#[test]
fn gmsh_groups_select_faces_and_missing_tags_are_errors() {
    let dir = std::env::temp_dir().join(format!("tessera-problem-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("tet.msh"), MSH).unwrap();
    let base = "order = 1\n[mesh]\nfile = \"tet.msh\"\n[material]\nyoungs = 1.0\npoisson = 0.25\n[[fixed]]\nselector = SEL\n[[loads]]\ntype = \"traction\"\nselector = { type = \"plane\", point = [0, 0, 1], normal = [0, 0, 1], tolerance = 2.0 }\ntraction = [0, 0, 1]\n";
    let run = |sel: &str| {
        let text = base.replace("SEL", sel);
        std::fs::write(dir.join("p.toml"), &text).unwrap();
        let p = Problem::from_file(&dir.join("p.toml")).unwrap();
        solve_problem(&p, &StaticOptions::default(), &mut |_| {})
    };
    // the tagged face is found by name and by tag (a clamped face: the tet is constrained)
    assert!(run("{ type = \"group\", name = \"base\" }").is_ok());
    assert!(run("{ type = \"group\", tag = 7 }").is_ok());
    let e = run("{ type = \"group\", tag = 99 }")
        .err()
        .unwrap()
        .to_string();
    assert!(
        e.contains("`fixed[0].selector`")
            && e.contains("no physical group with tag 99")
            && e.contains("base (tag 7, dim 2)"),
        "{e}"
    );
    let e = run("{ type = \"group\", name = \"solid\" }")
        .err()
        .unwrap()
        .to_string();
    assert!(e.contains("dimension 3"), "{e}");
    std::fs::remove_dir_all(&dir).ok();
}

/// The rigid-mode check names what the constraints leave free, independent of the solver.
#[test]
fn rigid_mode_check_names_the_free_modes() {
    use tessera_fem::nodes::HoMesh;
    use tessera_fem::static_solve::check_rigid_modes;
    use tessera_mesh::generate::{box_mesh, BoxKind};
    use tessera_mesh::simplex::SimplexMesh;
    use tessera_solve::{Constraints, SolveError};
    let sm = SimplexMesh::from_poly(&box_mesh(BoxKind::Tet, [3, 2, 2], [3.0, 1.0, 1.0])).unwrap();
    for p in 1..=2 {
        let ho = HoMesh::new(sm.clone(), p).unwrap();
        let x = ho.node_positions();
        let plane: Vec<usize> = (0..x.len()).filter(|&i| x[i][0].abs() < 1e-12).collect();
        let fix = |comps: &[usize], nodes: &[usize]| {
            let mut c = Constraints::none(x.len() * 3);
            for &i in nodes {
                for &k in comps {
                    c.fix(i, 3, k, 0.0);
                }
            }
            check_rigid_modes(&ho, &c)
        };
        // a clamped end: nothing free
        assert!(fix(&[0, 1, 2], &plane).is_ok());
        // u_x on a plane x = 0: translations y, z and the rotation about x are free
        match fix(&[0], &plane) {
            Err(SolveError::RigidModesFree { free, modes }) => {
                assert_eq!(free, 3, "{modes}");
                assert!(modes.contains("rotation about x"), "{modes}");
            }
            r => panic!("p = {p}: {r:?}"),
        }
        // one node fully fixed: the three rotations about it are free
        match fix(&[0, 1, 2], &plane[..1]) {
            Err(SolveError::RigidModesFree { free, .. }) => assert_eq!(free, 3),
            r => panic!("p = {p}: {r:?}"),
        }
        // two nodes: the rotation about the line through them is free
        let two = [plane[0], *plane.last().unwrap()];
        match fix(&[0, 1, 2], &two) {
            Err(SolveError::RigidModesFree { free, .. }) => assert_eq!(free, 1),
            r => panic!("p = {p}: {r:?}"),
        }
        // three non-collinear nodes fix the body
        let i3 = plane
            .iter()
            .copied()
            .find(|&i| {
                let (a, b, c) = (x[two[0]], x[two[1]], x[i]);
                let u = [b[1] - a[1], b[2] - a[2]];
                let v = [c[1] - a[1], c[2] - a[2]];
                (u[0] * v[1] - u[1] * v[0]).abs() > 1e-6
            })
            .unwrap();
        assert!(fix(&[0, 1, 2], &[two[0], two[1], i3]).is_ok());
        assert!(matches!(fix(&[], &[]), Err(SolveError::Unconstrained)));
    }
}
