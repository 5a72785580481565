"""`impl.vllm.serving` without a release: the settings' front door, the model class read off a source file, the
names a path gets, and the checkpoint folder the release's config lookup reads."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest

from deferlab.impl.vllm import serving
from deferlab.reference.system.errors import InputTypeError, InputValueError

pytestmark = pytest.mark.extra("vllm")  # vLLM runs for real: numba and pydantic (the vllm extra)


def test_settings_refuse_bad_input_in_one_line():
    assert serving.Settings() == serving.Settings(None, {}, "bfloat16")
    with pytest.raises(InputValueError, match=r"^dtype 'fp16' is not accepted; accepted: bfloat16, float32$"):
        serving.Settings(dtype="fp16")
    with pytest.raises(InputTypeError, match=r"^device_normalize must be None, True or False, got 'yes'"):
        serving.Settings(device_normalize="yes")
    with pytest.raises(InputTypeError, match=r"^processor_kwargs must be a mapping"):
        serving.Settings(processor_kwargs=[("max_pixels", 1)])
    assert serving.Settings().replace(dtype="float32").dtype == "float32"


def test_the_model_class_is_read_off_the_source_with_same_module_bases(tmp_path: Path):
    (tmp_path / "m.py").write_text(
        textwrap.dedent(
            """
            class Base:
                supports_mm_device_do_normalize = True
            class Child(Base):
                def __init__(self):
                    self.norm = build_mm_input_norm(config, layout="bchw")
            class Plain:
                x: int = 1
            class Off(Base):
                supports_mm_device_do_normalize: bool = False
            """
        )
    )
    read = {name: serving.ModelClass(name, "m.py") for name in ("Base", "Child", "Plain", "Off", "Absent")}
    assert {n: m.supports_device_normalize(tmp_path) for n, m in read.items()} == {
        "Base": True,
        "Child": True,
        "Plain": False,
        "Off": False,
        "Absent": None,
    }
    assert read["Child"].norm_layout(tmp_path) == "bchw" and read["Base"].norm_layout(tmp_path) == "pcl"
    assert serving.ModelClass("X", "missing.py").supports_device_normalize(tmp_path) is None


def test_a_path_is_named_by_what_it_does_beside_the_releases_default():
    assert serving.roles(True, True, "bfloat16", "host-normalized") == ("device-normalized", "VLLM", "bfloat16")
    assert serving.roles(False, True, "bfloat16", "host-normalized") == (
        "host-normalized",
        "VLLM host-normalized",
        "float32",
    )
    assert serving.roles(False, False, "bfloat16", "served") == ("served", "VLLM", "float32")
    assert serving.roles(True, False, "float32", "served")[1] == "VLLM device-normalized"


def test_the_checkpoint_folder_holds_the_config_and_empty_lookups():
    cfg = {"image_mean": [0.5] * 3, "image_std": [0.5] * 3}
    folder = Path(serving.config_folder(cfg))
    assert json.loads((folder / "preprocessor_config.json").read_text()) == cfg
    assert [json.loads((folder / n).read_text()) for n in ("processor_config.json", "tokenizer_config.json")] == [
        {},
        {},
    ]
    assert serving.config_folder(dict(cfg)) == str(folder)  # one folder per distinct config
    held = serving.model_config(cfg, mm_config="mm")
    assert held.model == str(folder) and held.hf_image_processor_config == cfg and held.get_multimodal_config() == "mm"
