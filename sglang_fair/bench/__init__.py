"""Benchmark harness: replay workloads against a live server or the simulator."""
