#!/usr/bin/env bash
# The domain-decomposed solve on two GPUs against one (dissertation §7.1.2), on a machine with two
# CUDA devices, from the repository root, with a device pack that holds the `tessera` program
# (../shared/tools/device-pack --bin tessera --data ../shared/meshes/bracket-1.69M.msh.gz):
#   docs/bench/dd-2gpu.sh MESH_DIR OUT_DIR ORDER PRECONDITIONER RUNS...
# (DD_MESH names another mesh file in MESH_DIR; DD_TIMEOUT bounds each run, seconds.)
# RUNS are device options, for example "--devices cuda:0,cuda:1" "--devices cuda:0" "--device cuda:0"
# (two domains on two GPUs, one domain on one GPU, the one-matrix solve). Outputs land in OUT_DIR
# as fem-solve-p<ORDER>-<PRECONDITIONER>-<run>.txt. NVLink multicast stays off.
set -u
export NCCL_NVLS_ENABLE=0
M=$1; O=$2; P=$3; PRE=$4; shift 4
C="$M/${DD_MESH:-bracket-1.69M.msh.gz}@$P"
for run in "$@"; do
  name=$(echo "$run" | tr -c 'a-z0-9\n' '_')
  echo "== bench fem-solve $C --preconditioner $PRE $run"
  timeout ${DD_TIMEOUT:-240} .device/run tessera bench fem-solve --case "$C" --preconditioner "$PRE" $run \
    --repeat 1 --warmup 0 2>&1 | grep -v '^\s*$' | tee "$O/fem-solve-p$P-$PRE$name.txt"
done
