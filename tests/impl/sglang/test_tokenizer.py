"""`impl.sglang.tokenizer`: the stub tokenizer, the placeholder prompt and the media config SGLang's processor gets."""

from __future__ import annotations

import pytest

from deferlab.impl.sglang import tokenizer
from deferlab.reference.system.profiles import profile


@pytest.mark.parametrize("n", [0, 1, 2, 5])
def test_the_prompt_has_one_placeholder_per_image(n):
    ids = tokenizer.prompt_ids(n)
    assert ids.count(tokenizer.IMAGE_TOKEN_ID) == n and ids[0] == 1 and ids[-1] == 3
    assert ids.count(2) == max(n - 1, 0)  # a separator between images, none after the last


def test_control_tokens_get_their_ids_and_other_text_one_id_per_char():
    tok = tokenizer.StubTokenizer()
    text = f"a<|media_begin|>{tokenizer.IMAGE_TOKEN}<|media_end|>b"
    assert tok.encode(text) == [1000 + ord("a"), 11, tokenizer.IMAGE_TOKEN_ID, 13, 1000 + ord("b")]
    batch = tok(["ab", "cd"]).input_ids
    assert batch.tolist() == [[1000 + ord("a"), 1000 + ord("b")], [1000 + ord("c"), 1000 + ord("d")]]
    assert tokenizer.IMAGE_TOKEN_ID not in tok.encode("media_pad and <|media_pad")  # only the whole token


def test_the_media_config_is_the_checkpoint_one_without_deferlabs_own_cap():
    cfg = profile("kimi-k3")
    media = tokenizer.media_proc_cfg(cfg)
    assert "max_pixels" not in media
    assert media == {k: v for k, v in cfg.to_media_proc_cfg().items() if k != "max_pixels"}
    assert media["patch_size"] == cfg.patch_size and media["in_patch_limit"] == cfg.in_patch_limit
