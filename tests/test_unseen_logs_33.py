"""Round 33 (2026-11-28): failures found unexplained while working through the new held-out sets and the threads
around them, each fixed for its family; every log is quoted from its thread, with guards for the cousins."""

from __future__ import annotations

from pathlib import Path

from tests.test_unseen_logs import _run, _verdict


def _run_in(tmp_path: Path, i: int, log: str):
    """The analysis of ``log`` in a folder of its own (the i-th log of a test)."""
    d = tmp_path / str(i)
    d.mkdir()
    return _run(d, log)


def _crash(a):
    return next(f for f in a.diagnosis.findings if f.code == "CRASH001")


def _lbl(a):
    return next(f for f in a.diagnosis.findings if f.code == "LBL001")


# https://github.com/hezhangsprinter/DCPDN/issues/65 (as pasted; the answer: "加载数据不对", the data was not loaded): torch's
# RandomSampler refuses an empty dataset before the first batch
DCPDN_65 = r"""Traceback (most recent call last):
  File "E:\DCPDN-master\DCPDN-master\train.py", line 76, in <module>
    dataloader = getLoader(opt.dataset,
  File "E:\DCPDN-master\DCPDN-master\misc.py", line 64, in getLoader
    dataloader = torch.utils.data.DataLoader(dataset,
  File "C:\ProgramData\anaconda3\envs\pytorch\lib\site-packages\torch\utils\data\dataloader.py", line 351, in __init__
    sampler = RandomSampler(dataset, generator=generator)  # type: ignore[arg-type]
  File "C:\ProgramData\anaconda3\envs\pytorch\lib\site-packages\torch\utils\data\sampler.py", line 107, in __init__
    raise ValueError("num_samples should be a positive integer "
ValueError: num_samples should be a positive integer value, but got num_samples=0
"""

# https://github.com/ultralytics/yolov5/issues/8139 (a comment of 2023-11-06, as pasted up to the help URL): every image
# is a background ("0 images, 500 backgrounds"), so the label check stops the run
YOLOV5_8139 = """train: Scanning /content/drive/MyDrive/Complete/Train/Images.cache... 0 images, 500 backgrounds, 0 corrupt: 100% 500/500 [00:00<?, ?it/s]
Traceback (most recent call last):
  File "/content/yolov5/train.py", line 647, in <module>
    main(opt)
  File "/content/yolov5/train.py", line 536, in main
    train(opt.hyp, opt, device, callbacks)
  File "/content/yolov5/train.py", line 195, in train
    train_loader, dataset = create_dataloader(train_path,
  File "/content/yolov5/utils/dataloaders.py", line 124, in create_dataloader
    dataset = LoadImagesAndLabels(
  File "/content/yolov5/utils/dataloaders.py", line 502, in __init__
    assert nf > 0 or not augment, f'{prefix}No labels found in {cache_path}, can not start training. {HELP_URL}'
AssertionError: train: No labels found in /content/drive/MyDrive/Complete/Train/Images.cache, can not start training.
"""

# https://github.com/WongKinYiu/yolov7/issues/1435 (as pasted): the wording of YOLOv5 before 2022, kept by YOLOv7
YOLOV7_1435 = ("AssertionError: train: No labels in /content/yolov7/SKU110K_fixed/annotations/train_list.cache. Can not train "
               "without labels. See https://github.com/ultralytics/yolov5/wiki/Train-Custom-Data\n")

# https://github.com/Morizeyao/GPT2-Chinese/issues/240 (the whole report): PyTorch Lightning's check of the train loader
GPT2_CHINESE_240 = "ValueError: `Dataloader` returned 0 length. Please make sure that it returns at least 1 batch\n"


def test_an_empty_dataset_is_named_as_such(tmp_path: Path):
    for i, log in enumerate((DCPDN_65, GPT2_CHINESE_240)):
        a = _run_in(tmp_path, i, log)
        assert _verdict(a) == ("failed", "data_exhausted"), i
        f = _crash(a)
        assert f.title.startswith("The training set is empty"), (i, f.title)
        assert f.evidence[0].where.startswith("line ")  # the exception's line, quoted in the message
        assert any(w in f.message for w in ("num_samples=0", "0 length")), (i, f.message)


def test_yolo_label_checks_of_both_wordings_name_the_cache(tmp_path: Path):
    # LBL001 (a dataset without labels): the message's own cache path, not the assert's source line above it
    a = _run(tmp_path, YOLOV5_8139)
    f = _lbl(a)
    assert _verdict(a) == ("failed", "all_labels_masked")
    assert "(/content/drive/MyDrive/Complete/Train/Images.cache)" in f.message and "{cache_path}" not in f.message
    assert f.evidence[0].where == "line 13"
    d = tmp_path / "v7"
    d.mkdir()
    a = _run(d, YOLOV7_1435)
    assert _verdict(a) == ("failed", "all_labels_masked")
    assert "(/content/yolov7/SKU110K_fixed/annotations/train_list.cache)" in _lbl(a).message


def test_other_sampler_and_label_errors_stay_crashes(tmp_path: Path):
    # a negative sample count is a bad argument, not an empty dataset (torch's own test of RandomSampler); the
    # YOLO "No labels found" warning alone (printed before a run that may go on) is no exception
    negative = DCPDN_65.replace("num_samples=0", "num_samples=-1")
    a = _run(tmp_path, negative)
    assert _verdict(a) == ("failed", "crash")
    d = tmp_path / "warn"
    d.mkdir()
    warn = ("WARNING ⚠️ No labels found in /home/wlixill/datasets/armor/labels/train2017.cache. See "
            "https://github.com/ultralytics/yolov5/wiki/Train-Custom-Data\n")  # yolov5#11085, the line before its error
    a = _run(d, warn)
    assert _verdict(a)[1] != "data_exhausted"


def test_an_empty_dataset_after_a_nan_is_not_the_cause(tmp_path: Path):
    # the sampler error raised when the NaN run rebuilt its loader (e.g. for a new epoch) is the NaN's consequence
    log = "step 1 | loss 2.31\nstep 2 | loss 2.10\nstep 3 | loss nan\nstep 4 | loss nan\n" + DCPDN_65
    a = _run(tmp_path, log)
    assert _verdict(a)[1] != "data_exhausted"


# https://github.com/pytorch/pytorch/issues/50259 (the traceback of the first comment, as pasted)
PYTORCH_50259 = r"""Traceback (most recent call last):
  File "E:/pytorch的编译资料/pytorch 全连接神经网络.py", line 102, in <module>
    loss = criterion(out, target.long())
  File "D:\ProgramData\Anaconda3\lib\site-packages\torch\nn\modules\module.py", line 727, in _call_impl
    result = self.forward(*input, **kwargs)
  File "D:\ProgramData\Anaconda3\lib\site-packages\torch\nn\modules\loss.py", line 962, in forward
    ignore_index=self.ignore_index, reduction=self.reduction)
  File "D:\ProgramData\Anaconda3\lib\site-packages\torch\nn\functional.py", line 2468, in cross_entropy
    return nll_loss(log_softmax(input, 1), target, weight, None, ignore_index, None, reduction)
  File "D:\ProgramData\Anaconda3\lib\site-packages\torch\nn\functional.py", line 2264, in nll_loss
    ret = torch._C._nn.nll_loss(input, target, weight, _Reduction.get_enum(reduction), ignore_index)
IndexError: Target 117 is out of bounds.
"""

# https://github.com/EricFillion/happy-transformer/issues/248 (as pasted; the maintainer: "The lowest valid label number
# is 0"): a -1 label
HAPPY_248 = """return torch._C._nn.cross_entropy_loss(input, target, weight, _Reduction.get_enum(reduction), ignore_index) IndexError:
Target -1 is out of bounds.
"""

# https://github.com/layumi/Person_reID_baseline_pytorch/issues/372 (as pasted, the five kernel lines kept): the GPU form,
# after an epoch that trained
REID_372 = """Epoch 0/59
----------
train Loss: 2.7186 Acc: 0.4082
/pytorch/aten/src/THCUNN/ClassNLLCriterion.cu:108: cunn_ClassNLLCriterion_updateOutput_kernel: block: [0,0,0], thread: [0,0,0] Assertion `t >= 0 && t < n_classes` failed.
/pytorch/aten/src/THCUNN/ClassNLLCriterion.cu:108: cunn_ClassNLLCriterion_updateOutput_kernel: block: [0,0,0], thread: [8,0,0] Assertion `t >= 0 && t < n_classes` failed.
/pytorch/aten/src/THCUNN/ClassNLLCriterion.cu:108: cunn_ClassNLLCriterion_updateOutput_kernel: block: [0,0,0], thread: [11,0,0] Assertion `t >= 0 && t < n_classes` failed.
/pytorch/aten/src/THCUNN/ClassNLLCriterion.cu:108: cunn_ClassNLLCriterion_updateOutput_kernel: block: [0,0,0], thread: [20,0,0] Assertion `t >= 0 && t < n_classes` failed.
/pytorch/aten/src/THCUNN/ClassNLLCriterion.cu:108: cunn_ClassNLLCriterion_updateOutput_kernel: block: [0,0,0], thread: [31,0,0] Assertion `t >= 0 && t < n_classes` failed.
Traceback (most recent call last):
  File "train.py", line 577, in <module>
    num_epochs=opt.total_epoch)
  File "train.py", line 379, in train_model
    running_loss += loss.item() * now_batch_size
RuntimeError: CUDA error: device-side assert triggered
"""

# https://github.com/LiyuanLucasLiu/LM-LSTM-CRF/issues/27 (as pasted: Markdown ate the backticks around the condition)
LMLSTMCRF_27 = ("/opt/conda/conda-bld/pytorch_1518244421288/work/torch/lib/THCUNN/ClassNLLCriterion.cu:101: void "
                "cunn_ClassNLLCriterion_updateOutput_kernel(Dtype *, Dtype *, Dtype *, long *, Dtype *, int, int, int, int, "
                "long) [with Dtype = float, Acctype = float]: block: [0,0,0], thread: [2,0,0] Assertion t >= 0 && t < "
                "n_classes failed.\n")


def test_a_class_label_beyond_the_classifier_is_named(tmp_path: Path):
    for i, (log, label) in enumerate(((PYTORCH_50259, "117"), (HAPPY_248, "-1"), (REID_372, None),
                                      (LMLSTMCRF_27, None))):
        a = _run_in(tmp_path, i, log)
        assert _verdict(a) == ("failed", "vocab_mismatch"), i
        f = next(f for f in a.diagnosis.findings if f.code == "VOCAB001")
        assert "outside the classifier's range" in f.title, (i, f.title)
        assert (f"label {label} " in f.title) if label else "A class label outside" in f.title, (i, f.title)
        assert ("negative label" in f.message) == (label == "-1"), i
        # the exception is the cause's consequence, not a second error
        assert all(g.severity == "info" for g in a.diagnosis.findings if g.code == "CRASH001"), i


def test_other_out_of_bounds_messages_are_not_class_labels(tmp_path: Path):
    # numpy's and a generic Python index error name no loss target
    log = ("Traceback (most recent call last):\n  File \"train.py\", line 3, in <module>\n    x = a[10]\n"
           "IndexError: index 10 is out of bounds for axis 0 with size 10\n")
    a = _run(tmp_path, log)
    assert _verdict(a) == ("failed", "crash")


# https://github.com/pytorch/pytorch/issues/139031 (the end of the notebook traceback, as pasted; closed as a usage error:
# the model's output rows did not pair with the labels)
PYTORCH_139031 = """/usr/local/lib/python3.10/dist-packages/torch/nn/functional.py in cross_entropy(input, target, weight, size_average, ignore_index, reduce, reduction, label_smoothing)
   3477     if size_average is not None or reduce is not None:
   3478         reduction = _Reduction.legacy_get_string(size_average, reduce)
-> 3479     return torch._C._nn.cross_entropy_loss(
   3480         input,
   3481         target,

ValueError: Expected input batch_size (60) to match target batch_size (10).
"""

# https://github.com/gauthierdmn/question_generation/issues/4 (as pasted): sequence logits flattened against questions of
# another length, 1216 = 64 x 19 rows against 1280 = 64 x 20 labels
QGEN_4 = """Traceback (most recent call last):
  File "train.py", line 171, in <module>
    loss = criterion(pred.view(-1, pred.size(2)), question.view(-1))
  File "/var/www/html/question_generate/env/lib/python3.6/site-packages/torch/nn/modules/module.py", line 493, in __call__
    result = self.forward(*input, **kwargs)
  File "/var/www/html/question_generate/env/lib/python3.6/site-packages/torch/nn/modules/loss.py", line 209, in forward
    return F.nll_loss(input, target, weight=self.weight, ignore_index=self.ignore_index, reduction=self.reduction)
  File "/var/www/html/question_generate/env/lib/python3.6/site-packages/torch/nn/functional.py", line 1869, in nll_loss
    .format(input.size(0), target.size(0)))
ValueError: Expected input batch_size (1216) to match target batch_size (1280)
"""


def test_prediction_rows_that_do_not_pair_with_the_targets_are_a_shape_mismatch(tmp_path: Path):
    for i, (log, n_in, n_t, folded) in enumerate(((PYTORCH_139031, 60, 10, True), (QGEN_4, 1216, 1280, False))):
        a = _run_in(tmp_path, i, log)
        assert _verdict(a) == ("failed", "loss_shape_mismatch"), i
        f = next(f for f in a.diagnosis.findings if f.code == "SHP001")
        assert f.title == f"The loss got {n_in} prediction rows for {n_t} targets"
        assert ("6x as many rows" in f.message) == folded
        assert "sequence outputs" in f.message
        assert all(g.severity == "info" for g in a.diagnosis.findings if g.code == "CRASH001"), i


# https://github.com/milesial/Pytorch-UNet/issues/244 (as pasted; solved by converting the masks to one channel)
UNET_244 = r"""Epoch 1/5:   0%|          | 0/37 [00:05<?, ?img/s]
Traceback (most recent call last):
  File "D:/project/Pytorch-UNet-master/train.py", line 181, in <module>
    val_percent=args.val / 100)
  File "D:/project/Pytorch-UNet-master/train.py", line 80, in train_net
    loss = criterion(masks_pred, true_masks)
  File "D:\Python\lib\site-packages\torch\nn\modules\module.py", line 541, in __call__
    result = self.forward(*input, **kwargs)
  File "D:\Python\lib\site-packages\torch\nn\modules\loss.py", line 601, in forward
    reduction=self.reduction)
  File "D:\Python\lib\site-packages\torch\nn\functional.py", line 2112, in binary_cross_entropy_with_logits
    raise ValueError("Target size ({}) must be the same as input size ({})".format(target.size(), input.size()))
ValueError: Target size (torch.Size([1, 3, 256, 256])) must be the same as input size (torch.Size([1, 1, 256, 256]))
"""

# https://github.com/Arctanxy/W-Net-PyTorch/issues/15 (the comment's traceback, its last lines): binary_cross_entropy
# raises the message the regression losses only warn with
WNET_15 = """  File "/home/pytorch/lib/python3.6/site-packages/torch/nn/modules/loss.py", line 613, in forward
    return F.binary_cross_entropy(input, target, weight=self.weight, reduction=self.reduction)
  File "/home//pytorch/lib/python3.6/site-packages/torch/nn/functional.py", line 2752, in binary_cross_entropy
    "Please ensure they have the same size.".format(target.size(), input.size())
ValueError: Using a target size (torch.Size([64])) that is different to the input size (torch.Size([64, 1])) is deprecated. Please ensure they have the same size.
"""


def test_binary_cross_entropy_refusing_a_shape_is_a_crash_not_a_broadcast(tmp_path: Path):
    for i, (log, why) in enumerate(((UNET_244, "the channels differ (1 predicted, 3 in the target)"),
                                    (WNET_15, "[N, 1] output against [N] labels"))):
        a = _run_in(tmp_path, i, log)
        assert _verdict(a) == ("failed", "loss_shape_mismatch"), i
        f = next(f for f in a.diagnosis.findings if f.code == "SHP001")
        assert f.title.startswith("The loss refused a target of shape"), f.title
        assert why in f.message and "broadcast" not in f.message, f.message
        assert all(g.severity == "info" for g in a.diagnosis.findings if g.code == "CRASH001"), i


# https://github.com/PawitKoch/LO-Net-pytorch/issues/1 (the last lines of the notebook traceback, as pasted)
LONET_1 = """--> 114         return F.linear(input, self.weight, self.bias)

RuntimeError: mat1 and mat2 shapes cannot be multiplied (4x356352 and 344064x512)
"""


def test_a_linear_layer_fed_another_feature_count_is_explained(tmp_path: Path):
    a = _run(tmp_path, LONET_1)
    assert _verdict(a) == ("failed", "crash")
    f = _crash(a)
    assert f.title.endswith("a Linear layer fed another number of features than it was built for"), f.title
    assert "in_features" in f.remedies[0]


# https://github.com/castorini/hedwig/issues/70 (as pasted; the maintainer: "cases where there isn't enough system memory")
HEDWIG_70 = """Note: You are using GPU for training
  0%|         | 0/3000001 [00:00<?, ?it/s]Skipping token 3000000 with 1-dimensional vector ['300']; likely a header
100%██████████████████| 3000001/3000001 [03:33<00:00, 14061.26it/s]
Killed
"""

# https://github.com/teacherpeterpan/Logic-LLM/issues/10 (as pasted, its command line left out; answered "Exit code 137 is
# a signal when a process runs out of memory"): an IDE's form
LOGICLLM_10 = """  0%|          | 0/204 [00:00<?, ?it/s]Loaded 204 examples from dev split.
 31%|███       | 63/204 [00:01<00:02, 66.83it/s]
Process finished with exit code 137 (interrupted by signal 9:SIGKILL)
"""

# https://github.com/zai-org/ChatGLM2-6B/issues/525 (as pasted up to the exception): torchrun's report of a worker killed
# while the checkpoint shards load into host RAM
CHATGLM2_525 = """Loading checkpoint shards:  57% 4/7 [00:37<00:28,  9.42s/it]ERROR:torch.distributed.elastic.multiprocessing.api:failed (exitcode: -9) local_rank: 0 (pid: 8180) of binary: /usr/bin/python3
Traceback (most recent call last):
  File "/usr/local/bin/torchrun", line 8, in <module>
    sys.exit(main())
  File "/usr/local/lib/python3.10/dist-packages/torch/distributed/elastic/multiprocessing/errors/__init__.py", line 346, in wrapper
    return f(*args, **kwargs)
  File "/usr/local/lib/python3.10/dist-packages/torch/distributed/run.py", line 794, in main
    run(args)
  File "/usr/local/lib/python3.10/dist-packages/torch/distributed/run.py", line 785, in run
    elastic_launch(
  File "/usr/local/lib/python3.10/dist-packages/torch/distributed/launcher/api.py", line 134, in __call__
    return launch_agent(self._config, self._entrypoint, list(args))
  File "/usr/local/lib/python3.10/dist-packages/torch/distributed/launcher/api.py", line 250, in launch_agent
    raise ChildFailedError(
torch.distributed.elastic.multiprocessing.errors.ChildFailedError:
"""


def test_a_process_killed_by_sigkill_is_host_memory(tmp_path: Path):
    for i, log in enumerate((HEDWIG_70, LOGICLLM_10, CHATGLM2_525)):
        a = _run_in(tmp_path, i, log)
        assert _verdict(a) == ("failed", "out_of_memory"), i
        f = _crash(a)
        assert "Killed by SIGKILL" in f.title and "host ran out of RAM" in f.title, (i, f.title)
        assert any("low_cpu_mem_usage" in r for r in f.remedies)


def test_sigterm_to_the_other_workers_and_an_own_exception_are_not_a_kill(tmp_path: Path):
    # torchrun's SIGTERM to the other workers after one failed with exit code 1 (its own traceback above): a crash
    log = ("Traceback (most recent call last):\n  File \"train.py\", line 3, in <module>\n    main()\n"
           "KeyError: 'input_ids'\n"
           "WARNING:torch.distributed.elastic.multiprocessing.api:Sending process 812914 closing signal SIGTERM\n"
           "ERROR:torch.distributed.elastic.multiprocessing.api:failed (exitcode: 1) local_rank: 3 (pid: 812917) of "
           "binary: /data/bin/python\n")
    a = _run(tmp_path, log)
    assert _verdict(a) == ("failed", "crash")
    # an exception of the script's own before the kill keeps its diagnosis
    d = tmp_path / "own"
    d.mkdir()
    a = _run(d, log.replace("failed (exitcode: 1)", "failed (exitcode: -9)"))
    assert _verdict(a) == ("failed", "crash")


# https://github.com/thograce/C2FNet/issues/9 (as pasted) and https://github.com/scverse/scvi-tools/issues/2314 (its last
# line; the maintainer: "the last batch of the training set contains one observation")
C2FNET_9 = """    raise ValueError(f"Expected more than 1 value per channel when training, got input size {size}")
ValueError: Expected more than 1 value per channel when training, got input size torch.Size([1, 16, 1, 1])
"""
SCVI_2314 = "ValueError: Expected more than 1 value per channel when training, got input size torch.Size([1, 128])\n"


def test_batchnorm_given_a_batch_of_one_is_explained(tmp_path: Path):
    for i, log in enumerate((C2FNET_9, SCVI_2314)):
        a = _run_in(tmp_path, i, log)
        assert _verdict(a) == ("failed", "crash")
        f = _crash(a)
        assert f.title.endswith("BatchNorm given a batch of one"), f.title
        assert "drop_last=True" in f.remedies[0]


# https://github.com/kyegomez/LiqudNet/issues/7 (as pasted, the traceback's last lines)
LIQUDNET_7 = """  File "/home/v/.local/lib/python3.10/site-packages/torch/nn/modules/conv.py", line 459, in _conv_forward
    return F.conv2d(input, weight, bias, self.stride,
RuntimeError: Input type (torch.cuda.FloatTensor) and weight type (torch.FloatTensor) should be the same
"""


def test_a_convolution_given_input_and_weights_on_two_devices_is_explained(tmp_path: Path):
    a = _run(tmp_path, LIQUDNET_7)
    f = _crash(a)
    assert f.title.endswith("tensors on different devices"), f.title
    assert "nn.ModuleList" in f.remedies[0]
    # both on CUDA, half against float: the dtype entry, not the device one
    d = tmp_path / "dtype"
    d.mkdir()
    a = _run(d, LIQUDNET_7.replace("(torch.cuda.FloatTensor) and weight type (torch.FloatTensor)",
                                   "(torch.cuda.HalfTensor) and weight type (torch.cuda.FloatTensor)"))
    assert _crash(a).title.endswith("half and float32 tensors mixed outside autocast")


# https://github.com/philschmid/sagemaker-huggingface-llama-2-samples/issues/22 (as quoted in the report; the answer in
# transformers#34392: "you need to provide `labels`"), and https://github.com/OptimalScale/LMFlow/issues/380 (the
# traceback's end, as pasted: the message cut before the inputs)
SAGEMAKER_22 = ("ValueError: The model did not return a loss from the inputs, only the following keys: logits. For "
                "reference, the inputs it received are input_ids,attention_mask.\n")
LMFLOW_380 = """  File "/opt/anaconda3/envs/lmflow/lib/python3.9/site-packages/transformers/trainer.py", line 2745, in compute_loss
    raise ValueError(
ValueError: The model did not return a loss from the inputs, only the following keys: logits,past_key_values. For reference, the inputs it
"""


def test_a_model_that_returned_no_loss_names_the_missing_labels(tmp_path: Path):
    f = _crash(_run_in(tmp_path, 0, SAGEMAKER_22))
    assert f.title.endswith("the batches reach the model without labels"), f.title
    assert "remove_unused_columns" in f.message
    f = _crash(_run_in(tmp_path, 1, LMFLOW_380))
    assert f.title.endswith("the model returned no loss"), f.title


# https://github.com/jfzhang95/pytorch-video-recognition/issues/71 (the traceback's end, as pasted) and
# https://github.com/dragen1860/MAML-Pytorch/issues/45 (its last line; the answer: y_spt.long())
VIDEO_71 = r"""  File "D:\anaconda3\envs\pytorch114\lib\site-packages\torch\nn\functional.py", line 2385, in nll_loss
    ret = torch._C._nn.nll_loss(input, target, weight, _Reduction.get_enum(reduction), ignore_index)
RuntimeError: expected scalar type Long but found Int
"""
MAML_45 = "RuntimeError: Expected object of scalar type Long but got scalar type Int for argument #2 'target'\n"


def test_class_targets_of_another_dtype_are_explained(tmp_path: Path):
    for i, log in enumerate((VIDEO_71, MAML_45)):
        f = _crash(_run_in(tmp_path, i, log))
        assert f.title.endswith("class targets that are not int64"), f.title
        assert "target.long()" in f.remedies[0]


# https://github.com/kfzyqin/Implementation-MolGAN-PyTorch/issues/3 (the traceback's end, as pasted)
MOLGAN_3 = """  File "/home/disk2/zhongzipeng/anaconda3/envs/Molgan/lib/python3.6/site-packages/torch/autograd/__init__.py", line 100, in backward
    allow_unreachable=True)  # allow_unreachable flag
RuntimeError: one of the variables needed for gradient computation has been modified by an inplace operation: [torch.FloatTensor [512, 45]], which is output 0 of TBackward, is at version 2; expected version 1 instead. Hint: enable anomaly detection to find the operation that failed to compute its gradient, with torch.autograd.set_detect_anomaly(True).
"""


def test_a_saved_tensor_changed_in_place_is_explained(tmp_path: Path):
    f = _crash(_run(tmp_path, MOLGAN_3))
    assert f.title.endswith("a tensor the backward needs was changed in place"), f.title
    assert "optimizer.step()" in f.remedies[0]


# https://github.com/IBM/FfDL/issues/127 (as pasted, a table of log lines; the maintainer: the learner pod did not have
# enough memory) and https://github.com/CharlesShang/FastMaskRCNN/issues/172 (its end, as pasted: Markdown bold)
FFDL_127 = """135 | 1534166953117 | /usr/local/bin/train.sh: line 18:    36 Killed                  python3 convolutional_network.py --trainImagesFile ${DATA_DIR}/train-images-idx3-ubyte.gz --trainLabelsFile ${DATA_DIR}/train-labels-idx1-ubyte.gz --testImagesFile ${DATA_DIR}/t10k-images-idx3-ubyte.gz --testLabelsFile ${DATA_DIR}/t10k-labels-idx1-ubyte.gz --learningRate 0.001 --trainingIters 2000 2>&1
136 | 1534166953118 | Training process finished. Exit code: 137
137 | 1534166953119 | Job exited with error code 137
138 | 1534166953120 | Failed: learner_exit_code: 137
"""
FASTMASKRCNN_172 = """iter 144: image-id:0254212, time:1.722(sec), regular_loss: 0.248765, total-loss 0.5882(0.0360, 0.5233, 0.000000, 0.0289, 0.0000), instances: 3, batch:(16|85, 0|11, 0|0)
labels
[]
classes
['background']

**Killed**
"""


def test_container_and_script_forms_of_a_kill_are_host_memory(tmp_path: Path):
    for i, log in enumerate((FFDL_127, FASTMASKRCNN_172)):
        a = _run_in(tmp_path, i, log)
        assert _verdict(a) == ("failed", "out_of_memory"), i
        assert "Killed by SIGKILL" in _crash(a).title
