"""The form a capability's criteria are written in (taxonomy/offline/forms.py): the words most of them use,
in order, the rest elided; none for a group of no common form or of a script written without spaces."""
from __future__ import annotations

import numpy as np

from taxonomy.offline.describe import _new_form
from taxonomy.offline.forms import typical_form, word_lists
from taxonomy.offline.openings import Opening

_OBJECTS = ["roc curve", "confusion matrix", "loss plot", "feature importance", "residual histogram", "learning curve"]


def _form(texts):
    return typical_form(texts, word_lists(texts), np.arange(len(texts)))


def test_a_template_shows_its_fixed_words_and_elides_what_varies():
    texts = [f"The {o} is saved as `results/figures/{o.replace(' ', '_')}.png`." for o in _OBJECTS]
    texts += ["A summary table of 3 runs is printed.", "Training stops early at epoch 10."]
    form = _form(texts)
    assert form is not None and form.text == "The … is saved as results/figures/….png", form
    assert form.share == round(len(_OBJECTS) / len(texts), 3)
    assert form.words == ("the", "is", "saved", "as", "results", "figures", "png")


def test_numbers_and_joined_letters_are_elided_but_a_word_of_one_letter_is_kept():
    texts = [f"A learning rate of {r}e-{i} is used for the {o}." for i, (r, o) in enumerate(zip("123456", _OBJECTS), 1)]
    form = _form(texts)
    assert form is not None and form.text == "A learning rate of … is used …", form
    assert "e" not in form.words


def test_no_form_without_common_words_or_in_a_script_without_spaces():
    assert _form(["Uses plain words.", "Cites two sources.", "Avoids jargon entirely.", "Answers within budget."]) is None
    assert _form(["回答中准确说明了风险", "回答中准确说明了剂量", "回答中准确说明了疗程", "回答中准确说明了禁忌"]) is None
    assert typical_form([], [], np.array([], dtype=int)) is None


def test_a_form_that_only_repeats_the_shown_opening_or_one_criterion_is_left_out():
    texts = [f"Code has been written to compute the {o}." for o in _OBJECTS]
    form = _form(texts)
    assert form is not None
    assert _new_form(form, [Opening("Code has been written to compute the", 1.0, "code has been written to compute the")]) is None
    assert _new_form(form, [Opening("Code has been", 1.0, "code has been")]) is form
    same = ["Cross-validation is used to evaluate the model."] * 4 + ["A plot is drawn."]
    assert _form(same).text == "Cross-validation is used to evaluate the model" and _new_form(_form(same), []) is None
