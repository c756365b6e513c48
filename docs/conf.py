"""Sphinx configuration of the llmq documentation site (``make -C docs html``).

Everything project-specific that is generated (the paper map, the notebook copies, the API stubs)
is written under ``docs/generated/`` at build time by the ``llmq_docs`` extension in ``_ext/``.
"""

from __future__ import annotations

import os
import sys
import types
from pathlib import Path

DOCS = Path(__file__).resolve().parent
ROOT = DOCS.parent
# the checked-out packages, not an installed copy, are documented
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(DOCS / "_ext"))
# autosummary imports every submodule it lists; importing llmq/__main__.py runs the command line
# on sphinx-build's own arguments. A placeholder module stands in for it (and the module template
# leaves every __main__ out of the reference).
sys.modules.setdefault("llmq.__main__", types.ModuleType("llmq.__main__"))
# notebook kernels started by myst-nb import the same checked-out packages
os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH")) if p)

project = "llmq"
author = "the llmq developers"
copyright = "2025, the llmq developers"

extensions = [
    "sphinx.ext.autodoc",
    "sphinx.ext.autosummary",
    "sphinx.ext.mathjax",
    "numpydoc",
    "myst_nb",
    "sphinxarg.ext",
    "llmq_docs",
]

source_suffix = {".rst": "restructuredtext", ".md": "myst-nb", ".ipynb": "myst-nb"}
templates_path = ["_templates"]
exclude_patterns = ["_build", "Thumbs.db", ".DS_Store", "**.ipynb_checkpoints"]
root_doc = "index"

# --- API reference: autosummary walks the packages (:recursive:), nothing lists modules by hand
autosummary_generate = True
autosummary_imported_members = False
autodoc_default_options = {"members": True, "show-inheritance": True}
autodoc_member_order = "bysource"
autodoc_typehints = "none"  # numpydoc's Parameters sections carry the types
# signatures show a default as written in the source (QUANT_TABLE), not its value on the machine that
# built the site (PosixPath('/home/.../data/...'))
autodoc_preserve_defaults = True
# numpydoc: no per-class autosummary of members (autodoc documents them already), and no
# cross-referencing of free-text types such as "array of float": nitpicky stays off, so an
# unresolvable type name is shown as text rather than failing the build.
numpydoc_show_class_members = False
numpydoc_class_members_toctree = False
numpydoc_xref_param_type = False
nitpicky = False
suppress_warnings = [
    # dataclasses list their fields in an "Attributes" section (numpydoc) and autodoc documents the
    # same fields again as members: the second description is the same object, not an error.
    "duplicate_declaration.py",
    "ref.python",  # several re-exported names resolve to more than one target (first wins)
]
# Docstrings whose reStructuredText is malformed (to be fixed in their modules, not here): their
# docutils warnings are listed at the end of the build instead of failing it. Anything else fails.
llmq_known_docstring_issues = ()
# (a package docstring's "Modules" section, a plain-text table, is shown as a literal block by
# the llmq_docs extension: no entry is needed for it)

# --- notebooks (myst-nb): copies executed earlier in the same CI run ($LLMQ_DOCS_NOTEBOOKS, see
# _ext/llmq_docs.py) are rendered as they are; otherwise the repository's notebooks, committed
# without outputs, are executed here, with a time limit per cell.
nb_execution_mode = "off" if os.environ.get("LLMQ_DOCS_NOTEBOOKS") else "force"
if nb_execution_mode == "force":  # the kernels inherit it: figures inline, whatever the shell set
    os.environ["MPLBACKEND"] = "module://matplotlib_inline.backend_inline"
nb_execution_timeout = 300
nb_execution_raise_on_error = True
nb_execution_show_tb = True
nb_merge_streams = True
myst_enable_extensions = ["colon_fence", "dollarmath"]
myst_heading_anchors = 3

# --- HTML
html_theme = "furo"
html_title = "llmq"
html_static_path: list[str] = []
html_show_sourcelink = False
