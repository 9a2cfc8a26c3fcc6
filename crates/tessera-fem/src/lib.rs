//! Higher-order simplex FEM assembly (dissertation Chapter 4).
