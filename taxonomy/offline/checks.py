"""The check-kind lexicon: which kind of check a criterion asks the verifier to perform.

A criterion is scored against every check kind by weighted cues (verbs, nouns, numbers,
quoted literals) and by its *mode*: does it ask about code as written (develop), about
evidence that something was run (execute), or about a claim on results (result)? The same
subject reads differently per mode: "accuracy" is a metric to recompute from code when
developing, a recorded number to read when executing, a claim to compare when reporting.

Cues score mostly in the criterion's main clause: PaperBench leaves often open with a
long setup clause ("When training X for the Y environment, ...") full of topic nouns; the
check sits after it. Labels are built only from the fixed words below, never from the
criterion, so they cannot encode a task's topic. The lexicon was designed by reading
PaperBench leaves and DevAI requirements; tests pin hand-picked real criteria per kind.

Cue syntax: words separated by spaces; `a|b` is either word, a trailing `*` a prefix;
`re:` starts a regular expression on the lower-cased text.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache

__all__ = ["CheckKind", "Hit", "KINDS", "KIND_BY_KEY", "detect", "kind_of_label", "label_for", "normalized"]

_SUFFIX = "_capability"
Tiers = tuple[tuple[float, tuple[str, ...]], ...]

# ---- modes: how the verifier gets its evidence ---------------------------------------
DEVELOP: Tiers = (
    (1.0, ("code has|have|was|is|for|to", "code has|have|was also", "the code to|for", "code that", "code can")),
    (0.8, ("has|have been implemented|written|developed|coded|added|defined|modified|adapted|instantiated",
           "is|are implemented|defined|coded|computed|initialized|initialised|instantiated",
           "can be|been computed|run|used|evaluated|measured|loaded|applied|trained|obtained|sampled|selected|"
           "built|initialized|calculated|constructed|estimated|repeated|set|identified|generated|streamed",
           "implementation", "implemented")),
)
EXECUTE: Tiers = (
    (1.5, ("code has|have been executed|run", "has|have been executed")),
    (1.0, ("has|have been run|trained|evaluated|measured|estimated|fine|finetuned|recorded|collected|repeated|"
           "performed|conducted|tested|plotted|downloaded|refined|benchmarked",
           "were|was trained|run|evaluated|measured|repeated|recorded|fine|finetuned",
           "is|are run", "seeded run*", "runs have|has been", "is|are recorded|reported|measured")),
    (0.5, ("has|have been computed|calculated|saved|generated|determined|found|identified|selected|created|"
           "applied|used|utilized|utilised|obtained|loaded", "is|are saved|stored|recorded|logged|printed", "and saved")),
)
RESULT: Tiers = (
    (1.5, ("show|shows|showed that", "results|metrics|scores|values|curves|plots|numbers|errors|measurements show|shows|indicate|demonstrate",
           "recorded|saved|measured|reported|final results|metrics|values|scores show|shows")),
    (1.0, ("outperform*", "higher|lower|better|worse|greater|smaller|faster|slower|larger|fewer than",
           "more|less * than", "highest", "lowest", "best performing", "worst", "second best|highest|lowest")),
    (0.6, ("achieve|achieves|achieved", "improvement", "improves", "significantly", "consistently", "comparable",
           "is|are positive|negative", "approximately", "roughly", "increase|increases|decrease|decreases",
           "reduce|reduces", "grow|grows", "drop|drops", "converge|converges", "trend", "re:~\\s?\\d", "plateau*",
           "similar to", "on par", "hold", "holds", "variation*", "gap", "negligible", "better", "worse", "poor",
           "effective", "robust to", "behaves|behave")),
)

# ---- subjects: what the verifier inspects --------------------------------------------
METRIC: Tiers = (
    (1.0, ("accuracy", "accuracies", "f1", "precision", "recall", "auc", "top 1|5", "exact match", "success rate*",
           "perplexity", "fid", "lpips", "bleu", "rouge", "c2st", "l2re", "mse", "mae", "rmse", "silhouette", "ece",
           "mean squared|absolute error", "relative error", "cross validation", "re:`results/metrics")),
    (0.7, ("metric*", "score", "scores", "error", "errors", "divergence*", "correlation", "line of best fit",
           "slope", "r 2", "cumulative reward", "average reward|return", "likelihood", "performance", "transfer",
           "fidelity", "win rate")),
    (0.5, ("evaluate", "evaluated", "evaluates", "evaluating", "evaluation", "measure", "measured", "measures",
           "measuring", "compute", "computed", "computing", "calculate*", "cross validation", "benchmark", "graded",
           "grade")),
)
CONFIG: Tiers = (
    (1.2, ("is|are|was|were set to|as", "has|have been set to", "discount rate|factor", "learning rate*", "batch size*", "hyperparameter*", "hyper parameter*", "weight decay", "momentum",
           "warmup", "warm up", "dropout", "temperature", "epoch", "epochs", "memory size", "line search",
           "grid search", "schedule", "scheduler", "max|maximum length|tokens", "guidance strength",
           "entropy coefficient", "discount factor", "clipping", "random seed*", "seeds", "number of iterations|steps|epochs",
           "training iterations|steps")),
    (0.6, ("set to", "configured", "configuration", "optimizer", "optimiser", "seed",
           "iterations", "training steps", "width of", "size of", "number of", "k", "re:\\bwith (?:a |an )?[\\w-]+ of \\d",
           "re:\\bfor \\d+\\S* (?:training )?(?:steps|iterations|epochs|episodes|simulations)\\b", "default",
           "at least", "budget", "trained for", "run for", "limited to", "maximum of", "at most", "no more than")),
)
METHOD: Tiers = (
    (1.0, ("algorithm", "equation*", "eq", "eqn", "formula", "follows the logic", "computed|calculated|defined|given|"
           "obtained|formulated as|by|via", "correctly", "corresponds to", "according to")),
    (0.5, ("loss", "objective", "gradient*", "update", "updates", "updated", "sample", "samples", "sampled", "sampling",
           "procedure", "logic", "function", "matrix", "estimator", "distribution", "encoder", "decoder", "embedding*",
           "module", "adapter", "vector*", "step", "forward pass", "backward")),
    (0.4, ("re:\\$[^$]{1,80}\\$", "section", "appendix", "as described", "as outlined", "method", "variant", "baseline",
           "mechanism", "component")),
)
MODEL: Tiers = (
    (1.4, ("model|classifier|regressor|network|architecture|algorithm is|are|was imported|used|loaded|implemented|"
           "adopted|employed|selected|chosen|defined",
           "is|are imported|loaded from")),
    (0.8, ("re:\"[^\"]{2,40}\" (?:model|algorithm|classifier|regressor|method|architecture|network)\\b",
           "re:\\bpre-?trained \"")),
    (0.7, ("layer", "layers", "activation*", "hidden", "convolution*", "architecture", "heads", "classifier", "regressor",
           "neurons", "residual", "backbone", "src model")),
)
DATA_TRANSFORM: Tiers = (
    (1.3, ("split", "splits", "subset", "subsets", "augment*", "preprocess*", "pre process*", "postprocess*", "post process*",
           "clean up", "cleaning", "normaliz*", "normalis*",
           "standardiz*", "standardis*", "feature selection|extraction|engineering|encoding|scaling", "missing values|data",
           "imput*", "tokeniz*", "tokenis*", "stop words", "label noise", "class imbalanced", "imbalanc*", "resampl*",
           "oversampl*", "shuffl*", "crop*", "resiz*", "data cleaning|alignment|transformation|processing|preparation",
           "time window", "randomly split|sampled|selected|chosen", "upsampl*", "downsampl*", "filtered", "filtering",
           "interpolat*", "held out", "partition*")),
    (0.6, ("train|training and|or validation|test set|sets|split|splits", "pairs", "noise", "noised", "noisy", "corrupt*",
           "features", "src data", "dataset of", "examples from")),
)
DATA_ACQUIRE: Tiers = (
    (1.3, ("dataset|datasets|data|simulator|environment is|are|was loaded|downloaded|obtained|used|utilized|available|accessed|imported|defined",
           "dataset|datasets|data|simulator|environment has|have been loaded|downloaded|obtained|used|accessed|imported",
           "dataset|datasets|data can be loaded|downloaded|obtained|used|accessed|streamed",
           "is|are downloaded|loaded|obtained|streamed|accessed", "has|have been downloaded|loaded|obtained|streamed|accessed",
           "can be downloaded|loaded|obtained|streamed|accessed", "obtained or streamed",
           "correctly set up", "set up", "gym make", "is|are available", "can be initialized", "download*",
           "is|was obtained", "installed", "obtaining", "official source", "equivalent mirrors",
           "available at|from|in|on", "downloaded from")),
    (0.5, ("dataset", "datasets", "pre trained", "pretrained", "weights", "checkpoint*", "imported", "import", "repository",
           "github", "huggingface", "re:https?://", "version", "loaded", "load", "loading", "install*", "src env", "simulator",
           "environment is|can|has")),
)
ARTIFACT: Tiers = (
    (1.2, ("saved as|in|under|to|at|into", "stored as|in|under|at", "file name", "filename", "save it|the|them",
           "saved models", "re:`[^`]*\\.(?:txt|pt|pth|npy|pkl|md|csv|json|h5|onnx|joblib|pdf)`", "re:`results/")),
    (0.5, ("saved", "file", "files", "directory", "folder", "exist", "exists", "re:`[^`]*/[^`]*`", "located", "path")),
)
VISUAL: Tiers = (
    (1.5, ("visualiz*", "visualis*", "plot", "plots", "plotted", "re:\\bfigures?\\b(?! ?\\d)", "chart*", "heatmap*", "heat map*",
           "grad cam", "confusion matrix", "video", "videos", "css", "styling",
           "color*", "colour*", "blurry", "distorted")),
    (0.8, ("re:`results/figures", "re:\\.(?:png|gif|jpe?g|svg|mp4)\\b")),
    (0.5, ("curve", "curves", "graph", "graphs", "image", "images", "displayed", "display", "shown", "visual", "legend", "resolution",
           "axis", "x axis", "y axis", "looks", "look")),
)
INTERACTIVE: Tiers = (
    (1.6, ("user", "users", "interface", "frontend", "front end", "web page", "webpage", "button*", "interactive",
           "streamlit", "gradio", "dashboard", "click*", "upload*", "ui", "slider")),
    (0.5, ("select", "selected", "selecting", "input", "display", "displayed", "displays", "view", "message", "messages",
           "text area", "request", "requests", "cache", "cached", "browser", "src app|frontend")),
)
NARRATIVE: Tiers = (
    (1.2, ("report", "reports", "explain", "explains", "documentation", "readme", "markdown",
           "jupyter notebook", "insight", "insights", "discussion", "justif*", "docstring*", "comments", "commented",
           "understandable", "maintainable", "readab*", "written explanation")),
    (0.5, ("describe", "described in the report", "description", "summary", "summarize", "summarise", "analyzing",
           "analysing", "analysis", "interpretab*", "showcase", "detailed")),
)
LOGGING: Tiers = (
    (1.1, ("log the|its|all|each|them|every", "to log", "logs", "logged", "logging", "track", "tracked", "tracks",
           "tracking", "cost", "costs", "wall clock", "vram", "runtime", "inference|training|running|execution|computation|wall time",
           "tqdm", "progress", "monitor*", "at regular intervals", "memory usage", "gpu memory")),
    (0.4, ("record", "recorded", "records", "recording", "save", "memory", "time", "per iteration", "throughout",
           "over the course", "statistic", "statistics")),
)
SEQUENCE: Tiers = (
    (1.0, ("at each|every iteration|step|epoch|round|timestep", "every * steps|iterations|epochs|episodes|timesteps|rounds",
           "before|after each|every|training|refinement|being", "prior to", "followed by", "in order", "in sequence",
           "subsequent*", "one at a time", "date", "dates", "chronolog*", "timestamp*",
           "initial * steps|iterations", "order of")),
    (0.3, ("once", "first", "after", "before", "during", "throughout", "each task|round", "then", "until",
           "at the beginning|start|end of")),
)
NUMBER: Tiers = (
    (1.2, ("re:\\b(?:was|is|achieves?|reaches|reached|takes up|approximately|around|about|roughly) ~?\\$?-?\\d+(?:\\.\\d+)?(?:e-?\\d+)?",
           "re:~\\s?\\d", "standard error|deviation of", "re:±")),
    (0.4, ("re:\\d+\\.\\d+", "re:\\d+(?:\\.\\d+)?\\s?%", "re:\\d+(?:\\.\\d+)?x\\b")),
)
LITERAL: Tiers = (
    (1.0, ("named", "called", "titled", "verbatim", "exactly", "exact name|string|text|title|wording",
           "re:\\bversion\\s*[\"'`]?[\\w.-]*\\d", "is version", "identifier", "name of", "spelled")),
    (0.4, ("re:\"[^\"]{2,60}\"", "re:'[^']{2,60}'", "re:`[^`]{2,60}`")),
)
MODES = {"develop": DEVELOP, "execute": EXECUTE, "result": RESULT}
GROUPS = {
    "metric": METRIC, "config": CONFIG, "method": METHOD, "model": MODEL, "data_transform": DATA_TRANSFORM,
    "data_acquire": DATA_ACQUIRE, "artifact": ARTIFACT, "visual": VISUAL, "interactive": INTERACTIVE,
    "narrative": NARRATIVE, "logging": LOGGING, "sequence": SEQUENCE, "number": NUMBER,
    "literal": LITERAL, **MODES,
}


# ---- kinds --------------------------------------------------------------------------
@dataclass(frozen=True)
class CheckKind:
    key: str
    check: str                                        # verifier verb heading the label
    objects: tuple[tuple[str, re.Pattern | None], ...]  # (object words, cue on the text); first is the default
    subjects: tuple[tuple[str, float], ...]           # (cue group, multiplier)
    modes: tuple[tuple[str, float], ...]              # mode affinity: + favoured, - disfavoured
    action: str                                       # "the verifier needs to <action> ..."
    summary: str                                      # what the check does, for capability cards
    signal: str = ""                                  # how to recognise such a criterion, for cards
    min_subject: float = 0.0                          # evidence needed before the kind is considered


# Kinds checked the same way in code and in run outputs: either mode counts as context, so
# they are not outscored by kinds a mode favours (metric code, implementation logic).
_EITHER_MODE = (("develop", 0.5), ("execute", 0.5))
STRONG = 0.8  # rare kinds whose weak cues are everyday words need one strong cue


# The three largest kinds (run output, configuration, metric computation) keep one object
# each: their object variants ("metric", "optimizer", "graded" ...) named what a paper's
# templated leaves are about rather than how they are checked, so micro-clusters split along
# them, and a count repair that split one of these kinds followed paper lines (topic leak).
# With a single micro-cluster each, a repair that must split a kind splits one whose
# variants cut across papers (implementation logic).


def _obj(words: str, pattern: str | None = None) -> tuple[str, re.Pattern | None]:
    return words, re.compile(pattern) if pattern else None


KINDS: tuple[CheckKind, ...] = (
    CheckKind(
        "implementation_logic", "audit",
        (_obj("algorithm_implementation_logic"),
         _obj("loss_implementation_logic", r"\bloss\b|\bobjective\b|reward function|penalt|regulari"),
         _obj("update_implementation_logic", r"\bupdate|gradient|step size|backprop|score function"),
         _obj("sampling_implementation_logic", r"\bsampl|\bdrawn?\b|monte carlo|rejection"),
         _obj("baseline_implementation_logic", r"\bbaseline|\bvariant|ablation"),
         _obj("component_implementation_logic", r"\blayers?\b|\bactivation|convolution|\bencoder|\bdecoder|\bheads?\b|embedding")),
        (("method", 1.0),), (("develop", 0.9), ("execute", -0.6), ("result", -1.5)),
        "audit the implementation logic against the specified method",
        "reads the implementation and checks that its logic follows the specified algorithm, equation or procedure",
        'the criterion points at an algorithm, equation or procedure the code must follow ("as described in Algorithm 2", "computed as", "has been implemented")',
    ),
    CheckKind(
        "configuration_setting", "verify",
        (_obj("training_configuration_setting"),),
        (("config", 1.0),), (("develop", 0.3), ("result", -1.5)),
        "verify the configured setting value",
        "checks that a hyperparameter, budget, seed count or other configuration value is set as specified",
        'the criterion names a setting and its value ("learning rate of", "batch size", "is set to", "number of seeds", "trained for N steps")',
    ),
    CheckKind(
        "run_output", "confirm",
        (_obj("experiment_run_output"),),
        (("execute", 1.0), ("metric", 0.6), ("config", 0.2), ("method", 0.2)),
        (("execute", 0.4), ("develop", -0.8), ("result", -1.5)),
        "read the run outputs and recorded measurements",
        "runs the code or reads its run outputs (logs, saved results, checkpoints) and checks the experiment ran and recorded the required measurements",
        'the criterion says something has been run, trained or evaluated and its measurements recorded ("has been executed", "has been evaluated", "is recorded")',
    ),
    CheckKind(
        "metric_computation", "recompute",
        (_obj("evaluation_metric_value"),),
        (("metric", 1.0),), (("develop", 0.8), ("execute", -0.4), ("result", -1.5)),
        "recompute the metric from the evaluation code",
        "re-derives an evaluation metric from its definition and checks that the code computes it that way",
        'the criterion asks for code that computes or evaluates a named metric ("code has been written to compute", "accuracy", "error", "correlation")',
    ),
    CheckKind(
        "result_trend", "compare",
        (_obj("reported_result_claim"),
         _obj("uncertainty_result_claim", r"standard (?:error|deviation)|±|\bstd\b|confidence interval"),
         _obj("numeric_result_claim", r"\b(?:was|is|of|achieves?|reaches|approximately|around|about|roughly) ~?\$?-?\d|~\s?\d"),
         _obj("ranking_result_claim", r"outperform|\bthan\b|\b(?:highest|lowest|best|worst)\b"),
         _obj("scaling_result_claim", r"increas|decreas|\bgrows?\b|reduc|\bdrops?\b|over the course|converge|plateau"),
         _obj("qualitative_result_claim", r"\bimages?\b|\blooks?\b|blurry|distorted|\bstyle\b|gaussian")),
        (("result", 1.0), ("number", 0.6), ("metric", 0.2)), (("result", 0.6), ("develop", -0.5), ("execute", -0.3)),
        "compare the reported results against the claimed numbers or trend",
        "compares measured results with the claimed numbers, ranking or direction across methods or settings",
        'the criterion claims a number, ranking or direction about results ("show that", "outperforms", "higher than", "achieves 73.8%")',
    ),
    CheckKind(
        "literal_value", "match",
        (_obj("exact_literal_value"),
         _obj("name_literal_value", r"\bnamed\b|\bcalled\b|\btitled\b|\blabell?ed\b|\bname of\b|verbatim"),
         _obj("version_literal_value", r"\bversion\b|\bidentifier\b|-v\d")),
        (("literal", 1.0),), _EITHER_MODE + (("result", -1.0),),
        "match a literal value or name verbatim",
        "matches a literal value, name, label or identifier in the deliverable character for character against the required one",
        'the criterion requires an exact value, name, label or identifier ("named", "version", a quoted literal)',
        min_subject=STRONG,
    ),
    CheckKind(
        "data_transformation", "examine",
        (_obj("preprocessing_data_transformation"),
         _obj("split_data_transformation", r"\bsplit|subset|partition|held-out|train(?:ing)?(?: and |/| )(?:validation|test)"),
         _obj("augmentation_data_transformation", r"augment|\bcrop|rotat|\bflip|scaling"),
         _obj("cleaning_data_transformation", r"normali[sz]|standardi[sz]|preprocess|pre-process|postprocess|post-process|clean|missing|imput|stop ?words|tokeni[sz]"),
         _obj("noise_data_transformation", r"nois|corrupt|imbalanc|perturb"),
         _obj("feature_data_transformation", r"\bfeature")),
        (("data_transform", 1.0),), _EITHER_MODE,
        "examine the data transformation step",
        "examines how input data is split, filtered, augmented or preprocessed and checks it matches the specification",
        'the criterion describes how data is split, filtered, augmented or preprocessed ("split into", "augmentation", "normalized", "label noise")',
    ),
    CheckKind(
        "data_acquisition", "check",
        (_obj("dataset_source_availability"),
         _obj("environment_source_availability", r"environment|\bgym\b|simulat"),
         _obj("checkpoint_source_availability", r"pre-?trained|\bweights\b|checkpoint"),
         _obj("repository_source_availability", r"github|repository|\bimport|\blibrary|\bpackage|\binstall")),
        (("data_acquire", 1.0),), _EITHER_MODE + (("result", -1.0),),
        "check that the dataset or environment is available",
        "checks that the required dataset, pretrained weights or environment is obtained, loadable and set up",
        'the criterion requires a dataset, pretrained weights or environment to be obtained or set up ("is loaded", "downloaded", "set up", "available")',
    ),
    CheckKind(
        "artifact_location", "locate",
        (_obj("saved_artifact_file"),
         _obj("checkpoint_artifact_file", r"\bmodel\b.*\bsaved|saved_models|\.pth?\b|checkpoint"),
         _obj("output_artifact_file", r"results?/|metrics/|\.txt\b|\boutputs?\b"),
         _obj("named_artifact_file", r"file ?name|\bnamed\b|\bcalled\b")),
        # What is saved decides: a saved figure is a visual check, a saved metric a results check.
        (("artifact", 1.0), ("visual", -0.5), ("metric", -0.3), ("narrative", -0.3)), _EITHER_MODE + (("result", -1.0),),
        "locate the saved artifact at its stated place",
        "locates a required file, folder or component at the stated place and confirms it exists",
        'the criterion names a file, folder or component that must exist at a place ("saved as", "saved in", a path)',
        min_subject=STRONG,
    ),
    CheckKind(
        "visual_presentation", "inspect",
        (_obj("figure_visual_presentation"),
         _obj("plot_visual_presentation", r"\bplot|\bcurve|\baxis|chart|graph"),
         _obj("image_visual_presentation", r"\bimages?\b|resolution|\bvideo|\bframes?\b|photo"),
         _obj("styling_visual_presentation", r"\bstyl|colou?r|\bcss\b|layout|\bfont")),
        (("visual", 1.0),), _EITHER_MODE,
        "inspect the visual presentation",
        "looks at a rendered figure, plot, image or styled view and checks what it shows and how",
        'the criterion is about a figure, plot, image or styling ("visualized", "plot", "figure", ".png", "resolution")',
        min_subject=STRONG,
    ),
    CheckKind(
        "interactive_behavior", "exercise",
        (_obj("interactive_interface_behavior"),
         _obj("input_interface_behavior", r"\binput|upload|select|button|slider|\benter"),
         _obj("display_interface_behavior", r"display|\bshow|\bview\b|\blist\b")),
        (("interactive", 1.0),), _EITHER_MODE + (("result", -1.0),),
        "exercise the interactive interface behavior",
        "operates an interactive interface and checks that it responds and displays as specified",
        'the criterion describes what a user can do in an interface ("users can", "frontend", "button", "interactive web page")',
        min_subject=STRONG,
    ),
    CheckKind(
        "narrative_judgment", "judge",
        (_obj("report_narrative_content"),
         _obj("documentation_narrative_content", r"documentation|readme|comment|docstring|readab|maintainab|understandab"),
         _obj("analysis_narrative_content", r"analy|discussion|insight|\bsection")),
        (("narrative", 1.0),), _EITHER_MODE + (("result", -1.0),),
        "judge the narrative content of the report",
        "reads prose (a report, explanation or documentation) and judges whether it covers and justifies what is required",
        'the criterion asks for prose that explains, reports or justifies ("report", "explanation", "documentation", "insights")',
        min_subject=STRONG,
    ),
    CheckKind(
        "logging_trace", "trace",
        (_obj("measurement_logged_record"),
         _obj("cost_logged_record", r"\bcosts?\b|memory|vram|\btime\b|wall-?clock|runtime|latency"),
         _obj("progress_logged_record", r"\bprogress\b|tqdm|\bcurves?\b|\bover (?:the course of )?training|each epoch|intervals")),
        (("logging", 1.0),), _EITHER_MODE + (("result", -0.5),),
        "trace the logged measurement records",
        "follows logs and tracked statistics to confirm a quantity was recorded where and when required",
        'the criterion asks for a quantity to be logged or tracked over a run ("logged", "tracked", "cost", "wall-clock time", "progress")',
        min_subject=STRONG,
    ),
    CheckKind(
        "step_sequence", "validate",
        (_obj("ordering_step_sequence"),
         _obj("iteration_step_sequence", r"each (?:iteration|step|epoch|round)|\bevery\b|interval"),
         _obj("date_step_sequence", r"\bdates?\b|chronolog|timestamp")),
        (("sequence", 1.0),), _EITHER_MODE + (("result", -1.0),),
        "validate the order and timing of the steps",
        "checks that steps happen in the required order or at the required points of a loop or schedule",
        'the criterion fixes when or in which order steps happen ("at each iteration", "every 10 steps", "before", "followed by")',
        min_subject=STRONG,
    ),
    CheckKind(
        "model_choice", "identify",
        (_obj("specified_model_choice"),
         _obj("architecture_model_choice", r"\blayers?\b|activation|convolution|\bhidden\b|\bheads?\b|neurons?|residual"),
         _obj("pretrained_model_choice", r"pre-?trained|\bimported\b|\bloaded\b")),
        (("model", 1.0),), _EITHER_MODE + (("result", -1.0),),
        "identify which model or method the code uses",
        "identifies which model, architecture or method the code actually uses and checks it is the specified one",
        'the criterion names the model, architecture or method to use ("the X model is used", "layers", "activation", "pre-trained")',
    ),
)
KIND_BY_KEY = {k.key: k for k in KINDS}
# With no cue at all, the mode alone picks the kind.
FALLBACK = {"develop": "implementation_logic", "execute": "run_output", "result": "result_trend", None: "implementation_logic"}

# Corpus categories, read as weak priors on the mode or the subject: they break ties, the text decides.
CATEGORY_PRIORS: tuple[tuple[re.Pattern, str, float], ...] = (
    (re.compile(r"code development"), "develop", 0.5),
    (re.compile(r"code execution"), "execute", 0.5),
    (re.compile(r"result analysis"), "result", 0.5),
    (re.compile(r"visuali"), "visual", 0.6),
    (re.compile(r"\bsav(?:e|ing)\b"), "artifact", 0.6),
    (re.compile(r"dataset|environment"), "data_acquire", 0.6),
    (re.compile(r"preprocess|postprocess"), "data_transform", 0.6),
    (re.compile(r"machine learning method|architecture"), "model", 0.6),
    (re.compile(r"metric"), "metric", 0.4),
    (re.compile(r"human computer|interaction|interface"), "interactive", 0.6),
)


# ---- cue matching -------------------------------------------------------------------
_TOKEN = re.compile(r"[a-z0-9]+")
_WS = re.compile(r"\s")


def normalized(text: str) -> str:
    """The text as `detect` sees it: lower case, every whitespace a space, so spans index the original."""
    return _WS.sub(" ", text.lower())


@dataclass(frozen=True)
class _Cue:
    group: str
    tier: int
    weight: float
    words: tuple[frozenset[str] | str, ...]  # per position: a set of exact words, or a prefix string


def _parse(phrase: str) -> tuple[frozenset[str] | str, ...]:
    return tuple(w[:-1] if w.endswith("*") else frozenset(w.split("|")) for w in phrase.split())


def _compile():
    single_exact: dict[str, list[_Cue]] = {}
    single_prefix: list[tuple[str, _Cue]] = []
    multi: list[_Cue] = []
    regexes: list[tuple[re.Pattern, _Cue, bool]] = []
    for group, tiers in GROUPS.items():
        for tier, (weight, phrases) in enumerate(tiers):
            for phrase in phrases:
                if phrase.startswith("re:"):
                    # A pattern with \d needs a digit: texts without one skip it.
                    regexes.append((re.compile(phrase[3:]), _Cue(group, tier, weight, ()), "\\d" in phrase))
                    continue
                words = _parse(phrase)
                cue = _Cue(group, tier, weight, words)
                if len(words) > 1:
                    multi.append(cue)
                elif isinstance(words[0], str):
                    single_prefix.append((words[0], cue))
                else:
                    for w in words[0]:
                        single_exact.setdefault(w, []).append(cue)
    return single_exact, single_prefix, multi, regexes


_SINGLE, _PREFIX, _MULTI, _REGEXES = _compile()


def _fits(slot: frozenset[str] | str, word: str) -> bool:
    return word.startswith(slot) if isinstance(slot, str) else word in slot


_NONE: tuple = ((), ())
_AT: dict[str, tuple[tuple[_Cue, ...], tuple[_Cue, ...]]] = {}  # memo: most words carry no cue
_PAIR: dict[tuple[str, str], tuple[_Cue, ...]] = {}  # memo: multi-word cues fitting two words


def _cues_at(word: str) -> tuple[tuple[_Cue, ...], tuple[_Cue, ...]]:
    """(one-word cues matching `word`, multi-word cues whose first word matches it)."""
    found = _AT.get(word)
    if found is None:
        singles = tuple(_SINGLE.get(word, ())) + tuple(c for p, c in _PREFIX if word.startswith(p))
        multis = tuple(c for c in _MULTI if _fits(c.words[0], word))
        found = _AT[word] = (singles, multis) if singles or multis else _NONE
    return found


def _occurrences(t: str) -> list[tuple[_Cue, int, int]]:
    """(cue, start, end) for every cue occurrence in the normalized text."""
    matches = list(_TOKEN.finditer(t))
    words = [m.group() for m in matches]
    out = []
    for i, w in enumerate(words):
        found = _AT.get(w) or _cues_at(w)
        if found is _NONE:
            continue
        singles, multis = found
        m = matches[i]
        out.extend((cue, m.start(), m.end()) for cue in singles)
        if not multis or i + 1 == len(words):
            continue
        pair = (w, words[i + 1])
        second = _PAIR.get(pair)
        if second is None:
            second = _PAIR[pair] = tuple(c for c in multis if _fits(c.words[1], pair[1]))
        for cue in second:
            n = len(cue.words)
            if i + n <= len(words) and all(_fits(slot, words[i + j]) for j, slot in enumerate(cue.words[2:], 2)):
                out.append((cue, m.start(), matches[i + n - 1].end()))
    has_digit = _DIGIT.search(t) is not None
    for pattern, cue, needs_digit in _REGEXES:
        if has_digit or not needs_digit:
            out.extend((cue, m.start(), m.end()) for m in pattern.finditer(t))
    return out


_DIGIT = re.compile(r"\d")


# ---- focus --------------------------------------------------------------------------
_LEAD = re.compile(r"^(?:code has been (?:executed|implemented|written|developed) such that\s+)?"
                   r"(?:when|while|for|using|in|during|if|after|once|given)\b")
_FINITE = re.compile(r"\b(?:is|are|was|were|has|have|had|can|could|should|must|will|does|do|shows?|achieves?|"
                     r"outperforms?|uses|applies|follows|reaches|takes)\b")


def _focus_start(t: str) -> int:
    """Where the main clause starts: after a leading "when/for/using ..., " preamble.

    The main clause is the first comma-separated chunk after the opener with a finite verb;
    "When training X with a learning rate of 1e-3, at dimension 10, a memory size of 100 is
    set" focuses on "a memory size of 100 is set".
    """
    if not _LEAD.match(t):
        return 0
    chunks = t.split(", ")
    pos = len(chunks[0]) + 2
    for chunk in chunks[1:]:
        if _FINITE.search(chunk):
            return pos
        pos += len(chunk) + 2
    return 0


# ---- scoring ------------------------------------------------------------------------
_PREAMBLE_WEIGHT = 0.6  # a cue only in the setup clause counts for less
# The main clause's grammatical subject is usually what gets checked: "A Markdown report
# containing the preprocessing steps" is about a report, not about preprocessing.
_HEAD_CHARS, _HEAD_BONUS = 30, 1.25
_NOT_SUBJECTS = {*MODES, "sequence", "number", "literal"}  # adverbials and numbers open clauses without being their subject
_MODE_CAP = 1.5  # mode evidence saturates: one clear cue is enough


@dataclass(frozen=True)
class Hit:
    kind: str               # CheckKind.key
    score: float
    span: tuple[int, int]   # strongest cue of the kind in the text, for quoting in the rationale


def _group_scores(t: str) -> dict[str, tuple[float, tuple[int, int] | None]]:
    """Per cue group: the sum over its tiers of the tier weight (once per tier) and the best span."""
    focus = _focus_start(t)
    best: dict[tuple[str, int], tuple[float, int, int]] = {}
    for cue, s, e in _occurrences(t):
        w = cue.weight if s >= focus else _PREAMBLE_WEIGHT * cue.weight
        if focus <= s < focus + _HEAD_CHARS and cue.group not in _NOT_SUBJECTS:
            w *= _HEAD_BONUS
        key = (cue.group, cue.tier)
        if key not in best or w > best[key][0]:
            best[key] = (w, s, e)
    out: dict[str, tuple[float, tuple[int, int] | None]] = {}
    strongest: dict[str, float] = {}
    for (group, _), (w, s, e) in sorted(best.items()):
        total, span = out.get(group, (0.0, None))
        if w > strongest.get(group, 0.0):
            strongest[group], span = w, (s, e)
        out[group] = (total + w, span)
    return out


@lru_cache(maxsize=1 << 16)
def label_for(kind_key: str, text: str) -> str:
    """`<check>_<object>_capability` for a kind: the object named first in the main clause, else the default."""
    kind, t = KIND_BY_KEY[kind_key], normalized(text)
    focus = _focus_start(t)
    # "The mean absolute error between ... accuracy" is about an error, not an accuracy.
    found = []
    for i, (words, pat) in enumerate(kind.objects[1:]):
        m = pat.search(t)
        if m and m.start() < focus:
            m = pat.search(t, focus) or m
        if m:
            found.append((m.start() - focus if m.start() >= focus else len(t) + m.start(), i, words))
    obj = min(found)[2] if found else kind.objects[0][0]
    return f"{kind.check}_{obj}{_SUFFIX}"


@lru_cache(maxsize=None)
def _label_index() -> dict[str, str]:
    return {f"{k.check}_{words}": k.key for k in KINDS for words, _ in k.objects}


def kind_of_label(label: str, suffix: str = _SUFFIX) -> str | None:
    """The check kind a lexicon label belongs to (None for a label not from this lexicon)."""
    stem = label[: -len(suffix)] if suffix and label.endswith(suffix) else label
    return _label_index().get(stem)


def _priors(category: str | None) -> dict[str, float]:
    out: dict[str, float] = {}
    for pattern, group, weight in CATEGORY_PRIORS:
        if category and pattern.search(category.lower()):
            out[group] = out.get(group, 0.0) + weight
    return out


@lru_cache(maxsize=1 << 16)
def detect(text: str, category: str | None = None) -> tuple[Hit, ...]:
    """Every check kind the criterion asks for, best first; never empty.

    Kinds need subject evidence; mode affinity then shifts the score. Ties break by
    lexicon order, so the result is deterministic.
    """
    t = normalized(text)
    groups = _group_scores(t)
    prior = _priors(category)
    score_of = {g: groups.get(g, (0.0, None))[0] for g in GROUPS}
    # A category names the mode only when the text itself is silent about it.
    text_has_mode = max(score_of[m] for m in MODES) >= 0.5
    for g, w in prior.items():
        if not (g in MODES and text_has_mode):
            score_of[g] += w
    mode_strength = {m: min(score_of[m], _MODE_CAP) for m in MODES}
    ranked = []
    for order, kind in enumerate(KINDS):
        subject = sum(mult * score_of[g] for g, mult in kind.subjects)
        if subject <= 0 or subject < kind.min_subject:
            continue
        # The mode scales the subject evidence rather than adding to it: it picks among kinds
        # that share a subject (metric code vs recorded metric) but cannot invent a subject.
        score = subject * max(0.0, 1.0 + sum(aff * mode_strength[m] / _MODE_CAP for m, aff in kind.modes))
        if score <= 0:
            continue
        spans = [(mult * groups[g][0], groups[g][1]) for g, mult in kind.subjects if g in groups]
        span = max(spans, key=lambda x: x[0])[1] if spans else (0, 0)
        ranked.append((-round(score, 6), order, Hit(kind.key, round(score, 4), span)))
    if not ranked:
        mode = max(MODES, key=lambda m: (mode_strength[m], m == "develop")) if any(mode_strength.values()) else None
        return (Hit(FALLBACK[mode], 0.0, (0, 0)),)
    ranked.sort(key=lambda r: (r[0], r[1]))
    return tuple(r[2] for r in ranked)
