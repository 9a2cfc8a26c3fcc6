// ovm_peer: the mesh relations of `tessera bench mesh` measured with OpenVolumeMesh, for the
// side-by-side comparison of dissertation Tables 3.2/3.3 (`tessera bench mesh --peer-ovm FILE.json`).
//
// This file is Tessera's own harness; it links against an OpenVolumeMesh build that the user
// makes from OVM's sources (scripts/bench-mesh-ovm.sh does that). Nothing of OVM is in the
// repository.
//
// usage: ovm_peer MESH.ovm NAME RUNS > ovm.json
//
// The mesh is read with OVM's FileManager with topology checks and bottom-up incidences off
// (edges, faces and cells keep the numbering of the file, which `tessera mesh convert` wrote
// from Tessera's own mesh, so both libraries work on the same entities). Each operation is
// run RUNS times after one warm-up; the medians of the wall-clock time (`ops_ms`) and of the
// thread's CPU time (`ops_cpu_ms`, robust on a shared machine) are reported in milliseconds:
//
// | JSON key            | OVM operation                                                   | Tessera row          |
// |---------------------|-----------------------------------------------------------------|----------------------|
// | Transpose Edges     | enable_vertex_bottom_up_incidences (outgoing half-edges)         | δ1 vertex -> edges   |
// | Transpose Faces     | enable_edge_bottom_up_incidences, face bottom-up off (no radial sort) | δ2 edge -> faces |
// | Transpose Cells     | enable_face_bottom_up_incidences, edge bottom-up off             | δ3 face -> cells     |
// | Cell Vertices       | tet_vertices(c) (the tetrahedron iterator) into a flat array     | ∂̂3²                  |
// | Cell Edges          | cell_edges(c) into a flat array                                   | ∂̂3¹                  |
// | Face Vertices       | face_vertices(f) into a flat array                                | ∂̂2¹                  |
// | Laplacian Smoothing | 10 Jacobi iterations over vertex_vertices, boundary fixed; iterations only | smoothing x10 |
//
// Each relation is cleared (disabled) between runs, so every run computes it from scratch.
#include <OpenVolumeMesh/FileManager/FileManager.hh>
#include <OpenVolumeMesh/Mesh/TetrahedralMesh.hh>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <string>
#include <time.h>
#include <vector>

using Mesh = OpenVolumeMesh::GeometricTetrahedralMeshV3d;
using namespace OpenVolumeMesh;

static double median(std::vector<double> v) {
    std::sort(v.begin(), v.end());
    size_t n = v.size();
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

static double thread_cpu_ms() {
    timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec * 1e-6;
}

struct Timing {
    double wall_ms, cpu_ms;
};

// medians (wall clock and this thread's CPU time, ms) of `runs` runs of `op` after one
// warm-up; `reset` (untimed) runs before each
static Timing time_op(int runs, const std::function<void()>& reset, const std::function<void()>& op) {
    std::vector<double> t, c;
    for (int r = 0; r <= runs; r++) {
        reset();
        double c0 = thread_cpu_ms();
        auto a = std::chrono::steady_clock::now();
        op();
        auto b = std::chrono::steady_clock::now();
        double c1 = thread_cpu_ms();
        if (r > 0) {
            t.push_back(std::chrono::duration<double, std::milli>(b - a).count());
            c.push_back(c1 - c0);
        }
    }
    return {median(t), median(c)};
}

static volatile size_t sink;

int main(int argc, char** argv) {
    if (argc < 4) {
        std::fprintf(stderr, "usage: ovm_peer MESH.ovm NAME RUNS\n");
        return 2;
    }
    const std::string path = argv[1], name = argv[2];
    const int runs = std::max(1, std::atoi(argv[3]));
    Mesh mesh;
    IO::FileManager fm;
    auto t0 = std::chrono::steady_clock::now();
    if (!fm.readFile(path, mesh, /*topologyCheck=*/false, /*computeBottomUpIncidences=*/false)) {
        std::fprintf(stderr, "ovm_peer: cannot read %s\n", path.c_str());
        return 1;
    }
    double load_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    const size_t nv = mesh.n_vertices(), ne = mesh.n_edges(), nf = mesh.n_faces(), nc = mesh.n_cells();
    std::fprintf(stderr, "ovm_peer: %s: V %zu E %zu F %zu C %zu (read in %.1f s)\n", name.c_str(), nv, ne, nf, nc,
                 load_s);
    mesh.enable_bottom_up_incidences(false);
    auto none = [] {};
    std::vector<std::pair<std::string, Timing>> rows;

    // δ1, δ2, δ3: OVM's bottom-up incidences, one kind at a time
    rows.emplace_back("Transpose Edges", time_op(runs, [&] { mesh.enable_vertex_bottom_up_incidences(false); },
                                                 [&] { mesh.enable_vertex_bottom_up_incidences(true); }));
    mesh.enable_vertex_bottom_up_incidences(false);
    rows.emplace_back("Transpose Faces", time_op(runs, [&] { mesh.enable_edge_bottom_up_incidences(false); },
                                                 [&] { mesh.enable_edge_bottom_up_incidences(true); }));
    mesh.enable_edge_bottom_up_incidences(false);
    rows.emplace_back("Transpose Cells", time_op(runs, [&] { mesh.enable_face_bottom_up_incidences(false); },
                                                 [&] { mesh.enable_face_bottom_up_incidences(true); }));
    mesh.enable_face_bottom_up_incidences(false);

    // indirect relations into flat arrays (offsets + entries), as Tessera's TCSR results
    std::vector<uint32_t> offs, vals;
    auto clear = [&] {
        offs.clear();
        vals.clear();
        offs.shrink_to_fit();
        vals.shrink_to_fit();
    };
    rows.emplace_back("Cell Vertices", time_op(runs, clear, [&] {
                          offs.reserve(nc + 1);
                          vals.reserve(4 * nc);
                          offs.push_back(0);
                          for (auto ch : mesh.cells()) {
                              for (auto it = mesh.tv_iter(ch); it.valid(); ++it) vals.push_back((*it).uidx());
                              offs.push_back((uint32_t)vals.size());
                          }
                          sink = vals.size();
                      }));
    rows.emplace_back("Cell Edges", time_op(runs, clear, [&] {
                          offs.reserve(nc + 1);
                          vals.reserve(6 * nc);
                          offs.push_back(0);
                          for (auto ch : mesh.cells()) {
                              for (auto it = mesh.ce_iter(ch); it.valid(); ++it) vals.push_back((*it).uidx());
                              offs.push_back((uint32_t)vals.size());
                          }
                          sink = vals.size();
                      }));
    rows.emplace_back("Face Vertices", time_op(runs, clear, [&] {
                          offs.reserve(nf + 1);
                          vals.reserve(3 * nf);
                          offs.push_back(0);
                          for (auto fh : mesh.faces()) {
                              for (auto it = mesh.fv_iter(fh); it.valid(); ++it) vals.push_back((*it).uidx());
                              offs.push_back((uint32_t)vals.size());
                          }
                          sink = vals.size();
                      }));
    clear();

    // Laplacian smoothing: boundary mask and incidences beforehand (untimed), then 10 Jacobi
    // iterations with two position buffers
    mesh.enable_bottom_up_incidences(true);
    std::vector<char> fixed(nv, 0);
    for (auto fh : mesh.faces())
        if (mesh.is_boundary(fh))
            for (auto it = mesh.fv_iter(fh); it.valid(); ++it) fixed[(*it).uidx()] = 1;
    std::vector<Mesh::PointT> start(nv), a(nv), b(nv);
    for (auto vh : mesh.vertices()) start[vh.uidx()] = mesh.vertex(vh);
    rows.emplace_back("Laplacian Smoothing", time_op(runs, [&] { a = start; }, [&] {
                          for (int it = 0; it < 10; it++) {
                              for (auto vh : mesh.vertices()) {
                                  size_t v = vh.uidx();
                                  if (fixed[v]) {
                                      b[v] = a[v];
                                      continue;
                                  }
                                  Mesh::PointT s(0, 0, 0);
                                  int n = 0;
                                  for (auto w = mesh.vv_iter(vh); w.valid(); ++w) {
                                      s += a[(*w).uidx()];
                                      n++;
                                  }
                                  b[v] = n ? s / double(n) : a[v];
                              }
                              std::swap(a, b);
                          }
                          sink = (size_t)a[0][0];
                      }));

    std::printf("{\n  \"peer\": \"OpenVolumeMesh\",\n  \"mesh\": \"%s\",\n  \"vertices\": %zu,\n  \"edges\": %zu,\n"
                "  \"faces\": %zu,\n  \"cells\": %zu,\n  \"runs\": %d,\n  \"threads\": 1,\n  \"ops_ms\": {\n",
                name.c_str(), nv, ne, nf, nc, runs);
    for (size_t i = 0; i < rows.size(); i++)
        std::printf("    \"%s\": %.4f%s\n", rows[i].first.c_str(), rows[i].second.wall_ms, i + 1 < rows.size() ? "," : "");
    std::printf("  },\n  \"ops_cpu_ms\": {\n");
    for (size_t i = 0; i < rows.size(); i++)
        std::printf("    \"%s\": %.4f%s\n", rows[i].first.c_str(), rows[i].second.cpu_ms, i + 1 < rows.size() ? "," : "");
    std::printf("  }\n}\n");
    return 0;
}
