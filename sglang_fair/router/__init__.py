"""Data-parallel routing: engine-agnostic routers (D2LPM and baselines)."""
