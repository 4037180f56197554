"""Every example in the library's docstrings runs and shows what it claims (one case per module that has
one: ``tests.doctests``)."""

import pytest

from tests.doctests import modules_with_examples, run_examples

MODULES = modules_with_examples("prom_reward")


def test_modules_with_examples_are_found():
    assert {"prom_reward", "prom_reward.format.eos", "prom_reward.core.judge"} <= set(MODULES)


def test_the_harness_runs_its_own_example():
    run_examples("tests.doctests")


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples(name):
    run_examples(name)
