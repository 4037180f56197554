"""The docstring examples of train_judge.merge run and show what they claim (one case per module that has
one: ``tests.doctests``)."""

import pytest

from tests.doctests import modules_with_examples, run_examples

MODULES = modules_with_examples("train_judge.merge")


def test_modules_with_examples_are_found():
    assert {"train_judge.merge.ties", "train_judge.merge.slerp", "train_judge.merge.chunking"} <= set(MODULES)


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples(name):
    run_examples(name)
