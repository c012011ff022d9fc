"""What a benchmark run records: per-request records, run results and the server parameters behind them."""
