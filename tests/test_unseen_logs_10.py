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
    assert any("log2 of the loss scale lowered to -16199.354 (scale 2^-16199.354 = 0.0)" in e.detail for e in f.evidence)
    cited = [(e.artifact, e.where) for e in f.evidence]
    assert len(cited) == len(set(cited))  # the first overflow is also the highest scale: cited once


def test_an_occasional_tf_ctc_no_valid_path_is_a_warning_on_a_healthy_run(tmp_path: Path):
    a = _run(tmp_path, RETURNN_1)
    assert _verdict(a) == ("healthy", "healthy")  # was: inconclusive (nothing read)
    f = next(x for x in a.diagnosis.findings if x.code == "DATA001")
    assert f.severity == "warning" and f.root_cause == "ctc_output_longer_than_input"
    assert "no valid path 1 time" in f.title.lower() and f.evidence[0].where == "line 1"


def test_no_valid_path_outside_ctc_is_not_an_event(tmp_path: Path):
    a = _run(tmp_path, "planner: No valid path found from start to end\n" * 3)
    assert not a.run.events_of("ctc_no_alignment")


# https://github.com/MaybeShewill-CV/CRNN_Tensorflow/issues/122 (as pasted; the first line's "I" was cut in the paste):
# the loss is printed as "cost", and the step whose CTC found no valid path logs cost= inf
CRNN_TF_122 = """NFO: 08-20 17:34:54: train_shadownet.py:148 * 140217671526144 Epoch: 542 cost= 69.799927 seq distance=  0.910998 train accuracy=  0.009455
INFO: 08-20 17:34:54: train_shadownet.py:148 * 140217671526144 Epoch: 543 cost= 69.512672 seq distance=  0.916690 train accuracy=  0.011318
INFO: 08-20 17:34:55: train_shadownet.py:148 * 140217671526144 Epoch: 544 cost= 69.189919 seq distance=  0.917188 train accuracy=  0.008049
2018-08-20 17:34:55.936201: W tensorflow/core/util/ctc/ctc_loss_calculator.cc:144] No valid path found.
INFO: 08-20 17:34:56: train_shadownet.py:148 * 140217671526144 Epoch: 545 cost=       inf seq distance=  0.925914 train accuracy=  0.006089
INFO: 08-20 17:34:56: train_shadownet.py:148 * 140217671526144 Epoch: 546 cost= 72.633850 seq distance=  0.903907 train accuracy=  0.014168
INFO: 08-20 17:34:57: train_shadownet.py:148 * 140217671526144 Epoch: 547 cost= 70.695236 seq distance=  0.903769 train accuracy=  0.012890
"""


def test_tf_ctc_no_valid_path_with_an_inf_cost_names_the_ctc_cause(tmp_path: Path):
    a = _run(tmp_path, CRNN_TF_122)
    assert _verdict(a) == ("failed", "ctc_output_longer_than_input")  # was: inconclusive, nothing read
    loss = a.run.scalars[a.run.scalars["metric"] == "loss"]
    # every cost line, the one whose "INFO" was cut to "NFO:" too (alone in its layout, read for its timestamp since
    # session 24)
    assert len(loss) == 6 and set(loss["key"]) == {"cost"} and loss["value"].iloc[0] == 69.799927
    f = next(x for x in a.diagnosis.findings if x.code == "DATA001")
    assert f.severity == "error" and "went non-finite" in f.title
    assert any("ignore_longer_outputs_than_inputs" in r for r in f.remedies)


def test_a_time_cost_is_not_a_loss(tmp_path: Path):
    # per-step timings as hand-written loops print them: "<word> cost" is that word's cost, not the loss
    log = "".join(f"step {i} time cost: {0.31 + i / 100:.2f}s loss: {2.0 - i / 10:.2f}\n" for i in range(1, 6))
    a = _run(tmp_path, log)
    df = a.run.scalars
    assert df[df["metric"] == "loss"]["value"].round(2).tolist() == [1.9, 1.8, 1.7, 1.6, 1.5]


# https://github.com/connorcoley/rexgen_direct/issues/16 (TensorFlow, as pasted): a line of nothing but pairs, two of
# them with two-word keys; the grad norm runs to inf (the reporter's modified loss line was at fault)
REXGEN_16 = """Model size: 757K
Acc@10: 0.0020, Acc@20: 0.0030, Param Norm: 55.96, Grad Norm: 32601341764211.89
Acc@10: 0.0020, Acc@20: 0.0030, Param Norm: 74.00, Grad Norm: 1186378715784512768.00
Acc@10: 0.0030, Acc@20: 0.0030, Param Norm: 83.09, Grad Norm: inf
Acc@10: 0.0010, Acc@20: 0.0040, Param Norm: 83.23, Grad Norm: inf
"""


def test_two_word_keys_of_a_pairs_line_are_read(tmp_path: Path):
    a = _run(tmp_path, REXGEN_16)
    df = a.run.scalars
    gn = df[df["metric"] == "grad_norm"]["value"].tolist()
    assert gn[:2] == [32601341764211.89, 1186378715784512768.0] and gn[2:] == [float("inf")] * 2  # was: nothing read
    assert set(df[df["metric"] == "Param Norm"]["value"].round(2)) == {55.96, 74.0, 83.09, 83.23}
    assert a.diagnosis.verdict.status == "inconclusive"  # the log does not say why; the onset is named
    assert any(f.code == "NUM001" and f.first_step == 3 for f in a.diagnosis.findings)
