"""The docstring examples of the train_judge modules of issue 6A run and show what they claim."""

import doctest
import importlib

import pytest

MODULES = ["train_judge.balance", "train_judge.comparative", "train_judge.config", "train_judge.data",
           "train_judge.evaluate", "train_judge.examples", "train_judge.layouts",
           "train_judge.pocket", "train_judge.ship", "train_judge.sft"]


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples(name):
    module = importlib.import_module(name)
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    assert result.attempted > 0 and result.failed == 0
