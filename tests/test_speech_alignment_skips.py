"""Speech runs (round 13): a CTC or transducer term at +inf is a sample with no valid alignment; a trainer's own
"grad norm is nan, skipping the update" messages are skipped updates, a failure when every step is skipped."""

from __future__ import annotations

from pathlib import Path

from tests.test_unseen_logs import _run, _verdict

# https://github.com/k2-fsa/icefall/issues/1352 (zipformer with a CTC head, train.py lines as pasted, wrapped): the
# maintainer pointed at utterances with more label symbols than frames after subsampling
ICEFALL_1352 = '2023-11-01 01:37:31,178 INFO [train.py:1034] Epoch 1, batch 1600, loss[loss=nan, simple_loss=inf, pruned_loss=inf, ctc_loss=nan, over 9765.00 frames. ], tot_loss[loss=nan, simple_loss=i\nnf, pruned_loss=inf, ctc_loss=nan, over 1905160.45 frames. ], batch size: 42, lr: 8.15e-03,\n2023-11-01 01:37:31,254 INFO [scaling.py:203] ScheduledFloat: name=encoder.encoders.2.encoder.layers.0.feed_forward1.out_proj.dropout_p, batch_count=152533.33333333334, ans=0.1\n2023-11-01 01:37:32,779 INFO [scaling.py:993] Whitening: name=encoder.encoders.4.encoder.layers.3.feed_forward2.out_whiten, num_groups=1, num_channels=512, metric=nan vs. limit=15.0\n2023-11-01 01:37:33,521 INFO [scaling.py:203] ScheduledFloat: name=encoder.encoders.0.layers.1.feed_forward3.hidden_balancer.prob, batch_count=152533.33333333334, ans=0.125\n2023-11-01 01:37:34,587 INFO [scaling.py:203] ScheduledFloat: name=encoder.encoders.4.encoder.layers.3.whiten.whitening_limit, batch_count=152533.33333333334, ans=12.0\n2023-11-01 01:37:35,613 INFO [scaling.py:993] Whitening: name=encoder.encoders.3.encoder.layers.3.nonlin_attention.whiten1, num_groups=1, num_channels=576, metric=nan vs. limit=10.0\n2023-11-01 01:37:38,542 INFO [scaling.py:993] Whitening: name=encoder.encoders.1.encoder.layers.1.feed_forward3.out_whiten, num_groups=1, num_channels=256, metric=nan vs. limit=15.0\n'

# https://github.com/espnet/espnet/issues/3170 (ESPnet2 trainer lines as pasted): nearly every step of epoch 2 skipped
ESPNET_3170 = '[user] 2021-04-23 19:22:52,420 (trainer:581) WARNING: The grad norm is nan. Skipping updating the model.\n[user] 2021-04-23 19:22:53,113 (trainer:581) WARNING: The grad norm is nan. Skipping updating the model.\n[user] 2021-04-23 19:22:53,694 (trainer:581) WARNING: The grad norm is nan. Skipping updating the model.\n[user] 2021-04-23 19:22:54,316 (trainer:581) WARNING: The grad norm is nan. Skipping updating the model.\n[user] 2021-04-23 19:22:54,997 (trainer:581) WARNING: The grad norm is nan. Skipping updating the model.\n[user] 2021-04-23 19:22:55,597 (trainer:581) WARNING: The grad norm is nan. Skipping updating the model.\n[user] 2021-04-23 19:22:56,229 (trainer:581) WARNING: The grad norm is nan. Skipping updating the model.\n[user] 2021-04-23 19:22:56,245 (trainer:636) INFO: 2epoch:train:12009-12640batch: iter_time=3.163e-04, forward_time=0.110, loss=65.129, loss_att=124.079, loss_ctc=144.685, acc=0.065, backward_time=0.086, optim0_lr0=1.485e-05, train_time=0.624\n[user] 2021-04-23 19:22:56,858 (trainer:581) WARNING: The grad norm is nan. Skipping updating the model.\n'


def test_a_transducer_term_at_inf_is_no_valid_alignment(tmp_path: Path):
    a = _run(tmp_path, ICEFALL_1352)
    assert _verdict(a) == ("failed", "ctc_output_longer_than_input")  # was: inconclusive
    f = next(x for x in a.diagnosis.findings if x.code == "DATA001")
    assert f.title == "pruned_loss is +inf at step 1600: a sample with no valid alignment"
    assert "simple_loss too" in f.evidence[0].detail


def test_a_ctc_term_that_is_only_nan_is_not_named(tmp_path: Path):
    a = _run(tmp_path, ICEFALL_1352.replace("=inf", "=nan").replace("=i\nnf", "=n\nan"))
    assert not [x for x in a.diagnosis.findings if x.root_cause == "ctc_output_longer_than_input"]


def test_consecutive_skip_messages_are_a_run_that_does_not_update(tmp_path: Path):
    a = _run(tmp_path, ESPNET_3170)
    assert _verdict(a) == ("inconclusive", "unknown")  # was: healthy
    f = next(x for x in a.diagnosis.findings if x.code == "NUM001")
    assert f.severity == "error" and f.title == "The trainer skipped 8 updates: the gradient norm was nan"
    assert "7 of them on consecutive lines" in f.message
    assert a.run.events_of("grad_skip")[0].data == {"value": "nan"}


def test_scattered_skips_are_a_warning(tmp_path: Path):
    rows = []
    for i in range(6):
        rows.append(f"[user] 2021-04-23 19:2{i}:56,245 (trainer:636) INFO: 2epoch:train:{i * 100 + 1}-{i * 100 + 100}batch: "
                    f"iter_time=3.163e-04, loss={65.1 - i:.3f}, loss_att=124.079, loss_ctc=144.685, acc=0.{i + 3}")
        if i in (2, 4):
            rows.append(f"[user] 2021-04-23 19:2{i}:57,113 (trainer:581) WARNING: The grad norm is nan. Skipping updating the model.")
    a = _run(tmp_path, "\n".join(rows) + "\n")
    f = next(x for x in a.diagnosis.findings if x.code == "NUM001")
    assert f.severity == "warning" and "guard working" in f.message
    assert _verdict(a)[0] == "healthy"
