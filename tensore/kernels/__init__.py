"""Kernels: GEMM and convolution tiled into micro-op programs (docs/kernels.md)."""
