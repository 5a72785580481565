"""``deferlab calibrate``: measure the simulator's host-side costs here, by running the real operations.

Why: a simulator constant must be measured, published or a stated assumption, never fitted. The host side of
SGLang's request path (pickling the items, shared-memory segments, the tokenizer's socket, the scheduler's gloo
``broadcast_pyobj``, host copies, hashing, the eager producer's preprocessing) runs the same on any machine, so
this command runs it through ``impl`` and torch and writes a cost profile (`sim.profile_schema`): each constant
with its value, unit, how, the machine and the spread over the repeats. This CPU also stands in for the
preprocessing device; what cannot run here (ViT, prefill, NVLink) refers to the GPU-class profile.

Default output ``$XDG_CACHE_HOME/deferlab/calibrated.toml`` (``~/.cache/...``); the shipped
``sim/profiles/calibrated-here.toml`` is ``--out`` of a run on the team's testbed. If a measurement cannot run
(the gloo group does not start, a worker dies), one line says so and the rest of the profile is still written;
the simulator then refuses the file, naming the missing constant.

This module measures and builds the profile text; the caller writes it (``run``'s ``write``: the CLI, `reports.cli`,
passes its one atomic writer, `reports.core.atomic.write_text_atomic`), so the instrument does not reach up into the
reports and there is one implementation of crash-safe writing.
"""

from __future__ import annotations

import argparse
import hashlib
import mmap
import os
import pickle
import statistics
import sys
import time
from collections.abc import Callable
from multiprocessing import shared_memory
from pathlib import Path
from typing import Any

import numpy as np

from deferlab.sim.calibrate.core import SMALL, MiB, Recorder, Say, timed
from deferlab.sim.calibrate.crossproc import measure_bcast, measure_socket, run_bcast  # noqa: F401 (run_bcast: re-exported)

DEFAULT_OUT = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "deferlab" / "calibrated.toml"
SIZES = ((512, 512), (1024, 768), (1536, 1024))  # 4 RGB images per request, the largest is the PR's microbenchmark


def _images(size: tuple[int, int], n: int = 4, seed: int = 0) -> list[Any]:
    from PIL import Image

    rng = np.random.default_rng(seed)
    w, h = size
    return [Image.fromarray(rng.integers(0, 256, (h, w, 3), dtype=np.uint8), "RGB") for _ in range(n)]


def _own(item: Any) -> Any:
    """SGLang's eager items own their storage (``.cpu()`` from the GPU). On a CPU-only host impl's ``.cpu()`` is a
    no-op and the items are views of one buffer, which pickle would copy whole per item: clone, to match SGLang."""
    item.feature = item.feature.clone()
    return item


def measure_producers(rec: Recorder) -> dict[str, dict[tuple[int, int], list]]:
    """impl's eager and deferred producers (the real microbenchmark), impl's device pipeline on this CPU."""
    import torch

    from deferlab.impl.pipeline import preprocess
    from deferlab.impl.processor import Processor
    from deferlab.reference.system.policies import RELEASED
    from deferlab.reference.system.profiles import profile

    cfg, n = profile("kimi-k3"), rec.repeats
    eager = Processor(cfg, transport="cpu", policy=RELEASED, cuda_available=False)
    deferred = Processor(cfg, transport="cpu", policy=RELEASED, cuda_available=True)
    items: dict[str, dict[tuple[int, int], list]] = {"fp32": {}, "uint8": {}}
    for w, h in SIZES:
        imgs = _images((w, h))
        rec.say(f"calibrate: impl producers on 4 x {w}x{h} RGB (PIL)")
        te = timed(lambda imgs=imgs: eager.process(imgs), n)
        td = timed(lambda imgs=imgs: deferred.process(imgs), n)
        rec.obs[f"producer_{w}x{h}"] = {"eager_s": statistics.median(te), "deferred_s": statistics.median(td)}
        items["fp32"][(w, h)] = [_own(it) for it in eager.process(imgs).items]
        items["uint8"][(w, h)] = deferred.process(imgs).items
    pixels = 4 * w * h
    what = f"4 x {w}x{h} RGB PIL"
    how = "impl Processor(cuda_available={}).process, " + what
    rec.put("cpu_preprocess_s_per_pixel", [t / pixels for t in te], "s/pixel", how.format(False) + ", per pixel")
    rec.rate("stage_bytes_per_s", 3 * pixels, td, how.format(True) + " (to_chw_uint8(PIL).cpu().contiguous())")
    rec.obs["microbenchmark_4x1536x1024"] = {
        "eager_s": statistics.median(te),
        "deferred_s": statistics.median(td),
        "eager_spread_s": [min(te), max(te)],
        "deferred_spread_s": [min(td), max(td)],
        "repeats": len(te),
        "how": "impl Processor eager (FP32 patches, this CPU as the device) vs deferred (uint8 staging), PIL RGB input",
    }
    tens = [torch.from_numpy(np.array(im)).permute(2, 0, 1).contiguous() for im in imgs]
    elements = sum(t.numel() for t in tens) + sum(int(it.feature.numel()) for it in items["fp32"][(w, h)])
    tp = timed(lambda: preprocess(tens, cfg, device="cpu"), n)
    how = "impl.pipeline.preprocess on the CPU device, "
    rec.put("preprocess_s_per_element", [t / elements for t in tp], "s/element", how + f"4 x {w}x{h}, per element")
    small = [torch.zeros((3, 28, 28), dtype=torch.uint8)]
    tf = timed(lambda: preprocess(small, cfg, device="cpu"), n)
    rec.put("preprocess_fixed_s", tf, "s", how + "one 28x28 image: the cost of a call")
    tiny = [_own(it) for it in deferred.process([torch.zeros((3, 32, 32), dtype=torch.uint8)] * 16).items]
    items["tiny"] = {(32, 32): tiny}
    return items


def measure_pickle(rec: Recorder, items: dict[str, dict[tuple[int, int], list]]) -> None:
    """pickle.dumps / loads of impl's real items, FP32 patches and uint8 pixels, at every size."""
    dumps = lambda its: pickle.dumps(its, protocol=pickle.HIGHEST_PROTOCOL)  # noqa: E731
    for kind in ("fp32", "uint8"):
        rows = {}
        for (w, h), its in items[kind].items():
            blob = dumps(its)
            tdump = timed(lambda its=its: dumps(its), rec.repeats)
            tload = timed(lambda b=blob: pickle.loads(b), rec.repeats)
            med = {"dumps_s": statistics.median(tdump), "loads_s": statistics.median(tload)}
            rows[f"{w}x{h}"] = {"bytes": len(blob), **med}
        rec.obs[f"pickle_{kind}_items"] = rows
        rec.say(
            f"calibrate: pickled {kind} items, " + ", ".join(f"{k} {r['bytes'] / MiB:.1f} MiB" for k, r in rows.items())
        )
        how = f"pickle.{{}} of impl's 4 x {w}x{h} {kind} items, {len(blob) / MiB:.1f} MiB (other sizes: observations)"
        rec.rate(f"pickle_{kind}_bytes_per_s", len(blob), tdump, how.format("dumps"))
        rec.rate(f"unpickle_{kind}_bytes_per_s", len(blob), tload, how.format("loads"))
    tiny = items["tiny"][(32, 32)]
    blob = dumps(tiny)
    how = "{} of 16 tiny impl items (3x32x32 uint8, grid, deferred config), per item"
    for key, fn in (("pickle_item_s", lambda: dumps(tiny)), ("unpickle_item_s", lambda: pickle.loads(blob))):
        rec.put(key, [t / 16 for t in timed(fn, rec.repeats)], "s", how.format(key.split("_")[0]))


def measure_host(rec: Recorder) -> None:
    """Host copies and hashing."""
    src = np.ones(64 * MiB, np.uint8)
    dst = np.empty_like(src)
    rec.say("calibrate: host memcpy and sha256")
    rec.rate("memcpy_bytes_per_s", src.nbytes, timed(lambda: np.copyto(dst, src), rec.repeats), "np.copyto of 64 MiB")
    ts = timed(lambda: hashlib.sha256(memoryview(src)).digest(), rec.repeats)
    rec.rate("cpu_hash_bytes_per_s", src.nbytes, ts, "hashlib.sha256 of 64 MiB, as tensor_hash for a CPU feature")


def measure_shm(rec: Recorder) -> None:
    """ShmPointerMMData: the producer creates, reserves and fills a segment; a receiver opens it, maps it
    privately (ACCESS_COPY), unlinks it, and later reads the pages through that fresh mapping (the H2D source)."""
    import torch

    rec.say("calibrate: POSIX shared memory segments")
    payload = torch.ones(64 * MiB, dtype=torch.uint8)
    stamps: dict[str, list[float]] = {"w4k": [], "w64m": [], "attach": [], "read": []}

    def write(nbytes: int, key: str) -> str:
        t = time.perf_counter()
        seg = shared_memory.SharedMemory(create=True, size=nbytes)
        os.posix_fallocate(seg._fd, 0, nbytes)  # as ShmPointerMMData reserves the pages
        torch.frombuffer(seg.buf, dtype=torch.uint8).copy_(payload[:nbytes])
        seg.close()
        stamps[key].append(time.perf_counter() - t)
        return seg.name

    for _ in range(rec.repeats * SMALL + 1):
        shared_memory.SharedMemory(name=write(4096, "w4k")).unlink()
    for _ in range(rec.repeats + 1):
        name = write(64 * MiB, "w64m")
        t = time.perf_counter()
        hnd = shared_memory.SharedMemory(name=name)
        torch.frombuffer(hnd.buf, dtype=torch.uint8)
        view = mmap.mmap(hnd._fd, 64 * MiB, access=mmap.ACCESS_COPY)
        hnd.unlink()
        hnd.close()
        stamps["attach"].append(time.perf_counter() - t)
        t = time.perf_counter()
        torch.empty(64 * MiB, dtype=torch.uint8).copy_(torch.frombuffer(view, dtype=torch.uint8))
        stamps["read"].append(time.perf_counter() - t)
        view.close()
    small = stamps["w4k"][1:]
    how = "SharedMemory(create) + posix_fallocate + copy in + close"
    base = statistics.median(small)
    rec.rate("shm_write_bytes_per_s", 64 * MiB, stamps["w64m"][1:], f"{how}: 64 MiB minus a 4 KiB segment", base)
    rec.put("shm_item_s", small, "s", f"{how}: a 4 KiB segment, the fixed cost per item")
    how = "open by name + frombuffer + mmap(ACCESS_COPY) + unlink, 64 MiB: a receiver's unpickle and materialize"
    rec.put("shm_attach_s", stamps["attach"][1:], "s", how)
    how = "copy of 64 MiB out of a fresh ACCESS_COPY mapping (page faults included)"
    rec.rate("shm_read_bytes_per_s", 64 * MiB, stamps["read"][1:], how)


def device_as_cpu(rec: Recorder) -> None:
    """The preprocessing device of ``calibrated-here`` is this CPU: its transfers are host copies, its hash sha256."""
    mem, sha = rec.c.get("memcpy_bytes_per_s"), rec.c.get("cpu_hash_bytes_per_s")
    for key, what in (("h2d_bytes_per_s", "H2D"), ("d2h_bytes_per_s", "D2H"), ("hbm_bytes_per_s", "device-memory")):
        if mem:
            rec.c[key] = {**mem, "how": f"this CPU is the device: its {what} copy is a host copy ({mem['how']})"}
    if sha:
        rec.c["gpu_hash_bytes_per_s"] = {**sha, "how": f"this CPU is the device: {sha['how']}"}


def build_profile(repeats: int, say: Say, port: int | None = None) -> tuple[str, list[str]]:
    """Measure everything and render the profile TOML; also the one-line failures, if any."""
    import torch

    from deferlab.sim.costmodel import CALIBRATED_PROFILE, GPU_CLASS_PROFILE
    from deferlab.sim.profile_schema import CONSTANTS, dump_profile

    t0, load0 = time.perf_counter(), os.getloadavg()[0]
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # one core per operation: on a shared host, more threads mostly measure the neighbours
    rec = Recorder(repeats, say)
    failures: list[str] = []
    steps: list[tuple[str, Callable[[], Any]]] = [
        ("host copies", lambda: measure_host(rec)),
        ("shared memory", lambda: measure_shm(rec)),
        ("producers and pickling", lambda: measure_pickle(rec, measure_producers(rec))),
        ("socket", lambda: measure_socket(rec)),
        ("gloo broadcast", lambda: failures.extend(measure_bcast(rec, port))),
    ]
    for what, step in steps:
        try:
            step()
        except Exception as e:  # noqa: BLE001 - one failed measurement must not lose the others
            line = f"calibrate: {what} failed ({type(e).__name__}: {e}); its constants left out"
            print(line, file=sys.stderr)
            failures.append(line)
    torch.set_num_threads(threads)
    device_as_cpu(rec)
    for name, (_, side) in CONSTANTS.items():
        if name not in rec.c and side != "host":
            rec.c[name] = {
                "from": GPU_CLASS_PROFILE,
                "note": "cannot be measured on this machine: the GPU-class figure",
            }
    missing = [n for n in CONSTANTS if n not in rec.c]
    meta = {
        "name": CALIBRATED_PROFILE,
        "description": "measured by deferlab calibrate on this machine, its CPU standing in for the preprocessing "
        f"device; ViT, prefill, NVLink and the serving-loop assumptions from {GPU_CLASS_PROFILE}",
        "machine": rec.mach,
        "decode": "cpu",
        "repeats": repeats,
        "torch_threads": 1,
        "wall_s": round(time.perf_counter() - t0, 1),
        "load_average_1min": [round(load0, 2), round(os.getloadavg()[0], 2)],  # at start and end: other jobs' share
    }
    notes = [f"missing: {n} (its measurement failed)" for n in missing] + failures
    constants = {k: rec.c[k] for k in CONSTANTS if k in rec.c}
    return dump_profile(meta, constants, rec.obs, notes), failures


def add_parser(subparsers: Any) -> argparse.ArgumentParser:
    """``deferlab calibrate [--out FILE] [--repeats N] [--port P]``."""
    p = subparsers.add_parser("calibrate", help="measure host-side costs here and write a cost profile TOML")
    p.add_argument("--out", type=Path, default=DEFAULT_OUT, help=f"profile to write (default {DEFAULT_OUT})")
    p.add_argument("--repeats", type=int, default=5, help="timed repeats per measurement, after a warm-up (default 5)")
    p.add_argument("--port", type=int, default=None, help="TCP port of the gloo rendezvous (default: a free one)")
    return p


def run(args: argparse.Namespace, write: Callable[[Path, str], object]) -> int:
    """Measure, then ``write(args.out, text)``; 0 when complete, 1 when a measurement failed (the rest is written).

    Bad arguments return 2 before anything runs or is written.
    """
    if not 1 <= args.repeats <= 100:
        print(f"deferlab calibrate: --repeats must be in 1..100, got {args.repeats}", file=sys.stderr)
        return 2
    if args.out.is_dir():
        print(f"deferlab calibrate: --out {str(args.out)!r} is a directory; give a .toml file path", file=sys.stderr)
        return 2
    t0 = time.perf_counter()
    text, failures = build_profile(args.repeats, lambda m: print(m, file=sys.stderr, flush=True), args.port)
    write(args.out, text)
    print(f"calibrate: wrote {args.out} in {time.perf_counter() - t0:.0f} s", file=sys.stderr)
    return 1 if failures else 0
