"""The form a capability's criteria are written in (taxonomy/offline/forms.py): the words most of them use,
in order, the rest elided; none for a group of no common form, of only the corpus's common words, or of a
script written without spaces."""
from __future__ import annotations

import numpy as np

from taxonomy.offline.describe import _new_form
from taxonomy.offline.forms import Forms
from taxonomy.offline.openings import Opening
from taxonomy.validate import FUNCTION_WORDS

_OBJECTS = ["roc curve", "confusion matrix", "loss plot", "feature importance", "residual histogram", "learning curve"]
_OTHERS = ["A summary table of 3 runs is printed.", "Training stops early at epoch 10.", "The README explains setup.",
           "Unit tests cover the parser.", "Logs are rotated daily.", "The API returns JSON errors.",
           "Dependencies are pinned in a lockfile.", "The CLI prints usage on bad flags.", "Seeds are fixed for every run.",
           "Docstrings describe each public function.", "Large files are streamed, not loaded.", "The cache is invalidated on change."]


def _form(group, others=_OTHERS, tasks=None):
    """The form of `group` read inside a corpus of `group` and `others`, each criterion its own task by default."""
    texts = list(group) + list(others)
    return Forms(texts, tasks or [f"t{i}" for i in range(len(texts))]).of(np.arange(len(group)))


def test_a_template_shows_its_fixed_words_and_elides_what_varies():
    group = [f"The {o} is saved as `results/figures/{o.replace(' ', '_')}.png`." for o in _OBJECTS] + _OTHERS[:2]
    form = _form(group)
    assert form is not None and form.text == "The … is saved as results/figures/….png", form
    assert form.share == round(len(_OBJECTS) / len(group), 3)
    assert form.words == ("the", "is", "saved", "as", "results", "figures", "png")


def test_numbers_and_joined_letters_are_elided_but_a_word_of_one_letter_is_kept():
    group = [f"A learning rate of {r}e-{i} is used for the {o}." for i, (r, o) in enumerate(zip("123456", _OBJECTS), 1)]
    form = _form(group)
    assert form is not None and form.text == "A learning rate of … is used …", form
    assert "e" not in form.words


def test_no_form_without_common_words_or_in_a_script_without_spaces():
    assert _form(["Uses plain words.", "Cites two sources.", "Avoids jargon entirely.", "Answers within budget."]) is None
    assert _form(["回答中准确说明了风险", "回答中准确说明了剂量", "回答中准确说明了疗程", "回答中准确说明了禁忌"]) is None
    assert _form([]) is None


def test_words_most_of_the_corpus_uses_do_not_make_a_form():
    """No list of Spanish function words: “la”, “respuesta”, “de” are in most of this corpus's criteria, so a
    group that shares only them has no form, while one that shares a check of its own shows it."""
    topics = ["fiebre", "tos", "dolor", "mareo", "alergia", "asma"]
    vague = [f"La respuesta de la {t} {w}." for t, w in zip(topics, ["sube", "baja", "cambia", "sigue", "varía", "cede"])]
    own = [f"La respuesta recomienda consultar al médico de la {t}." for t in topics]
    rest = [f"La respuesta de {t} menciona la dosis." for t in topics] + [f"La respuesta explica la causa de la {t}." for t in topics]
    assert _form(vague, own + rest) is None
    form = _form(own, vague + rest)
    assert form is not None and "recomienda consultar al médico" in form.text, form


def test_one_task_template_is_not_a_form():
    group = [f"The {o} is saved as `results/figures/{o.replace(' ', '_')}.png`." for o in _OBJECTS]
    tasks = ["paper-a"] * 4 + ["paper-b", "paper-c"] + [f"t{i}" for i in range(len(_OTHERS))]
    assert _form(group, tasks=tasks) is None
    tasks = ["paper-a"] * 2 + ["paper-b", "paper-c"] * 2 + [f"t{i}" for i in range(len(_OTHERS))]
    assert _form(group, tasks=tasks) is not None


def test_a_form_that_only_repeats_the_shown_opening_or_one_criterion_is_left_out():
    form = _form([f"Code has been written to compute the {o}." for o in _OBJECTS])
    assert form is not None
    assert _new_form(form, [Opening("Code has been written to compute the", 1.0, "code has been written to compute the")]) is None
    assert _new_form(form, [Opening("Code has been", 1.0, "code has been")]) is form
    # words the corpus uses everywhere are no news either, as the form's own weighting has it
    assert _new_form(form, [Opening("Code has been", 1.0, "code has been")], FUNCTION_WORDS | {"written", "compute"}) is None
    same = _form(["Cross-validation is used to evaluate the model."] * 4 + ["A plot is drawn."])
    assert same.text == "Cross-validation is used to evaluate the model" and _new_form(same, []) is None
