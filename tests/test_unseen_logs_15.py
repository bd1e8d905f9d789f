"""Round 15 (2026-11-28): formats the held-out sets showed unread, each the printout of a whole family of trainers, and
a header whose words outnumber the row's cells (a rendered table pasted as text), which was read into wrong columns."""

from __future__ import annotations

from pathlib import Path

from tests.test_unseen_logs import _run, _series, _verdict

# https://github.com/salesforce/LAVIS/issues/111 (as pasted): LAVIS' runner header "Train: data epoch: [0]" over the
# MetricLogger's "[  50/4427]" (the same header in MiniGPT-4, InstructBLIP, Video-LLaMA)
LAVIS_111 = '[INFO] Start training epoch 0, 4427 iters per inner epoch.\nTrain: data epoch: [0]  [   0/4427]  eta: 9:01:56  lr: 0.000000  loss: 1.9126  time: 7.3449  data: 0.0000  max mem: 26284\n[INFO] Reducer buckets have been rebuilt in this iteration.\nTrain: data epoch: [0]  [  50/4427]  eta: 6:32:09  lr: 0.000001  loss: nan  time: 5.3553  data: 0.0000  max mem: 34957\n'

# https://github.com/tfzhou/ContrastiveSeg/issues/68 (as pasted): openseg.pytorch's two-line report, "Train Iteration: 30"
# and, on the next line, "Learning rate = [...]  Loss = nan (ave = nan)"
CONTRASTIVESEG_68 = '2023-08-07 16:07:13,007 INFO    [trainer.py, 229] Train Epoch: 0        Train Iteration: 30      Time 4.248s / 10iters, (0.425)  Forward Time 2.557s / 10iters, (0.256)  Backward Time 1.583s / 10iters, (0.158)  Loss Time 0.075s / 10iters, (0.007)     Data load 0.033s / 10iters, (0.003317)\nLearning rate = [0.0009995649894856365, 0.009995649894856365, 0.009995649894856365]     Loss = nan (ave = nan)\n'

# https://github.com/EveryVoiceTTS/EveryVoice/issues/232 (as pasted): Lightning bars cut by the terminal before their "]"
EVERYVOICE_232 = 'Epoch 0:   4%|▎         | 1/28 [00:12<05:50,  0.08it/s, v_num=base, training/pitch_loss=0.950, training/energy_loss=0.931, training/duration_loss=2.580, training/spec_loss=19.70, training/postnet_loss=21.00, \nEpoch 0:   7%|▋         | 2/28 [00:18<04:04,  0.11it/s, v_num=base, training/pitch_loss=0.950, training/energy_loss=0.931, training/duration_loss=2.580, training/spec_loss=19.70, training/postnet_loss=21.00, \nEpoch 0:   7%|▋         | 2/28 [00:18<04:04,  0.11it/s, v_num=base, training/pitch_loss=nan.0, training/energy_loss=nan.0, training/duration_loss=nan.0, training/spec_loss=nan.0, training/postnet_loss=nan.0, ' + "\n"

# https://github.com/fastai/fastai/issues/941 (as pasted, the header and the row of its table; the row before it is
# added so the table has the two rows a headed table needs)
FASTAI_941 = "epoch train loss valid loss accuracy_thresh f2_opt\n0 0.612 0.598 0.981 0.402\n1 nan nan 0.997788 0.000000\n"


def test_lavis_header_over_the_metric_logger_is_read(tmp_path: Path):
    a = _run(tmp_path, LAVIS_111)
    df = a.run.scalars
    loss = df[df["metric"] == "loss"].sort_values("step")
    assert loss["step"].tolist() == [0, 50]  # was: nothing read
    assert loss["value"].iloc[0] == 1.9126 and loss["value"].isna().iloc[1]
    assert _verdict(a)[0] != "healthy"


def test_lavis_inner_epoch_counts_the_step():
    import re

    from autopsy.ingest.text_metrics import _MAE
    m = _MAE.search(b"Train: data epoch: [0]; inner epoch [3]  [  50/500]  eta: 0:01:00  lr: 0.000010  loss: 2.1\n")
    assert m is not None and int(m[2]) * int(m[4]) + int(m[3]) == 1550
    assert re.search(rb"loss", m[5])


def test_openseg_two_line_report_is_read(tmp_path: Path):
    a = _run(tmp_path, CONTRASTIVESEG_68)
    df = a.run.scalars
    loss = df[df["metric"] == "loss"]
    assert loss["step"].tolist() == [30] and loss["value"].isna().all()  # was: nothing read
    lr = df[df["metric"] == "learning_rate"]["value"].tolist()
    assert lr == [0.0009995649894856365]
    assert a.diagnosis.verdict.status != "healthy"


def test_openseg_finite_report_keeps_both_values(tmp_path: Path):
    text = CONTRASTIVESEG_68.replace("Loss = nan (ave = nan)", "Loss = 0.71053201 (ave = 0.73312000)")
    a = _run(tmp_path, text)
    assert _series(a, "loss") == [0.71053201]


def test_lightning_bars_cut_before_their_bracket_are_read(tmp_path: Path):
    a = _run(tmp_path, EVERYVOICE_232)
    df = a.run.scalars
    spec = df[df["metric"] == "training/spec_loss"].sort_values("step")
    assert spec["value"].iloc[0] == 19.70 and spec["value"].isna().iloc[-1]  # was: nothing read
    assert a.diagnosis.verdict.status != "healthy"


def test_a_cut_bar_drops_its_last_value_when_no_comma_follows(tmp_path: Path):
    line = EVERYVOICE_232.splitlines()[0].rstrip(", ")[:-2] + "\n"  # "...postnet_loss=21." cut mid-value
    a = _run(tmp_path, line * 3)
    df = a.run.scalars
    assert "training/postnet_loss" not in set(df["metric"])
    assert "training/spec_loss" in set(df["metric"])


def test_two_word_column_names_are_joined(tmp_path: Path):
    a = _run(tmp_path, FASTAI_941)
    df = a.run.scalars
    assert set(df["key"]) >= {"train_loss", "valid_loss", "accuracy_thresh"}
    tl = df[df["key"] == "train_loss"].sort_values("step")["value"]
    assert tl.iloc[0] == 0.612 and tl.isna().iloc[1]
    assert _verdict(a)[0] != "healthy"  # was: healthy, the NaN read into a column named "train"


def test_a_header_not_over_its_values_names_no_columns(tmp_path: Path):
    """More header words than cells and the values not under them: not a fixed-width table."""
    text = "epoch lr train acc top5 valid acc top5\n0 0.5 0.4 0.99 0.1\n1 nan nan 0.9 0.2\n"
    a = _run(tmp_path, text)
    assert not len(a.run.scalars) or "train" not in set(a.run.scalars["key"])


# https://github.com/microsoft/onnxruntime/pull/17685 (as pasted, the UserWarning line dropped): one record printed twice
# at the same step (two processes), loss 0.0 and LR 0
ORT_17685 = "  1%|██▏                                                                                                                                                                                                                                               | 9/1000 [00:05<03:57,  4.17it/s][WARNING|trainer_pt_utils.py:849] 2023-09-25 08:30:44,791 >> tried to get lr value before scheduler/optimizer started stepping, returning lr=0\n{'loss': 0.0, 'learning_rate': 0, 'epoch': 0.0}\n  1%|██▏                                                                                                                                                                                                                                               | 9/1000 [00:05<03:57,  4.17it/s][WARNING|trainer_pt_utils.py:849] 2023-09-25 08:30:44,889 >> tried to get lr value before scheduler/optimizer started stepping, returning lr=0\n{'loss': 0.0, 'learning_rate': 0, 'epoch': 0.0}\n"


def test_one_record_printed_by_two_ranks_is_the_start(tmp_path: Path):
    a = _run(tmp_path, ORT_17685)
    assert _verdict(a)[0] != "healthy"  # was: healthy, "loss 0 -> 0 over 2 logged points"
    assert any(f.code == "LBL001" for f in a.diagnosis.findings)


def test_an_excerpt_from_the_middle_at_zero_is_not_the_start(tmp_path: Path):
    """Two distinct steps far into the run: "from the first log" is not "from the start" (unchanged)."""
    text = '{"loss": 0.0, "learning_rate": 2e-05, "step": 3000}\n{"loss": 0.0, "learning_rate": 2e-05, "step": 3010}\n'
    a = _run(tmp_path, text)
    assert not any(f.code == "LBL001" for f in a.diagnosis.findings)

# https://github.com/alibaba/Megatron-LLaMA/issues/31 (as pasted): the reporter's own "iter N: loss" printout of two runs
MEGATRON_LLAMA_31 = ("----------------------------------\nOverlappedDistributedOptimizer\n----------------------------------\n"
                     "iter 1: 1.764603\niter 2: 1.693627\niter 3: 1.751950\niter 4: 1.745651\niter 5: 1.781831\n\n"
                     "----------------------------------\nDistributedOptimizer\n----------------------------------\n"
                     "iter 1: 1.764603\niter 2: 1.693627\niter 3: 1.751948\niter 4: 1.745644\niter 5: 1.781826\n")


def test_step_word_and_one_value_per_line_is_a_loss_listing(tmp_path: Path):
    a = _run(tmp_path, MEGATRON_LLAMA_31)
    assert _verdict(a) == ("healthy", "healthy")  # was: nothing read
    df = a.run.scalars
    assert sorted(df[df["metric"] == "loss"]["step"].tolist()) == [1, 1, 2, 2, 3, 3, 4, 4, 5, 5]


def test_a_nan_in_such_a_listing_is_not_healthy(tmp_path: Path):
    text = MEGATRON_LLAMA_31.replace("iter 4: 1.745644", "iter 4: nan").replace("iter 5: 1.781826", "iter 5: nan")
    a = _run(tmp_path, text)
    assert _verdict(a)[0] != "healthy"


def test_two_such_lines_are_prose(tmp_path: Path):
    a = _run(tmp_path, "We compared both.\niter 1: 1.764603\niter 2: 1.693627\nThat is all.\n")
    assert not len(a.run.scalars)


# https://github.com/deepspeedai/DeepSpeedExamples/issues/444 (as pasted, from the first inf log on): DeepSpeed-Chat step 3
# in fp16; the paste stops inside the ZeRO optimizer's loss-scale update, before the exception line
DSCHAT_444 = '|E2E latency=2.14s |Gather latency=0.00s (0.00%) |Generate time=1.62s (75.39%) |Training time=0.42s (19.74%) |Others=0.10 (4.87%)|CurSamplesPerSec=1.87 |AvgSamplesPerSec=1.95\nepoch: 0|step: 3184|ppo_ep: 1|act_loss: inf|cri_loss: inf|unsuper_loss: 0.0\naverage reward score: -6.359375\n-------------------------------------------------------------------------------------\n|E2E latency=2.16s |Gather latency=0.00s (0.00%) |Generate time=1.64s (76.19%) |Training time=0.42s (19.25%) |Others=0.10 (4.56%)|CurSamplesPerSec=1.85 |AvgSamplesPerSec=1.95\nepoch: 0|step: 3185|ppo_ep: 1|act_loss: inf|cri_loss: inf|unsuper_loss: 0.0\naverage reward score: -4.54296875\n|E2E latency=2.06s |Gather latency=0.00s (0.00%) |Generate time=1.54s (74.86%) |Training time=0.42s (20.36%) |Others=0.10 (4.77%)|CurSamplesPerSec=1.94 |AvgSamplesPerSec=1.95\nepoch: 0|step: 3196|ppo_ep: 1|act_loss: inf|cri_loss: inf|unsuper_loss: 0.0\naverage reward score: -4.56640625\n-------------------------------------------------------------------------------------\n|E2E latency=2.10s |Gather latency=0.00s (0.00%) |Generate time=1.58s (75.15%) |Training time=0.42s (19.89%) |Others=0.10 (4.97%)|CurSamplesPerSec=1.90 |AvgSamplesPerSec=1.95\nepoch: 0|step: 3197|ppo_ep: 1|act_loss: inf|cri_loss: inf|unsuper_loss: 0.0\naverage reward score: -6.9453125\n-------------------------------------------------------------------------------------\n|E2E latency=2.08s |Gather latency=0.00s (0.00%) |Generate time=1.56s (75.20%) |Training time=0.42s (19.98%) |Others=0.10 (4.82%)|CurSamplesPerSec=1.93 |AvgSamplesPerSec=1.95\nepoch: 0|step: 3198|ppo_ep: 1|act_loss: inf|cri_loss: inf|unsuper_loss: 0.0\naverage reward score: -5.7421875\n-------------------------------------------------------------------------------------\n|E2E latency=2.03s |Gather latency=0.00s (0.00%) |Generate time=1.52s (74.74%) |Training time=0.41s (20.41%) |Others=0.10 (4.85%)|CurSamplesPerSec=1.97 |AvgSamplesPerSec=1.95\nTraceback (most recent call last):\n  File "./training/step3_rlhf_finetuning/main_for_pai.py", line 534, in <module>\n    main(args, device)\n  File "./training/step3_rlhf_finetuning/main_for_pai.py", line 454, in main\n    actor_loss, critic_loss = trainer.train_rlhf(exp_data)\n  File "/apsara/TempRoot/Odps/multilingual_pretrain_dev_20230426074853813go3o9w73_e39195b8_a45c_45a2_8ec3_89b20a0fbe25_AlgoTask_0_0/PyTorchWorker@#0/workspace/training/step3_rlhf_finetuning/ppo_trainer.py", line 173, in train_rlhf\n    self.actor_model.step()\n  File "/opt/conda/lib/python3.8/site-packages/deepspeed/runtime/hybrid_engine.py", line 397, in step\n    super().step(lr_kwargs=lr_kwargs)\n  File "/opt/conda/lib/python3.8/site-packages/deepspeed/runtime/engine.py", line 1988, in step\n    self._take_model_step(lr_kwargs)\n  File "/opt/conda/lib/python3.8/site-packages/deepspeed/runtime/engine.py", line 1895, in _take_model_step\n    self.optimizer.step()\n  File "/opt/conda/lib/python3.8/site-packages/deepspeed/runtime/zero/stage_1_and_2.py", line 1652, in step\n    self._update_scale(self.overflow)\n  File "/opt/conda/lib/python3.8/site-packages/deepspeed/runtime/zero/stage_1_and_2.py", line 1896, in _update_scale\n    self.loss_scaler.update_scale(has_overflow)\n'


def test_a_traceback_cut_inside_deepspeeds_scaler_update_is_the_min_scale_abort(tmp_path: Path):
    a = _run(tmp_path, DSCHAT_444)
    assert _verdict(a) == ("failed", "loss_scale_collapse")  # was: a crash naming no cause
    ev = a.run.events_of("loss_scale_min")
    assert ev and ev[0].line == DSCHAT_444.count("\n") - 1 and "update_scale" in ev[0].message


def test_a_traceback_cut_elsewhere_in_deepspeed_implies_nothing(tmp_path: Path):
    text = DSCHAT_444[:DSCHAT_444.index('  File "/opt/conda/lib/python3.8/site-packages/deepspeed/runtime/zero/stage_1_and_2.py", line 1896')]
    a = _run(tmp_path, text)
    assert not a.run.events_of("loss_scale_min")
    assert _verdict(a)[1] != "loss_scale_collapse"


# https://github.com/NVIDIA/Megatron-LM/issues/5 (as pasted): pretrain_bert.py's evaluation drew from an exhausted iterator
MEGATRON_5 = '  successfully saved checkpoints/bert_345m/iter_0050000/mp_rank_00/model_optim_rng.pt\nTraceback (most recent call last):\n  File "pretrain_bert.py", line 584, in <module>\n    main()\n  File "pretrain_bert.py", line 562, in main\n    timers, args)\n  File "pretrain_bert.py", line 365, in train\n    prefix, val_data_iterator, model, args, timers, False)\n  File "pretrain_bert.py", line 419, in evaluate_and_print_results\n    args, timers, verbose)\n  File "pretrain_bert.py", line 395, in evaluate\n    args, timers)\n  File "pretrain_bert.py", line 212, in forward_step\n    padding_mask = get_batch(data_iterator, timers)\n  File "pretrain_bert.py", line 189, in get_batch\n    data = next(data_iterator)\n  File "/data2/z00487393/Applications/Anaconda/envs/ML_pytorch/lib/python3.6/site-packages/torch/utils/data/dataloader.py", line 794, in __next__\n    raise StopIteration\nStopIteration\n'

# https://github.com/modelscope/ms-swift/issues/4644 (as pasted, a headerless fragment with rank prefixes and blank lines)
MSSWIFT_4644 = '[rank24]: File "/home/user/.local/lib/python3.10/site-packages/swift/megatron/train/utils.py", line 213, in get_batch\n\n[rank24]: batch = get_batch_on_this_tp_rank(data_iterator)\n\n[rank24]: File "/home/user/.local/lib/python3.10/site-packages/swift/megatron/train/utils.py", line 60, in get_batch_on_this_tp_rank\n\n[rank24]: data = next(data_iterator)\n\n[rank24]: StopIteration\n'


def test_a_bare_stopiteration_from_next_on_the_data_is_the_data_running_out(tmp_path: Path):
    for text in (MEGATRON_5, MSSWIFT_4644):
        a = _run(tmp_path, text)
        assert _verdict(a) == ("failed", "data_exhausted")  # was: a crash with no cause / nothing read
        f = next(f for f in a.diagnosis.findings if f.root_cause == "data_exhausted")
        assert "StopIteration" in f.title and f.evidence


def test_a_stopiteration_after_the_loss_went_nan_is_not_the_data(tmp_path: Path):
    text = "step 1 | loss 2.31\nstep 2 | loss nan\nstep 3 | loss nan\n" + MSSWIFT_4644
    a = _run(tmp_path, text)
    assert _verdict(a)[1] != "data_exhausted"

# https://github.com/LeapLabTHU/ViTTT/issues/11 (as pasted, Swin-style main.py lines cut to the grad_norm column; AMP on):
# the running mean in brackets turns NaN after a skipped AMP step, the step's own norms stay finite
VITTT_11 = ("Train: [88/300][100/312] grad_norm 0.8387 (0.6661)\nTrain: [88/300][200/312] grad_norm 0.6910 (nan)\n"
            "Train: [88/300][300/312] grad_norm 0.7382 (nan)\n")


def test_swin_lines_cut_to_the_grad_norm_column_are_read(tmp_path: Path):
    a = _run(tmp_path, VITTT_11)
    assert _series(a, "grad_norm") == [0.8387, 0.6910, 0.7382]  # was: nothing read
    assert a.run.scalars["step"].tolist() == [88 * 312 + 100, 88 * 312 + 200, 88 * 312 + 300]
    assert _verdict(a) == ("healthy", "healthy")


def test_a_nan_grad_norm_of_the_step_itself_is_seen(tmp_path: Path):
    a = _run(tmp_path, VITTT_11.replace("0.6910 (nan)", "nan (nan)").replace("0.7382 (nan)", "nan (nan)"))
    assert _verdict(a)[0] != "healthy"


# https://github.com/HuangJunJie2017/BEVDet/issues/50 (as pasted: the mmdet log and the config line that turned on fp16)
BEVDET_50 = '$nohup tools/dist_train.sh configs/bevdet/bevdet-r50-cbgs.py 2 > mytrain_r50-fp16_log.txt 2>&1 &\n2023-06-15 04:03:40,870 - mmdet - INFO - Epoch [1][50/3862]\tlr: 4.915e-05, eta: 3 days, 22:56:26, time: 4.428, data_time: 1.900, memory: 10657, task0.loss_xy: 0.2820, task0.loss_z: 0.3374, task0.loss_whl: 0.7133, task0.loss_yaw: 0.3525, task0.loss_vel: 0.0843, task0.loss_heatmap: nan, loss: nan, grad_norm: nan\n2023-06-15 04:05:44,778 - mmdet - INFO - Epoch [1][100/3862]\tlr: 9.910e-05, eta: 3 days, 1:59:42, time: 2.479, data_time: 0.368, memory: 10657, task0.loss_xy: 0.2815, task0.loss_z: 0.3439, task0.loss_whl: 0.7107, task0.loss_yaw: 0.3526, task0.loss_vel: 0.0884, task0.loss_heatmap: nan, loss: nan, grad_norm: nan\n2023-06-15 04:07:49,798 - mmdet - INFO - Epoch [1][150/3862]\tlr: 1.491e-04, eta: 2 days, 19:08:44, time: 2.500, data_time: 0.140, memory: 10658, task0.loss_xy: 0.2809, task0.loss_z: 0.3409, task0.loss_whl: 0.7121, task0.loss_yaw: 0.3495, task0.loss_vel: 0.0868, task0.loss_heatmap: nan, loss: nan, grad_norm: nan\n'
BEVDET_50_CONFIG = "fp16 = dict(loss_scale='dynamic')\n"

# https://github.com/twangnh/Distilling-Object-Detectors/issues/4 (as pasted): four of the five terms NaN, loss_sup finite
DISTILL_4 = '[session 1][epoch  1][iter 21000/23080] loss: nan, loss_sup: 8.9603, lr: 3.00e-03\n                        fg/bg=(256/0), time cost: 19.056542\n                        rpn_cls: nan, rpn_box: nan, rcnn_cls: nan, rcnn_box nan\n[session 1][epoch  1][iter 21100/23080] loss: nan, loss_sup: 8.9857, lr: 3.00e-03\n                        fg/bg=(256/0), time cost: 19.276745\n                        rpn_cls: nan, rpn_box: nan, rcnn_cls: nan, rcnn_box nan\n[session 1][epoch  1][iter 21200/23080] loss: nan, loss_sup: 8.6904, lr: 3.00e-03\n                        fg/bg=(256/0), time cost: 19.519685\n                        rpn_cls: nan, rpn_box: nan, rcnn_cls: nan, rcnn_box nan\n[session 1][epoch  1][iter 21300/23080] loss: nan, loss_sup: 8.5541, lr: 3.00e-03\n                        fg/bg=(256/0), time cost: 19.295986\n                        rpn_cls: nan, rpn_box: nan, rcnn_cls: nan, rcnn_box nan\n[session 1][epoch  1][iter 21400/23080] loss: nan, loss_sup: 8.6372, lr: 3.00e-03\n                        fg/bg=(256/0), time cost: 19.508717\n'

# https://github.com/gjhhust/YOLOFT/issues/12 (as pasted): the YOLO label cache found no label for any image
YOLOFT_12 = 'train: Scanning /smoke_fusion_theraml/XS-VID/images/UAVTOD_DJI0824Part1_0.cache... 0 images, 7426 backgrounds, 0 corrupt: 100%|██████████| 7426/7426 [00:00<?, ?it/s]\ntrain: Scanning /smoke_fusion_theraml/XS-VID/images/UAVTOD_DJI0824Part1_0.cache... 0 images, 7426 backgrounds, 0 corrupt: 100%|██████████| 7426/7426 [00:00<?, ?it/s]\nAn error occurred during training session 2: train: No labels found in /smoke_fusion_theraml/XS-VID/images/UAVTOD_DJI0824Part1_0.cache, can not start training. See https://docs.ultralytics.com/yolov5/tutorials/train_custom_data\n'


def test_mmcv_fp16_dict_in_a_config_is_fp16(tmp_path: Path):
    a = _run(tmp_path, BEVDET_50, config=BEVDET_50_CONFIG)
    assert a.run.config.get("fp16") is True
    assert _verdict(a) == ("failed", "fp16_overflow")  # was: nan_in_data (one term NaN), the fp16 config unread


def test_without_the_fp16_line_one_term_nan_stays_a_data_finding(tmp_path: Path):
    a = _run(tmp_path, BEVDET_50)
    assert _verdict(a)[1] == "nan_in_data"


def test_most_terms_nan_together_is_not_one_terms_data(tmp_path: Path):
    a = _run(tmp_path, DISTILL_4)
    assert not any(f.code == "DATA001" and "Only" in f.title for f in a.diagnosis.findings)  # was: "Only rcnn_box ..."
    assert _verdict(a)[1] != "nan_in_data"


def test_yolo_no_labels_found_is_all_labels_masked(tmp_path: Path):
    a = _run(tmp_path, YOLOFT_12)
    assert _verdict(a) == ("failed", "all_labels_masked")  # was: nothing read
    f = next(f for f in a.diagnosis.findings if f.code == "LBL001")
    assert "UAVTOD_DJI0824Part1_0.cache" in f.message and f.evidence[0].where == "line 3"


def test_yolov5_assert_form_and_the_val_set_warning(tmp_path: Path):
    # YOLOv5 utils/dataloaders.py: assert nf > 0 or not augment, f'{prefix}No labels found in {cache_path}, can not start
    # training. {HELP_URL}'; val.py: "WARNING ⚠️ no labels found in val set, can not compute metrics without labels"
    tb = ('Traceback (most recent call last):\n  File "train.py", line 640, in <module>\n    main(opt)\n'
          "AssertionError: train: No labels found in /data/coco/labels/train2017.cache, can not start training. "
          "See https://docs.ultralytics.com/yolov5/tutorials/train_custom_data\n")
    a = _run(tmp_path, tb)
    assert _verdict(a) == ("failed", "all_labels_masked")
    b = _run(tmp_path / "val", "WARNING ⚠️ no labels found in val set, can not compute metrics without labels\n") \
        if (tmp_path / "val").mkdir() is None else None
    assert not b.run.events_of("no_labels_found")

# https://github.com/duj12/kws_demo/issues/1 (as pasted): WeNet's per-epoch "Epoch N CV info cv_loss X" summary (this
# fork adds cv_acc); wenet/bin/train.py prints 'Epoch {} CV info cv_loss {}'
KWS_DEMO_1 = ("INFO Epoch 0 CV info cv_loss 60.06750510101584 cv_acc 32.3473716624177\n"
              "INFO Epoch 5 CV info cv_loss 59.136570353712315 cv_acc 33.24977346669095\n")


def test_wenet_epoch_cv_summary_is_read(tmp_path: Path):
    a = _run(tmp_path, KWS_DEMO_1)
    df = a.run.scalars
    ev = df[df["metric"] == "eval_loss"].sort_values("step")
    assert ev["step"].tolist() == [0, 5] and ev["value"].tolist() == [60.06750510101584, 59.136570353712315]
    assert set(df["key"]) == {"cv_loss", "cv_acc"}  # was: nothing read


def test_wenet_cv_summary_sits_at_the_epochs_last_batch(tmp_path: Path):
    # wenet/utils/train_utils.py log_per_step rows, then the epoch's CV line
    text = ("TRAIN Batch 0/100 loss 120.512345 loss_att 110.1 loss_ctc 140.2 lr 0.00010000 grad_norm 80.1 rank 0\n"
            "TRAIN Batch 0/200 loss 95.312345 loss_att 90.1 loss_ctc 110.2 lr 0.00020000 grad_norm 60.1 rank 0\n"
            "Epoch 0 CV info cv_loss 88.123 rank 0\n")
    a = _run(tmp_path, text)
    df = a.run.scalars
    assert df[df["metric"] == "eval_loss"]["step"].tolist() == [200]

# https://github.com/ultralytics/yolov3/issues/1211 (as pasted: results.txt as a Markdown table, header by the reporter)
YOLOV3_1211 = ("epoch|mem|mloss0|mloss1|mloss2|mloss3|targets|imgsize|p|r|map|mf1|loss0|loss1|loss2\n"
               "-|-|-|-|-|-|-|-|-|-|-|-|-|-|-\n"
               "0/299|7.17G| 3.28| 2.15|0.816| 6.25|    5|  576|0.409|0.723|0.623|0.517| 3.06|  1.4|0.773|\n"
               "1/299|7.35G| 3.46| 1.92|0.969| 6.35|    5|  512| 0.49|0.709|0.647|0.572| 2.74| 1.23|  0.8|\n"
               "2/299|7.19G| 3.84| 1.85| 1.33| 7.02|    5|  384|0.536|0.665|0.629|0.585|  2.7| 1.16|0.883|\n")


def test_pipe_table_epoch_cells_with_their_total_are_steps(tmp_path: Path):
    a = _run(tmp_path, YOLOV3_1211)
    df = a.run.scalars
    assert df[df["key"] == "mloss3"].sort_values("step")["value"].tolist() == [6.25, 6.35, 7.02]  # was: nothing read
    assert sorted(set(df["step"])) == [0, 1, 2]
    assert "mem" not in set(df["key"])

# https://github.com/RVC-Project/Retrieval-based-Voice-Conversion/issues/11 (as pasted): RVC's train.py report
RVC_11 = ("INFO:xx:Train Epoch: 478 [92%]\nINFO:xx:[110200, 9.421142503636453e-05]\n"
          "INFO:xx:loss_disc=3.598, loss_gen=3.174, loss_fm=8.765,loss_mel=19.367, loss_kl=1.520\n")


def test_vits_family_report_is_read(tmp_path: Path):
    a = _run(tmp_path, RVC_11)
    df = a.run.scalars
    assert set(df["step"]) == {110200}  # was: nothing read
    assert dict(zip(df["key"], df["value"]))["loss_mel"] == 19.367
    assert _verdict(a) == ("healthy", "healthy")


def test_vits_two_line_losses_and_a_nan(tmp_path: Path):
    # the two-line variant (losses split after loss_fm, as in so-vits-svc forks' train.py), the generator gone NaN
    block = ("2024-01-01 10:00:00,000 INFO Train Epoch: {e} [40%]\n2024-01-01 10:00:00,000 INFO [{s}, 0.0002]\n"
             "2024-01-01 10:00:00,000 INFO loss_disc={d}, loss_gen={g}, loss_fm=8.100\n"
             "2024-01-01 10:00:00,000 INFO loss_mel=21.300, loss_kl=1.400\n")
    text = "".join(block.format(e=e, s=s, d=d, g=g) for e, s, d, g in
                   ((1, 200, "2.700", "2.900"), (2, 400, "2.650", "3.000"), (3, 600, "nan", "nan")))
    a = _run(tmp_path, text)
    df = a.run.scalars
    assert sorted(set(df["step"])) == [200, 400, 600]
    assert df[df["key"] == "loss_mel"]["value"].tolist() == [21.3, 21.3, 21.3]
    assert _verdict(a)[0] != "healthy"


# https://github.com/ml-explore/mlx-examples/issues/620 (the reporter's second run, as pasted): LoRA scale 10 at lr 7e-5,
# the loss thrown from 1.4 to 6.4 and staying far above it, nothing non-finite
MLX_620 = 'Training\nStarting training..., iters: 2596\nIter 1: Val loss 2.086, Val took 17.177s\nIter 25: Train loss 1.593, Learning Rate 7.000e-05, It/sec 0.999, Tokens/sec 387.697, Trained Tokens 9699, Peak mem 8.104 GB\nIter 50: Train loss 1.406, Learning Rate 7.000e-05, It/sec 0.942, Tokens/sec 369.778, Trained Tokens 19515, Peak mem 8.104 GB\nIter 75: Train loss 3.316, Learning Rate 7.000e-05, It/sec 0.933, Tokens/sec 366.098, Trained Tokens 29327, Peak mem 8.104 GB\nIter 100: Train loss 6.437, Learning Rate 7.000e-05, It/sec 0.921, Tokens/sec 371.347, Trained Tokens 39407, Peak mem 8.626 GB\nIter 100: Saved adapter weights to checkpoints/100_adapters.npz.\nIter 125: Train loss 5.478, Learning Rate 7.000e-05, It/sec 0.952, Tokens/sec 379.485, Trained Tokens 49374, Peak mem 8.626 GB\nIter 150: Train loss 4.857, Learning Rate 7.000e-05, It/sec 0.973, Tokens/sec 367.105, Trained Tokens 58811, Peak mem 8.626 GB\nIter 175: Train loss 4.874, Learning Rate 7.000e-05, It/sec 0.959, Tokens/sec 371.460, Trained Tokens 68497, Peak mem 8.626 GB\nIter 200: Train loss 4.604, Learning Rate 7.000e-05, It/sec 0.943, Tokens/sec 363.135, Trained Tokens 78122, Peak mem 8.626 GB\nIter 200: Saved adapter weights to checkpoints/200_adapters.npz.\n'


def test_a_sustained_divergence_without_nan_names_the_step_size(tmp_path: Path):
    a = _run(tmp_path, MLX_620)
    assert _verdict(a) == ("failed", "lr_too_high")  # was: inconclusive, the divergence a symptom without a cause
    f = next(f for f in a.diagnosis.findings if f.code == "DIV001")
    assert f.confidence == 0.5 and f.first_step == 75


# https://github.com/facebookresearch/fairseq/issues/506 (the maintainer's reference log, as pasted): an overflow halves
# the fp16 scale to 0.5 and it holds there while the loss keeps improving: healthy
FAIRSEQ_506 = "| epoch 066 | loss 3.577 | nll_loss 1.869 | ppl 3.65 | wps 1.19893e+06 | ups 2.9 | wpb 417527 | bsz 14128 | num_updates 24207 | lr 0.000406499 | gnorm 0.328 | clip 100% | oom 0 | loss_scale 1.000 | wall 9782\n| epoch 066 | valid on 'valid' subset | valid_loss 3.68436 | valid_nll_loss 1.92702 | valid_ppl 3.80\n| epoch 067 | loss 3.575 | nll_loss 1.867 | ppl 3.65 | wps 1.18887e+06 | ups 2.8 | wpb 417527 | bsz 14131 | num_updates 24574 | lr 0.000403452 | gnorm 0.326 | clip 100% | oom 0 | loss_scale 1.000 | wall 9933\n| epoch 067 | valid on 'valid' subset | valid_loss 3.68274 | valid_nll_loss 1.92629 | valid_ppl 3.80\n| WARNING: overflow detected, setting loss scale to: 0.5\n| epoch 068 | loss 3.573 | nll_loss 1.864 | ppl 3.64 | wps 1.19112e+06 | ups 2.9 | wpb 417537 | bsz 14129 | num_updates 24940 | lr 0.000400481 | gnorm 0.324 | clip 100% | oom 0 | loss_scale 0.500 | wall 10083\n| epoch 068 | valid on 'valid' subset | valid_loss 3.68672 | valid_nll_loss 1.9272 | valid_ppl 3.80\n| epoch 069 | loss 3.570 | nll_loss 1.862 | ppl 3.63 | wps 1.19853e+06 | ups 2.9 | wpb 417527 | bsz 14131 | num_updates 25307 | lr 0.000397566 | gnorm 0.323 | clip 100% | oom 0 | loss_scale 0.500 | wall 10226\n| epoch 069 | valid on 'valid' subset | valid_loss 3.68245 | valid_nll_loss 1.9233 | valid_ppl 3.79\n"


def test_a_scale_that_fell_below_one_and_held_is_not_a_collapse(tmp_path: Path):
    a = _run(tmp_path, FAIRSEQ_506)
    assert _verdict(a) == ("healthy", "healthy")  # was: failed, loss_scale_collapse
    f = next(f for f in a.diagnosis.findings if f.code == "PREC001")
    assert f.severity == "warning"


def test_a_scale_halved_log_after_log_below_one_is_a_collapse(tmp_path: Path):
    text = FAIRSEQ_506.replace("loss_scale 0.500 | wall 10226", "loss_scale 0.250 | wall 10226").replace(
        "| WARNING: overflow detected, setting loss scale to: 0.5",
        "| WARNING: overflow detected, setting loss scale to: 0.5\n| WARNING: overflow detected, setting loss scale to: 0.25")
    a = _run(tmp_path, text)
    assert _verdict(a)[1] == "loss_scale_collapse"


def test_fairseq_valid_lines_without_their_own_count_sit_at_their_epoch(tmp_path: Path):
    a = _run(tmp_path, FAIRSEQ_506)
    df = a.run.scalars
    ev = df[df["metric"] == "eval_loss"].sort_values("step")
    assert ev["step"].tolist() == [24207, 24574, 24940, 25307]  # was: 25308..25311, after the last update
    assert "valid_valid_loss" not in set(df["key"])
    assert a.run.events_of("overflow")[0].step == 24574


# https://github.com/yaringal/DropoutUncertaintyCaffeModels/issues/3 (as pasted): Caffe's train and test loss at 87.3365 = -ln(FLT_MIN), accuracy at chance
CAFFE_87 = 'I0616 00:24:30.437563 10711 solver.cpp:228] Iteration 55900, loss = 87.3365\nI0616 00:24:30.437683 10711 solver.cpp:244]     Train net output #0: loss = 87.3365 (* 1 = 87.3365 loss)\nI0616 00:24:30.437700 10711 sgd_solver.cpp:106] Iteration 55900, lr = 0.00243129\nI0616 00:26:52.689358 10711 solver.cpp:404]     Test net output #0: accuracy = 0.1\nI0616 00:26:52.689466 10711 solver.cpp:404]     Test net output #1: loss = 87.3365 (* 1 = 87.3365 loss)\nI0616 00:26:53.020918 10711 solver.cpp:228] Iteration 56000, loss = 87.3365\nI0616 00:26:53.020978 10711 solver.cpp:244]     Train net output #0: loss = 87.3365 (* 1 = 87.3365 loss)\nI0616 00:26:53.020994 10711 sgd_solver.cpp:106] Iteration 56000, lr = 0.00242852\n'


def test_caffe_loss_at_the_softmax_floor_is_not_healthy(tmp_path: Path):
    a = _run(tmp_path, CAFFE_87)
    st, cause = _verdict(a)
    assert st != "healthy"  # was: healthy
    f = next(f for f in a.diagnosis.findings if f.code == "DIV001")
    assert "87.3365" in f.title and f.first_step == 55900


def test_a_loss_near_87_that_moves_is_not_the_floor(tmp_path: Path):
    text = CAFFE_87.replace("Iteration 56000, loss = 87.3365", "Iteration 56000, loss = 86.9012").replace(
        "Train net output #0: loss = 87.3365 (* 1 = 87.3365 loss)\nI0616 00:26:53.020994",
        "Train net output #0: loss = 86.9012 (* 1 = 86.9012 loss)\nI0616 00:26:53.020994")
    a = _run(tmp_path, text)
    assert not any(f.code == "DIV001" and "87.3365" in f.title for f in a.diagnosis.findings)


# https://github.com/AlexeyAB/darknet/issues/2449 (as pasted, quote marks stripped): darknet saves the first weights at iteration 100 into a
# backup folder that does not exist; file_error() prints this and exits
DARKNET_2449 = "99: 469.803864, 848.945251 avg loss, 0.000000 rate, 20.457852 seconds, 6336 images\nLoaded: 0.000029 seconds\n100: 443.011078, 808.351807 avg loss, 0.000000 rate, 20.684246 seconds, 6400 images\nSaving weights to /home/rtc/darknet/backup//yolo-obj_last.weights\nCouldn't open file: /home//darknet/backup//yolo-obj_last.weights\n"


def test_darknet_file_error_ends_the_run(tmp_path: Path):
    a = _run(tmp_path, DARKNET_2449)
    assert _verdict(a) == ("failed", "crash")  # was: healthy
    f = next(f for f in a.diagnosis.findings if f.code == "CRASH001")
    assert f.first_step == 100 and "backup" in " ".join(f.remedies)


def test_couldnt_open_file_inside_a_sentence_is_not_an_exit(tmp_path: Path):
    a = _run(tmp_path, "I think it says Couldn't open file: data/obj.names but it kept going\n")
    assert not a.run.events_of("native_abort")


# https://blog.csdn.net/qq_32892383/article/details/143626070 (ultralytics results.csv as pasted, first 4 epochs): the
# val losses NaN at every epoch on a GTX 1660 Super under AMP, the training terms and mAP fine
YOLOV8_CSDN = 'epoch, train/box_loss, train/cls_loss, train/dfl_loss, metrics/precision(B), metrics/recall(B), metrics/mAP50(B), metrics/mAP50-95(B), val/box_loss, val/cls_loss, val/dfl_loss, lr/pg0, lr/pg1, lr/pg2\n1, 1.0528, 4.0179, 1.0164, 0.50566, 0.42115, 0.4226, 0.31671, nan, nan, nan, 0.0033291, 0.0033291, 0.0033291\n2, 0.975, 2.3274, 0.99149, 0.87422, 0.84204, 0.9524, 0.73884, nan, nan, nan, 0.0066075, 0.0066075, 0.0066075\n3, 0.99872, 1.7083, 1.0006, 0.86385, 0.92221, 0.97791, 0.75714, nan, nan, nan, 0.0098308, 0.0098308, 0.0098308\n4, 0.98629, 1.4711, 1.0027, 0.9398, 0.96121, 0.98227, 0.74803, nan, nan, nan, 0.0097525, 0.0097525, 0.0097525\n'


def test_an_eval_loss_nan_at_every_evaluation_is_not_a_term_never_computed(tmp_path: Path):
    a = _run(tmp_path, YOLOV8_CSDN)
    assert _verdict(a)[0] != "healthy"  # was: healthy (read as a term the trainer does not compute)
    f = next(f for f in a.diagnosis.findings if f.code == "NUM001")
    assert f.title.startswith("The evaluation loss went non-finite") and f.symptom == "eval_nonfinite"


# https://github.com/mozilla/DeepSpeech/issues/1629 (as pasted): TensorFlow's CTC loss refuses a transcript longer than
# its frames ("Not enough time for target transition sequence"), an InvalidArgumentError that stops training
DEEPSPEECH_1629 = 'Preprocessing [\'/home/dell/Documents/train_file1/train1.csv\']\nPreprocessing done\nPreprocessing [\'/home/dell/Documents/train_file1/dev1.csv\']\nPreprocessing done\nPreprocessing [\'/home/dell/Documents/train_file1/test1.csv\']\nPreprocessing done\nW Parameter --validation_step needs to be >0 for early stopping to work\nI Initializing from frozen model: ../models/output_graph.pb\nI STARTING Optimization\nI Training epoch 0...\nE Not enough time for target transition sequence (required: 77, available: 76)0You can turn this error into a warning by using the flag ignore_longer_outputs_than_inputs                                  \nE \t [[{{node tower_0/CTCLoss}} = CTCLoss[ctc_merge_repeated=true, ignore_longer_outputs_than_inputs=false, preprocess_collapse_repeated=false, _device="/job:localhost/replica:0/task:0/device:CPU:0"](tower_\n'


def test_tf_ctc_not_enough_time_is_the_label_longer_than_its_frames(tmp_path: Path):
    a = _run(tmp_path, DEEPSPEECH_1629)
    assert _verdict(a) == ("failed", "ctc_output_longer_than_input")  # was: inconclusive
    f = next(f for f in a.diagnosis.findings if f.root_cause == "ctc_output_longer_than_input")
    assert "77" in f.title and "76" in f.title

# https://github.com/dbolya/yolact/issues/53 (the maintainer's reference run, as pasted, parts): YOLACT's train.py rows
YOLACT_53 = ("[  0]     240 || B: 4.553 | C: 6.594 | M: 5.163 | S: 1.210 | T: 17.519 || ETA: 6 days, 20:00:21 || timer: 0.648\n"
             "[  0]     250 || B: 4.536 | C: 6.595 | M: 5.161 | S: 1.208 | T: 17.500 || ETA: 6 days, 19:30:03 || timer: 0.716\n"
             "[ 16]  237920 || B: 1.659 | C: 2.578 | M: 2.639 | S: 0.531 | T: 7.406 || ETA: 4 days, 11:02:14 || timer: 0.685\n"
             "[ 16]  237930 || B: 1.669 | C: 2.573 | M: 2.658 | S: 0.524 | T: 7.424 || ETA: 4 days, 11:03:43 || timer: 0.729\n")


def test_yolact_rows_are_read_with_t_as_the_loss(tmp_path: Path):
    a = _run(tmp_path, YOLACT_53)
    assert _series(a, "loss") == [17.519, 17.5, 7.406, 7.424]  # was: nothing read
    df = a.run.scalars
    assert df[df["key"] == "loss_mask"]["value"].tolist()[0] == 5.163
    assert _verdict(a) == ("healthy", "healthy")
    text = YOLACT_53.replace("T: 7.424", "T: nan").replace("M: 2.658", "M: nan")
    assert _verdict(_run(tmp_path / "nan" if (tmp_path / "nan").mkdir() is None else tmp_path, text))[0] != "healthy"


# https://github.com/chuanqi305/FocalLoss/issues/8 (as pasted): Caffe SSD, 393 -> 1.7e6 -> NaN within 20 iterations at lr 0.001
CAFFE_SSD_8 = ' Solving VGG_VOC0712_SSD_300x300_train\nI1112 16:14:25.373922 12274 solver.cpp:295] Learning Rate Policy: multistep\nI1112 16:14:26.191864 12274 solver.cpp:243] Iteration 0, loss = 393.183\nI1112 16:14:26.191922 12274 solver.cpp:259]     Train net output #0: mbox_loss = 463.676 (* 1 = 463.676 loss)\nI1112 16:14:26.191949 12274 sgd_solver.cpp:138] Iteration 0, lr = 0.001\nI1112 16:14:37.323004 12274 solver.cpp:243] Iteration 10, loss = 1.70709e+06\nI1112 16:14:37.323065 12274 solver.cpp:259]     Train net output #0: mbox_loss = 1.00702e+07 (* 1 = 1.00702e+07 loss)\nI1112 16:14:37.323082 12274 sgd_solver.cpp:138] Iteration 10, lr = 0.001\nI1112 16:14:48.218691 12274 solver.cpp:243] Iteration 20, loss = nan\nI1112 16:14:48.218749 12274 solver.cpp:259]     Train net output #0: mbox_loss = nan (* 1 = nan loss)\nI1112 16:14:48.218765 12274 sgd_solver.cpp:138] Iteration 20, lr = 0.001\nI1112 16:14:59.353508 12274 solver.cpp:243] Iteration 30, loss = nan\nI1112 16:14:59.353610 12274 solver.cpp:259]     Train net output #0: mbox_loss = nan (* 1 = nan loss)\nI1112 16:14:59.353627 12274 sgd_solver.cpp:138] Iteration 30, lr = 0.001\n'


def test_an_explosion_in_the_two_logs_before_nan_names_the_lr(tmp_path: Path):
    a = _run(tmp_path, CAFFE_SSD_8)
    assert _verdict(a) == ("failed", "lr_too_high")  # was: inconclusive ("Loss exploded at step 10")


def test_two_ordinary_logs_before_nan_do_not(tmp_path: Path):
    text = CAFFE_SSD_8.replace("loss = 1.70709e+06", "loss = 391.2").replace("mbox_loss = 1.00702e+07 (* 1 = 1.00702e+07",
                                                                              "mbox_loss = 391.2 (* 1 = 391.2")
    a = _run(tmp_path, text)
    assert _verdict(a)[1] != "lr_too_high"


# https://github.com/huaifeng1993/DFANet/issues/27 (as pasted, first lines): 910 -> 2.9e12 in the very next update, a
# bug in the published model file
DFANET_27 = ("Epoch 0/1499\nstep: 0/298 | loss: 910.1328 | IoU of batch: 0.0249\n"
             "step: 1/298 | loss: 2907000799232.0000 | IoU of batch: 0.0004\nstep: 2/298 | loss: nan | IoU of batch: 0.0303\n"
             "step: 3/298 | loss: nan | IoU of batch: 0.0233\n")


def test_a_blow_up_in_the_next_single_update_does_not_name_the_lr(tmp_path: Path):
    a = _run(tmp_path, DFANET_27)
    assert _verdict(a)[1] != "lr_too_high"


# https://github.com/MIC-DKFZ/nnDetection/issues/107 (as pasted): loguru's per-epoch "Train loss reached" / "Val loss
# reached" lines; the loss goes below 0 by design (GIoU-based)
NNDET_107 = '2022-09-06 15:45:56.947 | INFO     | nndet.ptmodule.retinaunet.base:training_epoch_end:252 - Train loss reached: 0.00359\n2022-09-06 16:29:43.007 | INFO     | nndet.ptmodule.retinaunet.base:validation_epoch_end:269 - Val loss reached: 0.00189\n2022-09-06 16:29:43.130 | INFO     | nndet.ptmodule.retinaunet.base:evaluation_end:284 - mAP@0.1:0.5:0.05: 0.697  AP@0.1: 0.721  AP@0.5: 0.658\n2022-09-06 16:29:43.131 | INFO     | nndet.ptmodule.retinaunet.base:evaluation_end:292 - Proxy FG Dice: 0.699\n2022-09-06 16:29:43.133 | INFO     | nndet.ptmodule.base_module:validation_epoch_end:88 - This epoch took 85 s\n2022-09-06 16:29:43.192 | INFO     | nndet.ptmodule.retinaunet.base:training_epoch_end:252 - Train loss reached: -0.06791\n2022-09-06 17:14:03.825 | INFO     | nndet.ptmodule.retinaunet.base:validation_epoch_end:269 - Val loss reached: -0.08439\n2022-09-06 17:14:03.932 | INFO     | nndet.ptmodule.retinaunet.base:evaluation_end:284 - mAP@0.1:0.5:0.05: 0.763  AP@0.1: 0.799  AP@0.5: 0.713\n2022-09-06 17:14:03.933 | INFO     | nndet.ptmodule.retinaunet.base:evaluation_end:292 - Proxy FG Dice: 0.748\n'


def test_nndetection_epoch_lines_are_read_and_a_negative_loss_is_healthy(tmp_path: Path):
    a = _run(tmp_path, NNDET_107)
    assert _series(a, "loss") == [0.00359, -0.06791]  # was: nothing read
    assert _series(a, "eval_loss") == [0.00189, -0.08439]
    assert _verdict(a) == ("healthy", "healthy")
    b = _run(tmp_path / "nan" if (tmp_path / "nan").mkdir() is None else tmp_path,
             NNDET_107.replace("Train loss reached: -0.06791", "Train loss reached: nan"))
    assert _verdict(b)[0] != "healthy"


def test_a_healthy_headline_cites_the_epoch_loss_when_no_per_step_loss_is_logged(tmp_path: Path):
    a = _run(tmp_path, FAIRSEQ_506)
    assert "train_loss 3.577 -> 3.57 over 4 logged points (steps 24207-25307)" in a.diagnosis.verdict.headline
