"""The CPU stand-ins in sglang_fair/cpu_standins (put on the path by scripts/install_cpu.sh or the launcher)."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

from sglang_fair import cpu_standins

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


def _bare_python(extra_path: str = "") -> dict:
    """An environment whose imports see neither this venv's .pth files nor sglang-fair's checkout:
    only the standard library, what ``extra_path`` adds, and sglang_fair itself (by its folder)."""
    package_root = str(Path(cpu_standins.__file__).resolve().parents[2])
    return {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in (package_root, extra_path) if p)}


def test_launcher_activation_finds_both_modules_in_a_process_that_lacks_them(tmp_path):
    code = ("import os, sys, importlib.util as u; from sglang_fair import cpu_standins as c; "
            "print(c.missing()); print(c.activate_if_missing()); print(c.missing()); "
            "print(os.environ['PYTHONPATH'].split(os.pathsep)[0] == str(c.SITE))")
    # -S: no site-packages, so nothing of this venv (the .pth included) is visible.
    out = subprocess.run([sys.executable, "-S", "-c", code], env=_bare_python(), cwd=tmp_path,
                         capture_output=True, text=True, check=True).stdout.split("\n")
    assert out[:4] == ["['sgl_kernel', 'torchvision']", "['sgl_kernel', 'torchvision']", "[]", "True"]


def test_install_writes_a_pth_naming_the_site_folder(tmp_path):
    path = cpu_standins.install(tmp_path)
    assert path == tmp_path / cpu_standins.PTH_NAME
    assert path.read_text().strip() == str(cpu_standins.SITE)
    assert (cpu_standins.SITE / "sgl_kernel" / "__init__.py").is_file()


def test_install_refuses_where_a_real_package_would_be_shadowed(tmp_path):
    real = tmp_path / "real"
    (real / "torchvision").mkdir(parents=True)
    (real / "torchvision" / "__init__.py").write_text("")
    code = "from sglang_fair.cpu_standins.__main__ import main; raise SystemExit(main(['--install']))"
    done = subprocess.run([sys.executable, "-S", "-c", code], env=_bare_python(str(real)), cwd=tmp_path,
                          capture_output=True, text=True)
    assert done.returncode == 2
    assert "a real torchvision is installed" in done.stderr and str(real) in done.stderr
