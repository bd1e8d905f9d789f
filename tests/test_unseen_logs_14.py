"""Round 14 (held-out, 2026-11-28): a paste of trainer_state.json pieces in a text file is read as text when no JSON
parser can read it whole; darknet's per-layer "Region N Avg" lines are not steps."""

from __future__ import annotations

from pathlib import Path

from tests.test_unseen_logs import _run, _series, _verdict

# https://github.com/zai-org/ChatGLM2-6B/issues/491 (as pasted: all_results.json, then trainer_state.json cut in its
# log_history); the official P-Tuning script stops at max_steps 3000, 0.42 epoch, by design
CHATGLM2_491 = '{\n    "epoch": 0.42,\n    "train_loss": 3.4180344645182292,\n    "train_runtime": 30187.6115,\n    "train_samples": 114599,\n    "train_samples_per_second": 1.59,\n    "train_steps_per_second": 0.099\n}\n{\n  "best_metric": null,\n  "best_model_checkpoint": null,\n  "epoch": 0.4188518224417316,\n  "global_step": 3000,\n  "is_hyper_param_search": false,\n  "is_local_process_zero": true,\n  "is_world_process_zero": true,\n  "log_history": [\n   \n    {\n      "epoch": 0.41,\n      "learning_rate": 0.0002,\n      "loss": 3.2439,\n      "step": 2970\n    },\n    {\n      "epoch": 0.42,\n      "learning_rate": 0.00013333333333333334,\n      "loss": 3.3575,\n      "step": 2980\n    },\n    {\n      "epoch": 0.42,\n      "learning_rate": 6.666666666666667e-05,\n      "loss": 3.2988,\n      "step": 2990\n    },\n    {\n      "epoch": 0.42,\n      "learning_rate": 0.0,\n      "loss": 3.2533,\n      "step": 3000\n    },\n    {\n      "epoch": 0.42,\n      "step": 3000,\n      "total_flos": 1.73594313916416e+17,\n      "train_loss": 3.4180344645182292,\n      "train_runtime": 30187.6115,\n      "train_samples_per_second": 1.59,\n      "train_steps_per_second": 0.099\n    }\n  ],\n'

# https://github.com/OpenGVLab/InternVL/issues/254 (as pasted): one HF record with loss 0.0 at epoch 0.01; the image tokens
# did not fit the truncated sequence, leaving nothing to supervise
INTERNVL_254 = "{'loss': 0.0, 'learning_rate': 3.3112582781456954e-07, 'epoch': 0.01}\n  0%|          | 3/30200 [01:39<256:54:21, 30.63s/it]warning: The size of tensor a (15968) must match the size of tensor b (52736) at non-singleton dimension 0, input_embeds[selected].shape=torch.Size([15968, 2048]), vit_embeds.shape=torch.Size([52736, 2048])\n"

# https://github.com/experiencor/keras-yolo2/issues/101 (TF 1.x tf.Print lines, as pasted): "Loss Class" is 0 with a single
# class, by design
KERAS_YOLO2_101 = '2017-12-21 14:46:50.722959: I tensorflow/core/kernels/logging_ops.cc:79] Loss XY \t[0.188059166]\n2017-12-21 14:46:50.722978: I tensorflow/core/kernels/logging_ops.cc:79] Loss WH \t[0.0108934361]\n2017-12-21 14:46:50.722994: I tensorflow/core/kernels/logging_ops.cc:79] Loss Conf \t[0.0540329479]\n2017-12-21 14:46:50.723009: I tensorflow/core/kernels/logging_ops.cc:79] Loss Class \t[0]\n'

# https://github.com/amdegroot/ssd.pytorch/issues/7 (as pasted): the loss climbs 15.2 -> 15.5 -> 17.6 -> 31.7, then NaN;
# the maintainer blamed stale default hyperparameters (the step size)
SSD_7 = 'Loading base network...\nInitializing weights...\nLoading Dataset...\nTraining SSD on VOC2007\nTimer: 6.7833 sec.\niter 0 || Loss: 26.1034 || Timer: 0.2098 sec.\niter 10 || Loss: 15.1629 || Timer: 0.2115 sec.\niter 20 || Loss: 15.4713 || Timer: 0.2101 sec.\niter 30 || Loss: 17.6274 || Timer: 0.2153 sec.\niter 40 || Loss: 31.7296 || Timer: 0.2107 sec.\niter 50 || Loss: nan || Timer: 0.2113 sec.\niter 60 || Loss: nan || Timer: 0.2073 sec.\niter 70 || Loss: nan || Timer: 0.2035 sec.\niter 80 || Loss: nan || Timer: 0.2090 sec.\niter 90 || Loss: nan || Timer: 0.2055 sec.\niter 100 || Loss: nan || Timer: 0.2196 sec.\niter 110 || Loss: nan || Timer: 0.2064 sec.\niter 120 || Loss: nan || Timer: 0.2257 sec.\niter 130 || Loss: nan || Timer: 0.2051 sec.\niter 140 || Loss: nan || Timer: 0.2142 sec.\niter 150 || Loss: nan || Timer: 0.2056 sec.\niter 160 || Loss: nan || Timer: 0.2122 sec.\niter 170 || Loss: nan || Timer: 0.2090 sec.\niter 180 || Loss: nan || Timer: 0.2091 sec.\niter 190 || Loss: nan || Timer: 0.2110 sec.\n'

# https://github.com/AlexeyAB/darknet/issues/4758 (as pasted): -nan in a yolo layer's line with count: 0 is a layer that
# saw no object; normal
DARKNET_4758 = 'v3 (mse loss, Normalizer: (iou: 0.750000, cls: 1.000000) Region 130 Avg (IOU: -nan, GIOU: -nan), Class: -nan, Obj: -nan, No Obj: 0.504471, .5R: -nan, .75R: -nan, count: 0, loss = 74375.835938, class_loss = 74375.835938, iou_loss = 0.000000\nv3 (mse loss, Normalizer: (iou: 0.750000, cls: 1.000000) Region 82 Avg (IOU: 0.310754, GIOU: 0.223625), Class: 0.568450, Obj: 0.503603, No Obj: 0.473598, .5R: 0.222222, .75R: 0.111111, count: 9, loss = 276.509735, class_loss = 265.729645, iou_loss = 10.780090\nv3 (mse loss, Normalizer: (iou: 0.750000, cls: 1.000000) Region 94 Avg (IOU: 0.291759, GIOU: 0.105928), Class: 0.524678, Obj: 0.562712, No Obj: 0.553509, .5R: 0.333333, .75R: 0.000000, count: 9, loss = 1421.265015, class_loss = 1405.048584, iou_loss = 16.216431\nv3 (mse loss, Normalizer: (iou: 0.750000, cls: 1.000000) Region 106 Avg (IOU: -nan, GIOU: -nan), Class: -nan, Obj: -nan, No Obj: 0.500648, .5R: -nan, .75R: -nan, count: 0, loss = 4664.142090, class_loss = 4664.142090, iou_loss = 0.000000\nv3 (mse loss, Normalizer: (iou: 0.750000, cls: 1.000000) Region 118 Avg (IOU: -nan, GIOU: -nan), Class: -nan, Obj: -nan, No Obj: 0.473961, .5R: -nan, .75R: -nan, count: 0, loss = 16648.542969, class_loss = 16648.542969, iou_loss = 0.000000\n'


def test_trainer_state_pieces_in_a_text_file_are_read_as_text(tmp_path: Path):
    a = _run(tmp_path, CHATGLM2_491)
    assert _verdict(a) == ("healthy", "healthy")  # was: nothing read (the JSON reader kept 0 entries)
    assert _series(a, "loss") == [3.2439, 3.3575, 3.2988, 3.2533]
    df = a.run.scalars
    assert df[df["metric"] == "loss"]["step"].tolist() == [2970, 2980, 2990, 3000]


def test_a_cut_trainer_state_json_keeps_its_own_reader(tmp_path: Path):
    """The real file name: the JSON reader reports the cut, as before."""
    body = CHATGLM2_491[CHATGLM2_491.index("}\n{") + 2:]
    a = _run(tmp_path, body, name="trainer_state.json")
    assert any("truncated or corrupt JSON" in (p.problem or "") for p in a.run.artifacts)


def test_darknet_region_lines_are_not_steps(tmp_path: Path):
    a = _run(tmp_path, DARKNET_4758)
    assert _verdict(a)[1] != "lr_too_high"  # was: "diverged at step 3" over five layers of one iteration
    assert not len(a.run.scalars)


def test_the_iteration_line_after_the_regions_is_read(tmp_path: Path):
    text = DARKNET_4758 + (" 1: 1875.204224, 1875.204224 avg loss, 0.000000 rate, 5.120000 seconds, 64 images, "
                           "1234.000000 hours left\n")
    a = _run(tmp_path, text)
    assert _series(a, "loss") == [1875.204224]


def test_the_only_log_of_an_lm_run_at_loss_zero_is_flagged(tmp_path: Path):
    a = _run(tmp_path, INTERNVL_254)
    f = next(x for x in a.diagnosis.findings if x.code == "LBL001")
    assert f.confidence == 0.45 and f.severity == "error"
    assert _verdict(a) == ("inconclusive", "unknown")  # was: healthy; one log is too little to name the cause


def test_a_zero_loss_log_late_in_the_epoch_alone_is_not(tmp_path: Path):
    a = _run(tmp_path, "{'loss': 0.0, 'learning_rate': 3.3e-07, 'epoch': 0.6}\n")
    assert not [x for x in a.diagnosis.findings if x.code == "LBL001"]


def _tf_print(steps: list[tuple[str, str]]) -> str:
    """tf.Print lines through glog (TF 1.x logging_ops.cc), one block of messages per step (values made up)."""
    out = []
    for i, (xy, total) in enumerate(steps):
        for msg, v in (("Loss XY", xy), ("Loss WH", "0.0108934361"), ("Total Loss", total)):
            out.append(f"2017-12-21 14:46:{50 + i}.722959: I tensorflow/core/kernels/logging_ops.cc:79] {msg} \t[{v}]")
    return "\n".join(out) + "\n"


def test_tf_print_losses_are_read(tmp_path: Path):
    a = _run(tmp_path, KERAS_YOLO2_101)
    assert _verdict(a) == ("healthy", "healthy")  # was: nothing read (inconclusive)
    assert _series(a, "Loss XY") == [0.188059166] and _series(a, "Loss Class") == [0.0]


def test_a_repeated_message_is_the_next_step(tmp_path: Path):
    a = _run(tmp_path, _tf_print([("0.19", "2.5"), ("0.17", "2.1"), ("0.15", "nan"), ("0.14", "nan")]))
    df = a.run.scalars
    assert df[df["metric"] == "loss"]["step"].tolist() == [1, 2, 3, 4]
    f = next(x for x in a.diagnosis.findings if x.code == "NUM001")
    assert f.first_step == 3


def test_tf_print_without_a_loss_is_left_alone(tmp_path: Path):
    text = _tf_print([("0.19", "2.5")]).replace("Loss XY", "anchors").replace("Loss WH", "scale").replace("Total Loss", "iou")
    a = _run(tmp_path, text)
    assert not len(a.run.scalars)


def test_a_monotone_climb_into_the_nan_is_the_step_size(tmp_path: Path):
    a = _run(tmp_path, SSD_7)
    assert _verdict(a) == ("failed", "lr_too_high")  # was: inconclusive
    f = next(x for x in a.diagnosis.findings if x.code == "OPT001")
    assert f.confidence == 0.55 and "loss rose from 15.16 (step 10) to 31.73 (step 40)" in f.message


def test_an_abrupt_nan_after_a_falling_loss_is_not(tmp_path: Path):
    rows = [f"iter {i * 10} || Loss: {v} || Timer: 0.2098 sec." for i, v in
            enumerate(["26.1034", "15.1629", "14.4713", "13.6274", "12.7296", "nan", "nan"])]
    a = _run(tmp_path, "\n".join(rows) + "\n")
    assert not [x for x in a.diagnosis.findings if x.code == "OPT001"]


def test_a_rise_that_is_not_monotone_is_not(tmp_path: Path):
    rows = [f"iter {i * 10} || Loss: {v} || Timer: 0.2098 sec." for i, v in
            enumerate(["26.1034", "15.1629", "31.4713", "17.6274", "31.7296", "nan", "nan"])]
    a = _run(tmp_path, "\n".join(rows) + "\n")
    assert not [x for x in a.diagnosis.findings if x.code == "OPT001"]
