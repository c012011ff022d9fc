"""Test and demo support: a tiny random-weight model and a real-server launcher.

Nothing here is needed to serve with sglang-fair; tests, the benchmark's
`--launch` option and the demo use it to run the real SGLang engine on CPU.
"""
