//! Generated meshes shared by tests/nodes.rs and tests/count.rs.
#![allow(dead_code)]

use tessera_mesh::simplex::SimplexMesh;

pub struct Rng(pub u64);
impl Rng {
    pub fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E3779B97F4A7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58476D1CE4E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D049BB133111EB);
        z ^ (z >> 31)
    }
    pub fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
    pub fn unit(&mut self) -> f64 {
        (self.next() >> 11) as f64 / (1u64 << 53) as f64
    }
    pub fn shuffle<T>(&mut self, v: &mut [T]) {
        for i in (1..v.len()).rev() {
            v.swap(i, self.below(i + 1));
        }
    }
}

/// A jittered grid of `n` cells (d = 3: cubes split into 6 Kuhn tetrahedra; d = 2: squares
/// split into 2 triangles; n[2] ignored), vertices relabelled at random, cells shuffled,
/// each cell's vertex order permuted at random, about `drop` of the cells removed.
pub fn grid_mesh(d: usize, n: [usize; 3], seed: u64, drop: f64) -> SimplexMesh {
    let mut rng = Rng(seed);
    let nz = if d == 3 { n[2] } else { 0 };
    let idx = |i: usize, j: usize, k: usize| i + (n[0] + 1) * (j + (n[1] + 1) * k);
    let nv = (n[0] + 1) * (n[1] + 1) * (nz + 1);
    let mut perm: Vec<u32> = (0..nv as u32).collect();
    rng.shuffle(&mut perm);
    let mut pos = vec![[0.0; 3]; nv];
    for k in 0..=nz {
        for j in 0..=n[1] {
            for i in 0..=n[0] {
                let mut p = [i as f64, j as f64, k as f64];
                for x in p.iter_mut().take(d) {
                    *x += 0.2 * (rng.unit() - 0.5);
                }
                pos[perm[idx(i, j, k)] as usize] = p;
            }
        }
    }
    let mut cells: Vec<Vec<u32>> = Vec::new();
    let mut push = |rng: &mut Rng, mut t: Vec<u32>| {
        if drop > 0.0 && rng.unit() < drop {
            return;
        }
        rng.shuffle(&mut t);
        cells.push(t);
    };
    if d == 3 {
        let axes = [
            [0, 1, 2],
            [0, 2, 1],
            [1, 0, 2],
            [1, 2, 0],
            [2, 0, 1],
            [2, 1, 0],
        ];
        for k in 0..nz {
            for j in 0..n[1] {
                for i in 0..n[0] {
                    for ax in axes {
                        let mut c = [i, j, k];
                        let mut t = vec![perm[idx(c[0], c[1], c[2])]];
                        for a in ax {
                            c[a] += 1;
                            t.push(perm[idx(c[0], c[1], c[2])]);
                        }
                        push(&mut rng, t);
                    }
                }
            }
        }
    } else {
        for j in 0..n[1] {
            for i in 0..n[0] {
                let q = [
                    idx(i, j, 0),
                    idx(i + 1, j, 0),
                    idx(i + 1, j + 1, 0),
                    idx(i, j + 1, 0),
                ]
                .map(|v| perm[v]);
                push(&mut rng, vec![q[0], q[1], q[2]]);
                push(&mut rng, vec![q[0], q[2], q[3]]);
            }
        }
    }
    rng.shuffle(&mut cells);
    SimplexMesh::new(d, cells.concat(), pos).unwrap()
}
