"""The front-door table, files and command-line half: config JSON, scenario and cost-profile TOML, ``deferlab``.

Config and scenario files reach deferlab through ``--config``, ``deferlab
sim`` and the Python loaders; each row writes the bad file into the test's
temporary folder. CLI rows (`BadCli`) must exit 2 with a ``deferlab: error:``
line naming the option and what is accepted.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from deferlab.reference.system.errors import ConfigError, InputTypeError, InputValueError, ProfileError, ScenarioError
from tests.front_door.api import K3_DICT, Bad


# --- config JSON files (``--config``, ``PreprocessConfig.from_json``) ------------------------------------------------
def _json_file(tmp: Path, text: str) -> Any:
    from deferlab.reference.system.config import PreprocessConfig

    p = tmp / "preprocessor_config.json"
    p.write_text(text)
    return PreprocessConfig.from_json(p)


JSON_ROWS = [
    Bad("json missing file", lambda t: _missing_json(t), ConfigError, r"config file '.*nope.json' does not exist"),
    Bad("json is a directory", lambda t: _dir_json(t), ConfigError, r"is a directory, not a JSON file"),
    Bad("json invalid", lambda t: _json_file(t, "{not json"), ConfigError, r"is not valid JSON"),
    Bad("json array", lambda t: _json_file(t, "[1, 2]"), ConfigError, r"must hold a JSON object, got list"),
    Bad(
        "json wrong shape",
        lambda t: _json_file(t, json.dumps({"image_processor": {"patch_size": 16}})),
        ConfigError,
        r"neither a 'media_proc_cfg' object nor its keys",
    ),
    Bad(
        "json bad value",
        lambda t: _json_file(t, json.dumps({"media_proc_cfg": {**K3_DICT, "patch_size": -14}})),
        InputValueError,
        r"patch_size must be an int >= 1, got -14",
    ),
    Bad(
        "json typo key",
        lambda t: _json_file(t, json.dumps({**K3_DICT, "merge_kernal_size": 2})),
        ConfigError,
        r"unknown key\(s\) \['merge_kernal_size'\]",
    ),
]


def _missing_json(tmp: Path) -> Any:
    from deferlab.reference.system.config import PreprocessConfig

    return PreprocessConfig.from_json(tmp / "nope.json")


def _dir_json(tmp: Path) -> Any:
    from deferlab.reference.system.config import PreprocessConfig

    return PreprocessConfig.from_json(tmp)


# --- scenario TOML (``deferlab sim FILE``, ``sim.load_scenario``) and the simulator's own types ----------------------
def _scenario(tmp: Path, text: str) -> Any:
    from deferlab.sim.scenario import load_scenario

    p = tmp / "bad.toml"
    p.write_text(text)
    return load_scenario(p)


def _topology(**kw: Any) -> Any:
    from deferlab.sim.topology import Topology

    return Topology(**kw)


def _workload(**kw: Any) -> Any:
    from deferlab.sim.workload import WorkloadSpec

    return WorkloadSpec(**kw)


def _missing_scenario(tmp: Path) -> Any:
    from deferlab.sim.scenario import load_scenario

    return load_scenario(tmp / "nope.toml")


SCENARIO_TEXTS = [
    (
        "scenario dp not divisor",
        "[topology]\ntp_size = 8\nattn_dp_size = 3\n",
        r"\[topology\].*attn_dp_size=3 must divide",
    ),
    ("scenario transport", "[topology]\ntransport = 'tcp'\n", r"\[topology\].*transport must be one of"),
    ("scenario topology key", "[topology]\ngpus = 8\n", r"\[topology\]: unknown key\(s\) \['gpus'\]; accepted"),
    ("scenario family", "[workload]\nfamily = 'video'\n", r"\[workload\].*family must be one of"),
    ("scenario rate", "[workload]\nrate = -1.0\n", r"\[workload\].*rate must be a number > 0"),
    ("scenario images range", "[workload]\nimages_per_request = [3, 1]\n", r"images_per_request"),
    ("scenario policy", "policy = 'nope'\n", r"policy = 'nope' is not accepted; accepted: \['PR_33921'"),
    ("scenario profile", "profile = 'kimi-k9'\n", r"profile = 'kimi-k9' is not accepted"),
    ("scenario placement", "[accounting]\nplacement = 'random'\n", r"\[accounting\] placement = 'random' is not"),
    ("scenario gate", "[accounting]\ngate = 'maybe'\n", r"\[accounting\] gate = 'maybe' is not accepted"),
    ("scenario decode", "[latency]\ndecode = 'fpga'\n", r"decode = 'fpga' is not accepted; accepted: \['cpu', 'gpu'\]"),
    ("scenario sweep zero", "[latency]\nsweep_rates = [0.0]\n", r"sweep_rates"),
    ("scenario sweep word", "[latency]\nsweep_rates = 'sometimes'\n", r"sweep_rates = 'sometimes'.*\"auto\""),
    ("scenario overlap", "[latency]\noverlap = 1\n", r"\[latency\] overlap = 1 is not accepted; accepted: true, false"),
    ("scenario cost profile", "cost_profile = 'tpu-class'\n", r"cost_profile = 'tpu-class' is not accepted; accepted:"),
    ("scenario fixed no size", "[workload]\nfamily = 'fixed'\n", r"image_size = None: give \[width, height\] exactly"),
    (
        "scenario fixed 0",
        "[workload]\nfamily = 'fixed'\nimage_size = [0, 5]\n",
        r"image_size must be \[width, height\]",
    ),
    ("scenario unknown key", "colour = 'blue'\n", r"unknown key\(s\) \['colour'\]"),
    ("scenario not toml", "[topology\n", r"not valid TOML"),
]
SCENARIO_ROWS = [
    Bad(name, lambda t, text=text: _scenario(t, text), ScenarioError, r"bad\.toml.*" + match)
    for name, text, match in SCENARIO_TEXTS
] + [
    Bad("scenario missing", _missing_scenario, ScenarioError, r"does not exist; shipped scenarios"),
    Bad("topology dp", lambda t: _topology(tp_size=8, attn_dp_size=3), ScenarioError, r"attn_dp_size=3 must divide tp"),
    Bad("topology nodes", lambda t: _topology(tp_size=8, nodes=3), ScenarioError, r"nodes=3 must divide tp_size=8"),
    Bad("topology ipc nodes", lambda t: _topology(tp_size=8, nodes=2, transport="cuda_ipc"), ScenarioError, r"cross"),
    Bad("topology epd", lambda t: _topology(epd_encoders=2, transport="fabric"), ScenarioError, r"force mm_feature"),
    Bad("topology tp 0", lambda t: _topology(tp_size=0), InputValueError, r"topology.tp_size must be an int >= 1"),
    Bad("topology tp str", lambda t: _topology(tp_size="8"), InputTypeError, r"topology.tp_size must be an int"),
    Bad("topology tp bool", lambda t: _topology(tp_size=True), InputTypeError, r"topology.tp_size must be an int"),
    Bad("topology vision 1", lambda t: _topology(vision_dp=1), InputTypeError, r"topology.vision_dp must be a bool"),
    Bad("topology epd -1", lambda t: _topology(epd_encoders=-1), InputValueError, r"epd_encoders must be an int >= 0"),
    Bad("workload family", lambda t: _workload(family="video"), ScenarioError, r"family must be one of"),
    Bad("workload arrival", lambda t: _workload(arrival="burst"), ScenarioError, r"arrival must be one of"),
    Bad("workload n 0", lambda t: _workload(n_requests=0), ScenarioError, r"n_requests must be an int >= 1"),
    Bad("workload rate 0", lambda t: _workload(rate=0.0), ScenarioError, r"rate must be a number > 0"),
    Bad("workload range", lambda t: _workload(images_per_request=(2, 1)), ScenarioError, r"images_per_request"),
]


# --- cost profile TOML (``deferlab sim --cost-profile FILE``, ``sim.costmodel.load_cost_model``) -------------------
def _cost_profile(tmp: Path, body: str, *, drop: str | None = None) -> Any:
    from deferlab.properties.strategies.sim import cost_profile_file
    from deferlab.sim.costmodel import load_cost_model

    return load_cost_model(cost_profile_file(tmp, body, drop=drop))


def _memcpy(table: str) -> str:
    return f"[constants.memcpy_bytes_per_s]\n{table}\n"


def _raw_profile(tmp: Path, text: str) -> Any:
    from deferlab.sim.costmodel import load_cost_model

    p = tmp / "s.toml"
    p.write_text(text)
    return load_cost_model(p)


# (id, the body of [constants.memcpy_bytes_per_s], what the message must match)
_PUBLISHED = 'unit = "GB/s"\nsource = "published"\nhow = "x"'
MEMCPY_TABLES = [
    (
        "profile unknown unit",
        'value = 1.0\nunit = "furlongs/fortnight"',
        r"'memcpy_bytes_per_s': unit 'furlongs/fortnight' is not known; accepted: \['bytes/s'",
    ),
    ("profile wrong unit", 'value = 1.0\nunit = "ms"', r"unit 'ms' is not known"),
    (
        "profile source",
        'value = 1.0\nunit = "GB/s"\nsource = "vibes"\nhow = "x"',
        r"'memcpy_bytes_per_s': source = 'vibes' is not accepted",
    ),
    (
        "profile measured lacks",
        'value = 1.0\nunit = "GB/s"\nsource = "measured"\nhow = "x"',
        r"'memcpy_bytes_per_s' \(measured\) lacks \['machine', 'spread', 'repeats'\]",
    ),
    ("profile zero rate", f"value = 0.0\n{_PUBLISHED}", r"'memcpy_bytes_per_s' is a rate and must be > 0"),
    ("profile value str", f'value = "fast"\n{_PUBLISHED}', r"'memcpy_bytes_per_s': value must be a finite number"),
    ("profile extra key", f"value = 1.0\n{_PUBLISHED}\ncolour = 1", r"unknown key\(s\) \['colour'\]"),
    ("profile from missing", 'from = "no-such-profile"', r"no-such-profile.*does not exist; shipped profiles"),
]
PROFILE_ROWS = [
    Bad(
        "profile missing constant",
        lambda t: _cost_profile(t, "", drop="memcpy_bytes_per_s"),
        ProfileError,
        r"constant 'memcpy_bytes_per_s' is missing",
    ),
    *(
        Bad(name, lambda t, table=table: _cost_profile(t, _memcpy(table)), ProfileError, match)
        for name, table, match in MEMCPY_TABLES
    ),
    Bad(
        "profile unknown constant",
        lambda t: _cost_profile(
            t, '[constants.warp_speed]\nvalue = 9.0\nunit = "s"\nsource = "assumption"\nhow = "x"\n'
        ),
        ProfileError,
        r"unknown constant\(s\) \['warp_speed'\]",
    ),
    Bad(
        "profile old layout",
        lambda t: _raw_profile(t, "[host]\nmemcpy_bytes_per_s = 1.0\n"),
        ProfileError,
        r"unknown section\(s\) \['host'\]",
    ),
]

FILE_ROWS = JSON_ROWS + SCENARIO_ROWS + PROFILE_ROWS


# --- the command line: exit status 2, the message on stderr -------------------------------------------------------
@dataclass(frozen=True)
class BadCli:
    """One row: ``deferlab argv(tmp)`` must exit 2 with a ``deferlab: error:`` line matching ``match``."""

    id: str
    argv: Callable[[Path], list[str]]
    match: str


def _snapshot(tmp: Path, text: str) -> str:
    """A model snapshot folder whose preprocessor_config.json holds ``text``."""
    (tmp / "snap").mkdir()
    (tmp / "snap" / "preprocessor_config.json").write_text(text)
    return str(tmp / "snap")


def _write(tmp: Path, name: str, text: str) -> str:
    p = tmp / name
    p.write_text(text)
    return str(p)


CLI_ROWS = [
    BadCli("report profile", lambda t: ["report", "--profile", "fast"], r"--profile must be one of 'ci', 'dev'"),
    BadCli("report preset", lambda t: ["report", "--preset", "kimi-k9"], r"--preset: unknown profile 'kimi-k9'"),
    BadCli("report config missing", lambda t: ["report", "--config", str(t / "m.json")], r"--config: .*does not exist"),
    BadCli(
        "report config json",
        lambda t: ["report", "--config", _write(t, "b.json", "{x")],
        r"--config: config file .* not valid JSON",
    ),
    BadCli(
        "report config value",
        lambda t: ["report", "--config", _write(t, "v.json", json.dumps({**K3_DICT, "patch_size": 0}))],
        r"--config: patch_size must be an int >= 1",
    ),
    BadCli(
        "report config and preset",
        lambda t: ["report", "--preset", "kimi-k3", "--config", _write(t, "c.json", json.dumps(K3_DICT))],
        r"not allowed with",
    ),
    BadCli("report skip", lambda t: ["report", "--skip", "everything"], r"--skip: unknown step\(s\) everything"),
    BadCli(
        "report model", lambda t: ["report", "--model", "qwen9"], r"--model: unknown model family 'qwen9'; accepted"
    ),
    BadCli(
        "report model without engine",
        lambda t: ["report", "--model", "internvl"],
        r"--model internvl: deferlab's model serves Kimi-K3 only; accepted with --sglang SPEC or --vllm SPEC",
    ),
    BadCli(
        "report checkpoint class",
        lambda t: ["report", "--checkpoint", _snapshot(t, '{"image_processor_type": "CLIPImageProcessor"}')],
        r"--checkpoint: .*processor class 'CLIPImageProcessor' is no checked family's; accepted: .*Qwen2VL",
    ),
    BadCli(
        "report checkpoint other family",
        lambda t: [
            "report",
            "--vllm",
            "0.34.0",
            "--model",
            "internvl",
            "--checkpoint",
            _snapshot(t, '{"image_processor_type": "Qwen2VLImageProcessor", "patch_size": 16}'),
        ],
        r"names Qwen3-VL's processor, not --model internvl's; accepted: --model qwen3-vl, or no --model",
    ),
    BadCli(
        "report checkpoint family without engine",
        lambda t: ["report", "--checkpoint", _snapshot(t, '{"image_processor_type": "Gemma3ImageProcessor"}')],
        r"\(gemma3\): deferlab's model serves Kimi-K3 only; accepted with --sglang SPEC or --vllm SPEC",
    ),
    BadCli(
        "report from-results",
        lambda t: ["report", "--from-results", str(t / "nowhere")],
        r"--from-results: .*does not exist",
    ),
    BadCli("report baseline missing", lambda t: ["report", "--baseline", str(t / "nb.json")], r"--baseline"),
    BadCli(
        "report baseline schema",
        lambda t: ["report", "--baseline", _write(t, "bs.json", json.dumps({"schema_version": 99}))],
        r"--baseline: .*schema_version",
    ),
    BadCli("report max side", lambda t: ["report", "--sweep-max-side", "0"], r"--sweep-max-side must be an int in 2"),
    BadCli("report limits", lambda t: ["report", "--sweep-limits", "0"], r"--sweep-limits must be an int >= 1"),
    BadCli("report out file", lambda t: ["report", "--out", _write(t, "f", "")], r"--out: .* is not a directory"),
    BadCli(
        "report out unwritable", lambda t: ["report", "--out", "/proc/foo"], r"--out: '/proc/foo' cannot be written"
    ),
    BadCli("sweep max side", lambda t: ["sweep", "--max-side", "100000"], r"--max-side must be an int in 2\.\.8192"),
    BadCli("baseline from", lambda t: ["baseline", "--from", str(t / "nothing.json")], r"--from: cannot read report"),
    BadCli("claims from-results", lambda t: ["claims", "--from-results", str(t / "nowhere")], r"--from-results"),
    BadCli("unknown command", lambda t: ["frobnicate"], r"invalid choice: 'frobnicate'"),
    BadCli("report sglang and impl", lambda t: ["report", "--sglang", "0.5.23", "--impl", "x"], r"not allowed with"),
    BadCli(
        "report sglang not a checkout",
        lambda t: ["report", "--sglang", str(t), "--out", str(t / "r")],
        r"--sglang: sglang source '.*': .* is not an SGLang checkout .*; accepted: 'installed'",
    ),
    BadCli(
        "report sglang not a version",
        lambda t: ["report", "--sglang", "latest", "--out", str(t / "r")],
        r"--sglang: sglang source 'latest': neither 'installed', an existing path nor a version; accepted:",
    ),
    BadCli(
        "report vllm and impl", lambda t: ["report", "--vllm", "0.33.0", "--impl", "x"], r"--vllm: not allowed with"
    ),
    BadCli(
        "report vllm not a version", lambda t: ["report", "--vllm", "latest"], r"--vllm: vllm source 'latest': neither"
    ),
    BadCli(
        "report vllm before kimi-k3",
        lambda t: ["report", "--vllm", "0.26.0", "--out", str(t / "r")],
        r"--vllm: vllm source '0\.26\.0': no Kimi-K3 image path; accepted: 0\.27\.0 and later",
    ),
    BadCli(
        "report vllm unknown version",  # the index says so (or, offline, that it cannot be fetched): one line
        lambda t: ["report", "--vllm", "0.99.0", "--out", str(t / "r")],
        r"--vllm: vllm source '0\.99\.0': .*accepted: 'installed'",
    ),
    BadCli(
        "report vllm not a checkout",
        lambda t: ["report", "--vllm", str(t), "--out", str(t / "r")],
        r"--vllm: vllm source '.*': .* is not a vLLM checkout .*; accepted: 'installed'",
    ),
    BadCli(
        "report checkpoint missing", lambda t: ["report", "--checkpoint", str(t / "m")], r"--checkpoint: .* does not"
    ),
    BadCli("report checkpoint no file", lambda t: ["report", "--checkpoint", str(t)], r"holds no preprocessor_config"),
    BadCli(
        "report checkpoint json",
        lambda t: ["report", "--checkpoint", _snapshot(t, "{x")],
        r"--checkpoint: .*preprocessor_config\.json' is not valid JSON",
    ),
    BadCli(
        "report checkpoint key",
        lambda t: ["report", "--checkpoint", _snapshot(t, json.dumps({**K3_DICT, "merge_kernal_size": 2}))],
        r"--checkpoint: .*unknown key\(s\) \['merge_kernal_size'\]",
    ),
    BadCli("versions vllm before kimi-k3", lambda t: ["versions", "--vllm", "0.22.1"], r"accepted: 0\.27\.0 and later"),
    BadCli("versions not a version", lambda t: ["versions", "latest"], r"VERSION must look like 0\.5\.23"),
    BadCli("versions newest and list", lambda t: ["versions", "--newest", "0.5.23"], r"--newest takes no VERSION"),
    BadCli("versions profile", lambda t: ["versions", "--profile", "fast"], r"--profile must be one of"),
    BadCli(
        "versions baseline",
        lambda t: ["versions", "0.5.23", "--baseline", _write(t, "vb.json", "{}")],
        r"--baseline: .* is not a (versions|deferlab) baseline",
    ),
]
