"""The CPU stand-ins in support/cpu_shims (installed by scripts/install_cpu.sh)."""

import pytest

torch = pytest.importorskip("torch")
sgl_kernel = pytest.importorskip("sgl_kernel")
if "sglangfair" not in getattr(sgl_kernel, "__version__", ""):
    pytest.skip("the real sgl_kernel is installed, not the CPU stand-in", allow_module_level=True)


def test_assign_req_to_token_pool_writes_each_requests_slots_in_order():
    table = torch.full((4, 8), -1, dtype=torch.int32)
    rows = torch.tensor([2, 0, 3])
    starts = torch.tensor([0, 3, 5])
    ends = torch.tensor([2, 6, 5])  # request 3 adds no token
    slots = torch.tensor([10, 11, 20, 21, 22], dtype=torch.int64)
    sgl_kernel.assign_req_to_token_pool_cpu(rows, table, starts, ends, slots, table.shape[1])
    assert table[2, :3].tolist() == [10, 11, -1]
    assert table[0, 2:7].tolist() == [-1, 20, 21, 22, -1]
    assert (table[3] == -1).all() and (table[1] == -1).all()


def test_stand_in_registers_no_sgl_kernel_ops():
    # SGLang switches onto its Intel AMX kernels when this op exists.
    assert not hasattr(torch.ops.sgl_kernel, "convert_weight_packed")


def test_unimplemented_kernels_fail_loudly_and_unknown_ones_do_not_import():
    with pytest.raises(NotImplementedError, match="copy_all_layer_kv_cache_cpu"):
        sgl_kernel.copy_all_layer_kv_cache_cpu()
    with pytest.raises(ImportError):
        from sgl_kernel import rmsnorm  # noqa: F401  SGLang's ImportError fallbacks rely on this


def test_torchvision_stand_in_imports_but_refuses_use():
    from torchvision.transforms import InterpolationMode, Normalize
    from torchvision.transforms import functional

    assert functional.__name__ == "torchvision.transforms.functional"
    assert "BICUBIC" in repr(InterpolationMode.BICUBIC)
    with pytest.raises(NotImplementedError, match="torchvision.transforms.Normalize"):
        Normalize(mean=[0.5], std=[0.5])
