"""Import-only stand-in for `torchvision.transforms.v2` (see torchvision/_standin.py)."""

from torchvision._standin import module_getattr
from torchvision.transforms.v2 import functional

__getattr__ = module_getattr(__name__)
