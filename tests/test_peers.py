"""``tests.peers``: the run fails, naming the module, when a pinned peer framework does not import."""

from __future__ import annotations

import pytest

from tests.peers import check_peers, peer_modules, pinned


def test_every_pinned_framework_is_checked(tmp_path):
    path = tmp_path / "frameworks.txt"
    path.write_text("# c\nopenrlhf==0.11.2\nflow-judge==0.1.2\nverifiers==0.4.0\nrenderers\n")
    assert pinned(path) == ["openrlhf", "flow-judge", "verifiers"]
    assert peer_modules(path)[:3] == ["openrlhf.utils.agent", "flow_judge", "verifiers.v1"]


def test_a_peer_that_does_not_import_fails_with_its_name():
    with pytest.raises(RuntimeError, match="no_such_peer_pkg: ModuleNotFoundError.*fix: make setup"):
        check_peers(["json", "no_such_peer_pkg"])


def test_the_installed_peers_import():
    check_peers()
