"""Import-only stand-in for `torchvision.io` (see torchvision/_standin.py)."""

from torchvision._standin import module_getattr

__getattr__ = module_getattr(__name__)
