"""Every example in the library's docstrings runs and shows what it claims."""

import doctest
import importlib
import pkgutil

import pytest

import prom_reward

MODULES = sorted(m.name for m in pkgutil.walk_packages(prom_reward.__path__, "prom_reward."))


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples(name):
    module = importlib.import_module(name)
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    assert result.failed == 0
