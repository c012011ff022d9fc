"""What every process of ours shares: settings, the supported SGLang releases, the hook record, message and file formats.

Imports no other part of the binding, so each process's package
(``http``, ``scheduler``, ``controller``, ``ray``) depends on this one only.
"""
