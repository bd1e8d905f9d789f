"""Round 19 (2026-11-28): failures the fresh held-out sets showed misread, each fixed by a rule that holds for its family."""

from __future__ import annotations

from pathlib import Path

from tests.test_unseen_logs import _run, _verdict

# https://github.com/unslothai/unsloth/issues/4982 (as pasted): Gemma-4 E2B LoRA under Unsloth, every loss and grad_norm
# exactly 16x the values of the maintainer's fixed branch (a gradient-accumulation normalisation bug)
UNSLOTH_4982 = """Unsloth: Will smartly offload gradients to save VRAM!
{'loss': '185.9', 'grad_norm': '6880', 'learning_rate': '1.263e-06', 'epoch': '0.002296'}
{'loss': '142.5', 'grad_norm': '4512', 'learning_rate': '2.538e-06', 'epoch': '0.004592'}
{'loss': '117.6', 'grad_norm': '8128', 'learning_rate': '3.814e-06', 'epoch': '0.006888'}
{'loss': '92.86', 'grad_norm': '1344', 'learning_rate': '5.089e-06', 'epoch': '0.009185'}
"""

# https://github.com/huggingface/transformers/pull/35438 (yzhangcs, 2024-12-29): the same run with gradient_accumulation_steps=1,
# a healthy from-scratch LM: its first loss 10.59 is below ln(vocab) of a large vocabulary, no scaling
HF_35438_GA1 = """{'loss': 10.5949, 'grad_norm': 188.29049682617188, 'learning_rate': 4.5833333333333334e-05, 'epoch': 0.25}
{'loss': 8.2312, 'grad_norm': 87.74673461914062, 'learning_rate': 4.166666666666667e-05, 'epoch': 0.5}
{'loss': 7.8988, 'grad_norm': 74.35655212402344, 'learning_rate': 3.7500000000000003e-05, 'epoch': 0.75}
{'loss': 8.0197, 'grad_norm': 52.913124084472656, 'learning_rate': 3.3333333333333335e-05, 'epoch': 1.0}
{'loss': 6.0704, 'grad_norm': 51.57878875732422, 'learning_rate': 2.916666666666667e-05, 'epoch': 1.25}
"""

# https://github.com/openvla/openvla/issues/49 (the end of the pasted output): the loop prints its tensors, then the loss once
OPENVLA_49 = """correct_preds:  tensor([[False, False, False, False, False, False, False, False, False, False,
         False, False, False, False, False, False, False, False, False, False]],
       device='cuda:0')
action_accuracy:  tensor(0., device='cuda:0')
train_loss:  nan
"""


def test_lm_loss_far_above_ln_vocab_is_a_scaling_bug(tmp_path: Path):
    a = _run(tmp_path, UNSLOTH_4982)
    assert _verdict(a) == ("failed", "framework_bug")  # was healthy: "loss 185.9 -> 92.86 ... all finite"
    (f,) = [f for f in a.diagnosis.findings if f.code == "FW001"]
    assert f.first_step == 1 and "185.9" in f.title
    assert "14.9x ln(262,144) = 12.48" in f.message  # the number and the bound it is measured against
    assert any("gradient_accumulation_steps" in r for r in f.remedies)


def test_lm_loss_below_the_bound_is_not_flagged(tmp_path: Path):
    a = _run(tmp_path, HF_35438_GA1)
    assert not [f for f in a.diagnosis.findings if f.code == "FW001"]
    assert _verdict(a)[0] == "healthy"


def test_a_huge_loss_outside_a_token_lm_is_not_flagged(tmp_path: Path):
    # the same numbers as a generic regression loop's log (no LM trainer, no token settings): an MSE can be 185
    text = "".join(f"step {i} | loss {v}\n" for i, v in enumerate((185.9, 142.5, 117.6, 92.86, 80.1), 1))
    a = _run(tmp_path, text)
    assert not [f for f in a.diagnosis.findings if f.code == "FW001"]


def test_a_run_that_overflows_keeps_its_overflow_cause(tmp_path: Path):
    # loss in the hundreds, then NaN: the overflow explains the values; the off-scale start is a side note
    text = UNSLOTH_4982.replace("'92.86', 'grad_norm': '1344'", "'nan', 'grad_norm': 'nan'")
    a = _run(tmp_path, text)
    offs = [f for f in a.diagnosis.findings if f.code == "FW001" and "cross-entropy" in f.title]
    assert offs and offs[0].severity == "warning"


def test_one_bare_nan_loss_line_is_read(tmp_path: Path):
    a = _run(tmp_path, OPENVLA_49)
    assert _verdict(a)[0] != "healthy"  # was healthy: nothing read
    (num,) = [f for f in a.diagnosis.findings if f.code == "NUM001"]
    assert "loss" in num.message and num.evidence[0].where == "line 5"


def test_one_bare_finite_loss_or_a_best_loss_stays_unread(tmp_path: Path):
    a = _run(tmp_path, "best_loss: inf\ntrain_loss: 2.31\nsaving model\n")
    assert "loss" not in a.run.metrics()


# https://github.com/OpenNMT/OpenNMT-py/issues/869 (as pasted): Adam at lr 2 without the noam schedule; xent 6776 at the first
# log, an explosion of the learning rate (DIV001), not a summed loss: two logs, and nothing falls
OPENNMT_PY_869 = ("[2018-08-01 18:29:48,221 INFO] Step 50/100000000; acc:   0.00; ppl: 26881171418161356094253400435962903554686976.00; "
                  "xent: 6776.20; lr: 2.00000; 4132/2064 tok/s;     52 sec\n") * 2


def test_a_huge_loss_that_does_not_fall_is_left_to_the_explosion_reading(tmp_path: Path):
    a = _run(tmp_path, OPENNMT_PY_869)
    assert _verdict(a) == ("failed", "lr_too_high")
    assert not [f for f in a.diagnosis.findings if f.code == "FW001"]


# https://github.com/databrickslabs/dolly/issues/139 (as pasted, first and last lines): a Metaflow step's log, every line behind
# the launcher's prefix; torch.save's zip writer failed with ENOSPC: the disk filled while saving a checkpoint
_DOLLY = "2023-04-29 06:01:12.977 [177/train/578 (pid 28936)] [09c561ee-a44c-4795-967c-7183a83b3160] "
DOLLY_139 = "".join(_DOLLY + ln + "\n" for ln in (
    "2023-04-29 06:01:12 ERROR [__main__] main failed",
    "Traceback (most recent call last):",
    '  File "/opt/conda/lib/python3.7/site-packages/torch/serialization.py", line 379, in save',
    "    _save(obj, opened_zipfile, pickle_module, pickle_protocol)",
    '  File "/opt/conda/lib/python3.7/site-packages/torch/serialization.py", line 604, in _save',
    "    zip_file.write_record(name, storage.data_ptr(), num_bytes)",
    "OSError: [Errno 28] No space left on device"))


def test_a_traceback_behind_a_launcher_prefix_is_read(tmp_path: Path):
    a = _run(tmp_path, DOLLY_139)
    assert _verdict(a) == ("failed", "crash")  # was healthy: the prefixed traceback was not read
    (f,) = [f for f in a.diagnosis.findings if f.code == "CRASH001"]
    assert "disk filled while saving a checkpoint" in f.title
    assert "serialization.py:604 in _save" in " ".join(e.detail for e in f.evidence)
    # the exception message is a sentence of its own before the explanation
    assert "No space left on device. This means" in f.message


def test_enospc_from_a_dataloader_worker_stays_shared_memory(tmp_path: Path):
    # the same errno raised where workers pass batches (no saving frame): /dev/shm, as before
    log = ("Traceback (most recent call last):\n"
           '  File "/usr/lib/python3/site-packages/torch/multiprocessing/reductions.py", line 322, in reduce_storage\n'
           "    fd, size = storage._share_fd_()\nRuntimeError: unable to write to file </torch_18693_1954506>: "
           "No space left on device (28)\n")
    a = _run(tmp_path, log)
    (f,) = [f for f in a.diagnosis.findings if f.code == "CRASH001"]
    assert "shared memory" in f.title


# https://github.com/PaddlePaddle/PaddleDetection/issues/3100 (as pasted): Paddle's allocator message (cuda_allocator.cc)
PADDLE_DET_3100 = ("Out of memory error on GPU 0. Cannot allocate 18.062744MB memory on GPU 0, available memory is only "
                   "17.537501MB.\n\nPlease check whether there is any other process using GPU 0.\n")


def test_paddle_out_of_memory_message_is_oom(tmp_path: Path):
    a = _run(tmp_path, PADDLE_DET_3100)
    assert _verdict(a) == ("failed", "out_of_memory")  # was "nothing to judge"


# https://github.com/thu-spmi/CAT/issues/22 (as pasted): the loop printed the CTC loss's length arguments; 149 labels on 113
# frames, and the loss -inf at the first step
CAT_22 = """training epoch: 1, step: 1
netout torch.Size([8, 133, 365]) , labels torch.Size([833]), , input_lengths tensor([133, 131, 128, 116, 113, 113,  83,  77]), label_lengths tensor([121, 124, 105, 100, 149, 103,  70,  61], dtype=torch.int32)
netout torch.Size([8, 133, 365]) , labels torch.Size([869]), , input_lengths tensor([132, 128, 125, 121, 115, 103, 102,  66]), label_lengths tensor([111, 154, 105,  87, 100, 122, 124,  66], dtype=torch.int32)
time: 58.328730165958405, partial_loss -inf,tr_real_loss: -inf, lr: 0.001
"""


def test_printed_ctc_lengths_with_more_labels_than_frames(tmp_path: Path):
    a = _run(tmp_path, CAT_22)
    assert _verdict(a) == ("failed", "ctc_output_longer_than_input")  # was unknown
    (f,) = [f for f in a.diagnosis.findings if f.code == "DATA001"]
    assert f.title.startswith("4 of 16 printed samples") and "149 labels on 113 frames" in f.message


def test_printed_ctc_lengths_that_fit_say_nothing(tmp_path: Path):
    fits = CAT_22.replace("149", "99").replace("154", "94").replace("122", "92").replace("124,  66", "94,  66")
    a = _run(tmp_path, fits)
    assert not [f for f in a.diagnosis.findings if f.root_cause == "ctc_output_longer_than_input"]


# https://github.com/bmaltais/kohya_ss/issues/1908 (as quoted): sd-scripts' latent caching found NaN in the VAE's output (a
# GTX 1660 in fp16); the second line is its loader's replacement message
KOHYA_1908 = "RuntimeError: NaN detected in latents\nNaN found in latents, replacing with zeros\n"


def test_sd_scripts_nan_latents_is_the_vae_in_fp16(tmp_path: Path):
    a = _run(tmp_path, KOHYA_1908)
    assert _verdict(a) == ("failed", "fp16_overflow")  # was crash: "Crashed with RuntimeError"
    (f,) = [f for f in a.diagnosis.findings if f.code == "PREC001"]
    assert "VAE" in f.title and any("--no_half_vae" in r for r in f.remedies)
    crash = [f for f in a.diagnosis.findings if f.code == "CRASH001"]
    assert crash and crash[0].severity == "info"  # the exception is the VAE check's, explained


def test_sd_scripts_nan_latents_names_the_image(tmp_path: Path):
    a = _run(tmp_path, "RuntimeError: NaN detected in latents: D:\\train\\img\\10_cat\\0042.png\n")
    (f,) = [f for f in a.diagnosis.findings if f.code == "PREC001"]
    assert "0042.png" in f.title


# https://github.com/CorentinJ/Real-Time-Voice-Cloning/issues/797 (as pasted): WaveRNN's progress line, printed once, NaN
WAVERNN_797 = "Found 117946 samples\n \n{| Epoch: 1 (989/1180) | Loss: nan | 2.3 steps/s | Step: 0k | }\n"


def test_one_progress_line_with_a_nan_loss_is_read(tmp_path: Path):
    a = _run(tmp_path, WAVERNN_797)
    assert _verdict(a)[0] == "inconclusive" and [f for f in a.diagnosis.findings if f.code == "NUM001"]  # was nothing read
    a = _run(tmp_path, WAVERNN_797.replace("Loss: nan", "Loss: 4.2"))  # the same line, finite: one point is no series
    assert "loss" not in a.run.metrics()


# https://github.com/QwenLM/Qwen-VL/issues/352 (as pasted): fine-tuning in fp16 on a V100, the first log finite and every later
# one exactly 0.0 (HF's logging_nan_inf_filter over windows of nothing but NaN steps)
QWEN_VL_352 = """{'loss': 3.8462, 'learning_rate': 3.4482758620689656e-07, 'epoch': 0.0}
{'loss': 0.0, 'learning_rate': 6.896551724137931e-07, 'epoch': 0.01}
{'loss': 0.0, 'learning_rate': 1.0344827586206898e-06, 'epoch': 0.01}
{'loss': 0.0, 'learning_rate': 1.3793103448275862e-06, 'epoch': 0.01}
{'loss': 0.0, 'learning_rate': 1.724137931034483e-06, 'epoch': 0.02}
"""


def test_hf_loss_falling_off_a_cliff_to_exact_zero_is_hidden_nan(tmp_path: Path):
    a = _run(tmp_path, QWEN_VL_352)
    assert _verdict(a)[0] == "inconclusive"  # was healthy
    (num,) = [f for f in a.diagnosis.findings if f.code == "NUM001"]
    assert num.first_step == 2 and "logging_nan_inf_filter" in num.message
    assert "float16 overflow" in num.remedies[0]  # the first suspect, from this run's numbers


def test_a_cliff_outside_an_hf_log_or_from_a_low_loss_is_not_hidden_nan(tmp_path: Path):
    generic = "".join(f"step {i} | loss {v}\n" for i, v in enumerate((3.8462, 0.0, 0.0, 0.0, 0.0), 1))
    a = _run(tmp_path, generic)
    assert not [f for f in a.diagnosis.findings if f.code == "NUM001"]
    fell = QWEN_VL_352.replace("'loss': 3.8462", "'loss': 0.0004")  # a memorised tiny loss rounding to 0.0
    a = _run(tmp_path, fell)
    assert not [f for f in a.diagnosis.findings if f.code == "NUM001"]


# https://github.com/tloen/alpaca-lora/issues/334 (the start of the pasted warning; the reporter's paste is garbled further on)
ALPACA_LORA_334 = ("There were missing keys in the checkpoint model loaded: ['base_model.model.model.embed_tokens.weight', "
                   "'base_model.model.model.layers.0.self_attn.q_proj.weight', "
                   "'base_model.model.model.layers.0.self_attn.q_proj.lora_A.default.weight', "
                   "'base_model.model.model.layers.0.self_attn.q_proj.lora_B.default.weight', "
                   "'base_model.model.model.layers.0.self_attn.k_proj.weight']\n")


def test_missing_lora_keys_on_reload_is_an_empty_adapter(tmp_path: Path):
    a = _run(tmp_path, ALPACA_LORA_334)
    assert _verdict(a) == ("failed", "framework_bug")  # was unknown: nothing read
    (f,) = [f for f in a.diagnosis.findings if f.code == "FW001"]
    assert "2 adapter keys missing" in f.title and "lora_A.default.weight" in f.message
    assert any("state_dict override" in r for r in f.remedies)


def test_missing_tied_embeddings_on_reload_are_harmless(tmp_path: Path):
    # the notice for tied/recomputed weights (a T5's shared embeddings) names no adapter weight
    a = _run(tmp_path, "There were missing keys in the checkpoint model loaded: ['encoder.embed_tokens.weight', "
                       "'decoder.embed_tokens.weight'].\n")
    assert not [f for f in a.diagnosis.findings if f.code == "FW001"]


# https://github.com/dariopavllo/convmesh/issues/8 (as pasted): a GAN's terms as space-separated "<term>_loss value" pairs
# behind a leading counter, g_loss NaN from the first update (torch 1.7, said the thread)
CONVMESH_8 = ("[0] epoch 0, 0/186, g_loss nan d_fake_loss 0.00000 d_real_loss 0.00000 flat 0.24812\n"
              "[10] epoch 0, 10/186, g_loss nan d_fake_loss nan d_real_loss nan flat nan\n")


def test_gan_term_losses_behind_a_counter_are_read(tmp_path: Path):
    a = _run(tmp_path, CONVMESH_8)
    assert {"g_loss", "d_fake_loss", "d_real_loss"} <= set(a.run.metrics())  # was nothing read
    (num,) = [f for f in a.diagnosis.findings if f.code == "NUM001"]
    assert "g_loss" in num.message


def test_space_separated_pairs_without_a_leading_counter_stay_unread(tmp_path: Path):
    a = _run(tmp_path, "we saw g_loss nan and d_loss 0.5 after a while\nthen g_loss 0.3 d_loss 0.2 again\n")
    assert not a.run.metrics()
