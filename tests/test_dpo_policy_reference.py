"""A preference run whose policy never leaves the reference model: rewards exactly 0 at every log, the loss at
ln 2, log-probs that are not 0 (so the completions are not empty: that is LEN001's case)."""

from __future__ import annotations

from pathlib import Path

from tests.test_unseen_logs import _run, _verdict

# https://github.com/stanleylsx/llms_tool/issues/46 (DPO, HF Trainer dicts as pasted): every reward 0.0, loss 0.6931;
# a commenter traced it to the reference model built with deepcopy(model)
LLMS_TOOL_46 = """{'loss': 0.6931, 'learning_rate': 9.99231529256779e-06, 'rewards/chosen': 0.0, 'rewards/rejected': 0.0, 'rewards/accuracies': 0.0, 'rewards/margins': 0.0, 'logps/rejected': -445.9979248046875, 'logps/chosen': -30.411256790161133, 'logits/rejected': 2.6535236835479736, 'logits/chosen': 1.1344398260116577, 'epoch': 0.0}
{'loss': 0.6931, 'learning_rate': 9.991217477220333e-06, 'rewards/chosen': 0.0, 'rewards/rejected': 0.0, 'rewards/accuracies': 0.0, 'rewards/margins': 0.0, 'logps/rejected': -200.39610290527344, 'logps/chosen': -33.55436706542969, 'logits/rejected': 1.5881015062332153, 'logits/chosen': 3.952385187149048, 'epoch': 0.0}
{'loss': 0.6931, 'learning_rate': 9.990119661872873e-06, 'rewards/chosen': 0.0, 'rewards/rejected': 0.0, 'rewards/accuracies': 0.0, 'rewards/margins': 0.0, 'logps/rejected': -155.58612060546875, 'logps/chosen': -40.69193649291992, 'logits/rejected': 2.194831132888794, 'logits/chosen': 1.8327357769012451, 'epoch': 0.0}
{'loss': 0.6931, 'learning_rate': 9.989021846525415e-06, 'rewards/chosen': 0.0, 'rewards/rejected': 0.0, 'rewards/accuracies': 0.0, 'rewards/margins': 0.0, 'logps/rejected': -258.0289306640625, 'logps/chosen': -41.872779846191406, 'logits/rejected': 4.575325965881348, 'logits/chosen': 0.9270402789115906, 'epoch': 0.0}
"""


def _healthy_dpo() -> str:
    """The same records shape as a DPO run that learns: the first log (before any update) has rewards 0 and
    loss ln 2, later ones move (TRL's DPOTrainer keys)."""
    rows = ["{'loss': 0.6931, 'learning_rate': 1e-05, 'rewards/chosen': 0.0, 'rewards/rejected': 0.0, "
            "'rewards/accuracies': 0.0, 'rewards/margins': 0.0, 'logps/rejected': -200.1, 'logps/chosen': -150.2, "
            "'epoch': 0.01}"]
    for i in range(1, 6):
        rows.append(f"{{'loss': {0.6931 - 0.02 * i:.4f}, 'learning_rate': 1e-05, 'rewards/chosen': {0.01 * i}, "
                    f"'rewards/rejected': {-0.02 * i}, 'rewards/accuracies': 0.6, 'rewards/margins': {0.03 * i}, "
                    f"'logps/rejected': -201.3, 'logps/chosen': -149.8, 'epoch': {0.01 * (i + 1):.2f}}}")
    return "\n".join(rows) + "\n"


def test_rewards_exactly_zero_with_real_logps_is_a_policy_that_never_moves(tmp_path: Path):
    a = _run(tmp_path, LLMS_TOOL_46)
    assert _verdict(a) == ("failed", "gradientless_params")
    f = next(x for x in a.diagnosis.findings if x.code == "GRAD001")
    assert f.title == "The policy never moves away from the reference model"
    assert "all 4 logs (steps 1-4)" in f.evidence[0].detail and f.evidence[0].where == "line 4"
    assert "logps/chosen = -41.87" in f.evidence[1].detail
    assert any("ref_model=None" in r for r in f.remedies)


def test_a_dpo_run_that_learns_is_healthy(tmp_path: Path):
    a = _run(tmp_path, _healthy_dpo())
    assert _verdict(a) == ("healthy", "healthy")
    assert not [x for x in a.diagnosis.findings if x.code == "GRAD001"]


def test_two_stuck_logs_are_not_enough(tmp_path: Path):
    a = _run(tmp_path, "".join(LLMS_TOOL_46.splitlines(keepends=True)[:2]))
    assert not [x for x in a.diagnosis.findings if x.code == "GRAD001"]


def test_beta_zero_in_the_config_is_named(tmp_path: Path):
    a = _run(tmp_path, LLMS_TOOL_46, config="beta: 0.0\nlearning_rate: 1.0e-05\n")
    f = next(x for x in a.diagnosis.findings if x.code == "GRAD001")
    assert any(e.detail.startswith("beta = 0") for e in f.evidence) and f.remedies[0].startswith("Set beta > 0")
    assert "beta = 0 alone explains it" in f.message
