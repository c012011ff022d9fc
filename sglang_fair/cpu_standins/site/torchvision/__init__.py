"""Import-only stand-in for torchvision, for CPU test machines only.

The PyPI torchvision wheel cannot load next to CPU torch 2.13.0 and,
unconstrained, pulls the CUDA torch build. SGLang imports it only for
multimodal models; see torchvision/_standin.py. Never install this on a GPU
machine: the real torchvision belongs there.
"""

from torchvision import io, transforms
from torchvision._standin import module_getattr

# A PEP 440 local version that no `>=` check accepts.
__version__ = "0.0.0+sglangfair.cpu.standin"

__getattr__ = module_getattr(__name__)
