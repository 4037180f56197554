"""``python -m train_judge.evaluate`` refuses bad arguments before any model is loaded (exit status 2)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from train_judge.evaluate import main


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--num-samples", "0"], "--num-samples: expected an int >= 1, got 0"),
        (["--max-tokens", "-5"], "--max-tokens: expected an int >= 1, got -5"),
        (["--pairs", "-1"], "--pairs: expected an int >= 0, got -1"),
        (["--dev-limit", "0"], "--dev-limit: expected an int >= 1, got 0"),
        (["--batch-size", "0"], "--batch-size: expected an int >= 1, got 0"),
    ],
)
def test_bad_counts_stop_before_any_work(tmp_path: Path, capsys, args: list[str], message: str) -> None:
    with pytest.raises(SystemExit) as e:
        main(["--model", str(tmp_path / "no-model"), "--out", str(tmp_path / "r.json"), *args])
    assert e.value.code == 2 and message in capsys.readouterr().err
    assert not (tmp_path / "r.json").exists()


def test_an_out_file_in_a_missing_folder_stops_before_any_work(tmp_path: Path, capsys) -> None:
    """Before: the results of a whole evaluation were lost to a FileNotFoundError at the end."""
    with pytest.raises(SystemExit) as e:
        main(["--model", str(tmp_path / "no-model"), "--out", str(tmp_path / "missing" / "r.json")])
    assert e.value.code == 2 and "--out: the folder of" in capsys.readouterr().err


def test_the_pipeline_checks_the_same_counts_before_training(tmp_path: Path, capsys) -> None:
    from train_judge.pocket_pipeline import main as pipeline

    with pytest.raises(SystemExit) as e:
        pipeline(["--out", str(tmp_path / "run"), "--num-samples", "0"])
    assert e.value.code == 2 and "--num-samples: expected an int >= 1, got 0" in capsys.readouterr().err
    assert not (tmp_path / "run").exists()


def test_a_config_error_is_one_line_and_status_2(tmp_path: Path, capsys) -> None:
    with pytest.raises(SystemExit) as e:
        main(["--model", str(tmp_path / "no-model"), "--out", str(tmp_path / "r.json")])
    err = capsys.readouterr().err
    assert e.value.code == 2 and err.startswith("error: ") and "Traceback" not in err


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (b'{"prompt": "p", "response 1": "a", "response 2": "b", "label": 0}\n{"prompt": "p", "r', ":2: not valid"),
        (b'{"prompt": "p", "response 1": "a", "label": 0}\n', ": row 0: 'response 2' missing or of the wrong type"),
        (b'{"prompt": "p", "response 1": "a", "response 2": "b", "label": "0"}\n', ": row 0: 'label' missing"),
    ],
)
def test_a_broken_autoj_file_names_file_row_and_field(tmp_path: Path, data: bytes, message: str) -> None:
    from prom_reward.errors import InputError
    from train_judge.evaluate import autoj_subset

    (tmp_path / "autoj.jsonl").write_bytes(data)
    with pytest.raises(InputError, match="^" + re.escape(str(tmp_path / "autoj.jsonl")) + message):
        autoj_subset(tmp_path / "autoj.jsonl", 4)


def test_an_adapter_folder_without_weights_is_a_config_error(tmp_path: Path, capsys) -> None:
    (tmp_path / "adapter").mkdir()
    with pytest.raises(SystemExit) as e:
        main(["--model", "m", "--adapter", str(tmp_path / "adapter"), "--out", str(tmp_path / "r.json")])
    err = capsys.readouterr().err
    assert e.value.code == 2 and "expected a PEFT LoRA folder with adapter_model.safetensors" in err
