"""The reproducers of the video and decoded-bytes claims (semantics §20): which template fits a recorded row, and
the values it states (the texts are `reports.repro.video_texts`, `reports.repro.video_served_texts`, C19's
`reports.repro.video_pixels`, C20's `reports.repro.bytes_texts`; GLM-4.1V's own, `reports.repro.video_glm_texts`; Gemma 4's,
`reports.repro.video_gemma4_texts`).

Why these: C16 (frames taken), C17 (size, padding, grid, tokens) and C18 (times) are pixel-free, so a reproducer
needs only the clip's metadata, which the counterexample names (``Clip(frames=5, fps=5.0, ...)`` and its
``VideoRequest``), and both sides' own code: the engine's sampling function (the one deferlab runs, semantics
§20.5-§20.7) and the checkpoint's transformers video processor (§20.4), run on black frames of the clip's size for
the geometry. Where the engine computes more by a rule of its own, the script calls that too: vLLM's processor
kwargs (its size aliases), the metadata it hands the processor (Qwen3-VL resampling a clip read whole) and its
Qwen3-VL timestamps; SGLang's Qwen2.5-VL times (no metadata handed over). Where the served times are the pinned
processor's own timestamps of the engine's frames (Qwen3-VL on SGLang and LMDeploy), the script shows the claim
with the engine's indices and no restatement of a time rule. C19 makes the clip itself (`reports.repro
.video_pixels`); C20's counterexample names the encoded class, size and seed: the script makes those bytes with
Pillow and hands them to the engine's loader and to ``load_image`` (§20.8).

What differs per engine (where a script states the request's options and under which names, which families each
claim's script covers, what the served side is called, the constants its functions need) is the engine's own data:
the ``repro_video`` module beside the ``video`` module its plugin registers (`engine_part`); this module tests no
engine's name. A row no template fits gets no file (the caller says so).
"""

from __future__ import annotations

import importlib
import re
from collections.abc import Mapping
from string import Template
from types import ModuleType
from typing import Any

from deferlab.reports.repro import bytes_texts, video_gemma4_texts, video_glm_texts
from deferlab.reports.repro import video_served_texts as more
from deferlab.reports.repro import video_texts as texts
from deferlab.reports.repro.fitting import literal
from deferlab.reports.repro.served import _literal

CLAIMS = ("C16", "C17", "C18", "C19", "C20")
PROCESSORS = {
    "qwen2.5-vl": "Qwen2VLVideoProcessor",
    "qwen3-vl": "Qwen3VLVideoProcessor",
    "glm-4.1v": "Glm4vVideoProcessor",
    "gemma4": "Gemma4VideoProcessor",
}
# family -> its own texts where its trained side is not the Qwen ones' (GLM-4.1V's sampler, padding and prompt
# times, semantics §20.4): per engine its imports and functions (``VIDEO``), per claim its test, its constants
_OWN = {"glm-4.1v": video_glm_texts, "gemma4": video_gemma4_texts}  # Gemma 4: semantics §20.10
_TESTS = {"C16": texts.VIDEO_C16_TEST, "C17": texts.VIDEO_C17_TEST, "C18": texts.VIDEO_C18_TEST}
_VIDEO = {
    "sglang": (texts.SGLANG_VIDEO_IMPORTS, texts.SGLANG_VIDEO),
    "vllm": (texts.VLLM_VIDEO_IMPORTS, texts.VLLM_VIDEO),
    "lmdeploy": (texts.LMDEPLOY_VIDEO_IMPORTS, texts.LMDEPLOY_VIDEO),
}
# (engine, claim) -> (stdlib imports, other imports, the engine's functions, the constants they read) where the
# claim needs more of the engine than its frames (`reports.repro.video_served_texts`)
_MORE = {
    ("vllm", "C17"): (more.VLLM_IMPORTS, "", more.VLLM_PROCESSOR + more.VLLM_GEOMETRY, ("INFO",)),
    ("vllm", "C18"): (more.VLLM_IMPORTS, "", more.VLLM_PROCESSOR + more.VLLM_TIMES, ("INFO",)),
    ("sglang", "C18"): ("", more.SGLANG_IMPORTS, more.SGLANG_TIMES, ()),
}
_WHAT = {
    "C16": "the source frames a served video path takes differ from the checkpoint's video processor's",
    "C17": "the served per-frame size, temporal padding, video_grid_thw or tokens differ from the checkpoint's",
    "C18": "the times the model is told each temporal grid step sits at differ from the checkpoint's",
    "C19": "the frames a served video loader takes from a client's clip, or their pixels, differ from the checkpoint's",
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


def engine_part(engine: str) -> ModuleType | None:
    """The engine's own part of the video reproducers: the ``repro_video`` module beside the ``video`` module its
    plugin registers (`reference.system.engines.EngineFacts.video`), holding as data where a script states the
    request's options, the families each claim's script covers and its served side's names; None for an engine
    with no video path or no such module (its rows get no video file, C20's served side keeps its name)."""
    from deferlab.reference.system.systems import engine as engine_facts

    try:
        video = engine_facts(engine).video
    except Exception:  # noqa: BLE001 - an engine the registry does not know: no part
        return None
    if not video:
        return None
    try:
        return importlib.import_module(video.rpartition(".")[0] + ".repro_video")
    except ModuleNotFoundError:
        return None


def option_constants(part: ModuleType, options: dict[str, Any], family: str | None = None) -> str:
    """The engine's constants of the request's options (``part.OPTIONS``: constant -> (the options it holds, None
    for every one; the engine's names where they differ); a family's own where its path takes them elsewhere,
    ``part.FAMILY_OPTIONS``), in the order the engine lists them."""
    out = ""
    for name, (taken, renames) in getattr(part, "FAMILY_OPTIONS", {}).get(family, part.OPTIONS).items():
        out += _consts(**{name: {renames.get(k, k): v for k, v in options.items() if taken is None or k in taken}})
    return out


def video_consts(c: Any, part: ModuleType, options: dict[str, Any], what: str) -> str:
    """The constants every video script states after its clip: the request's options (``what`` says which), the
    engine's constants of them, and the checkpoint's video processor and config."""
    consts = f"# The request's options ({what})\n" + _consts(OPTIONS=options)
    consts += option_constants(part, options, c.family)
    consts += f"# The checkpoint's video processor ({c.family}) and its config (semantics §20.4)\n"
    return consts + _consts(PROCESSOR=PROCESSORS[c.family]) + f"VIDEO_CONFIG = {_literal(_video_config(c.family))}\n"


def fit_video(cid: str, c: Any, ce: Any, failure: str) -> tuple[str, str, str] | None:
    """(imports, constants, body) of the C16, C17 or C18 reproducer for the row's column; None where the engine's
    frames are not final for the family here, the column is not the default path, or the counterexample is not
    a clip and request (or asks for what the engine takes no option for: total_pixels)."""
    part = engine_part(c.engine)
    case = parse_case(ce)
    if part is None or c.family not in part.FAMILIES.get(cid, ()) or c.path is not None or case is None:
        return None
    clip, options = case
    if "total_pixels" in options or clip["frames"] < 1:
        return None
    consts = "# The clip deferlab's counterexample names (its metadata only: semantics §20.3, pixel-free)\n"
    consts += _consts(FRAMES=clip["frames"], FPS=clip["fps"], WIDTH=clip["width"], HEIGHT=clip["height"])
    consts += video_consts(c, part, options, "VideoRequest's names; semantics §20.4-§20.7 map them to each side")
    own = _OWN.get(c.family)
    if own is not None:
        if c.engine not in own.VIDEO or any(k in options for k in getattr(own, "NO_OPTIONS", ())):
            return None
        (stdlib, engine), served = own.VIDEO[c.engine]
        consts += "".join(_consts(**{n: part.CONSTANTS[c.family][n]}) for n in own.NAMES[c.engine])
        imports = "\n" + texts.VIDEO_NEEDS + stdlib + "\n" + engine + texts.VIDEO_IMPORTS + own.IMPORTS
        return imports, consts, served + own.TESTS[cid]
    (stdlib, engine), served = _VIDEO[c.engine]
    test, more_of = _TESTS[cid], _MORE.get((c.engine, cid), ("", "", "", ()))
    if cid == "C18" and c.family in getattr(part, "PROCESSOR_TIMES", ()):
        more_of = ("", "", "", ())  # the processor's own timestamps of the engine's frames: VIDEO_C18_TEST
    elif cid == "C18":
        test = more.TRAINED_TIMES  # the engine's own time rule (its _served_times) against the checkpoint's
    extra_std, extra, body, names = more_of
    consts += "".join(_consts(**{n: part.CONSTANTS[c.family][n]}) for n in names)
    stdlib += extra_std
    imports = "\n" + texts.VIDEO_NEEDS + (stdlib + "\n" if stdlib else "") + engine + texts.VIDEO_IMPORTS + extra
    return imports, consts, served + body + test


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


def render(
    cid: str, ce: Any, failure: str, c: Any, row: Mapping[str, Any] | None = None
) -> tuple[str, str, Any] | None:
    """(the test's code, what it reproduces, the column) of the template fitting a C16-C20 row of column ``c``
    (`reports.repro.families.Column`), or None (another claim, or a row no template fits); ``row``, the whole
    verdict row, where C19's evidence names more failing clip kinds than its counterexample."""
    if cid not in CLAIMS:
        return None
    part = engine_part(c.engine)
    if cid == "C20":
        made = fit_bytes(c, ce, failure) if c.path is None else None
        served = getattr(part, "LOADER", c.engine)
    elif cid == "C19":
        from deferlab.reports.repro import video_gemma4_pixels, video_glm_pixels, video_pixels

        own = {"glm-4.1v": video_glm_pixels.fit, "gemma4": video_gemma4_pixels.fit}  # own decode texts (§20.4, §20.10)
        made = own.get(c.family, video_pixels.fit)(c, part, ce, row)
        if made is not None and part is not None:
            what = "none: the claim runs each side's loader at its defaults"
            made = (made[0], made[1] + video_consts(c, part, {}, what), made[2])
        served = getattr(part, "SERVED", c.engine)
    else:
        made = fit_video(cid, c, ce, failure)
        served = getattr(part, "SERVED", c.engine)
    if made is None:
        return None
    imports, consts, body = made
    code = Template(imports + "\n" + consts + body).safe_substitute(cid=cid.lower(), served=served)
    return code.lstrip("\n"), _WHAT[cid], c
