"""Round 13 (held-out, 2026-11-28): a traceback pasted without its exception line is still a crash (read from the
last frame's raise); a box-regression term exactly 0 at two logs from the run's start is no ground-truth box."""

from __future__ import annotations

from pathlib import Path

from tests.test_unseen_logs import _run, _verdict

# https://github.com/huggingface/peft/issues/341 (as pasted: the final "ValueError: ..." line is not in the paste)
PEFT_341 = 'Traceback (most recent call last):\n  File "/home/jonathanasdf/.local/lib/python3.10/site-packages/transformers/trainer.py", line 1662, in train\n    return inner_training_loop(\n  File "/home/jonathanasdf/.local/lib/python3.10/site-packages/transformers/trainer.py", line 1962, in _inner_training_loop\n    self.scaler.unscale_(self.optimizer)\n  File "/home/jonathanasdf/.local/lib/python3.10/site-packages/torch/cuda/amp/grad_scaler.py", line 284, in unscale_\n    optimizer_state["found_inf_per_device"] = self._unscale_grads_(optimizer, inv_scale, found_inf, False)\n  File "/home/jonathanasdf/.local/lib/python3.10/site-packages/torch/cuda/amp/grad_scaler.py", line 212, in _unscale_grads_\n    raise ValueError("Attempting to unscale FP16 gradients.")\n'

# https://github.com/deepgram/kur/issues/27 (Kur's executor, as pasted): the validation loss creeping up on a long
# speech run; the maintainer: normal, keep training
KUR_27 = '[INFO 2017-03-02 18:11:38,332 kur.model.executor:175] Validation loss: 155.686\nPrediction: "i know wat mammock ind a forto guervev en iwile set she give tat"\nTruth: "i know what mamma can afford to give and i will see she gives it"\n[INFO 2017-03-02 20:43:30,224 kur.model.executor:175] Validation loss: 159.761\nPrediction: "i se at call tad his vholly sendy oll o oadanetural ho those obof"\nTruth: "i see him called tad his voice sounding hollow and unnatural to those above"\n'

# https://github.com/AILab-CVC/YOLO-World/issues/146 (mmengine lines as pasted): a custom 5-class set configured as COCO
YOLO_WORLD_146 = '03/18 06:15:39 - mmengine - INFO - Epoch(train)  [1][50/70]  base_lr: 2.0000e-04 lr: 9.8000e-06  eta: 1:58:38  time: 1.2826  data_time: 0.0524  memory: 11573  grad_norm: nan  loss: 331.5620  loss_cls: 331.5620  loss_bbox: 0.0000  loss_dfl: 0.0000\n03/18 06:33:35 - mmengine - INFO - Epoch(train) [16][50/70]  base_lr: 2.0000e-04 lr: 1.6535e-04  eta: 1:10:05  time: 0.9005  data_time: 0.0392  memory: 10765  grad_norm: 0.0206  loss: 0.0000  loss_cls: 0.0000  loss_bbox: 0.0000  loss_dfl: 0.0000\n'


def test_a_traceback_cut_before_its_exception_line_is_a_crash(tmp_path: Path):
    a = _run(tmp_path, PEFT_341)
    assert _verdict(a) == ("failed", "crash")  # was: healthy
    tb = a.run.events_of("traceback")
    assert len(tb) == 1 and tb[0].data["exc_type"] == "ValueError" and tb[0].data["cut"]
    assert tb[0].message.startswith("ValueError: Attempting to unscale FP16 gradients.")
    assert tb[0].data["frame"]["function"] == "_unscale_grads_"


def test_a_cut_traceback_without_a_raise_names_its_last_frame(tmp_path: Path):
    text = ("Traceback (most recent call last):\n"
            '  File "train.py", line 12, in <module>\n    main()\n'
            '  File "train.py", line 8, in main\n    trainer.train()\n')
    a = _run(tmp_path, text)
    tb = a.run.events_of("traceback")
    assert len(tb) == 1 and tb[0].data["exc_type"] == ""
    assert tb[0].message.startswith('traceback ending at File "train.py", line 8, in main')


def test_a_complete_traceback_is_one_event(tmp_path: Path):
    a = _run(tmp_path, PEFT_341 + "ValueError: Attempting to unscale FP16 gradients.\n")
    tb = a.run.events_of("traceback")
    assert len(tb) == 1 and not tb[0].data.get("cut")


def test_box_regression_zero_at_two_logs_from_the_start(tmp_path: Path):
    a = _run(tmp_path, YOLO_WORLD_146)
    assert _verdict(a) == ("failed", "all_labels_masked")  # was: healthy
    f = next(x for x in a.diagnosis.findings if x.code == "LBL001")
    assert f.title.startswith("Box-regression loss exactly 0 at every log")


def test_box_regression_zero_at_one_of_two_logs_is_not(tmp_path: Path):
    a = _run(tmp_path, YOLO_WORLD_146.replace("loss_bbox: 0.0000  loss_dfl: 0.0000\n", "loss_bbox: 1.2100  loss_dfl: 0.9800\n", 1))
    assert not [x for x in a.diagnosis.findings if x.code == "LBL001"]


def test_two_timestamped_validation_loss_lines_are_read(tmp_path: Path):
    a = _run(tmp_path, KUR_27)
    assert _verdict(a) == ("healthy", "healthy")  # was: nothing read (inconclusive)
    df = a.run.scalars
    assert df[df["metric"] == "eval_loss"]["value"].tolist() == [155.686, 159.761]


def test_two_prose_lines_with_a_loss_are_not(tmp_path: Path):
    a = _run(tmp_path, "My validation loss: 155.686 after a day.\nThen validation loss: 159.761, should I stop?\n")
    assert not len(a.run.scalars)
