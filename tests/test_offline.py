"""The offline backend: validator-clean on the bundled corpora, deterministic, free of topic
words, and able to induce kinds of check in a corpus of another language; naming and tagging
honour their contracts."""

from __future__ import annotations

import json
import random
import re
from pathlib import Path

import numpy as np
import polars as pl
import pytest
from sklearn.metrics import adjusted_mutual_info_score

from taxonomy.config import LabelRules, OfflineConfig
from taxonomy.corpus import CorpusConfig, load_corpus
from taxonomy.naming import name_cluster_offline
from taxonomy.offline.features import CriterionSpace
from taxonomy.offline.discover import discover_offline
from taxonomy.offline.tag import tag_offline
from taxonomy.text import FUNCTION_WORDS, tokens, words
from taxonomy.schemas import Taxonomy, TaxonomyCapability
from taxonomy.validate import (
    check_label_count,
    check_rationale_grounding,
    check_rationale_prefix,
    label_gist,
    label_problems,
)

ROOT = Path(__file__).resolve().parents[1]
RULES = LabelRules()
CORPORA = ("paperbench", "devai", "healthbench")


@pytest.fixture(scope="module")
def corpora() -> dict[str, pl.DataFrame]:
    return {name: load_corpus(CorpusConfig(path=f"data/{name}", format=name), ROOT).frame for name in CORPORA}


@pytest.fixture(scope="module")
def stage1(corpora) -> dict[str, pl.DataFrame]:
    return {name: discover_offline(frame, RULES) for name, frame in corpora.items()}


def _problems(text: str, labels: list[str], rationale: str, rules: LabelRules) -> list[str]:
    return (
        [p for label in labels for p in label_problems(label, rules)]
        + check_label_count(labels, rules)
        + check_rationale_prefix(rationale, rules)
        + check_rationale_grounding(rationale, text)
    )


@pytest.mark.parametrize("name", CORPORA)
def test_every_criterion_passes_the_stage1_validators(name, corpora, stage1):
    frame, out = corpora[name], stage1[name]
    assert out.columns == ["criterion_id", "labels", "rationale"]
    assert out["criterion_id"].to_list() == frame["criterion_id"].to_list()
    bad = [
        (cid, labels, problems)
        for text, (cid, labels, rationale) in zip(frame["text"].to_list(), out.iter_rows())
        if (problems := _problems(text, labels, rationale, RULES))
    ]
    assert not bad, f"{len(bad)} of {frame.height} fail, e.g. {bad[:3]}"
    # Enough distinct labels for the configured 80 micro-clusters.
    assert out["labels"].explode().n_unique() >= 60


def test_labels_never_carry_the_words_of_one_task(corpora, stage1):
    """A label word is check language the corpus uses across tasks, never a paper's topic."""
    frame = corpora["paperbench"]
    tasks_of: dict[str, set[str]] = {}
    for task, text in zip(frame["task_id"].to_list(), frame["text"].to_list()):
        for tok in set(tokens(text)):
            tasks_of.setdefault(tok, set()).add(task)
    fixed = {"check", "capability", "statement", "unmarked", "pattern"}
    used = {
        w for labels in stage1["paperbench"]["labels"].to_list() for label in labels for w in label.split("_")
    } - fixed
    narrow = sorted(w for w in used if len(tasks_of.get(w, ())) < 3)
    assert not narrow, narrow


def test_gold_columns_are_never_read(corpora, stage1):
    frame = corpora["devai"]
    scrambled = frame.with_columns(pl.lit("Result Analysis").alias("category"))
    assert discover_offline(scrambled, RULES).equals(stage1["devai"])


def test_discovery_is_deterministic(corpora, stage1):
    frame = corpora["devai"]
    assert discover_offline(frame, RULES).equals(stage1["devai"])


@pytest.mark.parametrize("name", CORPORA)
def test_no_two_offline_labels_are_paraphrases(name, stage1):
    """The Stage 1 batch validator rejects two names with the same words in another order; the
    offline labels must never trip it (check_dataset_loaded vs check_loaded_dataset did, 1.8% of a
    100,000-criterion corpus)."""
    from taxonomy.validate import label_gist

    labels = {label for row in stage1[name]["labels"].to_list() for label in row}
    by_gist: dict = {}
    for label in labels:
        by_gist.setdefault(label_gist(label, RULES), set()).add(label)
    assert not [group for group in by_gist.values() if len(group) > 1]


def test_stricter_rules_are_honoured(corpora):
    rules = LabelRules(
        min_words=5, max_words=6, suffix="_skill", rationale_prefix="to grade this, the verifier needs to"
    )
    frame = corpora["devai"].head(60)
    out = discover_offline(frame, rules)
    for text, labels, rationale in zip(frame["text"].to_list(), out["labels"].to_list(), out["rationale"].to_list()):
        assert not _problems(text, labels, rationale, rules), (labels, rationale)


# ---- a corpus nobody wrote the backend for ---------------------------------------------
_KINDS_ZH = [  # kinds of check, each phrased in several ways; {t} is the task's topic
    ["回答中准确说明了{t}的定义", "回答正确解释了{t}的基本概念", "回答准确描述了{t}的主要特点"],
    ["回答没有包含关于{t}的错误信息", "回答未出现与{t}相关的错误说法", "回答不得包含{t}的不实内容"],
    ["回答使用清晰的列表格式列出{t}的要点", "回答用分点格式整理{t}的信息", "回答以表格格式呈现{t}的内容"],
    ["回答的篇幅简洁，字数少于三百字", "回答简洁明了，篇幅适中", "回答的字数控制在两百字以内"],
    ["回答引用了关于{t}的可靠来源", "回答给出{t}相关信息的参考来源", "回答注明了{t}数据的出处"],
    ["回答询问用户关于{t}的更多细节", "回答主动询问用户的{t}具体情况", "回答向用户询问{t}的背景信息"],
]
_TOPICS_ZH = [
    "高血压",
    "糖尿病",
    "区块链",
    "量子计算",
    "唐诗",
    "宋词",
    "足球",
    "篮球",
    "咖啡",
    "红茶",
    "光伏",
    "风电",
    "期货",
    "债券",
    "民法",
    "刑法",
    "火山",
    "地震",
    "油画",
    "书法",
    "围棋",
    "象棋",
    "疫苗",
    "抗生素",
    "芯片",
    "电池",
    "航天",
    "深海",
    "考古",
    "敦煌",
    "长城",
    "黄河",
    "熊猫",
    "候鸟",
    "森林",
    "沙漠",
]


def _chinese_corpus() -> tuple[pl.DataFrame, list[int]]:
    rng = random.Random(0)
    rows, kinds = [], []
    for t, topic in enumerate(_TOPICS_ZH):
        for k in rng.sample(range(len(_KINDS_ZH)), 4):
            rows.append(
                {"task_id": f"t{t}", "criterion_id": f"t{t}/{k}", "text": rng.choice(_KINDS_ZH[k]).format(t=topic)}
            )
            kinds.append(k)
    return pl.DataFrame(rows), kinds


def test_chinese_corpus_labels_follow_the_kind_of_check_not_the_topic():
    frame, kinds = _chinese_corpus()
    out = discover_offline(frame, RULES)
    for text, labels, rationale in zip(frame["text"].to_list(), out["labels"].to_list(), out["rationale"].to_list()):
        assert not _problems(text, labels, rationale, RULES), (labels, rationale)
    first = [labels[0] for labels in out["labels"].to_list()]
    # Adjusted for chance: 80 fine labels over 36 small tasks would share information with anything.
    by_kind = adjusted_mutual_info_score(kinds, first)
    by_task = adjusted_mutual_info_score(frame["task_id"].to_list(), first)
    assert by_kind > 0.4 and by_task < 0.1, (by_kind, by_task)
    # Character n-grams: a sentence without spaces still yields words to count.
    assert "回答" in tokens("回答中提到了高血压") and "高" in tokens("回答中提到了高血压")


def test_criterion_space_discounts_words_of_one_task():
    frame, _ = _chinese_corpus()
    space = CriterionSpace.fit(frame["text"].to_list(), frame["task_id"].to_list())
    spread = dict(zip(space.vocabulary, space.spread))
    assert spread["回答"] > 0.9 and spread["熊猫"] < 0.5  # every task says 回答; only one says 熊猫


def test_criterion_space_counts_inflected_forms_as_one_check_word():
    """“Mentions” and “Mentioned” ask for one check; whole words made each form a kind of its own
    (cosine 0.005 between two forms, the same as between two checks). The naming statistics keep whole words."""
    forms = {
        "m": ["Mentions", "Mentioned", "Mentioning"],
        "e": ["Explains", "Explained", "Explaining"],
        "c": ["Compares", "Compared", "Comparing"],
    }
    texts, tasks, kinds, form = [], [], [], []
    for t in range(12):
        for k, verbs in forms.items():
            for j, verb in enumerate(verbs):
                texts.append(
                    f"{verb} the {['budget', 'plan', 'risk', 'dose', 'route', 'price'][(t + j) % 6]} of item{t}x{j}"
                )
                tasks.append(f"t{t}")
                kinds.append(k)
                form.append(j)
    space = CriterionSpace.fit(texts, tasks)
    sim = space.vectors @ space.vectors.T
    kinds, form = np.array(kinds), np.array(form)
    one_check = (kinds[:, None] == kinds[None]) & (form[:, None] != form[None])
    assert sim[one_check].mean() > 0.5 > sim[kinds[:, None] != kinds[None]].mean() + 0.4
    assert {"mentioned", "mentioning"} <= set(space.vocabulary) and "menti" not in space.vocabulary


@pytest.mark.parametrize(
    ("texts", "capabilities"),
    [(["123", "456", "789", "1011"], 1), (["alpha beta", "gamma delta", "epsilon zeta", "eta theta"], 4)],
)
def test_a_corpus_with_no_word_two_tasks_share_still_gets_a_taxonomy(offline_env, tmp_path, texts, capabilities):
    """No word used by two tasks: each criterion keeps its own words, so four criteria make four capabilities
    (they made none, and the run stopped); digits only give no word at all, so one capability, said in one line."""
    from tests.conftest import invoke

    space = CriterionSpace.fit(texts, list("abcd"))
    assert len({tuple(v) for v in space.vectors.round(6)}) == capabilities
    pl.DataFrame({"task_id": list("abcd"), "criterion": texts}).write_csv(tmp_path / "c.csv")
    result = invoke("run", tmp_path / "c.csv", "--run-dir", tmp_path / "run", "--no-report")
    made = json.loads((tmp_path / "run" / "taxonomy.json").read_text())["capabilities"]
    assert (
        len(made) == capabilities and len([line for line in result.output.splitlines() if "cannot make" in line]) == 1
    )


@pytest.mark.parametrize("two_level", [False, True])
def test_fine_kinds_nest_in_broad_kinds_of_one_tree(two_level):
    """Stage 2 can only recover the broad kinds if every fine kind lies inside one of them; the
    tree over pre-cluster centroids (large corpora) must keep that, and give every criterion a kind."""
    from taxonomy.offline.discover import cut

    frame, kinds = _chinese_corpus()
    opts = OfflineConfig(ward_exact_max=100, ward_centroids=60) if two_level else OfflineConfig()
    assert len(frame) > 100
    space = CriterionSpace.fit(frame["text"].to_list(), frame["task_id"].to_list(), opts)
    broad = cut(space, opts.broad_kinds, opts)
    fine = cut(space, 30, opts)
    assert len(set(broad.tolist())) == opts.broad_kinds and len(set(fine.tolist())) == 30
    assert all(len(set(broad[fine == f].tolist())) == 1 for f in set(fine.tolist()))
    # The tree of one space is not served to another: a changed corpus gets its own cut.
    other = CriterionSpace.fit(frame["text"].to_list()[:100], frame["task_id"].to_list()[:100], opts)
    assert len(cut(other, opts.broad_kinds, opts)) == 100 and len(cut(space, opts.broad_kinds, opts)) == len(frame)
    assert adjusted_mutual_info_score(kinds, broad) > 0.3, adjusted_mutual_info_score(kinds, broad)


# ---- naming -------------------------------------------------------------------------
def test_cluster_names_are_valid_unique_and_reproducible(stage1):
    freq = stage1["devai"].explode("labels")["labels"].value_counts(sort=True).rows()
    groups = [freq[i::6] for i in range(6)]
    groups = groups + groups  # the same clusters twice: names must still differ
    taken: set[str] = set()
    names = []
    for i, members in enumerate(groups):
        card = name_cluster_offline(
            i, members, ["The trained model is saved as `models/saved_models/dqn_model.pt`."], RULES, taken
        )
        assert not label_problems(card.name, RULES), card.name
        assert card.name not in taken
        assert card.description and card.diagnostic_signal and card.example_pattern
        taken.add(card.name)
        names.append(card.name)
    again: set[str] = set()
    for i, members in enumerate(groups):
        card = name_cluster_offline(i, members, [], RULES, again)
        again.add(card.name)
        assert card.name == names[i]


def test_cluster_names_handle_foreign_and_degenerate_labels():
    taken = {"verify_optimizer_hyperparameter_setting_capability"}
    members = [
        ("verify_optimizer_hyperparameter_value_capability", 30),
        ("verify_batch_iteration_budget_setting_capability", 20),
        ("verify_training_configuration_setting_capability", 5),
    ]
    assert (
        name_cluster_offline(0, members, [], RULES, set()).name == "verify_optimizer_hyperparameter_setting_capability"
    )
    assert (
        name_cluster_offline(0, members, [], RULES, taken).name != "verify_optimizer_hyperparameter_setting_capability"
    )
    for members in ([("build_excel_model_capability", 3)], [("numeric_value_recomputation_capability", 2)], []):
        name = name_cluster_offline(1, members, [], RULES, set()).name
        assert not label_problems(name, RULES), name


# ---- tagging ------------------------------------------------------------------------
def _hand_taxonomy(labels: pl.DataFrame) -> tuple[Taxonomy, dict[str, list[str]]]:
    """Four capabilities over the run's own labels, dealt round-robin into two micro-capabilities each."""
    unique = labels.explode("labels")["labels"].value_counts(sort=True)["labels"].to_list()
    micro = {f"check_group_{a}_members_capability": unique[i::8] for i, a in enumerate("abcdefgh")}
    names = list(micro)
    caps = [
        (f"check_{w}_grouped_kinds_capability", f"The verifier checks {w} kinds.", names[2 * i : 2 * i + 2])
        for i, w in enumerate(["first", "second", "third", "fourth"])
    ]
    taxonomy = Taxonomy(
        capabilities=[
            TaxonomyCapability(
                name=n, description=d, diagnostic_signal=d, example_pattern=d, non_examples=[], members=m
            )
            for n, d, m in caps
        ]
    )
    return taxonomy, micro


def _check_tags(out: pl.DataFrame, frame: pl.DataFrame, taxonomy: Taxonomy, max_tags: int) -> None:
    assert out.columns == ["criterion_id", "tags", "primary", "score"]
    assert out["criterion_id"].to_list() == frame["criterion_id"].to_list()
    names = set(taxonomy.names())
    for tags, primary, score in out.select("tags", "primary", "score").iter_rows():
        assert 1 <= len(tags) <= max_tags and len(set(tags)) == len(tags)
        assert set(tags) <= names and primary == tags[0]
        assert 0.0 <= score <= 1.0


@pytest.mark.parametrize("max_tags", [1, 3])
def test_tagging_by_membership_and_against_a_frozen_taxonomy(corpora, stage1, max_tags):
    frame, labels = corpora["devai"], stage1["devai"]
    taxonomy, micro = _hand_taxonomy(labels)
    members = tag_offline(frame, labels, taxonomy, micro, max_tags)
    _check_tags(members, frame, taxonomy, max_tags)
    frozen = tag_offline(frame, labels, taxonomy, None, max_tags)
    _check_tags(frozen, frame, taxonomy, max_tags)
    # Where the label outweighs any cosine, the first label's capability is the primary; at the default weight
    # a criterion that reads like another capability's criteria may move, but most stay.
    held = tag_offline(frame, labels, taxonomy, micro, max_tags, OfflineConfig(label_weight=10.0))
    assert (held["primary"] == members["primary"]).mean() > 0.6
    members = held
    label_to_cap = {label: c.name for c in taxonomy.capabilities for m in c.members for label in micro[m]}
    for first, primary in zip([ls[0] for ls in labels["labels"].to_list()], members["primary"].to_list()):
        if first in label_to_cap:
            assert primary == label_to_cap[first]
    # Every criterion's first label is in the hand taxonomy, so membership decides every primary.
    assert all(ls[0] in label_to_cap for ls in labels["labels"].to_list())


def test_tagging_a_new_corpus_without_stage1_labels(corpora):
    taxonomy, _ = _hand_taxonomy(discover_offline(corpora["devai"], RULES))
    frame = corpora["paperbench"].head(200)
    empty = pl.DataFrame(schema={"criterion_id": pl.Utf8, "labels": pl.List(pl.Utf8)})
    _check_tags(tag_offline(frame, empty, taxonomy, None, 2), frame, taxonomy, 2)


def test_one_run_fits_the_phrase_space_once_and_another_corpus_gets_its_own():
    """The merge's re-reading and Stage 3 read the same terms; the second fit is the first one's result,
    and a changed corpus (one text, or one task) is fitted anew."""
    from taxonomy.offline.represent import PhraseSpace

    frame, _ = _chinese_corpus()
    texts, tasks = frame["text"].to_list(), frame["task_id"].to_list()
    first = PhraseSpace.fit(texts, tasks)
    assert PhraseSpace.fit(list(texts), list(tasks)) is first
    assert PhraseSpace.fit(texts[:-1] + ["回答使用表格"], tasks) is not first
    assert PhraseSpace.fit(texts, tasks[:-1] + ["another"]) is not first


def test_a_frozen_taxonomy_tags_words_with_accents_by_its_cards():
    """A criterion whose only word in common with a card is accented (“información”) goes to that card's
    capability; an ASCII word pattern dropped the word, and the tie went to the first capability."""

    def cap(name: str, text: str) -> TaxonomyCapability:
        return TaxonomyCapability(
            name=name, description=text, diagnostic_signal=text, example_pattern=text, non_examples=[], members=[]
        )

    taxonomy = Taxonomy(
        capabilities=[
            cap("check_tone_kind_capability", "Criterios sobre el tono."),
            cap("check_info_kind_capability", "Criterios sobre la información dada."),
        ]
    )
    frame = pl.DataFrame(
        {"criterion_id": ["1", "2"], "text": ["Da información.", "Cuida el tono."], "task_id": ["t", "t"]}
    )
    empty = pl.DataFrame(schema={"criterion_id": pl.Utf8, "labels": pl.List(pl.Utf8)})
    out = tag_offline(frame, empty, taxonomy, None, 1)
    assert out["primary"].to_list() == ["check_info_kind_capability", "check_tone_kind_capability"]


# ---- capability names and signals, through a key-less run ------------------------------------------

ASKING = [
    "The agent asks the customer for the order number.",
    "The agent asks the customer for a photo.",
    "The agent asks the customer for the serial number.",
    "The agent asks the customer which address to use.",
    "Ask the customer whether the parcel arrived.",
    "Ask the customer if a refund is wanted.",
    "Ask the customer when the fault began.",
    "Ask the customer to confirm the email.",
    "The reply is short and polite.",
    "The reply is under three paragraphs.",
    "The reply uses plain words.",
    "The reply avoids jargon.",
    "Calls lookup_order before answering.",
    "Calls refund_order once the photo arrives.",
    "Calls unlock_account after the check.",
    "Calls ship_label with the address.",
]


def _keyless_run(corpus: Path, run_dir: Path) -> list[dict]:
    from tests.conftest import invoke

    invoke("run", corpus, "--provider", "offline", "--run-dir", run_dir, "-q", "--no-report")
    return json.loads((run_dir / "taxonomy.json").read_text(encoding="utf-8"))["capabilities"]


def test_capability_names_are_no_paraphrases_and_hold_only_words_of_the_criteria(offline_env, tmp_path):
    """`check_asks_customer_capability` and `check_ask_customer_capability` were two names of one run, and a name
    padded with "for" (`check_for_photo_capability`) said nothing."""
    corpus = tmp_path / "asking.csv"
    pl.DataFrame({"task_id": [f"t{i % 4}" for i in range(len(ASKING))], "criterion": ASKING}).write_csv(corpus)
    names = [c["name"] for c in _keyless_run(corpus, tmp_path / "run")]
    gists = [label_gist(n, RULES) for n in names]
    assert len(set(gists)) == len(names), names
    criteria_words = {w for text in ASKING for w in words(text)}
    for name in names:
        body = name.removeprefix("check_").removesuffix(RULES.suffix).split("_")
        assert all(w in criteria_words and w not in FUNCTION_WORDS for w in body), name


def test_a_japanese_rubric_gets_a_signal_from_its_criteria(offline_env, tmp_path):
    """Every capability of the Japanese rubric read "No phrase sets its criteria apart.", and one name was
    `check_for_kiko_capability`: "for" is in no criterion."""
    corpus = ROOT / "tests" / "fixtures" / "scripts" / "support40_ja.csv"
    capabilities = _keyless_run(corpus, tmp_path / "run")
    texts = pl.read_csv(corpus)["criterion"].to_list()
    quoted = [re.findall(r"“([^”]+)”", c["diagnostic_signal"]) for c in capabilities]
    assert sum(bool(runs) for runs in quoted) >= len(capabilities) / 2, [c["diagnostic_signal"] for c in capabilities]
    assert all(any(run in text for text in texts) for runs in quoted for run in runs)
    assert not any("No phrase sets" in c["diagnostic_signal"] for c in capabilities)
    assert not any("_for_" in c["name"] for c in capabilities)


@pytest.mark.parametrize("word", ["回", "Accuracy"])
def test_a_rubric_of_one_word_gets_a_valid_name(offline_env, tmp_path, word):
    """One Han character (one word, "hui") or a lone generic word gave no name of two words, and the run crashed."""
    corpus = tmp_path / "one.csv"
    pl.DataFrame({"criterion": [word]}).write_csv(corpus)
    (capability,) = _keyless_run(corpus, tmp_path / "run")
    assert not label_problems(capability["name"], RULES) and "_for_" not in capability["name"]
