#!/usr/bin/env python3
"""vLLM's device normalization on CUDA: the release's Triton kernel against its ``forward_native`` (one short run).

Why: on a CPU deferlab runs ``FusedMMInputNorm.forward_native`` (multiply, then add: two fp32 roundings); a CUDA
server runs ``fused_mm_input_norm_triton``, whose ``x * w + b`` Triton may contract into one FMA (one rounding).
This compares the two for every uint8 level x channel, in float32 and bfloat16, for mean/std 0.5/0.5 and CLIP's,
and against the single-rounded FMA computed exactly on the host. It prints one JSON summary (counts of differing
values, the first example) and writes it to ``--out`` when given.

Where the kernel comes from (the summary's ``source``): the cached vLLM release loaded through deferlab's loader
(``DEFERLAB_VLLM``, default the driver's release; ``--vllm-cache`` names a deferlab cache folder or a tarball
of one made here with ``--pack``, for a machine without the cache). Only if that load fails is the 20-line
kernel restated below, and the summary says so and why.

    python scripts/gpu_norm_check.py [--out FILE] [--vllm-cache DIR|TGZ]   # exits 0 with a skip line without CUDA
    python scripts/gpu_norm_check.py --pack build/vllm-py.tgz               # the cached release's Python, for carry
"""

from __future__ import annotations

import argparse
import atexit
import json
import os
import shutil
import sys
import tarfile
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CLIP = ([0.48145466, 0.4578275, 0.40821073], [0.26862954, 0.26130258, 0.27577711])
HALF = ([0.5, 0.5, 0.5], [0.5, 0.5, 0.5])
NORM = "vllm.model_executor.layers.fusion.mm_input_norm"


def _scratch(prefix: str) -> Path:
    """A temporary folder removed when the script exits."""
    folder = Path(tempfile.mkdtemp(prefix=prefix))
    atexit.register(shutil.rmtree, folder, True)
    return folder


def _deferlab() -> None:
    """Make ``deferlab`` importable from this checkout (it is a namespace over the checkout's folders)."""
    try:
        import deferlab  # noqa: F401
    except ImportError:
        link = _scratch("deferlab-ns-") / "deferlab"
        link.symlink_to(ROOT, target_is_directory=True)
        sys.path.insert(0, str(link.parent))


def _spec() -> str:
    _deferlab()
    from deferlab.impl.vllm.sources import DEFAULT_VERSION

    return os.environ.get("DEFERLAB_VLLM", DEFAULT_VERSION)


def pack(out: Path) -> int:
    """A tarball of the cached release's Python tree, its RECORD copy and metadata (what a load verifies)."""
    _deferlab()
    from deferlab.impl.loader import wheels
    from deferlab.impl.vllm.sources import ENGINE

    spec = _spec()
    tree = wheels.cached_tree(ENGINE, spec)
    if tree is None:
        print(f"gpu_norm_check: vllm {spec} is not cached here; fetch it first (python -m deferlab.impl.loader check "
              f"vllm {spec})", file=sys.stderr)  # fmt: skip
        return 2
    out.parent.mkdir(parents=True, exist_ok=True)
    with tarfile.open(out, "w:gz") as tar:
        for name in ("vllm", wheels.RECORD, wheels.META):
            tar.add(tree / name, arcname=f"vllm/{spec}/{name}")
    print(f"gpu_norm_check: packed vllm {spec} into {out} ({out.stat().st_size // 1024} KiB)")
    return 0


def _use_cache(where: str) -> None:
    path = Path(where)
    if path.is_file():
        folder = _scratch("deferlab-cache-")
        with tarfile.open(path) as tar:
            tar.extractall(folder, filter="data")
        path = folder
    os.environ["DEFERLAB_CACHE"] = str(path)
    os.environ["DEFERLAB_OFFLINE"] = "1"


def released_kernel() -> tuple[object, object, str]:
    """(kernel, build(mean, std) -> FusedMMInputNorm, source): the release's, through deferlab's loader."""
    _deferlab()
    from deferlab.impl.vllm import serving, sources

    source = sources.load(_spec())
    module = source.module(NORM)

    def build(mean: list[float], std: list[float]) -> object:
        return serving.input_norm(source, {"image_mean": mean, "image_std": std}, "pcl")

    return module.fused_mm_input_norm_triton, build, f"{source.name} through deferlab's loader ({source.root})"


def restated_kernel(why: str) -> tuple[object, object, str]:
    """The release's kernel and ``forward_native``, restated (only when the release cannot be loaded here)."""
    import torch
    import triton
    import triton.language as tl

    @triton.jit
    def kernel(x_ptr, y_ptr, w_ptr, b_ptr, numel, L, C: tl.constexpr, BLOCK: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        mask = offs < numel
        c = (offs // L) % C
        x = tl.load(x_ptr + offs, mask=mask, other=0, eviction_policy="evict_first").to(tl.float32)
        w = tl.load(w_ptr + c, mask=mask, other=0).to(tl.float32)
        b = tl.load(b_ptr + c, mask=mask, other=0).to(tl.float32)
        tl.store(y_ptr + offs, x * w + b, mask=mask, eviction_policy="evict_first")

    def run(inputs: torch.Tensor, outputs: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
        p, c, length = inputs.shape
        kernel[(triton.cdiv(p * c * length, 1024),)](
            inputs.contiguous(), outputs, weight, bias, p * c * length, length, C=c, BLOCK=1024, num_warps=4
        )
        return outputs

    class Native(torch.nn.Module):
        def __init__(self, mean: list[float], std: list[float]) -> None:
            super().__init__()
            m, s = torch.tensor(mean, dtype=torch.float32), torch.tensor(std, dtype=torch.float32)
            self.register_buffer("weight", (1 / 255) / s)
            self.register_buffer("bias", -m / s)
            self.channel = len(mean)

        def forward_native(self, x: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
            x3 = x.reshape(x.shape[0], self.channel, -1)
            return (x3 * self.weight.view(1, -1, 1) + self.bias.view(1, -1, 1)).reshape(x.shape).to(dtype)

    return run, Native, f"restated in scripts/gpu_norm_check.py ({why})"


def compare(kernel: object, build: object, mean: list[float], std: list[float], device: str = "cuda") -> dict:
    """Kernel vs forward_native (CPU and CUDA) vs the exact single-rounded FMA, per dtype: counts, first example."""
    import numpy as np
    import torch

    norm = build(mean, std)
    x = torch.arange(256, dtype=torch.uint8).repeat(3).reshape(1, 3 * 256)
    weight, bias = norm.weight.float(), norm.bias.float()
    fma = (np.arange(256, dtype=np.float64)[None] * weight.numpy()[:, None].astype(np.float64)
           + bias.numpy()[:, None].astype(np.float64)).astype(np.float32)  # fmt: skip
    result = {"mean": mean, "std": std}
    for name, dtype in (("float32", torch.float32), ("bfloat16", torch.bfloat16)):
        cpu = norm.forward_native(x, dtype).float().reshape(3, 256).numpy()
        cuda_norm = norm.to(device)
        on_cuda = cuda_norm.forward_native(x.to(device), dtype).float().reshape(3, 256).cpu().numpy()
        y = torch.empty((1, 3, 256), dtype=dtype, device=device)
        kernel(x.to(device).reshape(1, 3, 256), y, cuda_norm.weight, cuda_norm.bias)
        tri = y.float().reshape(3, 256).cpu().numpy()
        cuda_norm.to("cpu")
        fma_d = torch.from_numpy(fma).to(dtype).float().numpy()
        row = {}
        for label, other in (("native_cpu", cpu), ("native_cuda", on_cuda), ("fma_exact", fma_d)):
            differ = np.argwhere(tri.view(np.uint32) != other.view(np.uint32))
            first = None
            if len(differ):
                c, level = (int(v) for v in differ[0])
                first = {"channel": c, "level": level, "triton": float(tri[c, level]), label: float(other[c, level])}
            row[f"triton_vs_{label}"] = {"differ": int(len(differ)), "of": int(tri.size), "first": first}
        result[name] = row
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, help="also write the JSON summary here")
    parser.add_argument("--vllm-cache", help="a deferlab cache folder, or a tarball made with --pack")
    parser.add_argument("--pack", type=Path, help="write a tarball of the cached release's Python and exit")
    args = parser.parse_args(argv)
    if args.pack:
        return pack(args.pack)
    try:
        import torch
    except ImportError:
        print("gpu_norm_check: skip (torch is not installed)")
        return 0
    if not torch.cuda.is_available():
        print("gpu_norm_check: skip (no CUDA device)")
        return 0
    try:
        import triton  # noqa: F401
    except ImportError:
        print("gpu_norm_check: skip (triton is not installed)")
        return 0
    if args.vllm_cache:
        _use_cache(args.vllm_cache)
    try:
        kernel, build, source = released_kernel()
    except Exception as e:  # noqa: BLE001 - any failure to load the release: restate, and say why
        kernel, build, source = restated_kernel(f"{type(e).__name__}: {str(e).splitlines()[0][:300] if str(e) else ''}")
    summary = {
        "source": source,
        "device": torch.cuda.get_device_name(0),
        "torch": torch.__version__,
        "triton": __import__("triton").__version__,
        "stats": {name: compare(kernel, build, *stats) for name, stats in (("0.5/0.5", HALF), ("clip", CLIP))},
    }
    text = json.dumps(summary, indent=2)
    print(text)
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(text + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
