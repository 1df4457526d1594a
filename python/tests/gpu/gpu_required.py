"""What every GPU test module imports first: torch with a CUDA device.

``from gpu_required import torch`` skips the importing module, saying why,
where torch is not importable or sees no CUDA device (CPU-only CI), so the
GPU suite reports its skips instead of failing to collect.
"""

import pytest

try:
    import torch
except ImportError as error:
    pytest.skip(f"no CUDA device: torch is not importable ({error})",
                allow_module_level=True)
if not torch.cuda.is_available():
    pytest.skip("no CUDA device: torch.cuda.is_available() is False",
                allow_module_level=True)

__all__ = ["torch"]
