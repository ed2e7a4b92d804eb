"""Generated rubric files, well-formed and malformed, as Hypothesis strategies: the property tests of the loaders
and the CLI (tests/test_cli_inputs.py) and benchmarks/fuzz.py draw from the same ones.

A well-formed rubric has a criterion column found by name, a criterion on every row and a number (or nothing) as
every weight; anything else varies: the other columns, the script, the weights, repeats and near repeats, the
size (1-200 rows), the format (CSV, TSV, JSONL, a JSON list, Parquet) and the text encoding. A malformed one is a
well-formed one with one fault: a row at fault (`RowFault`: an empty criterion, a weight that is text), or a file
the loader cannot or may not read as it is (`FileFault`: a missing criterion column, lists and objects in JSON
fields, latin-1 bytes, binary, gzip under a .csv name, other separators, cut short)."""

from __future__ import annotations

import csv
import gzip
import io
import json
import re
import tempfile
import unicodedata
from dataclasses import dataclass, field
from pathlib import Path

import polars as pl
from hypothesis import strategies as st
from hypothesis.configuration import set_hypothesis_home_dir

# Hypothesis keeps caches (constants it read in the code under test) in .hypothesis/ of the working folder; CI checks
# that the tests leave the checkout as they found it, so they go to the temporary folder.
set_hypothesis_home_dir(Path(tempfile.gettempdir()) / "taxonomy-hypothesis")

# Per script: (subjects, verbs, objects, qualifiers, joiner); a criterion is one of each, so every script can make
# far more distinct criteria than the 200 rows a rubric here holds.
SCRIPTS: dict[str, tuple[tuple[str, ...], ...]] = {
    "latin": (
        ("The agent", "The response", "The report", "The answer"),
        ("states", "checks", "confirms", "explains", "cites", "lists", "refunds", "quotes", "compares", "names"),
        (
            "the order number",
            "the refund fee",
            "the shipping date",
            "the warranty terms",
            "the error message",
            "the unit test results",
            "the source of each figure",
            "the customer's name",
            "the final answer",
            "the delivery address",
            "the cancellation policy",
            "the dataset's licence",
            "the API rate limit",
        ),
        ("", "before closing the ticket", "in its first reply", "with a link", "without jargon"),
    ),
    "cyrillic": (
        ("Ответ", "Агент", "Отчёт"),
        ("указывает", "проверяет", "объясняет", "называет", "сравнивает", "подтверждает"),
        (
            "сумму возврата",
            "номер заказа",
            "дату доставки",
            "причину ошибки",
            "условия гарантии",
            "адрес клиента",
            "источник данных",
            "итоговый ответ",
        ),
        ("", "в первом сообщении", "со ссылкой", "без жаргона"),
    ),
    "arabic": (
        ("الإجابة", "الوكيل", "التقرير"),
        ("تذكر", "تشرح", "تتحقق من", "تقارن", "تؤكد", "تسمي"),
        ("رقم الطلب", "مبلغ الاسترداد", "تاريخ التسليم", "سبب الخطأ", "شروط الضمان", "عنوان العميل", "مصدر البيانات"),
        ("", "في الرد الأول", "مع رابط", "بوضوح"),
    ),
    "devanagari": (
        ("उत्तर", "एजेंट", "रिपोर्ट"),
        ("बताता है", "जाँचता है", "समझाता है", "पुष्टि करता है", "तुलना करता है"),
        ("ऑर्डर संख्या", "वापसी राशि", "डिलीवरी तिथि", "त्रुटि का कारण", "वारंटी की शर्तें", "ग्राहक का पता"),
        ("", "पहले उत्तर में", "लिंक के साथ", "स्पष्ट रूप से"),
    ),
    "han": (
        ("回答", "代理", "报告"),
        ("说明", "核对", "解释", "比较", "列出", "确认"),
        ("退款金额", "订单号", "送货日期", "错误原因", "保修条款", "客户地址", "数据来源", "最终答案"),
        ("", "在第一次回复中", "并附上链接", "不用术语"),
    ),
    "kana": (
        ("かいとうは", "エージェントは", "レポートは"),
        ("を せつめいする", "を かくにんする", "を ていじする", "を くらべる", "を あげる"),
        ("キャンセル", "ポイント", "メールアドレス", "パスワード", "おとどけび", "へんきんがく", "エラーメッセージ"),
        ("", "さいしょに ", "リンクつきで ", "わかりやすく "),
    ),
    "thai": (
        ("คำตอบ", "เอเจนต์", "รายงาน"),
        ("ระบุ", "อธิบาย", "ตรวจสอบ", "ยืนยัน", "เปรียบเทียบ"),
        ("หมายเลขคำสั่งซื้อ", "จำนวนเงินคืน", "วันที่จัดส่ง", "สาเหตุของข้อผิดพลาด", "เงื่อนไขการรับประกัน", "ที่อยู่ลูกค้า"),
        ("", "ในข้อความแรก", "พร้อมลิงก์", "อย่างชัดเจน"),
    ),
    "emoji": (
        ("The agent 🤖", "The reply 💬", "✅ The answer"),
        ("shows", "sends", "adds", "uses"),
        (
            "👍 after the refund",
            "🎉 for a resolved ticket",
            "⚠️ before a risky step",
            "📦 with the tracking number",
            "🙂 in a greeting",
            "🔒 next to the password reset",
            "👨‍👩‍👧 for a family plan",
        ),
        ("", "once", "at the end", "🚀"),
    ),
}


def _sentence(script: str, s: int, v: int, o: int, q: int) -> str:
    subjects, verbs, objects, quals = SCRIPTS[script]
    if script == "kana":  # Japanese puts the verb last: subject, qualifier, object, verb
        return f"{subjects[s]}{quals[q]}{objects[o]}{verbs[v]}。"
    words = [subjects[s], verbs[v], objects[o], quals[q]]
    end = {"han": "。", "thai": "", "devanagari": "।", "arabic": "."}.get(script, ".")
    return (" " if script != "han" else "").join(w for w in words if w) + end


@st.composite
def criterion_texts(draw, script: str) -> str:
    subjects, verbs, objects, quals = SCRIPTS[script]
    pick = [draw(st.integers(0, len(part) - 1)) for part in (subjects, verbs, objects, quals)]
    return _sentence(script, *pick)


def near_repeat(text: str, how: int) -> str:
    """The same criterion as a careless editor retypes it: case, spaces or the final stop changed."""
    return [text.upper(), f"  {text}  ", text.rstrip(".。।") + "!", re.sub(" ", "  ", text), text.lower()][how % 5]


def folded(text: str) -> str:
    """A criterion as a reader compares two: case, spaces and punctuation ignored (as the loader's near repeats)."""
    return "".join(c for c in unicodedata.normalize("NFKC", text).casefold() if unicodedata.category(c)[0] not in "PZ")


TEXT_COLUMNS = ("criterion", "criteria", "text", "requirement", "rubric", "Criterion", "CRITERION")
TASK_COLUMNS = ("task_id", "task", "prompt_id")
WEIGHT_COLUMNS = ("weight", "points", "score")
FORMATS = ("csv", "tsv", "jsonl", "json", "parquet")
ENCODINGS = ("utf-8", "utf-8-sig", "utf-16")  # UTF-16 as spreadsheets export it: with a byte-order mark


@dataclass
class Rubric:
    """A generated rubric: its rows (column -> value), the file format and the encoding of a text format."""

    rows: list[dict]
    text_column: str
    weight_column: str | None
    fmt: str
    encoding: str = "utf-8"
    name: str = "rubric"
    ensure_ascii: bool = False

    @property
    def filename(self) -> str:
        return f"{self.name}.{self.fmt}"

    def kept_rows(self) -> list[tuple[str, str, float]]:
        """(task, text, weight) of each row the loader keeps: a word-for-word repeat in a task is collapsed."""
        seen, kept = set(), []
        for row in self.rows:
            w = row.get(self.weight_column) if self.weight_column else None
            key = (str(row.get("_task", "task")), row[self.text_column].strip(), 1.0 if w in (None, "") else float(w))
            if key not in seen:
                seen.add(key)
                kept.append(key)
        return kept


def weights() -> st.SearchStrategy:
    """Every kind of weight a valid rubric may hold: ints, floats, negatives (penalties), zero, nothing."""
    return st.one_of(
        st.integers(-10, 10),
        st.sampled_from([0, 0.0, -0.5, 0.25, 1.5, 2.0, 100, None, ""]),
        st.floats(-5, 5, allow_nan=False, allow_infinity=False).map(lambda x: round(x, 3)),
    )


@st.composite
def rubrics(draw, max_rows: int = 200, formats: tuple[str, ...] = FORMATS) -> Rubric:
    """A well-formed rubric: 1-`max_rows` rows over 1-60 distinct criteria in one or two scripts."""
    scripts = draw(st.lists(st.sampled_from(sorted(SCRIPTS)), min_size=1, max_size=2, unique=True))
    n_distinct = draw(st.integers(1, min(60, max_rows)))
    texts = draw(
        st.lists(st.sampled_from(scripts).flatmap(criterion_texts), min_size=1, max_size=n_distinct, unique_by=folded)
    )
    n_rows = draw(st.integers(len(texts), max(len(texts), min(max_rows, len(texts) * draw(st.integers(1, 4))))))
    order = list(range(len(texts))) + draw(
        st.lists(st.integers(0, len(texts) - 1), min_size=n_rows - len(texts), max_size=n_rows - len(texts))
    )
    order = draw(st.permutations(order))
    n_tasks = draw(st.integers(1, 12))
    text_col = draw(st.sampled_from(TEXT_COLUMNS))
    weight_col = draw(st.one_of(st.none(), st.sampled_from(WEIGHT_COLUMNS)))
    task_col = draw(st.one_of(st.none(), st.sampled_from(TASK_COLUMNS)))
    extra_cols = draw(
        st.lists(
            st.text("abcdefghijklmnopqrstuvwxyz_", min_size=1, max_size=8).map("x_".__add__), max_size=3, unique=True
        )
    )
    # A criterion keeps its weight where it repeats, but now and then is scored the other way (a penalty in one
    # task, a reward in another, or both in one), as rubrics assembled from several sources are.
    base = [draw(weights()) for _ in texts] if weight_col else []
    rows = []
    for i, t in enumerate(order):
        text = texts[t]
        if draw(st.integers(0, 9)) == 0:
            text = near_repeat(text, draw(st.integers(0, 4)))
        task = f"task-{i % n_tasks}" if task_col else "task"
        row = {text_col: text, "_task": task}
        if task_col:
            row[task_col] = task
        if weight_col:
            flip = draw(st.integers(0, 3)) == 0 and isinstance(base[t], (int, float))
            row[weight_col] = -base[t] if flip else base[t]
        if draw(st.booleans()):
            row.setdefault("category", draw(st.sampled_from(["tone", "facts", "tool", "", None])))
        for col in extra_cols:
            row[col] = draw(st.one_of(st.none(), st.integers(-3, 3), st.sampled_from(["a", "b c", "", "ünï"])))
        rows.append(row)
    if weight_col and len(rows) + 2 <= max_rows and draw(st.integers(0, 2)) == 0:
        rows += _scored_both_ways(rows[draw(st.integers(0, len(rows) - 1))], weight_col, draw(st.integers(1, 5)))
    fmt = draw(st.sampled_from(formats))
    encoding = draw(st.sampled_from(ENCODINGS)) if fmt != "parquet" else "utf-8"
    return Rubric(rows, text_col, weight_col, fmt, encoding, ensure_ascii=draw(st.booleans()))


def _scored_both_ways(row: dict, weight_col: str, w: int) -> list[dict]:
    """The row's criterion scored both ways in its task and once more in another: two rows to add after it."""
    row[weight_col] = w
    task_col = next((c for c in TASK_COLUMNS if c in row), None)
    other = {**row, weight_col: w, "_task": row["_task"] + "-b"} | ({task_col: row["_task"] + "-b"} if task_col else {})
    return [{**row, weight_col: -w}, other]


def _cell(value) -> str:
    if value is None:
        return ""
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)


def _columns(rows: list[dict]) -> list[str]:
    cols: dict[str, None] = {}
    for row in rows:
        cols.update(dict.fromkeys(k for k in row if k != "_task"))
    return list(cols)


def _parquet_column(values: list) -> pl.Series:
    """A Parquet column keeps one type: numbers stay numbers where all are, anything else is written as text."""
    if all(v is None or (isinstance(v, (int, float)) and not isinstance(v, bool)) for v in values):
        return pl.Series([None if v is None else float(v) for v in values], dtype=pl.Float64)
    return pl.Series([None if v is None else _cell(v) for v in values], dtype=pl.Utf8)


def file_bytes(rubric: Rubric, separator: str | None = None) -> bytes:
    """The rubric's file as it would be saved: the format's own layout, in the rubric's encoding."""
    cols, rows = _columns(rubric.rows), [{k: v for k, v in r.items() if k != "_task"} for r in rubric.rows]
    if rubric.fmt == "parquet":
        buffer = io.BytesIO()
        pl.DataFrame({c: _parquet_column([r.get(c) for r in rows]) for c in cols}).write_parquet(buffer)
        return buffer.getvalue()
    if rubric.fmt in ("csv", "tsv"):
        out = io.StringIO(newline="")
        writer = csv.writer(out, delimiter=separator or ("\t" if rubric.fmt == "tsv" else ","), lineterminator="\n")
        writer.writerow(cols)
        writer.writerows([_cell(r.get(c)) for c in cols] for r in rows)
        text = out.getvalue()
    elif rubric.fmt == "jsonl":
        text = "".join(json.dumps(r, ensure_ascii=rubric.ensure_ascii) + "\n" for r in rows)
    else:
        text = json.dumps(rows, ensure_ascii=rubric.ensure_ascii, indent=1)
    return text.encode(rubric.encoding)


def row_places(rubric: Rubric, i: int) -> tuple[str, ...]:
    """The ways an error may name the i-th (0-based) data row of this rubric's file: its data row, or its line in
    the file (a CSV's header is line 1), or its JSON pointer in a JSON list."""
    line = {"csv": i + 2, "tsv": i + 2, "jsonl": i + 1}.get(rubric.fmt)
    return (f"row {i + 1}", f"at /{i}") + ((f"line {line}",) if line else ())


@dataclass
class RowFault:
    """One row made invalid: the error must name this row."""

    kind: str
    row: int


@dataclass
class FileFault:
    """A file damaged or shaped so that it may be refused as a whole, or read after all; never a traceback."""

    kind: str
    detail: dict = field(default_factory=dict)


ROW_FAULTS = ("empty criterion", "blank criterion", "text weight")


@st.composite
def row_faults(draw, max_rows: int = 200) -> tuple[Rubric, RowFault]:
    """A well-formed rubric with one row made invalid."""
    rubric = draw(rubrics(max_rows=max_rows))
    kind = draw(st.sampled_from(ROW_FAULTS))
    i = draw(st.integers(0, len(rubric.rows) - 1))
    row = rubric.rows[i]
    if kind == "text weight":
        if rubric.weight_column is None:
            rubric.weight_column = "weight"
            for r in rubric.rows:
                r["weight"] = 1
        row[rubric.weight_column] = draw(st.sampled_from(["heavy", "n/a", "1,5", "two", "½", "∞", "1 pt"]))
    else:
        row[rubric.text_column] = "" if kind == "empty criterion" else draw(st.sampled_from([" ", "  \t ", "\u3000"]))
        if kind == "empty criterion" and rubric.fmt in ("jsonl", "json") and draw(st.booleans()):
            row[rubric.text_column] = None
    return rubric, RowFault(kind, i)


FILE_FAULTS = (
    "no criterion column",
    "list in a field",
    "object in a field",
    "latin-1 bytes",
    "binary",
    "gzip named .csv",
    "semicolon separator",
    "cut short",
    "utf-16 without bom",
    "empty file",
    "header only",
    "odd weight",
    "any column names",
)


def _json_value(draw) -> object:
    return draw(
        st.recursive(
            st.one_of(st.none(), st.booleans(), st.integers(-5, 5), st.sampled_from(["a", "b", "", "The fee."])),
            lambda inner: st.one_of(
                st.lists(inner, max_size=3), st.dictionaries(st.sampled_from("abc"), inner, max_size=2)
            ),
            max_leaves=5,
        )
    )


ODD_COLUMNS = (
    "direction",
    "criterion_id",
    "brief",
    "prompt",
    "context",
    "",
    " criterion ",
    "Weight",
    "id",
    "[bold]x[/bold]",
)


def _reshape(draw, rubric: Rubric, fault: FileFault) -> None:
    """The rows and format of a fault that lies in the values or columns, not in the bytes."""
    kind = fault.kind
    if kind == "no criterion column":
        new = draw(st.sampled_from(["checkpoint", "description", "item", "critère", "评分标准", ""]))
        for row in rubric.rows:
            row[new] = row.pop(rubric.text_column)
        fault.detail["column"] = new
    elif kind in ("list in a field", "object in a field"):
        rubric.fmt = draw(st.sampled_from(["jsonl", "json"]))
        column = draw(st.sampled_from([rubric.text_column, "brief", "context", "task", "weight", "category"]))
        value = _json_value(draw)
        value = [value, "x"] if kind == "list in a field" else {"k": value}
        rows = sorted(set(draw(st.lists(st.integers(0, len(rubric.rows) - 1), min_size=1, max_size=4))))
        for i in rows:
            rubric.rows[i][column] = value
        fault.detail.update(column=column, rows=rows)
    elif kind == "odd weight":
        rubric.weight_column = rubric.weight_column or "weight"
        rubric.fmt = draw(st.sampled_from(["jsonl", "json", "csv"]))
        i = draw(st.integers(0, len(rubric.rows) - 1))
        odd = [True, "1e309", "NaN", "-inf", 1e308, "0x10", " 2 "]
        rubric.rows[i][rubric.weight_column] = draw(st.sampled_from(odd))
    elif kind == "any column names":
        values = st.one_of(st.none(), st.sampled_from(["penalty", "reward", "x", "1", ""]), st.integers(0, 3))
        for row in rubric.rows:
            for name in draw(st.lists(st.sampled_from(ODD_COLUMNS), max_size=2)):
                row[name] = draw(values)
    if kind in ("latin-1 bytes", "gzip named .csv", "semicolon separator", "utf-16 without bom", "header only"):
        rubric.fmt = "csv" if kind != "latin-1 bytes" else draw(st.sampled_from(["csv", "tsv", "jsonl", "json"]))
        rubric.encoding = "utf-8"


def _damage(draw, rubric: Rubric, kind: str, data: bytes) -> bytes:
    """The file's bytes with a fault that lies in the bytes."""
    if kind == "latin-1 bytes":
        at = draw(st.integers(0, len(data)))
        return data[:at] + draw(st.sampled_from(["é", "ß", "ñ", "°"])).encode("latin-1") + data[at:]
    if kind == "binary":
        head = draw(st.sampled_from([b"\x89PNG\r\n\x1a\n", b"PK\x03\x04", b"\x00\x01\x02", b"%PDF-1.4\n"]))
        return head + bytes(draw(st.lists(st.integers(0, 255), max_size=64)))
    if kind == "gzip named .csv":
        rubric.fmt = "csv"
        return gzip.compress(data)
    if kind == "cut short":
        return data[: draw(st.integers(0, max(0, len(data) - 1)))]
    if kind == "utf-16 without bom":
        return data.decode("utf-8").encode("utf-16-le")
    if kind == "empty file":
        return b""
    if kind == "header only":
        return data.split(b"\n", 1)[0] + b"\n"
    return data


@st.composite
def file_faults(draw, max_rows: int = 200) -> tuple[Rubric, FileFault, bytes]:
    """A rubric and its file with one file-level fault: (rubric, fault, the file's bytes)."""
    rubric = draw(rubrics(max_rows=max_rows))
    fault = FileFault(draw(st.sampled_from(FILE_FAULTS)))
    _reshape(draw, rubric, fault)
    data = file_bytes(rubric, separator=";" if fault.kind == "semicolon separator" else None)
    return rubric, fault, _damage(draw, rubric, fault.kind, data)


def write(rubric: Rubric, folder: Path, data: bytes | None = None) -> Path:
    path = folder / rubric.filename
    path.write_bytes(file_bytes(rubric) if data is None else data)
    return path
