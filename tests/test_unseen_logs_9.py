"""Round 9 of unseen logs: a dead run whose exception merely mentions requires_grad is not healthy, and FSDP's
refusal of mixed frozen/trainable units is the known issue it is (KI-TORCH-005)."""

from __future__ import annotations

from pathlib import Path

from tests.test_unseen_logs import _run, _verdict

# https://github.com/declare-lab/flan-alpaca/issues/10 (training.py --use_fsdp --use_lora, flan-t5-xl; the traceback's
# tail as pasted)
FLAN_ALPACA_10 = """  File "/opt/conda/lib/python3.8/site-packages/torch/distributed/fsdp/flat_param.py", line 440, in _init_flat_param
    self._init_flat_param(params, fully_sharded_module, use_orig_params)
  File "/opt/conda/lib/python3.8/site-packages/torch/distributed/fsdp/flat_param.py", line 440, in _init_flat_param
    raise ValueError(
ValueError: `FlatParameter` requires uniform `requires_grad`
"""


def test_fsdp_with_lora_is_the_known_issue_not_a_healthy_run(tmp_path: Path):
    a = _run(tmp_path, FLAN_ALPACA_10)  # was: healthy, the crash demoted to info as "named by the other findings"
    assert _verdict(a) == ("failed", "framework_bug")
    fw = [f for f in a.diagnosis.findings if f.code == "FW001"][0]
    assert "KI-TORCH-005" in fw.title and any("use_orig_params=True" in r for r in fw.remedies)
    crash = [f for f in a.diagnosis.findings if f.code == "CRASH001"][0]
    assert crash.severity == "error"


# torch's own message (torch/csrc/autograd/variable.cpp) when code flips requires_grad on a non-leaf tensor: it
# mentions requires_grad, yet no gradientless-parameter event is in the run, so nothing else explains the death
LEAF = """Traceback (most recent call last):
  File "train.py", line 88, in <module>
    emb.requires_grad = False
RuntimeError: you can only change requires_grad flags of leaf variables. If you want to use a computed variable in a subgraph that doesn't require differentiation use var_no_grad = var.detach().
"""


def test_an_exception_naming_requires_grad_with_nothing_to_explain_it_is_a_crash(tmp_path: Path):
    a = _run(tmp_path, LEAF)
    assert a.diagnosis.verdict.status == "failed"
    crash = [f for f in a.diagnosis.findings if f.code == "CRASH001"][0]
    assert crash.severity == "error" and "the cause is named by the other findings" not in crash.message


# the case the demotion exists for (peft#137's shape): the no-grad_fn error beside the gradient-checkpointing warning
# that GRAD001 reads; the crash stays info there, and the verdict is GRAD001's
NO_GRAD_FN = """/usr/lib/python3/site-packages/torch/utils/checkpoint.py:31: UserWarning: None of the inputs have requires_grad=True. Gradients will be None
  warnings.warn("None of the inputs have requires_grad=True. Gradients will be None")
Traceback (most recent call last):
  File "finetune.py", line 120, in <module>
    trainer.train()
RuntimeError: element 0 of tensors does not require grad and does not have a grad_fn
"""


def test_the_no_grad_fn_crash_stays_left_to_its_detector(tmp_path: Path):
    a = _run(tmp_path, NO_GRAD_FN)
    assert _verdict(a) == ("failed", "gradientless_params")
    crash = [f for f in a.diagnosis.findings if f.code == "CRASH001"][0]
    assert crash.severity == "info"


# https://github.com/espnet/espnet/issues/863 (ESPnet1 AMI recipe, pytorch backend; the five warnings as pasted): the
# batches ESPnet left out of its log; the maintainer: length mismatch in the CTC branch, harmless as ESPnet skips them
ESPNET_863 = """2019-06-13 02:30:01,545 (e2e_asr:302) WARNING: loss (=nan) is not correct
2019-06-13 03:52:24,416 (e2e_asr:302) WARNING: loss (=14484257.000000) is not correct
2019-06-13 04:22:57,220 (e2e_asr:302) WARNING: loss (=93660798500470784.000000) is not correct
2019-06-13 05:06:23,975 (e2e_asr:302) WARNING: loss (=-186341) is not correct
2019-06-13 05:26:13,287 (e2e_asr:302) WARNING: loss (=-61910442439.000000) is not correct
"""


def test_espnet_batches_left_out_of_the_log_are_a_warning_with_their_values(tmp_path: Path):
    a = _run(tmp_path, ESPNET_863)
    assert _verdict(a) == ("healthy", "healthy")  # the run goes on; these batches are a warning, not the verdict
    f = [x for x in a.diagnosis.findings if x.code == "DATA001"][0]
    assert f.severity == "warning" and "5 batch loss(es)" in f.title and "-6.19e+10" in f.title
    assert "2 are negative" in f.message and "label sequence is longer" in f.message
    assert min(e.data["value"] for e in a.run.events_of("loss_rejected") if e.data["value"] == e.data["value"]) == -61910442439.0


# https://github.com/google/gemma_pytorch/issues/24 (HF Trainer + PEFT LoRA, the dicts as pasted): grad_norm is logged
# once, NaN, at step 3; the loss is finite right after and NaN only at some later logs
GEMMA_24 = """{'loss': 5.6332, 'lr': 0.0002, 'epoch': 0.09}
{'loss': 5.3049, 'lr': 0.0002, 'epoch': 0.09}
{'loss': 153318.95, 'grad_norm': nan, 'learning_rate': 0.0002, 'epoch': 0.09}
{'loss': 5.7517, 'lr': 0.0002, 'epoch': 0.09}
{'loss': 5.6231, 'lr': 0.0002, 'epoch': 0.09}
{'loss': nan, 'lr': 0.0002, 'epoch': 0.09}
{'loss': 5.0968, 'lr': 0.0002, 'epoch': 0.09}
{'loss': nan, 'lr': 0.0002, 'epoch': 0.09}
"""


def test_a_once_logged_grad_norm_onset_takes_its_course_from_the_loss(tmp_path: Path):
    from detectors._common import nonfinite_onset

    a = _run(tmp_path, GEMMA_24)
    on = nonfinite_onset(a.run)
    assert (on.metric, on.step) == ("grad_norm", 3) and on.recovered  # was: recovered False ("it stays non-finite")
    f = [x for x in a.diagnosis.findings if x.code == "NUM001" and x.severity == "error"][0]
    assert "then finite and non-finite in turn" in f.message and "stays non-finite" not in f.message
