"""Round 10 of unseen logs (eval/held_out_10a, 10b): the general gaps they showed, with their lines quoted."""

from __future__ import annotations

from pathlib import Path

from tests.test_unseen_logs import _run, _verdict

# https://github.com/openai/guided-diffusion/issues/50 (as pasted): the logger's key/value table, then the fp16
# trainer's "Found NaN, decreased lg_loss_scale to ..." (guided_diffusion/fp16_util.py) at every step
GUIDED_DIFFUSION_50 = """-----------------------------
| lg_loss_scale | -1.62e+04 |
| loss          | nan       |
| loss_q0       | nan       |
| mse           | nan       |
| samples       | 3.92e+07  |
| step          | 1.53e+05  |
| vb            | nan       |
-----------------------------
Found NaN, decreased lg_loss_scale to -16199.354
Found NaN, decreased lg_loss_scale to -16200.354
Found NaN, decreased lg_loss_scale to -16201.354
Found NaN, decreased lg_loss_scale to -16202.354
Found NaN, decreased lg_loss_scale to -16203.354
"""

# https://github.com/rwth-i6/returnn-experiments/issues/1: TensorFlow's CTC warning, which the maintainer called
# harmless when occasional early in training
RETURNN_1 = ("2018-07-17 16:19:35.497434: W tensorflow/core/util/ctc/ctc_loss_calculator.cc:144] "
             "No valid path found.\n")


def test_lg_loss_scale_decreases_are_overflows_and_the_table_step_is_read(tmp_path: Path):
    a = _run(tmp_path, GUIDED_DIFFUSION_50)
    assert _verdict(a) == ("failed", "loss_scale_collapse")  # was: inconclusive at step 1
    ovf = a.run.events_of("overflow")
    assert len(ovf) == 5 and ovf[0].data["lg_new"] == -16199.354 and ovf[0].data["new"] == 0.0
    assert "at step 153000" in a.diagnosis.verdict.headline  # the table's own step counter
    f = next(x for x in a.diagnosis.findings if x.root_cause == "loss_scale_collapse")
    assert any("log2 of the loss scale lowered to" in e.detail for e in f.evidence)


def test_an_occasional_tf_ctc_no_valid_path_is_a_warning_on_a_healthy_run(tmp_path: Path):
    a = _run(tmp_path, RETURNN_1)
    assert _verdict(a) == ("healthy", "healthy")  # was: inconclusive (nothing read)
    f = next(x for x in a.diagnosis.findings if x.code == "DATA001")
    assert f.severity == "warning" and f.root_cause == "ctc_output_longer_than_input"
    assert "no valid path 1 time" in f.title.lower() and f.evidence[0].where == "line 1"


def test_no_valid_path_outside_ctc_is_not_an_event(tmp_path: Path):
    a = _run(tmp_path, "planner: No valid path found from start to end\n" * 3)
    assert not a.run.events_of("ctc_no_alignment")
