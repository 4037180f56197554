"""Every subcommand's ``--help``: each option and argument has help text, no doctest leaks into it, and the
job commands end with their exit statuses (issue 32: help in one voice)."""

from __future__ import annotations

import argparse

import pytest

from prom_reward.cli.main import build_parser


def _commands() -> dict[str, argparse.ArgumentParser]:
    parser = build_parser()
    (sub,) = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    return dict(sub.choices)


@pytest.mark.parametrize("name", sorted(_commands()))
def test_every_option_of_every_command_has_help(name):
    command = _commands()[name]
    silent = [
        a.option_strings or [a.dest]
        for a in command._actions
        if not isinstance(a, argparse._SubParsersAction) and a.help != argparse.SUPPRESS and not (a.help or "").strip()
    ]
    assert silent == [], f"prom-reward {name}: no help for {silent}"
    text = command.format_help()
    assert ">>>" not in text and "Example:" not in text


@pytest.mark.parametrize("name", ["grade", "compare", "pairs"])
def test_job_help_ends_with_the_exit_statuses(name):
    text = " ".join(_commands()[name].format_help().split())
    assert text.endswith("130 interrupted (--resume continues)") and "4 the judge could not be reached" in text
