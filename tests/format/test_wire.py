"""Wire formats: the three ways a judge prompt reaches the model."""

import pytest

from prom_reward import ConfigError, UnknownNameError
from prom_reward.format.wire import WIRE_FORMATS, fold_system, get_wire_format, template_accepts_system


def test_inst_form_is_exact():
    assert get_wire_format("inst").render("SYS", "USER") == "[INST] SYS\nUSER [/INST]"


def test_raw_is_the_filled_template_alone():
    assert get_wire_format("raw").render("SYS", "USER") == "USER"


def test_fold_is_the_training_form():
    assert fold_system("SYS", "USER") == "SYS\n\nUSER"
    assert get_wire_format("chat").messages("SYS", "USER", system_role=False) == [
        {"role": "user", "content": "SYS\n\nUSER"}
    ]
    assert get_wire_format("chat").messages("SYS", "USER", system_role=True)[0] == {"role": "system", "content": "SYS"}


def test_unknown_wire_lists_valid_names():
    with pytest.raises(UnknownNameError, match="chat, inst, raw"):
        get_wire_format("mistral")
    assert WIRE_FORMATS.names() == ["chat", "inst", "raw"]


def test_chat_without_tokenizer_explains_fix():
    with pytest.raises(ConfigError, match="wire='inst'"):
        get_wire_format("chat").render("S", "U", None)


def test_mistral_style_template_folds_system(tiny_model_dir):
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(tiny_model_dir)
    assert template_accepts_system(tok) is False
    text = get_wire_format("chat").render("SYS", "USER", tok)
    assert text == f"{tok.bos_token}[INST] SYS\n\nUSER [/INST]"


def test_chatml_template_keeps_system_role(smollm2_dir):
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(smollm2_dir)
    assert template_accepts_system(tok) is True
    text = get_wire_format("chat").render("SYS", "USER", tok)
    assert "<|im_start|>system\nSYS<|im_end|>" in text and text.endswith("<|im_start|>assistant\n")
