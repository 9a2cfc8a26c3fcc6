#!/usr/bin/env python3
"""pyamg's smoothed aggregation with rigid-body modes on a system exported by
`tessera fem assemble PROBLEM.toml -o K.mtx --rhs b.mtx --nullspace B.mtx --fixed fixed.txt`,
for the CPU comparison in BENCHMARKS.md ("Multigrid preconditioners").

usage: scripts/pyamg-compare.py DIR [TOL]     (DIR holds K.mtx, b.mtx, B.mtx, fixed.txt)

The constrained DOFs are eliminated (u = prescribed there, the free block solved), the modes
restricted to the free DOFs, then pyamg.smoothed_aggregation_solver(A, B=B) (symmetric
strength, standard aggregation, Jacobi-smoothed prolongator, its default symmetric
Gauss-Seidel smoothing) is used as the preconditioner of CG to a relative residual of TOL
(default 1e-8). Prints setup and solve seconds, iterations, levels, operator complexity.
"""
import sys
import time

import numpy as np
import pyamg
import scipy.io

d = sys.argv[1]
tol = float(sys.argv[2]) if len(sys.argv) > 2 else 1e-8
t = time.perf_counter()
K = scipy.io.mmread(d + "/K.mtx").tocsr()
B = np.asarray(scipy.io.mmread(d + "/B.mtx"))
b = np.asarray(scipy.io.mmread(d + "/b.mtx")).ravel()
fixed = np.loadtxt(d + "/fixed.txt", comments="#", ndmin=2)
n = K.shape[0]
idx = fixed[:, 0].astype(np.int64)
u = np.zeros(n)
u[idx] = fixed[:, 1]
free = np.setdiff1d(np.arange(n), idx)
A = K[free][:, free].tocsr()
rhs = b[free] - K[free][:, idx] @ u[idx]
Bf = np.ascontiguousarray(B[free])
print(f"read + reduce {time.perf_counter() - t:.2f} s, {A.shape[0]} free dofs, {A.nnz} nonzeros")

t = time.perf_counter()
ml = pyamg.smoothed_aggregation_solver(A, B=Bf, max_coarse=512)
setup = time.perf_counter() - t
res = []
t = time.perf_counter()
x = ml.solve(rhs, tol=tol, accel="cg", maxiter=2000, residuals=res)
solve = time.perf_counter() - t
true_rel = np.linalg.norm(rhs - A @ x) / np.linalg.norm(rhs)
print(ml)
print(
    f"pyamg {pyamg.__version__}: setup {setup:.3f} s, solve {solve:.3f} s, "
    f"{len(res) - 1} CG iterations, relative residual {true_rel:.2e}, "
    f"levels {len(ml.levels)}, operator complexity {ml.operator_complexity():.3f}"
)
