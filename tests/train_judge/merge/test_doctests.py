"""The docstring examples of train_judge.merge run and show what they claim."""

import doctest
import importlib
import pkgutil

import pytest

import train_judge.merge

MODULES = sorted(m.name for m in pkgutil.walk_packages(train_judge.merge.__path__, "train_judge.merge."))


def test_every_module_is_found():
    assert {"train_judge.merge.ties", "train_judge.merge.slerp", "train_judge.merge.engine"} <= set(MODULES)


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples(name):
    module = importlib.import_module(name)
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    assert result.failed == 0
