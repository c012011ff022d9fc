"""Import-only stand-in for `torchvision.transforms.v2.functional` (see torchvision/_standin.py)."""

from torchvision._standin import module_getattr

__getattr__ = module_getattr(__name__)
