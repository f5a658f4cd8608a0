"""Shared fixtures: the bundled model (loaded once per session) and tiny random models built from configs.

Fixtures other test files can use:
    bundled          attnviz.LoadedModel of the bundled all-MiniLM-L6-v2 (session-scoped, load it once)
    bundled_eager    a second copy of it with attn_implementation="eager", for reference outputs
    tiny_bert_dir, tiny_gpt2_dir, tiny_llama_dir   folders written with save_pretrained (safetensors)
    tiny_bert, tiny_gpt2, tiny_llama               those folders loaded through attnviz.load_model
    tiny_xlnet_dir   a family that computes attention in its own code attnviz does not read (weights only)
    tiny_deberta_dir a family read from its own code (all stages) whose layers cannot be copied into our module
    eager_copy       eager_copy(folder, implementation="eager") -> the same weights loaded independently with
                     transformers' eager (or "sdpa") attention, cached per folder
    eager_reference  eager_reference(eager_model, loaded, text, pad_to=None) -> (attentions, last_hidden_state)
    tiny_text        a sentence made only of words the tiny tokenizers know
    fresh_venv       a fresh venv with attnviz installed by `pip install .` (python, build folder, notebook runner)

Test modules should take these as fixtures rather than `from conftest import ...`: tests/browser has its
own conftest.py, and which one `import conftest` finds depends on collection order.
"""

from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path

if os.environ.get("PYTEST_XDIST_WORKER"):  # before numpy and torch start their thread pools: see torch_threads below
    os.environ.setdefault("OMP_NUM_THREADS", "1")
# The default view made ahead (attnviz.ui.made_ahead) goes to a folder of this run's own, never the user's cache, so
# that every cold start a test makes is the same; tests/app/test_first_view.py makes the file where it wants one.
os.environ.setdefault("ATTNVIZ_CACHE_DIR", tempfile.mkdtemp(prefix="attnviz-test-cache-"))

import numpy as np  # noqa: E402
import pytest  # noqa: E402
import torch  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:  # the package is used from the checkout, not installed
    sys.path.insert(0, str(ROOT))

import attnviz  # noqa: E402
from attnviz.hf import bundled_model_path  # noqa: E402
from attnviz.settings import torch_threads  # noqa: E402

#: Words the tiny tokenizers know; everything else becomes the unknown token.
TINY_WORDS = "the cat sat on mat a dog ran away . , hello world it was tired because".split()
TINY_TEXT = "the cat sat on the mat because it was tired ."


# --- running in parallel (`pytest -n 2 --dist loadgroup`, as .ci/run does; plain `pytest` runs serially) ---------

# One torch thread count for the whole process, the one the app's setup() picks on its first run
# (attnviz.settings.torch_threads): a trace the app computed (and cached) under another count than the test's own
# reference differs in the last float bits, and the tests compare them exactly. Under xdist that count is one thread
# per worker (OMP_NUM_THREADS=1, which the app follows too, as do the servers, kernels and Ray workers the tests
# start): two workers of two threads each on the CI's two cores, beside Chromium, made tiny torch ops wait on each
# other's threads (measured on a loaded machine: four of test_own_bert's cases 0.2 s with one thread, 1-5 s with two).
torch.set_num_threads(torch_threads())


# Work units. xdist's own groups (--dist loadgroup with xdist_group marks) do nothing here: xdist 3.8 writes the
# group into item._nodeid, which pytest 9 no longer reads, so the marks were dropped and every browser file ran on
# both workers. The scheduler below takes its units from the test ids instead.
#: Files whose tests share the venv built by pip (fresh_venv; executed_notebook builds on it): one unit, one venv.
FRESH_VENV_FILES = {"test_readme.py", "test_notebook.py", "test_packaging.py", "test_jupyterlab.py"}
#: Browser files whose tests are units of their own (their module fixtures are cheap or serve one test), so that
#: their slow tests start first, each on whichever worker is free. Every other browser file is one unit: its module
#: fixtures (a second server, a copied model) are built once.
BROWSER_SPLIT = {"test_links.py", "test_long_pages.py"}
#: Browser tests (a file, or a test id) that read one session fixture's pass through the pages (tests/browser/
#: conftest.py: light_pass): one unit, so that the pass runs once, on one worker.
BROWSER_SHARED = ("test_screenshots.py", "test_small_screens.py", "draws_no_text_over_text[10]")
#: The order units start in, slowest first (seconds on two workers, 2026-11-27: the head-slider session ~70, the
#: overlap checks 56/45/40, the 2,048-token pages 36), then whole files. Units not named here follow in collection
#: order, so the quick single tests fill in around the long ones at the end (both workers then end within a second).
FIRST = ("test_the_head_slider", "test_every_page_draws_a_2048", "test_every_page_at_10_128_and_512", "test_links.py",
         "test_browser.py", "test_screenshots.py", "test_small_screens.py", "test_robustness.py", "fresh_venv",
         "test_chart_clicks.py", "test_embed.py", "test_hostile_links_in_chromium.py", "test_conditions.py")  # fmt: skip


def work_unit(nodeid: str) -> str:
    """The unit a test runs in under xdist: 'fresh_venv', 'browser-<file>', 'browser-light-pass', or the test alone."""
    path = nodeid.split("::")[0]
    name = path.rsplit("/", 1)[-1]
    if name in FRESH_VENV_FILES:
        return "fresh_venv"
    if path.startswith("tests/browser/") and any(key in nodeid for key in BROWSER_SHARED):
        return "browser-light-pass"
    if path.startswith("tests/browser/") and name not in BROWSER_SPLIT:
        return f"browser-{name}"
    return nodeid


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config, log):
    """`-n 2 --dist loadgroup` (as .ci/run runs it): the units of work_unit(), handed out in the order the workers
    collected them (pytest_collection_modifyitems) rather than largest first. Each worker that runs browser tests
    starts its own streamlit server and chromium (session fixtures; its own log, browserkit.SERVER_LOG)."""
    if config.getvalue("dist") != "loadgroup":
        return None
    from xdist.scheduler import LoadScopeScheduling

    class Units(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return work_unit(nodeid)

    config.option.loadscopereorder = False
    return Units(config, log)


def pytest_collection_modifyitems(config, items):
    """Under xdist, the units named in FIRST come first (a serial run keeps the collection order)."""
    if not os.environ.get("PYTEST_XDIST_WORKER"):
        return

    def rank(item) -> int:
        unit = work_unit(item.nodeid)
        name = unit if unit == "fresh_venv" else item.nodeid
        return next((i for i, key in enumerate(FIRST) if key in name), len(FIRST))

    items.sort(key=rank)  # stable: within a rank, collection order


# --- tiny model builders (plain functions, < 1 s each) ------------------------------------------------


def _wordlevel_tokenizer(specials: list[str], unk: str, eos: str, bos: str):
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    vocab = {w: i for i, w in enumerate(specials + TINY_WORDS)}
    backend = Tokenizer(models.WordLevel(vocab=vocab, unk_token=unk))
    backend.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    tok = PreTrainedTokenizerFast(tokenizer_object=backend, unk_token=unk, eos_token=eos, bos_token=bos)
    return tok, len(vocab)


def build_tiny_bert(folder: Path) -> Path:
    from transformers import BertConfig, BertModel, BertTokenizer

    torch.manual_seed(0)
    vocab = {w: i for i, w in enumerate(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] + TINY_WORDS)}
    tok = BertTokenizer(vocab=vocab)  # transformers 5 silently ignores vocab_file=
    config = BertConfig(
        vocab_size=len(vocab),
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=4,
        intermediate_size=64,
        max_position_embeddings=64,
    )
    BertModel(config).save_pretrained(folder, safe_serialization=True)
    tok.save_pretrained(folder)
    return folder


def build_tiny_gpt2(folder: Path) -> Path:
    """Saved with its language-model head (GPT2LMHeadModel): attnviz loads it as that class and traces inside it."""
    from transformers import GPT2Config, GPT2LMHeadModel

    torch.manual_seed(1)
    tok, n_vocab = _wordlevel_tokenizer(["<unk>", "<|endoftext|>"], "<unk>", "<|endoftext|>", "<|endoftext|>")
    config = GPT2Config(vocab_size=n_vocab, n_embd=32, n_layer=2, n_head=4, n_positions=64)
    GPT2LMHeadModel(config).save_pretrained(folder, safe_serialization=True)
    tok.save_pretrained(folder)
    return folder


def build_tiny_llama(folder: Path) -> Path:
    """Grouped-query attention: 4 query heads share 2 key/value heads; saved with its head (LlamaForCausalLM)."""
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(2)
    tok, n_vocab = _wordlevel_tokenizer(["<unk>", "<s>", "</s>"], "<unk>", "</s>", "<s>")
    config = LlamaConfig(
        vocab_size=n_vocab,
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        intermediate_size=64,
        max_position_embeddings=64,
    )
    LlamaForCausalLM(config).save_pretrained(folder, safe_serialization=True)
    tok.save_pretrained(folder)
    return folder


def build_tiny_xlnet(folder: Path) -> Path:
    """XLNet computes attention in its own code (two-stream relative attention: content, position and segment terms
    added to q.k), which attnviz does not read: it falls back to eager, weights only, with a note that says why."""
    from transformers import XLNetConfig, XLNetModel

    torch.manual_seed(3)
    tok, n_vocab = _wordlevel_tokenizer(["<unk>", "<|endoftext|>"], "<unk>", "<|endoftext|>", "<|endoftext|>")
    config = XLNetConfig(
        vocab_size=n_vocab, d_model=32, n_layer=2, n_head=4, d_head=8, d_inner=64, bos_token_id=1, eos_token_id=1,
        pad_token_id=1,
    )  # fmt: skip
    XLNetModel(config).save_pretrained(folder, safe_serialization=True)
    tok.save_pretrained(folder)
    return folder


def build_tiny_deberta(folder: Path) -> Path:
    """DeBERTa-v2 computes attention in its own code, which attnviz reads (attnviz.hf.readers.deberta.deberta_v2), but its
    layers (query_proj / key_proj, disentangled position terms) cannot be copied into our module."""
    from transformers import DebertaV2Config, DebertaV2Model

    torch.manual_seed(4)
    tok, n_vocab = _wordlevel_tokenizer(["<unk>", "<|endoftext|>"], "<unk>", "<|endoftext|>", "<|endoftext|>")
    config = DebertaV2Config(
        vocab_size=n_vocab, hidden_size=32, num_hidden_layers=2, num_attention_heads=4, intermediate_size=64,
        max_position_embeddings=64,
    )  # fmt: skip
    DebertaV2Model(config).save_pretrained(folder, safe_serialization=True)
    tok.save_pretrained(folder)
    return folder


# --- fixtures ---------------------------------------------------------------------------------------------


@pytest.fixture(scope="session")
def bundled():
    """The bundled all-MiniLM-L6-v2 through attnviz.load_model(): loaded once for the whole session."""
    return attnviz.load_model()


@pytest.fixture(scope="session")
def bundled_eager(eager_copy):
    return eager_copy(bundled_model_path())


@pytest.fixture(scope="session")
def tiny_bert_dir(tmp_path_factory):
    return build_tiny_bert(tmp_path_factory.mktemp("tiny-bert"))


@pytest.fixture(scope="session")
def tiny_gpt2_dir(tmp_path_factory):
    return build_tiny_gpt2(tmp_path_factory.mktemp("tiny-gpt2"))


@pytest.fixture(scope="session")
def tiny_llama_dir(tmp_path_factory):
    return build_tiny_llama(tmp_path_factory.mktemp("tiny-llama"))


@pytest.fixture(scope="session")
def tiny_xlnet_dir(tmp_path_factory):
    return build_tiny_xlnet(tmp_path_factory.mktemp("tiny-xlnet"))


@pytest.fixture(scope="session")
def tiny_deberta_dir(tmp_path_factory):
    return build_tiny_deberta(tmp_path_factory.mktemp("tiny-deberta"))


@pytest.fixture(scope="session")
def gpt2_bpe_dir(tmp_path_factory):
    """GPT-2 with its byte-level BPE tokenizer, trained offline, saved with its LM head (tests/tiny_families.py); 512
    positions, so pages can be opened on it at the server's token cap (tests/browser/test_long_pages.py)."""
    from tiny_families import build_gpt2_bpe

    return build_gpt2_bpe(tmp_path_factory.mktemp("gpt2-bpe"), positions=512)


@pytest.fixture(scope="session")
def gpt2_bpe(gpt2_bpe_dir):
    return attnviz.load_model(str(gpt2_bpe_dir))


@pytest.fixture(scope="session")
def tiny_bert(tiny_bert_dir):
    return attnviz.load_model(str(tiny_bert_dir))


@pytest.fixture(scope="session")
def tiny_gpt2(tiny_gpt2_dir):
    return attnviz.load_model(str(tiny_gpt2_dir))


@pytest.fixture(scope="session")
def tiny_llama(tiny_llama_dir):
    return attnviz.load_model(str(tiny_llama_dir))


@pytest.fixture(scope="session")
def eager_copy():
    """eager_copy(folder): the model in `folder` loaded independently of attnviz, with eager attention."""
    from transformers import AutoModel

    cache = {}

    def load(folder, implementation: str = "eager") -> torch.nn.Module:
        key = (str(folder), implementation)
        if key not in cache:
            cache[key] = AutoModel.from_pretrained(
                key[0], attn_implementation=implementation, dtype=torch.float32, use_safetensors=True,
                trust_remote_code=False,
            ).eval()  # fmt: skip
        return cache[key]

    return load


def _eager_reference(eager_model, loaded, text: str, pad_to: int | None = None):
    """Reference (attentions [L, H, T, T], last_hidden_state [T, d]) from transformers' own eager path.

    Tokenizes like attnviz (split_special_tokens=True); `pad_to` appends pad tokens masked out by attention_mask.
    """
    tok = loaded.tokenizer
    enc = tok(text, split_special_tokens=True, add_special_tokens=True)
    ids = list(enc["input_ids"])
    extra = {k: list(v) for k, v in enc.items() if k == "token_type_ids"}
    attn = [1] * len(ids)
    if pad_to is not None and pad_to > len(ids):
        n_pad = pad_to - len(ids)
        pad_id = tok.pad_token_id if tok.pad_token_id is not None else tok.eos_token_id
        ids += [pad_id] * n_pad
        attn += [0] * n_pad
        for v in extra.values():
            v += [0] * n_pad
    inputs = {"input_ids": torch.tensor([ids]), "attention_mask": torch.tensor([attn])}
    inputs.update({k: torch.tensor([v]) for k, v in extra.items()})
    eager = eager_model.config._attn_implementation == "eager"
    with torch.no_grad():
        out = eager_model(**inputs, output_attentions=eager)
    if not eager:  # an SDPA copy gives outputs only
        return None, out.last_hidden_state[0].float().numpy()
    assert out.attentions, "the eager reference returned no attentions"
    attentions = np.stack([a[0].float().numpy() for a in out.attentions])
    return attentions, out.last_hidden_state[0].float().numpy()


@pytest.fixture(scope="session")
def eager_reference():
    return _eager_reference


@pytest.fixture(scope="session")
def tiny_text() -> str:
    return TINY_TEXT


@pytest.fixture(scope="session")
def fresh_venv(tmp_path_factory):
    """A fresh venv with attnviz installed by `pip install .` (tests/fresh_install.py), built once per session."""
    import fresh_install

    return fresh_install.build(tmp_path_factory.mktemp("fresh-venv"))


@pytest.fixture(scope="session")
def executed_notebook(fresh_venv, tmp_path_factory):
    """docs/notebook.ipynb executed by `jupyter nbconvert --execute` in the fresh install, once per session, with a
    first cell that prints where attnviz came from: the file a user hands on (tests/test_notebook.py reads its
    outputs, tests/browser/test_jupyterlab.py opens it in JupyterLab)."""
    import fresh_install
    import nbformat
    from nbformat.v4 import new_code_cell

    nb = nbformat.read(ROOT / "docs" / "notebook.ipynb", as_version=4)
    nb.cells.insert(0, new_code_cell(fresh_install.WHERE_CELL))
    return fresh_venv.nbconvert_execute(nb, tmp_path_factory.mktemp("executed-notebook"))


@pytest.fixture(scope="session")
def family_dir(tmp_path_factory):
    """family_dir(kind, encoder_only=False) -> a folder with a tiny random model of a family with special attention
    (built by tests/tiny_families.py, cached)."""
    from tiny_families import build

    made = {}

    def get(kind: str, encoder_only: bool = False):
        key = (kind, encoder_only)
        if key not in made:
            made[key] = build(
                kind, tmp_path_factory.mktemp(f"{kind}{'-encoder' if encoder_only else ''}"), encoder_only
            )
        return made[key]

    return get
