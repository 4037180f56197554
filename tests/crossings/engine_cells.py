"""The real-engine cell of each entry point of the crossing matrix: an existing integration test (``make test``,
not ``make test-fast``) that drives that entry point against the session's vLLM engine or server. The matrix
references them rather than starting another engine run: ``test_engine_cells.py`` checks that every entry point of
``entry_points.ENTRY_POINTS`` has one, that the test exists and that it uses an engine or server fixture."""

from __future__ import annotations

_TRL = "tests/rewards/test_reward_trl.py::test_grpo_two_steps_with_vllm_judge"
_MODES = "tests/rewards/test_reward_modes_engine.py::test_a_pairwise_mode_rewards_from_a_real_judge"

ENGINE_CELLS: dict[str, str] = {
    "grade": "tests/cli/test_cli.py::test_grade_jsonl_via_server_and_resume",
    "compare": "tests/cli/test_cli.py::test_compare_against_a_real_server",
    "pairs": "tests/cli/test_cli.py::test_pairs_command_against_a_real_server",
    "report-grade": "tests/cli/test_cli.py::test_grade_jsonl_via_server_and_resume",  # reports what it graded
    "report-compare": "tests/cli/test_cli.py::test_compare_against_a_real_server",  # reports its verdicts
    "probe": "tests/probe/test_probe.py::test_cli_probe_against_a_real_vllm_server",
    "reward-server": "tests/integrations/test_openrlhf_http.py::test_cli_reward_server_end_to_end",
    "reward_func": "tests/integrations/test_openrlhf_func.py::test_real_vllm_judge_through_env_config",
    "verl": "tests/integrations/test_verl_integration.py::test_real_vllm_judge_through_verls_router",
    "verifiers": "tests/integrations/test_verifiers_judge.py::test_end_to_end_against_the_real_vllm_server",
    "online-dpo": "tests/rewards/test_online_dpo.py::test_online_dpo_trainer_two_steps_with_vllm_judge",
    "sync-absolute": _TRL,
    "async-absolute": "tests/integrations/test_trl_async.py::test_judge_served_over_http_scores_groups_in_the_child",
    "sync-pairwise_group": _MODES,
    "sync-pairwise_reference": _MODES,
    "async-pairwise_group": _MODES,
    "async-pairwise_reference": _MODES,
}
"""Entry point -> the node id of its engine test (a parametrized test: all its cases run in ``make test``)."""
