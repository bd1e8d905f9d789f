"""DIV001 on a perplexity no model reaches by learning: exp of a cross-entropy far past uniform guessing over any
vocabulary (OpenNMT-py caps it at exp(100); OpenNMT-tf's overflows to inf)."""

from __future__ import annotations

from pathlib import Path

from tests.test_unseen_logs import _run, _verdict

# https://github.com/OpenNMT/OpenNMT-py/issues/869 (Transformer without -decay_method noam, lr 2 constant), as pasted
# (the first line twice)
OPENNMT_PY_869 = '[2018-08-01 18:29:48,221 INFO] Step 50/100000000; acc:   0.00; ppl: 26881171418161356094253400435962903554686976.00; xent: 6776.20; lr: 2.00000; 4132/2064 tok/s;     52 sec\n[2018-08-01 18:29:48,221 INFO] Step 50/100000000; acc:   0.00; ppl: 26881171418161356094253400435962903554686976.00; xent: 6776.20; lr: 2.00000; 4132/2064 tok/s;     52 sec\n'


def _onmt(ppls: list[float]) -> str:
    """OpenNMT-py report lines (Step N/M; acc; ppl; xent; lr; ...) as trainer.py prints them, values made up."""
    import math

    return "".join(f"[2018-08-01 18:29:48,221 INFO] Step {50 * (i + 1)}/100000; acc:  {20 + i:5.2f}; ppl: {p:.2f}; "
                   f"xent: {math.log(p):.2f}; lr: 0.00100; 4132/2064 tok/s;     52 sec\n" for i, p in enumerate(ppls))


def test_a_capped_perplexity_with_lr_2_is_an_explosion(tmp_path: Path):
    a = _run(tmp_path, OPENNMT_PY_869)
    assert _verdict(a) == ("failed", "lr_too_high")
    f = next(x for x in a.diagnosis.findings if x.code == "DIV001")
    assert f.evidence[0].detail.startswith("ppl 2.69e+43 at step 50 = exp(100.0)")
    assert "learning rate 2 at step 50" in f.evidence[-1].detail


def test_an_untrained_models_perplexity_is_not(tmp_path: Path):
    """A 32k vocabulary at initialisation: perplexity ~3e4, falling."""
    a = _run(tmp_path, _onmt([31000.0, 9000.0, 2400.0, 800.0]))
    assert not [x for x in a.diagnosis.findings if x.code == "DIV001"]
    assert _verdict(a) == ("healthy", "healthy")
