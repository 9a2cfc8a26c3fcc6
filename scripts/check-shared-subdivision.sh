#!/usr/bin/env bash
# Issue 3: subdivision counts of levels 1-2 equal Eqs. 3.1-3.4 for every mesh in ../shared/meshes
# (or $TESSERA_SHARED_MESHES). Release build; level 2 of the 1.69M-tet bracket: 11 GB peak, ~2 min on 2 cores.
set -euo pipefail
cd "$(dirname "$0")/.."
TESSERA_SHARED_MESHES=${TESSERA_SHARED_MESHES:-$PWD/../shared/meshes} exec cargo test --release -p tessera-mesh --test subdivide -- --ignored --nocapture --test-threads=1 every_shared_mesh "$@"
