"""Import-only stand-in for `torchvision.transforms` (see torchvision/_standin.py)."""

from torchvision._standin import module_getattr
from torchvision.transforms import functional, v2

__getattr__ = module_getattr(__name__)
