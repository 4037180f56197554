"""Every subcommand's ``--help``: each option and argument has help text, no doctest leaks into it, and the
job commands end with their exit statuses (issue 32: help in one voice); no reST markup in any help, and no flag
listed that the command refuses (issue 44)."""

from __future__ import annotations

import argparse
import re

import pytest

from prom_reward.cli.main import build_parser, main


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


MARKUP = re.compile(r"``|:(?:class|func|meth|mod|attr|data|obj|exc|ref|doc):`")
"""reST markup: a literal (``x``) or a role (:class:`X`)."""


def _parsers(parser: argparse.ArgumentParser, name: str) -> dict[str, argparse.ArgumentParser]:
    """``parser`` and every subcommand under it (``store info`` ...), by their command line."""
    out = {name: parser}
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub_name, sub in action.choices.items():
                out.update(_parsers(sub, f"{name} {sub_name}"))
    return out


PARSERS = _parsers(build_parser(), "prom-reward")


@pytest.mark.parametrize("name", sorted(PARSERS))
def test_help_shows_no_markup(name):
    text = PARSERS[name].format_help()
    assert not MARKUP.findall(text), f"{name} --help: {[line for line in text.splitlines() if MARKUP.search(line)]}"


def test_plain_help_drops_literals_and_roles():
    from prom_reward.cli.voice import plain

    assert plain('``"raise"`` (:class:`~prom_reward.RewardConfig`, :func:`load`)') == '"raise" (RewardConfig, load)'


def _given(action: argparse.Action) -> list[str]:
    """A command line giving ``action``'s flag (a value of its kind)."""
    flag = action.option_strings[-1]
    if action.nargs == 0:
        return [flag]
    return [flag, str(action.choices[0]) if action.choices else "prometheus2" if action.dest == "format" else "1"]


def test_every_flag_reward_server_lists_reaches_its_settings():
    """Each flag of reward-server's help is taken by its settings: a value may be refused, a name never is."""
    from prom_reward.cli.servers import reward_server_settings
    from prom_reward.errors import ConfigError

    command = _commands()["reward-server"]
    listed = [a for a in command._actions if a.option_strings and a.help != argparse.SUPPRESS and a.dest != "help"]
    assert len(listed) > 40
    for action in listed:
        args = command.parse_args(_given(action))
        try:
            reward_server_settings(args, {})
        except ConfigError as e:
            assert "unknown setting" not in str(e) and "renamed" not in str(e), (action.option_strings, str(e))


@pytest.mark.parametrize("argv", [["--truncate"], ["--on-outage", "fail"], ["--call-timeout-s", "5"]])
def test_a_removed_reward_server_flag_is_an_unknown_option(argv, capsys):
    assert "--truncate" not in _commands()["reward-server"].format_help()
    with pytest.raises(SystemExit) as e:
        main(["reward-server", "--server", "http://127.0.0.1:9/v1", "--failure-reward", "0", *argv])
    err = capsys.readouterr().err
    assert e.value.code == 2 and f"unrecognized arguments: {' '.join(argv)}" in err and "renamed" not in err
