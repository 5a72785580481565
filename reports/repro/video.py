"""The reproducers of the video and decoded-bytes claims (semantics §20): which template fits a recorded row, and
the values it states (the texts are `reports.repro.video_texts`).

Why these and not more: C16 (frames taken) and C18 (times) are pixel-free, so a reproducer needs only the clip's
metadata, which the counterexample names (``Clip(frames=5, fps=5.0, ...)`` and its ``VideoRequest``), and both
sides' own code: the engine's sampling function (the one deferlab runs, semantics §20.5-§20.7) and the checkpoint's
transformers video processor (§20.4); for vLLM's Qwen3-VL, also the processor's own resample of what the loader
read, as vLLM hands it over. C18 is written where the served times are the pinned processor's own
timestamps of the engine's frames (Qwen3-VL on SGLang and LMDeploy), so the script shows the claim with the
engine's indices and no restatement of a time rule. C20's counterexample names the encoded class, size and seed:
the script makes those bytes with Pillow and hands them to the engine's loader and to ``load_image`` (§20.8).
C17 (size, padding, grid, tokens) is written where the served geometry is the pinned processor run on the
engine's frames as the engine hands them (SGLang after its own pre-resize, LMDeploy with the kwargs its
``preprocess`` passes): the script runs the processor on black frames of the clip's size on both sides; vLLM's
(its processor kwargs and Qwen3-VL's resampling) gets none. A row no template fits gets no file (the caller says
so).
"""

from __future__ import annotations

import re
from string import Template
from typing import Any

from deferlab.reports.repro import bytes_texts
from deferlab.reports.repro import video_texts as texts
from deferlab.reports.repro.fitting import literal
from deferlab.reports.repro.served import _literal

CLAIMS = ("C16", "C17", "C18", "C20")
PROCESSORS = {"qwen2.5-vl": "Qwen2VLVideoProcessor", "qwen3-vl": "Qwen3VLVideoProcessor"}
# SGLang's server video dict names the count ``nframes`` (semantics §20.5); the other options keep their names
SGLANG_NAMES = {"num_frames": "nframes"}
# The families whose frames each engine's reproducer takes the way deferlab runs them (semantics §20.5-§20.7):
# vLLM's Qwen3-VL processor resamples a clip its loader read whole: its script runs that resample too.
VIDEO_FAMILIES = {"sglang": ("qwen2.5-vl", "qwen3-vl"), "vllm": ("qwen2.5-vl", "qwen3-vl"), "lmdeploy": ("qwen3-vl",)}
TIMES_FAMILIES = {"sglang": ("qwen3-vl",), "lmdeploy": ("qwen3-vl",)}
GEOMETRY_FAMILIES = {"sglang": ("qwen2.5-vl", "qwen3-vl"), "lmdeploy": ("qwen3-vl",)}
_FAMILIES = {"C16": VIDEO_FAMILIES, "C17": GEOMETRY_FAMILIES, "C18": TIMES_FAMILIES}
_TESTS = {"C16": texts.VIDEO_C16_TEST, "C17": texts.VIDEO_C17_TEST, "C18": texts.VIDEO_C18_TEST}
SERVED = {"sglang": "SGLang's video path", "vllm": "vLLM's video loader", "lmdeploy": "LMDeploy's video loader"}
LOADERS = {"sglang": "SGLang's image loader", "vllm": "vLLM's media connector", "lmdeploy": "LMDeploy's image loader"}
_VIDEO = {
    "sglang": (texts.SGLANG_VIDEO_IMPORTS, texts.SGLANG_VIDEO),
    "vllm": (texts.VLLM_VIDEO_IMPORTS, texts.VLLM_VIDEO),
    "lmdeploy": (texts.LMDEPLOY_VIDEO_IMPORTS, texts.LMDEPLOY_VIDEO),
}
_WHAT = {
    "C16": "the source frames a served video path takes differ from the checkpoint's video processor's",
    "C17": "the served per-frame size, temporal padding, video_grid_thw or tokens differ from the checkpoint's",
    "C18": "the times the model is told each temporal grid step sits at differ from the checkpoint's",
    "C20": "the image an engine's media loader makes of a client's bytes differs from load_image's",
}
_CLIP = re.compile(r"Clip\(frames=(\d+), fps=([0-9.e+-]+), width=(\d+), height=(\d+)\)")
_REQUEST = re.compile(r"VideoRequest\(((?:\w+=[^,()]+(?:, )?)*)\)")
_NUMBER = re.compile(r"-?\d+(?:\.\d+)?(?:e[+-]?\d+)?")
_KIND = re.compile(r"\[[^\[\];]+; (data-uri|file)\]")


def _consts(**values: Any) -> str:
    return "".join(f"{name} = {value!r}\n" for name, value in values.items())


def parse_case(ce: Any) -> tuple[dict[str, Any], dict[str, Any]] | None:
    """(the clip's fields, the request's options set) of a video counterexample ``[Clip(...), VideoRequest(...)]``
    as recorded (reprs); None for anything else."""
    got = literal(ce)
    if not (isinstance(got, list | tuple) and len(got) == 2):
        return None
    clip, request = _CLIP.fullmatch(str(got[0]).strip()), _REQUEST.fullmatch(str(got[1]).strip())
    if clip is None or request is None:
        return None
    options: dict[str, Any] = {}
    for part in filter(None, request.group(1).split(", ")):
        name, _, value = part.partition("=")
        if value == "None":
            continue
        if _NUMBER.fullmatch(value) is None:
            return None
        options[name] = float(value) if any(c in value for c in ".e") else int(value)
    fields = {"frames": int(clip.group(1)), "fps": float(clip.group(2)), "width": int(clip.group(3)),
              "height": int(clip.group(4))}  # fmt: skip
    return fields, options


def _video_config(family: str) -> dict[str, Any]:
    """The checkpoint's video processor config (`reference.system.requests.VIDEO_CONFIGS`, semantics §20.4)."""
    from deferlab.reference.system.requests import VIDEO_CONFIGS

    return dict(VIDEO_CONFIGS[family][0])


def fit_video(cid: str, c: Any, ce: Any, failure: str) -> tuple[str, str, str] | None:
    """(imports, constants, body) of the C16, C17 or C18 reproducer for the row's column; None where the engine's
    frames are not final for the family here, the column is not the default path, or the counterexample is not
    a clip and request (or asks for what the engine takes no option for: total_pixels)."""
    families = _FAMILIES.get(cid, {})
    case = parse_case(ce)
    if c.family not in families.get(c.engine, ()) or c.path is not None or case is None:
        return None
    clip, options = case
    if "total_pixels" in options or clip["frames"] < 1:
        return None
    consts = "# The clip deferlab's counterexample names (its metadata only: semantics §20.3, pixel-free)\n"
    consts += _consts(FRAMES=clip["frames"], FPS=clip["fps"], WIDTH=clip["width"], HEIGHT=clip["height"])
    consts += "# The request's options (VideoRequest's names; semantics §20.4-§20.7 map them to each side)\n"
    consts += _consts(OPTIONS=options)
    if c.engine == "vllm":  # media_io_kwargs['video']: where vLLM samples
        consts += _consts(MEDIA_IO_KWARGS={k: v for k, v in options.items() if k in ("fps", "num_frames")})
    if c.engine == "sglang":  # the server's video dict (--mm-process-config), SGLang's names (semantics §20.5)
        consts += _consts(SERVER_VIDEO_CONFIG={SGLANG_NAMES.get(k, k): v for k, v in options.items()})
    consts += f"# The checkpoint's video processor ({c.family}) and its config (semantics §20.4)\n"
    consts += _consts(PROCESSOR=PROCESSORS[c.family]) + f"VIDEO_CONFIG = {_literal(_video_config(c.family))}\n"
    (stdlib, engine), served = _VIDEO[c.engine]
    imports = "\n" + texts.VIDEO_NEEDS + (stdlib + "\n" if stdlib else "") + engine + texts.VIDEO_IMPORTS
    return imports, consts, served + _TESTS[cid]


def fit_bytes(c: Any, ce: Any, failure: str) -> tuple[str, str, str] | None:
    """(imports, constants, body) of C20's reproducer: the recorded (class, width, height, seed) and the request
    kind the failure names first (a file where it names both); None for another counterexample."""
    from deferlab.reference.system.requests import ENCODED_CLASSES, media_type

    got = literal(ce)
    if c.engine not in bytes_texts.BYTES or not (isinstance(got, list | tuple) and len(got) == 4):
        return None
    cls, width, height, seed = got
    if cls not in ENCODED_CLASSES or not all(isinstance(v, int) and v >= 0 for v in (width, height, seed)):
        return None
    kinds = _KIND.findall(failure)
    kind = "file" if "file" in kinds or not kinds else "data-uri"
    mime, suffix = media_type(cls)
    consts = "# The encoded image deferlab's counterexample names (properties.strategies.encoded's classes)\n"
    consts += _consts(CLS=cls, WIDTH=width, HEIGHT=height, SEED=seed)
    consts += "# How the client sends it: a data URI or a file: URL (semantics §20.8)\n"
    consts += _consts(KIND=kind, MEDIA_TYPE=mime, SUFFIX=suffix)
    imports, served = bytes_texts.BYTES[c.engine]
    return bytes_texts.BYTES_IMPORTS + imports, consts, bytes_texts.BYTES_TEST + served


def render(cid: str, ce: Any, failure: str, c: Any) -> tuple[str, str, Any] | None:
    """(the test's code, what it reproduces, the column) of the template fitting a C16-C18 or C20 row of column
    ``c`` (`reports.repro.families.Column`), or None (another claim, or a row no template fits)."""
    if cid not in CLAIMS:
        return None
    if cid == "C20":
        made = fit_bytes(c, ce, failure) if c.path is None else None
        served = LOADERS.get(c.engine, c.engine)
    elif cid in _FAMILIES:
        made = fit_video(cid, c, ce, failure)
        served = SERVED.get(c.engine, c.engine)
    else:
        return None
    if made is None:
        return None
    imports, consts, body = made
    code = Template(imports + "\n" + consts + body).safe_substitute(cid=cid.lower(), served=served)
    return code.lstrip("\n"), _WHAT[cid], c
