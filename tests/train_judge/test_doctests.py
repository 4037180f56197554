"""The docstring examples of the train_judge modules (train_judge.merge has its own) run and show what they
claim (one case per module that has one: ``tests.doctests``)."""

import pytest

from tests.doctests import modules_with_examples, run_examples

MODULES = modules_with_examples("train_judge", exclude=("train_judge.merge",))


def test_modules_with_examples_are_found():
    assert {"train_judge.comparative", "train_judge.balance", "train_judge.layouts"} <= set(MODULES)


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples(name):
    run_examples(name)
