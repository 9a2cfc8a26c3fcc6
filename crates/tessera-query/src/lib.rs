//! Query compiler for derived fields (dissertation §6.3.4).
