"""The model classes a CPU server registers at start-up (``SGLANG_EXTERNAL_MODEL_PACKAGE``, ``tiny_cpu.CPU_ENV``).

SGLang otherwise imports every model module it ships in each scheduler
process before serving, about 4 s a process on 2 cores. With this package
named, it registers the classes below and imports its own only for an
architecture not found here, so any other model still loads.
"""
