#!/usr/bin/env python3
"""Writes the seed corpora of the fuzz targets, fuzz/corpus/<target>/, from the reader
fixtures (valid files, the malformed corpus and the hostile reproducers), hand-built
binary MSH files, gzip streams, the example problem files and field files. The same
corpora seed the bounded-time fuzz tests of `cargo test` (tests/fuzz_ci.rs). Run from the
repository root; deterministic."""
import glob, gzip, os, struct, shutil

FIX = "crates/tessera-mesh/tests/fixtures"


def out(target, name, data):
    d = os.path.join("fuzz/corpus", target)
    os.makedirs(d, exist_ok=True)
    if isinstance(data, str):
        data = data.encode()
    with open(os.path.join(d, name), "wb") as f:
        f.write(data)


def read(p):
    return open(p, "rb").read()


for t in ["msh", "medit", "ovm", "vtu", "tetgen", "gzip", "problem_toml", "query_fields"]:
    shutil.rmtree(os.path.join("fuzz/corpus", t), ignore_errors=True)

# text fixtures by format
for p in sorted(glob.glob(FIX + "/*") + glob.glob(FIX + "/malformed/*") + glob.glob(FIX + "/hostile/*")):
    if os.path.isdir(p):
        continue
    base = os.path.basename(p)
    tag = os.path.basename(os.path.dirname(p))
    name = base if tag == "fixtures" else f"{tag}-{base}"
    if base.endswith(".msh"):
        out("msh", name, read(p))
    elif base.endswith(".mesh"):
        out("medit", name, read(p))
    elif base.endswith(".ovm"):
        out("ovm", name, read(p))
    elif base.endswith(".node"):
        ele = p[: -len(".node")] + ".ele"
        if os.path.exists(ele):
            out("tetgen", name[: -len(".node")], read(p) + b"\0" + read(ele))

# binary MSH of two tetrahedra with a physical volume and a tagged triangle
nodes = [(1, 0.0, 0.0, 0.0), (2, 1.0, 0.0, 0.0), (3, 0.0, 1.0, 0.0), (4, 0.0, 0.0, 1.0), (5, 1.0, 1.0, 1.0)]
names = b"$PhysicalNames\n2\n2 2 \"face\"\n3 1 \"solid\"\n$EndPhysicalNames\n"
b22 = b"$MeshFormat\n2.2 1 8\n" + struct.pack("<i", 1) + b"\n$EndMeshFormat\n" + names
b22 += b"$Nodes\n5\n" + b"".join(struct.pack("<iddd", *n) for n in nodes) + b"\n$EndNodes\n"
b22 += b"$Elements\n3\n" + struct.pack("<iii", 4, 2, 2)
b22 += struct.pack("<iiiiiii", 1, 1, 1, 1, 2, 3, 4) + struct.pack("<iiiiiii", 2, 1, 1, 2, 3, 4, 5)
b22 += struct.pack("<iii", 2, 1, 2) + struct.pack("<iiiiii", 3, 2, 1, 1, 2, 3)
b22 += b"\n$EndElements\n"
out("msh", "seed-bin22.msh", b22)
for swap in [False, True]:
    e = ">" if swap else "<"
    b41 = b"$MeshFormat\n4.1 1 8\n" + struct.pack(e + "i", 1) + b"\n$EndMeshFormat\n" + names
    b41 += b"$Entities\n" + struct.pack(e + "QQQQ", 0, 0, 1, 1)
    # a surface (physical 2) and a volume (physical 1), no bounding entities
    b41 += struct.pack(e + "i6dQiQ", 1, 0, 0, 0, 1, 1, 0, 1, 2, 0)
    b41 += struct.pack(e + "i6dQiQ", 1, 0, 0, 0, 1, 1, 1, 1, 1, 0)
    b41 += b"\n$EndEntities\n$Nodes\n" + struct.pack(e + "QQQQ", 1, 5, 1, 5)
    b41 += struct.pack(e + "iiiQ", 3, 1, 0, 5) + b"".join(struct.pack(e + "Q", n[0]) for n in nodes)
    b41 += b"".join(struct.pack(e + "ddd", *n[1:]) for n in nodes) + b"\n$EndNodes\n"
    b41 += b"$Elements\n" + struct.pack(e + "QQQQ", 2, 3, 1, 3)
    b41 += struct.pack(e + "iiiQ", 2, 1, 2, 1) + struct.pack(e + "QQQQ", 3, 1, 2, 3)
    b41 += struct.pack(e + "iiiQ", 3, 1, 4, 2) + struct.pack(e + "QQQQQ", 1, 1, 2, 3, 4) + struct.pack(e + "QQQQQ", 2, 2, 3, 4, 5)
    b41 += b"\n$EndElements\n"
    out("msh", "seed-bin41-be.msh" if swap else "seed-bin41.msh", b41)

# VTU: the two tetrahedra in ASCII, base64, appended raw and zlib-compressed appended raw,
# with point, cell and field data and a gmsh:physical array; a polyhedron; a quadratic tet
import base64, zlib

pts = [n[1:] for n in nodes]
conn = [0, 1, 2, 3, 1, 2, 3, 4]
arrays = [  # (tag, type, name, ncomp, values, fmt)
    ("Points", "Float64", None, 3, [c for p in pts for c in p], "d"),
    ("Cells", "Int64", "connectivity", 1, conn, "q"),
    ("Cells", "Int64", "offsets", 1, [4, 8], "q"),
    ("Cells", "UInt8", "types", 1, [10, 10], "B"),
    ("PointData", "Float64", "T", 1, [0.5, 1, 2, 3, 4], "d"),
    ("CellData", "Int32", "gmsh:physical", 1, [1, 1], "i"),
]


def vtu(enc):
    app = b""
    sections = {"Points": [], "Cells": [], "PointData": [], "CellData": []}
    for tag, ty, name, nc, vals, f in arrays:
        raw = struct.pack("<%d%s" % (len(vals), f), *vals)
        attrs = 'type="%s"%s NumberOfComponents="%d"' % (ty, ' Name="%s"' % name if name else "", nc)
        if enc == "ascii":
            body = " ".join(str(v) for v in vals)
            sections[tag].append('<DataArray %s format="ascii">%s</DataArray>' % (attrs, body))
        elif enc == "base64":
            blob = base64.b64encode(struct.pack("<Q", len(raw)) + raw).decode()
            sections[tag].append('<DataArray %s format="binary">%s</DataArray>' % (attrs, blob))
        else:
            if enc == "zlib":
                z = zlib.compress(raw)
                blob = struct.pack("<QQQQ", 1, len(raw), len(raw), len(z)) + z
            else:
                blob = struct.pack("<Q", len(raw)) + raw
            sections[tag].append('<DataArray %s format="appended" offset="%d"/>' % (attrs, len(app)))
            app += blob
    comp = ' compressor="vtkZLibDataCompressor"' if enc == "zlib" else ""
    x = '<?xml version="1.0"?>\n<VTKFile type="UnstructuredGrid" version="1.0" byte_order="LittleEndian" header_type="UInt64"%s>\n' % comp
    x += '<UnstructuredGrid>\n<FieldData><DataArray type="Int32" Name="solid" NumberOfTuples="2" format="ascii">1 3</DataArray></FieldData>\n'
    x += '<Piece NumberOfPoints="5" NumberOfCells="2">\n'
    for tag in ["PointData", "CellData", "Points", "Cells"]:
        x += "<%s>\n%s\n</%s>\n" % (tag, "\n".join(sections[tag]), tag)
    x += "</Piece>\n</UnstructuredGrid>\n"
    data = x.encode()
    if enc in ("raw", "zlib"):
        data += b'<AppendedData encoding="raw">\n_' + app + b"\n</AppendedData>\n"
    return data + b"</VTKFile>\n"


for enc in ["ascii", "base64", "raw", "zlib"]:
    out("vtu", "two-tets-%s.vtu" % enc, vtu(enc))
# one hexahedron as a VTK_POLYHEDRON (faces / faceoffsets) and one quadratic tetrahedron
hexp = [(x, y, z) for z in (0, 1) for y in (0, 1) for x in (0, 1)]
faces = [6, 4, 0, 2, 3, 1, 4, 4, 5, 7, 6, 4, 0, 1, 5, 4, 4, 2, 6, 7, 3, 4, 0, 4, 6, 2, 4, 1, 3, 7, 5]
poly = ('<?xml version="1.0"?>\n<VTKFile type="UnstructuredGrid" version="1.0" byte_order="LittleEndian">\n'
        '<UnstructuredGrid><Piece NumberOfPoints="8" NumberOfCells="1">\n'
        '<Points><DataArray type="Float64" NumberOfComponents="3" format="ascii">%s</DataArray></Points>\n'
        '<Cells><DataArray type="Int64" Name="connectivity" format="ascii">0 1 2 3 4 5 6 7</DataArray>\n'
        '<DataArray type="Int64" Name="offsets" format="ascii">8</DataArray>\n'
        '<DataArray type="UInt8" Name="types" format="ascii">42</DataArray>\n'
        '<DataArray type="Int64" Name="faces" format="ascii">%s</DataArray>\n'
        '<DataArray type="Int64" Name="faceoffsets" format="ascii">%d</DataArray></Cells>\n'
        '</Piece></UnstructuredGrid>\n</VTKFile>\n') % (" ".join("%g %g %g" % p for p in hexp), " ".join(map(str, faces)), len(faces))
out("vtu", "polyhedron.vtu", poly)
q = [(0, 0, 0), (1, 0, 0), (0, 1, 0), (0, 0, 1), (0.5, 0, 0), (0.5, 0.5, 0), (0, 0.5, 0), (0, 0, 0.5), (0.5, 0, 0.5), (0, 0.5, 0.5)]
quad = ('<?xml version="1.0"?>\n<VTKFile type="UnstructuredGrid" version="1.0" byte_order="LittleEndian">\n'
        '<UnstructuredGrid><Piece NumberOfPoints="10" NumberOfCells="1">\n'
        '<Points><DataArray type="Float32" NumberOfComponents="3" format="ascii">%s</DataArray></Points>\n'
        '<Cells><DataArray type="Int32" Name="connectivity" format="ascii">0 1 2 3 4 5 6 7 8 9</DataArray>\n'
        '<DataArray type="Int32" Name="offsets" format="ascii">10</DataArray>\n'
        '<DataArray type="UInt8" Name="types" format="ascii">24</DataArray></Cells>\n'
        '</Piece></UnstructuredGrid>\n</VTKFile>\n') % " ".join("%g %g %g" % p for p in q)
out("vtu", "quadratic-tet.vtu", quad)

# gzip streams: a mesh, two members, an empty member, zeros, truncated
mesh = read(FIX + "/mixed-v41.msh")
out("gzip", "mesh.gz", gzip.compress(mesh, mtime=0))
out("gzip", "two-members.gz", gzip.compress(b"ab", mtime=0) + gzip.compress(b"cd", mtime=0))
out("gzip", "empty.gz", gzip.compress(b"", mtime=0))
out("gzip", "zeros.gz", gzip.compress(bytes(1 << 16), mtime=0))
out("gzip", "truncated.gz", gzip.compress(mesh, mtime=0)[:-9])
out("gzip", "not-gzip", b"\x1f\x8b\x09garbage")

# problem files
for p in sorted(glob.glob("examples/*.toml")):
    out("problem_toml", os.path.basename(p), read(p))
out("problem_toml", "box.toml", """title = "box"
order = 2
[mesh]
generate = { box = { cells = [4, 2, 2], size = [4.0, 1.0, 1.0] } }
[material]
youngs = 200e3
poisson = 0.3
[[fixed]]
selector = { type = "plane", point = [0, 0, 0], normal = [1, 0, 0] }
[[loads]]
type = "traction"
selector = { type = "plane", point = [4, 0, 0], normal = [1, 0, 0] }
traction = [0.0, 0.0, -1.0]
[solver]
method = "cholesky"
""")

# field files
out("query_fields", "f32x3", struct.pack("<3f", 1.0, -2.5, 3.0))
out("query_fields", "f64x2", struct.pack("<2d", 1.0, float("nan")))
out("query_fields", "odd", b"\x00\x01\x02")


def npy(descr, shape, payload, fortran="False"):
    h = "{'descr': '%s', 'fortran_order': %s, 'shape': %s, }" % (descr, fortran, shape)
    h = h + " " * ((64 - (10 + len(h) + 1) % 64) % 64) + "\n"
    return b"\x93NUMPY\x01\x00" + struct.pack("<H", len(h)) + h.encode() + payload


out("query_fields", "f8.npy", npy("<f8", "(3,)", struct.pack("<3d", 1.0, 2.0, 3.0)))
out("query_fields", "f4-2d.npy", npy("<f4", "(2, 2)", struct.pack("<4f", 1, 2, 3, 4)))
out("query_fields", "i4-be.npy", npy(">i4", "(2,)", struct.pack(">2i", -1, 7)))
out("query_fields", "u1.npy", npy("|u1", "(4,)", bytes([1, 2, 3, 255])))
out("query_fields", "huge-shape.npy", npy("<f8", "(4000000000, 4000000000)", b""))

# polygon surfaces: the first byte picks the reader (0 OBJ, 1 PLY, 2 OFF)
P = [(0, 0, 0), (1, 0, 0), (0, 1, 0), (0, 0, 1)]
F = [(0, 2, 1), (0, 1, 3), (1, 2, 3), (0, 3, 2)]
obj = "# tetrahedron\n" + "".join(f"v {x} {y} {z}\n" for x, y, z in P) + "vt 0 0\nvn 0 0 1\ng body\n"
obj += "".join(f"f {a + 1} {b + 1}/1 {c + 1}//1\n" for a, b, c in F) + "f -4 -3 -2 -1\n"
out("surface", "tet.obj", b"\x00" + obj.encode())


def ply_header(fmt, nv=4):
    return (f"ply\nformat {fmt} 1.0\ncomment t\nelement vertex {nv}\nproperty float x\n"
            "property float y\nproperty float z\nproperty uchar red\nelement face 4\n"
            "property list uchar int vertex_indices\nend_header\n").encode()


ply = ply_header("ascii") + b"".join(f"{x} {y} {z} 255\n".encode() for x, y, z in P)
ply += b"".join(f"3 {a} {b} {c}\n".encode() for a, b, c in F)
out("surface", "tet-ascii.ply", b"\x01" + ply)
for e, tag in (("<", "binary_little_endian"), (">", "binary_big_endian")):
    ply = ply_header(tag) + b"".join(struct.pack(e + "fffB", x, y, z, 255) for x, y, z in P)
    ply += b"".join(struct.pack(e + "Biii", 3, a, b, c) for a, b, c in F)
    out("surface", f"tet-{tag}.ply", b"\x01" + ply)
off = "OFF\n# tet\n4 4 6\n" + "".join(f"{x} {y} {z}\n" for x, y, z in P)
off += "".join(f"3 {a} {b} {c} 255 0 0\n" for a, b, c in F)
out("surface", "tet.off", b"\x02" + off.encode())
noff = "NOFF\n4 4 0\n" + "".join(f"{x} {y} {z} 0 0 1\n" for x, y, z in P)
noff += "".join(f"3 {a} {b} {c}\n" for a, b, c in F)
out("surface", "tet-n.off", b"\x02" + noff.encode())
out("surface", "huge-count.off", b"\x02OFF\n4000000000 4000000000 0\n0 0 0\n")
out("surface", "huge-count.ply", b"\x01" + ply_header("binary_little_endian", 4000000000))
out("surface", "two-vertex-face.obj", b"\x00v 0 0 0\nv 1 0 0\nf 1 2\n")

# streaming protocol: ClientMessage protobufs (Subscribe = 1, FrameRequest = 2)
def varint(n):
    b = bytearray()
    while True:
        x, n = n & 0x7F, n >> 7
        if n:
            b.append(x | 0x80)
        else:
            b.append(x)
            return bytes(b)


def pb_bytes(field, payload):
    return varint(field << 3 | 2) + varint(len(payload)) + payload


def pb_varint(field, v):
    return varint(field << 3) + varint(v)


sub = pb_bytes(1, b"Pressure") + pb_bytes(1, b"VelocityX")
sub += pb_bytes(2, b"sqrt(VelocityX^2+VelocityY^2)") + pb_varint(3, 1) + pb_varint(4, 7)
out("stream_decode", "subscribe", pb_bytes(1, sub))
out("stream_decode", "request", pb_bytes(2, pb_varint(1, 3)))
out("stream_decode", "request-zero", pb_bytes(2, pb_varint(1, 0)))
out("stream_decode", "subscribe-empty", pb_bytes(1, b""))
out("stream_decode", "huge-length", varint(1 << 3 | 2) + varint(1 << 62) + b"x")

print("corpora:", {t: len(os.listdir(os.path.join("fuzz/corpus", t))) for t in sorted(os.listdir("fuzz/corpus"))})
