#!/usr/bin/env python3
"""Writes crates/tessera-mesh/tests/fixtures/hostile/: the malformed inputs of the
reliability campaign (huge header counts, silently accepted files, truncations), each
small and checked in. Run from the repository root; the output is deterministic.
tests/hostile.rs holds the expected error (location and words) of every file."""
import os, struct

OUT = "crates/tessera-mesh/tests/fixtures/hostile"
FIX = "crates/tessera-mesh/tests/fixtures"
os.makedirs(OUT, exist_ok=True)


def put(name, data):
    if isinstance(data, str):
        data = data.encode()
    with open(os.path.join(OUT, name), "wb") as f:
        f.write(data)


def fixture(name):
    return open(os.path.join(FIX, name), "rb").read().decode()


HEAD41 = "$MeshFormat\n4.1 0 8\n$EndMeshFormat\n"
HEAD22 = "$MeshFormat\n2.2 0 8\n$EndMeshFormat\n"

# --- huge counts in headers (each would reserve tens of GB before reading data) -------
put("m41-huge-nodes.msh", HEAD41 + "$Nodes\n1 4000000000 1 4000000000\n")
put("m41-huge-tag-range.msh", HEAD41 + "$Nodes\n1 600000000 1 600000000\n3 1 0 1\n1\n0 0 0\n$EndNodes\n")
put("m41-huge-node-block.msh", HEAD41 + "$Nodes\n1 1 1 1\n3 1 0 4000000000\n1\n0 0 0\n$EndNodes\n")
put("m41-huge-element-block.msh", HEAD41 + "$Nodes\n1 4 1 4\n3 1 0 4\n1\n2\n3\n4\n0 0 0\n1 0 0\n0 1 0\n0 0 1\n$EndNodes\n"
    "$Elements\n1 1 1 1\n3 1 4 4000000000\n1 1 2 3 4\n$EndElements\n")
put("m41-huge-physical-names.msh", HEAD41 + "$PhysicalNames\n4000000000\n3 1 \"a\"\n$EndPhysicalNames\n")
put("m41-huge-entities.msh", HEAD41 + "$Entities\n4000000000 0 0 0\n$EndEntities\n")
put("m22-huge-nodes.msh", HEAD22 + "$Nodes\n4000000000\n1 0 0 0\n")
put("m22-huge-elements.msh", HEAD22 + "$Nodes\n1\n1 0 0 0\n$EndNodes\n$Elements\n4000000000\n1 4 0 1 1 1 1\n")
# binary MSH 2.2: header line, then int 1 (endianness), then data
bin22 = b"$MeshFormat\n2.2 1 8\n" + struct.pack("<i", 1) + b"\n$EndMeshFormat\n"
put("m22-bin-huge-nodes.msh", bin22 + b"$Nodes\n4000000000\n" + struct.pack("<iddd", 1, 0, 0, 0))
# binary MSH 4.1, size_t = 8
bin41 = b"$MeshFormat\n4.1 1 8\n" + struct.pack("<i", 1) + b"\n$EndMeshFormat\n"
put("m41-bin-huge-nodes.msh", bin41 + b"$Nodes\n" + struct.pack("<QQQQ", 1, 4_000_000_000, 1, 4_000_000_000))
put("medit-huge-vertices.mesh", "MeshVersionFormatted 2\nDimension 3\nVertices\n4000000000\n0 0 0 0\n")
put("medit-huge-tetrahedra.mesh", "MeshVersionFormatted 2\nDimension 3\nVertices\n1\n0 0 0 0\nTetrahedra\n4000000000\n1 1 1 1 1\n")
put("tg-huge.node", "4000000000 3 0 0\n0 0 0 0\n")
put("tg-huge.ele", "1 4 0\n0 0 1 2 3\n")
put("tg-huge-ele.node", fixture("cube.node"))
put("tg-huge-ele.ele", "4000000000 4 0\n1 1 2 4 8\n")
put("ovm-huge-vertices.ovm", "OVM ASCII\nVertices\n1000000000\n0 0 0\n")
cube = fixture("cube.ovm")
put("ovm-huge-edges.ovm", cube.replace("Edges\n19\n", "Edges\n1000000000\n"))
put("ovm-huge-faces.ovm", cube.replace("Faces\n18\n", "Faces\n1000000000\n"))
put("ovm-huge-polyhedra.ovm", cube.replace("Polyhedra\n6\n", "Polyhedra\n1000000000\n"))

# --- silently accepted before ---------------------------------------------------------
v22 = fixture("mixed-v22.msh")
v41 = fixture("mixed-v41.msh")
# MSH 2.2 binary whose tetrahedron references node -3 (read as node 0 before)
nodes = [(1, 0, 0, 0), (2, 1, 0, 0), (3, 0, 1, 0), (4, 0, 0, 1)]
b = bin22 + b"$Nodes\n4\n" + b"".join(struct.pack("<iddd", *n) for n in nodes) + b"\n$EndNodes\n"
b += b"$Elements\n1\n" + struct.pack("<iii", 4, 1, 2) + struct.pack("<iii", 1, 1, 1) + struct.pack("<iiii", 1, 2, 3, -3)
b += b"\n$EndElements\n"
put("m22-bin-negative-node.msh", b)
# node tag 0 in MSH 4.1
put("m41-node-tag-0.msh", v41.replace("3 1 0 8\n10\n", "3 1 0 8\n0\n").replace("3 13 10 500", "3 13 0 500")
    .replace("1 10 20 30 40 50 60 70 80", "1 0 20 30 40 50 60 70 80").replace("5 10 20 30 40", "5 0 20 30 40"))
# a physical tag above 2^31 (4294967297 was truncated to 1: it joined group "solid")
put("m41-physical-tag-wide.msh", v41.replace("2 1 -1 0 2 0 1 1 3 0", "2 1 -1 0 2 0 1 1 4294967299 0"))
put("m22-physical-tag-wide.msh", v22.replace("6 2 2 3 2 100 60 120", "6 2 2 4294967299 2 100 60 120"))
# a duplicate cell (same vertices, another order) and a repeated $Elements section
put("m41-duplicate-cell.msh", v41.replace("$Elements\n7 7 1 7\n3 1 5 1\n", "$Elements\n7 8 1 8\n3 1 5 1\n")
    .replace("3 1 4 1\n4 20 100 60 120\n", "3 1 4 2\n4 20 100 60 120\n8 100 20 120 60\n"))
put("m22-duplicate-cell.msh", v22.replace("$Elements\n7\n", "$Elements\n8\n")
    .replace("4 4 2 1 1 20 100 60 120\n", "4 4 2 1 1 20 100 60 120\n8 4 2 1 1 60 20 120 100\n"))
els = v41[v41.index("$Elements"):]
put("m41-repeated-elements.msh", v41 + els)
put("m22-repeated-nodes.msh", v22.replace("$Elements", v22[v22.index("$Nodes"):v22.index("$Elements")] + "$Elements"))
# OVM: polyhedra that do not close, a flipped half-face, a face of two vertices, a
# duplicate face, no polyhedra
put("ovm-open-polyhedron.ovm", cube.replace("4 0 2 4 6\n", "4 0 2 4 8\n"))
put("ovm-flipped-halfface.ovm", cube.replace("4 0 2 4 6\n", "4 0 2 4 7\n"))
put("ovm-two-vertex-face.ovm", cube.replace("Faces\n18\n", "Faces\n19\n").replace("Polyhedra\n", "4 0 1 0 1\nPolyhedra\n"))
put("ovm-duplicate-face.ovm", cube.replace("Faces\n18\n", "Faces\n19\n").replace("Polyhedra\n", "3 5 3 1\nPolyhedra\n"))
put("ovm-no-polyhedra.ovm", cube[: cube.index("Polyhedra")] + "Polyhedra\n0\n")
# truncated by a couple of bytes: the last number is cut, there is no end marker
# (the cut numbers stay valid: half-face 34 -> 3, region 18 -> 1, marker 10 -> 1)
put("ovm-truncated-2.ovm", cube[:-2])
put("tg-truncated-2.node", fixture("cube.node"))
put("tg-truncated-2.ele", fixture("cube.ele").replace("6  1 7 5 8  8\n", "6  1 7 5 8  18\n")[:-2])
put("tg-truncated-node.node", fixture("cube.node").replace("8  1 1 1  0.5  1\n", "8  1 1 1  0.5  10\n")[:-2])
put("tg-truncated-node.ele", fixture("cube.ele"))
medit = fixture("mixed.mesh")
put("medit-no-end.mesh", medit[: medit.index("End")])
put("medit-repeated-vertices.mesh", medit.replace("Hexahedra", medit[medit.index("Vertices"):medit.index("Hexahedra")] + "Hexahedra"))
put("medit-duplicate-cell.mesh", medit.replace("Tetrahedra\n1\n2 10 6 12 1\n", "Tetrahedra\n2\n2 10 6 12 1\n12 6 10 2 1\n"))
put("tg-duplicate-cell.node", fixture("cube.node"))
put("tg-duplicate-cell.ele", fixture("cube.ele").replace("6 4 1\n", "7 4 1\n") + "7  8 4 2 1  7\n")
print("wrote", len(os.listdir(OUT)), "files to", OUT)
