"""The docstring examples of the benchmark scripts run and show what they claim (one case per module that
has one: ``tests.doctests``)."""

import pytest

from tests.doctests import modules_with_examples, run_examples

MODULES = modules_with_examples("benchmarks")


def test_modules_with_examples_are_found():
    assert {"benchmarks.metrics", "benchmarks.merge_identity", "benchmarks.demo_speed"} <= set(MODULES)


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples(name):
    run_examples(name)
